// What every S3 operation handler (buckets.ts, objects.ts, multipart.ts) works with: the request in
// hand (`Exchange`) and one `Kit` of shared steps — answering, receiving bodies, checking access and
// ownership — built once per endpoint by server.ts.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Dialect } from '../../../db/dialect.js';
import type { Database } from '../../../db/schema/index.js';
import { iso, type Clock } from '../../../domain/clock.js';
import type { SecretBox } from '../../../crypto/secret-box.js';
import { memorySink, receiveBody, type ReceivedBody } from './body.js';
import { errors } from './errors.js';
import type { FeatureExchange } from './exchange.js';
import type { AccessDecision, CallerKind } from './access.js';
import type { BlobArea, BlobStore, BlobWrite } from './blobs.js';
import type { LookupCache } from './lookup-cache.js';
import type { BucketRow, ObjectMetadata } from './metadata.js';
import type { AccessRequest, Statement } from './policy.js';
import { headerValue, type ParsedSignature } from './sigv4.js';
import { xmlDocument, type XmlNode } from './xml.js';

export interface S3ServerDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  secretBox: SecretBox;
  logger: Logger;
  dataDir: string;
  /** Where object and part bytes live; the data directory's files when not given (blobs.ts). */
  blobs?: BlobStore;
  /** Host names under which `<bucket>.<host>` means virtual-host-style addressing. */
  virtualHostSuffixes: readonly string[];
  /** How long access keys and buckets looked up in the store are reused (default LOOKUP_TTL_MS). */
  lookupTtlMs?: number;
  /** Each request as it ends (metrics): see S3RequestRecord. */
  onRequest?: (request: S3RequestRecord) => void;
  /** BERTH_S3_BLOCK_PUBLIC_ACCESS: every bucket as if its PublicAccessBlock had all four settings on. */
  blockPublicAccess?: boolean;
  /** BERTH_TRUSTED_PROXIES: peers whose X-Forwarded-For names the client (aws:SourceIp). */
  trustedProxies?: readonly string[];
}

/** One request the endpoint answered, for metrics. */
export interface S3RequestRecord {
  /** The S3 operation (`PutObject`, `GetObject`…), `Options` for a CORS preflight, `Unknown` before routing. */
  operation: string;
  status: number;
  /** The request body's bytes when it was read to its end (the object's bytes of an aws-chunked upload). */
  bytesIn: number;
  /** Bytes written to the connection for the answer, its headers included. */
  bytesOut: number;
}

export const MAX_OBJECT = 5 * 1024 ** 3;
export const MIN_PART = 5 * 1024 ** 2;
const MAX_XML = 2 * 1024 * 1024;
/** Request headers an object keeps and answers with (beside `x-amz-meta-*`); form fields of a POST too. */
export const STORED_HEADERS = [
  'content-type',
  'content-encoding',
  'content-disposition',
  'content-language',
  'cache-control',
  'expires',
];

/** Sorts after every key that starts with the text before it (see metadata.listObjects). */
export const SKIP_UNDER = '\u{10FFFF}';

/** Where a storage's bucket is remembered in the look-up caches: names are unique per storage only. */
export const bucketCacheKey = (storageId: number, name: string): string => `${storageId}/${name}`;

export const quoteEtag = (hex: string) => `"${hex}"`;
export const bareEtag = (etag: string) => etag.replace(/^"|"$/g, '');

export interface AccessKey {
  storageId: number;
  statements: readonly Statement[];
  secret: string;
  accessKeyId: string;
  username: string;
}

/**
 * Who is asking: a key of the storage (`user`), a key of another storage on this storage's endpoint
 * (`other`) or nobody (`anonymous`, an unsigned request: no key, no statements, an unsigned payload).
 * `storageId` is the storage whose buckets the request names.
 */
export interface Caller extends AccessKey {
  kind: CallerKind;
  signature: ParsedSignature;
  /** The client's address (access.ts sourceAddress), for aws:SourceIp. */
  sourceIp: string;
}

/** One authenticated request on its way through the handlers. */
export interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  params: Map<string, string>;
  bucket: string | undefined;
  key: string | undefined;
  caller: Caller;
  /** The buckets this request has looked up (ownBucket), for the ACL and policy of each. */
  seen: Map<string, BucketRow>;
  /** Sends 100 Continue once the request is authenticated (Expect: 100-continue). */
  proceed(): void;
}

export type Headers = Record<string, string | number>;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A header value as the client meant it. Node reads header bytes as latin1; clients that send
 * non-ASCII metadata send its UTF-8 (botocore), or latin1 bytes (Node's own http client): the bytes
 * are read as UTF-8 when they are valid UTF-8, as latin1 otherwise.
 */
export function fromWire(value: string): string {
  if (!/[^\x00-\x7f]/.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, 'latin1'));
  } catch {
    return value;
  }
}

/**
 * A stored value as a header: latin1 text goes out byte for byte; text beyond latin1 goes out
 * RFC 2047-encoded, as S3 answers non-ASCII metadata.
 */
export const toWire = (value: string): string =>
  /[^\x00-\xff]/.test(value) ? `=?UTF-8?B?${Buffer.from(value, 'utf8').toString('base64')}?=` : value;

/**
 * The length of the body's content as the client declares it (decoded, for aws-chunked framing);
 * undefined when it does not (a chunked transfer without a declared length).
 */
export function bodyLength(req: IncomingMessage, signature: ParsedSignature): number | undefined {
  const text =
    signature.payload.kind === 'chunked'
      ? headerValue(req.headers, 'x-amz-decoded-content-length')
      : headerValue(req.headers, 'content-length');
  return text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : undefined;
}

export function createKit(
  deps: S3ServerDeps,
  meta: ObjectMetadata,
  blobs: BlobStore,
  bucketCache: LookupCache<BucketRow>,
  decision: AccessDecision,
) {
  /** The 403 of a refusal: as it was before ACLs for a caller that is not the storage's. */
  const denied = (x: Exchange) =>
    x.caller.kind === 'anonymous'
      ? errors.accessDenied('Anonymous access is not allowed')
      : x.caller.kind === 'other'
        ? errors.accessDenied('The access key belongs to another object storage')
        : errors.accessDenied();

  /** Whether the caller may (user policy, bucket policy, ACLs: access.ts); `objectAcl` once known. */
  const allows = (x: Exchange, request: AccessRequest, objectAcl?: string): boolean =>
    decision.allows(
      x.caller,
      request,
      request.bucket === undefined ? undefined : x.seen.get(request.bucket),
      objectAcl,
    );

  function allow(x: Exchange, request: AccessRequest, objectAcl?: string): void {
    if (!allows(x, request, objectAcl)) throw denied(x);
  }

  /**
   * Reading an object whose ACL may be what grants it: allowed as `allow`, or by the object's own ACL.
   * A missing object is a 404 for a caller who may list the bucket under the key (s3:prefix = the
   * key), a 403 for others (as on S3).
   */
  function allowRead(x: Exchange, request: AccessRequest, object: { acl?: string } | undefined): void {
    if (object === undefined) {
      // Only the storage's users keep the 404 they always had; others learn of keys only by listing.
      const listing = { action: 's3:ListBucket', bucket: request.bucket!, listPrefix: request.key! };
      if (allows(x, listing) || (x.caller.kind === 'user' && allows(x, request)))
        throw errors.noSuchKey(request.key!);
      throw denied(x);
    }
    if (!allows(x, request, object.acl ?? 'private')) throw denied(x);
  }

  /**
   * The caller's bucket of that name: 404 if its storage has none. Each storage has its own names
   * (migration 024), so another storage's bucket of the same name is never reached. A key of another
   * storage learns nothing of its names: 403 as for a bucket it may not use (decision 0008).
   */
  async function ownBucket(x: Exchange, name: string): Promise<BucketRow> {
    const bucket = await bucketCache.get(bucketCacheKey(x.caller.storageId, name), () =>
      meta.findBucket(x.caller.storageId, name),
    );
    if (!bucket) throw x.caller.kind === 'other' ? denied(x) : errors.noSuchBucket(name);
    x.seen.set(name, bucket);
    return bucket;
  }

  function send(x: Exchange, status: number, headers: Headers = {}, body?: string): void {
    x.res.writeHead(status, {
      'x-amz-request-id': x.requestId,
      server: 'Berth',
      ...(body !== undefined
        ? { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) }
        : { 'content-length': 0 }),
      ...headers,
    });
    x.res.end(body);
  }

  const sendXml = (x: Exchange, root: string, body: XmlNode, headers: Headers = {}) =>
    send(x, 200, headers, xmlDocument(root, body));

  /**
   * Receives a body into a new blob of `owner`, not yet placed (the caller places or discards it); on
   * any failure nothing of it is left.
   */
  async function receiveBlob(
    x: Exchange,
    area: BlobArea,
    owner: number,
  ): Promise<ReceivedBody & { blob: BlobWrite }> {
    const blob = await blobs.begin(area, owner, bodyLength(x.req, x.caller.signature));
    x.proceed();
    try {
      const received = await receiveBody(x.req, x.caller.signature, x.caller.secret, blob.sink, MAX_OBJECT);
      return { blob, ...received };
    } catch (error) {
      await blob.discard();
      throw error;
    }
  }

  /**
   * A bounded XML body. `bodyChecksum: false` where an x-amz-checksum-* header is the checksum of the
   * object being made, not of this body (CompleteMultipartUpload).
   */
  async function receiveXml(x: Exchange, bodyChecksum = true): Promise<string> {
    x.proceed();
    const sink = memorySink(MAX_XML);
    await receiveBody(x.req, x.caller.signature, x.caller.secret, sink, MAX_XML, bodyChecksum);
    return sink.text();
  }

  /** The headers an object keeps and answers with (Content-Type…, x-amz-meta-*), as stored JSON. */
  function storedHeaders(req: IncomingMessage): string {
    const stored: Record<string, string> = {};
    for (const name of STORED_HEADERS) {
      let value = headerValue(req.headers, name);
      if (name === 'content-encoding' && value !== undefined) {
        // aws-chunked describes the transfer, not the object; the rest is kept as the client wrote it.
        value =
          value
            .split(',')
            .filter((token) => token.trim().toLowerCase() !== 'aws-chunked')
            .join(',')
            .trim() || undefined;
      }
      if (value !== undefined) stored[name] = value;
    }
    for (const [name, value] of Object.entries(req.headers)) {
      if (name.startsWith('x-amz-meta-') && value !== undefined)
        stored[name] = fromWire(Array.isArray(value) ? value.join(',') : value);
    }
    stored['content-type'] ??= 'application/octet-stream';
    return JSON.stringify(stored);
  }

  function checkKey(key: string): void {
    if (Buffer.byteLength(key) > 1024) throw errors.keyTooLong();
  }

  /** What the feature modules (cors.ts…) see of a request. */
  function feature(x: Exchange): FeatureExchange {
    return {
      req: x.req,
      allow: (request) => allow(x, request),
      readXml: () => receiveXml(x),
      reply: (status, headers) => send(x, status, headers),
      replyXml: (root, body, headers) => sendXml(x, root, body, headers),
      replyDocument: (body, contentType = 'application/xml') =>
        send(x, 200, { 'content-type': contentType }, body),
    };
  }

  const ownerOf = (x: Exchange) => ({
    ID: String(x.caller.storageId),
    DisplayName: `storage-${x.caller.storageId}`,
  });

  return {
    deps,
    meta,
    blobs,
    bucketCache,
    now: () => iso(deps.clock.now()),
    decision,
    allow,
    allows,
    allowRead,
    ownBucket,
    send,
    sendXml,
    receiveBlob,
    receiveXml,
    storedHeaders,
    checkKey,
    feature,
    ownerOf,
  };
}

export type Kit = ReturnType<typeof createKit>;
