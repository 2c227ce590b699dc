// Who is asking and for what: the bucket and key a request addresses (path or virtual-host style) and
// the access key that signed it (SigV4, with the key's compiled policies).
import type { IncomingMessage } from 'node:http';
import { errors } from './errors.js';
import type { AccessKey, S3ServerDeps } from './kit.js';
import type { LookupCache } from './lookup-cache.js';
import type { ObjectMetadata } from './metadata.js';
import { compilePolicies, type Statement } from './policy.js';
import {
  headerValue,
  parseSignature,
  payloadModeOf,
  uriDecode,
  verifySignature,
  type ParsedSignature,
} from './sigv4.js';

/**
 * How an endpoint of its own names a storage: the storage's uuid, as a host label (`<uuid>.<host>`)
 * or as the first path segment (`/<uuid>/…`). Bucket names of this shape are refused (buckets.ts), so
 * a name never reads as both.
 */
export const STORAGE_LABEL = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export interface Address {
  /** The uuid a storage's own endpoint names; absent on the shared endpoint. */
  storage?: string;
  bucket?: string;
  key?: string;
}

/** `/<bucket>/<key>`. */
function pathStyle(path: string): Address {
  const slash = path.indexOf('/', 1);
  const bucketPart = slash < 0 ? path.slice(1) : path.slice(1, slash);
  if (bucketPart === '') return {};
  const keyPart = slash < 0 ? '' : path.slice(slash + 1);
  return { bucket: uriDecode(bucketPart), ...(keyPart !== '' ? { key: uriDecode(keyPart) } : {}) };
}

/**
 * The storage, bucket and key of a request. The shared endpoint: `<bucket>.<suffix>/<key>` or
 * `/<bucket>/<key>`. A storage's own endpoint (`storages` true): `<bucket>.<uuid>.<suffix>/<key>`,
 * `<uuid>.<suffix>/<bucket>/<key>` or `/<uuid>/<bucket>/<key>`. With `storages` false a uuid-shaped
 * label is read as a bucket (one named so before such names were refused, when no storage has that uuid).
 */
export function addressOf(
  suffixes: readonly string[],
  host: string | undefined,
  path: string,
  storages = true,
): Address {
  const hostname = (host ?? '').toLowerCase().replace(/:\d+$/, '');
  const suffix = suffixes.find((s) => hostname.endsWith(`.${s}`));
  if (suffix && !hostname.startsWith('[')) {
    const labels = hostname.slice(0, -(suffix.length + 1));
    const dot = labels.lastIndexOf('.');
    const last = labels.slice(dot + 1);
    if (storages && STORAGE_LABEL.test(last)) {
      if (dot < 0) return { storage: last, ...pathStyle(path) };
      const key = path.length > 1 ? uriDecode(path.slice(1)) : undefined;
      return { storage: last, bucket: labels.slice(0, dot), ...(key !== undefined ? { key } : {}) };
    }
    const key = path.length > 1 ? uriDecode(path.slice(1)) : undefined;
    return { bucket: labels, ...(key !== undefined ? { key } : {}) };
  }
  const first = path.slice(1, 37);
  if (storages && STORAGE_LABEL.test(first) && (path.length === 37 || path[37] === '/')) {
    return { storage: first, ...pathStyle(path.slice(37) || '/') };
  }
  return pathStyle(path);
}

/**
 * The access key a request says signed it (Authorization header or X-Amz-Credential), unverified:
 * only to pick the storage whose CORS rules answer a browser before the signature is checked.
 */
export function claimedAccessKey(req: IncomingMessage, params: Map<string, string>): string | undefined {
  const header = req.headers.authorization;
  const credential =
    (typeof header === 'string' ? /Credential=([^,\s]+)/.exec(header)?.[1] : undefined) ??
    params.get('X-Amz-Credential');
  const id = credential?.split('/')[0];
  return id !== undefined && /^[A-Za-z0-9]{1,128}$/.test(id) ? id : undefined;
}

export function createAuthenticator(
  deps: S3ServerDeps,
  meta: ObjectMetadata,
  keyCache: LookupCache<AccessKey>,
) {
  const compiled = new Map<string, readonly Statement[]>();

  function statementsOf(policies: string): readonly Statement[] {
    let found = compiled.get(policies);
    if (!found) {
      try {
        found = compilePolicies(JSON.parse(policies));
      } catch {
        found = []; // provisioning refuses policies it cannot compile; anything else grants nothing
      }
      if (compiled.size > 1000) compiled.clear();
      compiled.set(policies, found);
    }
    return found;
  }

  const loadKey = (accessKeyId: string) =>
    keyCache.get(accessKeyId, async () => {
      const row = await meta.findAccessKey(accessKeyId);
      return (
        row && {
          storageId: row.object_storage_id,
          statements: statementsOf(row.policies),
          secret: deps.secretBox.decrypt(row.secret_encrypted),
          accessKeyId,
          username: row.username,
        }
      );
    });

  /** The request's verified key and signature; undefined for a request that carries no signature. */
  async function authenticate(
    req: IncomingMessage,
  ): Promise<(AccessKey & { signature: ParsedSignature }) | undefined> {
    const request = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers };
    const signature = parseSignature(request, deps.clock.now());
    if (!signature) return undefined;
    const key = await loadKey(signature.accessKeyId);
    if (!key) throw errors.invalidAccessKeyId();
    verifySignature(request, signature, key.secret);
    return { ...key, signature };
  }

  return { loadKey, authenticate };
}

/**
 * What an unsigned request's body is checked against: a SHA-256 or an unsigned aws-chunked framing the
 * client declares; a signed framing needs a signature it does not have.
 */
export function anonymousSignature(req: IncomingMessage): ParsedSignature {
  const payloadHash = headerValue(req.headers, 'x-amz-content-sha256') ?? 'UNSIGNED-PAYLOAD';
  const payload = payloadModeOf(payloadHash);
  if (payload.kind === 'chunked' && payload.signed)
    throw errors.accessDenied('Anonymous access is not allowed');
  return {
    accessKeyId: '',
    date: '',
    region: 'us-east-1',
    service: 's3',
    amzDate: '',
    signedHeaders: [],
    signature: '',
    presigned: false,
    payloadHash,
    payload,
  };
}
