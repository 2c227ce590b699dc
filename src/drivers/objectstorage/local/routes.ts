// What Berth's S3 endpoint implements, as one explicit table: a request is routed by method, path
// form and sub-resource, and anything the table does not name is refused before any read or write.
// S3 clients send operations Berth does not know (tagging, legal hold, versioned deletes…) to the
// same paths as the ones it does; routing them by method alone once replaced an object's content
// with a legal-hold document.
import type { IncomingHttpHeaders } from 'node:http';
import { GRANT_HEADERS, requestedAcl } from './access.js';
import { errors } from './errors.js';
import { headerValue } from './sigv4.js';

export type PathForm = 'service' | 'bucket' | 'object';

export interface Route<H> {
  method: string;
  form: PathForm;
  /** The sub-resource (`?tagging`…), '' for none. */
  sub: string;
  /** S3's operation name: header rules and logs refer to it. */
  op: string;
  handler: H;
}

/** Sub-resources of the S3 API reference; each names an operation of its own. */
const SUBRESOURCES = new Set([
  'accelerate',
  'acl',
  'analytics',
  'attributes',
  'cors',
  'delete',
  'encryption',
  'intelligent-tiering',
  'inventory',
  'legal-hold',
  'lifecycle',
  'location',
  'logging',
  'metadataConfiguration',
  'metadataTable',
  'metrics',
  'notification',
  'object-lock',
  'ownershipControls',
  'policy',
  'policyStatus',
  'publicAccessBlock',
  'renameObject',
  'replication',
  'requestPayment',
  'restore',
  'retention',
  'select',
  'session',
  'tagging',
  'torrent',
  'uploadId',
  'uploads',
  'versioning',
  'versions',
  'website',
]);

/** Query parameters that qualify an operation without naming another one. */
const PARAMETERS = new Set([
  'bucket-region',
  'continuation-token',
  'delimiter',
  'encoding-type',
  'fetch-owner',
  'key-marker',
  'list-type',
  'marker',
  'max-buckets',
  'max-keys',
  'max-parts',
  'max-uploads',
  'part-number-marker',
  'partNumber',
  'prefix',
  'start-after',
  'upload-id-marker',
  'version-id-marker',
  'versionId',
  'x-id',
  'response-cache-control',
  'response-content-disposition',
  'response-content-encoding',
  'response-content-language',
  'response-content-type',
  'response-expires',
]);

/**
 * The request's sub-resource, '' for none. A parameter Berth does not know counts as a sub-resource
 * of its own, so that no route matches it: an operation added to S3 later is refused, not mistaken
 * for a plain GET or PUT.
 */
export function subresourceOf(params: Map<string, string>): string {
  const subs = [...params.keys()].filter(
    (k) => !/^x-amz-/i.test(k) && (SUBRESOURCES.has(k) || !PARAMETERS.has(k)),
  );
  return subs.sort().join('&');
}

export function routeTable<H>(rows: ReadonlyArray<Route<H>>) {
  const byKey = new Map(rows.map((r) => [`${r.method} ${r.form} ${r.sub}`, r]));
  return {
    /** The route for a request, or a 501/405 error when Berth does not implement it. */
    find(method: string, form: PathForm, params: Map<string, string>): Route<H> {
      const found = byKey.get(`${method} ${form} ${subresourceOf(params)}`);
      if (found) return found;
      if (!['GET', 'HEAD', 'PUT', 'POST', 'DELETE'].includes(method)) throw errors.methodNotAllowed();
      throw errors.notImplemented();
    },
  };
}

/** Operations that accept a version id: only `null`, the one version of an unversioned object. */
const VERSIONED_READS = new Set(['GetObject', 'HeadObject', 'DeleteObject']);
/**
 * Writes that S3 makes conditional on If-Match/If-None-Match and Berth does not honour (PutObject and
 * CompleteMultipartUpload do: conditional.ts).
 */
const CONDITIONAL_WRITES = new Set(['CopyObject', 'DeleteObject']);

/**
 * Headers that ask for something Berth does not do; storing the data anyway would betray the caller.
 * (`x-amz-bypass-governance-retention` is not among them: without object lock there is no retention
 * to bypass, and S3 ignores it on such buckets; clients send it when they empty a bucket.)
 */
const UNHONOURED_PREFIXES = [
  'x-amz-server-side-encryption',
  'x-amz-copy-source-server-side-encryption',
  'x-amz-object-lock-',
  'x-amz-grant-', // but the five S3 knows, which requestedAcl reads
];
const UNHONOURED = [
  'x-amz-website-redirect-location',
  'x-amz-mfa',
  'x-amz-write-offset-bytes',
  'x-amz-object-ownership',
  'x-amz-if-match-last-modified-time',
  'x-amz-if-match-size',
  'x-amz-if-match-initiated-time',
];

/**
 * Refuses headers and parameters that would change what the operation does when Berth cannot honour
 * them: encryption, object lock, ACL grants, conditional copies and deletes, versions other than `null`.
 */
export function refuseUnhonoured(
  op: string,
  headers: IncomingHttpHeaders,
  params: Map<string, string>,
  ownerId: string,
): void {
  // Presigned URLs carry signed headers in the query (x-amz-server-side-encryption=…): they count too.
  const hoisted: IncomingHttpHeaders = {};
  for (const [name, value] of params) if (/^x-amz-/.test(name)) hoisted[name] = value;
  headers = { ...hoisted, ...headers };
  for (const name of Object.keys(headers)) {
    if (name in GRANT_HEADERS) continue;
    if (UNHONOURED.includes(name) || UNHONOURED_PREFIXES.some((p) => name.startsWith(p))) {
      // `x-amz-bucket-object-lock-enabled: false` and the like ask for nothing.
      throw errors.notImplemented(`The ${name} header is not implemented`);
    }
  }
  if (headerValue(headers, 'x-amz-bucket-object-lock-enabled')?.toLowerCase() === 'true')
    throw errors.notImplemented('Object lock is not implemented');
  // An ACL Berth does not implement (a canned one, or grants to other accounts) is refused here.
  requestedAcl(headers, ownerId);
  const storageClass = headerValue(headers, 'x-amz-storage-class');
  if (storageClass !== undefined && storageClass !== 'STANDARD')
    throw errors.notImplemented('Storage classes other than STANDARD are not implemented');
  const owner = headerValue(headers, 'x-amz-expected-bucket-owner');
  if (owner !== undefined && owner !== ownerId) throw errors.accessDenied();
  if (
    CONDITIONAL_WRITES.has(op) &&
    (headerValue(headers, 'if-match') !== undefined || headerValue(headers, 'if-none-match') !== undefined)
  ) {
    throw errors.notImplemented('Conditional writes are not implemented');
  }
  const tagging = headerValue(headers, 'x-amz-tagging-directive');
  if (tagging !== undefined && tagging !== 'COPY' && tagging !== 'REPLACE')
    throw errors.invalidArgument('Unknown tagging directive.');
  const directive = headerValue(headers, 'x-amz-metadata-directive');
  if (directive !== undefined && directive !== 'COPY' && directive !== 'REPLACE')
    throw errors.invalidArgument('Unknown metadata directive.');
  const versionId = params.get('versionId');
  if (versionId !== undefined) {
    if (!VERSIONED_READS.has(op)) throw errors.notImplemented('Versioning is not implemented');
    if (versionId !== 'null') throw errors.invalidArgument('Invalid version id specified');
  }
  const source = headerValue(headers, 'x-amz-copy-source');
  if (source !== undefined && /[?&]versionId=(?!null(&|$))/.test(source))
    throw errors.invalidArgument('Invalid version id specified');
  if (params.has('partNumber') && !['UploadPart', 'GetObject', 'HeadObject'].includes(op))
    throw errors.invalidArgument('partNumber is not valid for this operation');
}
