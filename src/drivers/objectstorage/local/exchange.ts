// What a feature handler (cors.ts, tagging.ts…) needs from one authenticated S3 request, so that the
// handlers do not depend on how server.ts routes requests.
import type { IncomingMessage } from 'node:http';
import type { AccessRequest } from './policy.js';
import type { XmlNode } from './xml.js';

export interface FeatureExchange {
  req: IncomingMessage;
  /** Throws AccessDenied unless the caller's policies allow the request. */
  allow(request: AccessRequest): void;
  /** The request body (XML), bounded and signature-checked. */
  readXml(): Promise<string>;
  reply(status: number, headers?: Record<string, string | number>): void;
  replyXml(root: string, body: XmlNode, headers?: Record<string, string | number>): void;
  /** A 200 with a document already rendered (an ACL's XML, a policy's JSON). */
  replyDocument(body: string, contentType?: string): void;
}
