// What the s3 artifact store does without the AWS SDK: its upstream keys, its URLs (presigned GETs of
// the upstream, signed here synchronously, as url() is), and the stand-in src/composition.ts hands out
// until the SDK is loaded on first use.
import type { Clock } from '../../domain/clock.js';
import { presignUrl } from '../objectstorage/local/sigv4.js';
import type { UpstreamSettings } from '../objectstorage/upstream-client.js';
import { checkArtifactKey, MAX_URL_TTL_SECONDS, type ArtifactStore } from './types.js';

/** Every upstream key of the store starts so: the bucket also holds the object storage's objects/. */
export const ARTIFACT_PREFIX = 'artifacts/';

/** The upstream key of an artifact (the key checked first). */
export const upstreamArtifactKey = (key: string): string => ARTIFACT_PREFIX + checkArtifactKey(key);

/** A presigned GET of the artifact at the upstream, good for `ttlSeconds` from the clock's now. */
export function presignedArtifactUrl(
  settings: UpstreamSettings,
  clock: Clock,
  key: string,
  ttlSeconds: number,
): string {
  const upstreamKey = upstreamArtifactKey(key);
  if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_URL_TTL_SECONDS)
    throw new RangeError(`ttlSeconds must be an integer from 1 to ${MAX_URL_TTL_SECONDS}`);
  return presignUrl({
    method: 'GET',
    endpoint: settings.url,
    path: `/${settings.bucket}/${upstreamKey}`,
    region: settings.region,
    accessKeyId: settings.accessKeyId,
    secretAccessKey: settings.secretAccessKey,
    now: clock.now(),
    expiresSeconds: ttlSeconds,
  });
}

/**
 * The s3 store before its SDK is loaded: `url` is answered at once (it needs no SDK), everything else
 * waits for `load` (once).
 */
export function lazyS3ArtifactStore(
  settings: UpstreamSettings,
  clock: Clock,
  load: () => Promise<ArtifactStore>,
): ArtifactStore {
  let loaded: Promise<ArtifactStore> | undefined;
  const store = () => (loaded ??= load());
  return {
    name: 's3',
    put: async (key, body, options) => (await store()).put(key, body, options),
    open: async (key) => (await store()).open(key),
    stat: async (key) => (await store()).stat(key),
    exists: async (key) => (await store()).exists(key),
    remove: async (key) => (await store()).remove(key),
    removeApplication: async (appId) => (await store()).removeApplication(appId),
    url: (key, ttlSeconds) => presignedArtifactUrl(settings, clock, key, ttlSeconds),
    localFile: async (key) => (await store()).localFile(key),
    check: async () => (await store()).check?.(),
  };
}
