// Who is asking and for what: the bucket and key a request addresses (path or virtual-host style) and
// the access key that signed it (SigV4, with the key's compiled policies).
import type { IncomingMessage } from 'node:http';
import { errors } from './errors.js';
import type { AccessKey, Caller, S3ServerDeps } from './kit.js';
import type { LookupCache } from './lookup-cache.js';
import type { ObjectMetadata } from './metadata.js';
import { compilePolicies, type Statement } from './policy.js';
import { parseSignature, uriDecode, verifySignature } from './sigv4.js';

/** The bucket and key of a request: `<bucket>.<suffix>/<key>` or `/<bucket>/<key>`. */
export function addressOf(
  suffixes: readonly string[],
  host: string | undefined,
  path: string,
): { bucket?: string; key?: string } {
  const hostname = (host ?? '').toLowerCase().replace(/:\d+$/, '');
  const suffix = suffixes.find((s) => hostname.endsWith(`.${s}`));
  if (suffix && !hostname.startsWith('[')) {
    const bucket = hostname.slice(0, -(suffix.length + 1));
    const key = path.length > 1 ? uriDecode(path.slice(1)) : undefined;
    return { bucket, ...(key !== undefined ? { key } : {}) };
  }
  const slash = path.indexOf('/', 1);
  const bucketPart = slash < 0 ? path.slice(1) : path.slice(1, slash);
  if (bucketPart === '') return {};
  const keyPart = slash < 0 ? '' : path.slice(slash + 1);
  return { bucket: uriDecode(bucketPart), ...(keyPart !== '' ? { key: uriDecode(keyPart) } : {}) };
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
        }
      );
    });

  async function authenticate(req: IncomingMessage): Promise<Caller> {
    const request = { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers };
    const signature = parseSignature(request, deps.clock.now());
    if (!signature) throw errors.accessDenied('Anonymous access is not allowed');
    const key = await loadKey(signature.accessKeyId);
    if (!key) throw errors.invalidAccessKeyId();
    verifySignature(request, signature, key.secret);
    return { ...key, signature };
  }

  return { loadKey, authenticate };
}
