// Where Berth keeps what it hands to runtimes: uploaded source archives today, built release archives
// when a runtime builds away from where it runs (docs/decisions/0011-artifact-store.md). The `local`
// store keeps files under the data dir. Another host, a second Berth
// replica or a Kubernetes pod fetches an artifact by the short-lived URL `url()` signs, never by a path.
// The `s3` store keeps them in the upstream bucket of BERTH_S3_UPSTREAM_* and its URLs are presigned
// GETs of that upstream.
import type { Readable } from 'node:stream';

/**
 * A key: `apps/<application id>/<kind>/<name>`. A name is lower-case letters, digits, `.`, `_` and `-`,
 * starting with a letter or digit, at most 128 characters, and holds no `..`: no key climbs out of its
 * application, is absolute, or names a directory (so no key lists anything).
 */
export const ARTIFACT_KEY_PATTERN =
  /^apps\/[1-9][0-9]{0,15}\/(sources|releases)\/[a-z0-9][a-z0-9._-]{0,127}$/;

export const ARTIFACT_KEY_RULE =
  'apps/<application id>/sources|releases/<name>, the name of lower-case letters, digits, ".", "_" and "-" (no "..")';

/** Why `key` is not an artifact key, or undefined when it is one. */
export function artifactKeyProblem(key: string): string | undefined {
  if (!ARTIFACT_KEY_PATTERN.test(key) || key.includes('..'))
    return `The artifact key must be ${ARTIFACT_KEY_RULE}.`;
  return undefined;
}

/** Throws unless `key` is an artifact key: every method of a store checks its key first. */
export function checkArtifactKey(key: string): string {
  const problem = artifactKeyProblem(key);
  if (problem !== undefined) throw new InvalidArtifactKeyError(problem);
  return key;
}

/** The key of an application's uploaded source archive. */
export const sourceKey = (appId: number, name: string): string =>
  checkArtifactKey(`apps/${appId}/sources/${name}`);

export class InvalidArtifactKeyError extends Error {
  override readonly name = 'InvalidArtifactKeyError';
}

/** `put` read more than its `maxBytes`: nothing of it was kept. */
export class ArtifactTooLargeError extends Error {
  override readonly name = 'ArtifactTooLargeError';
  constructor(readonly maxBytes: number) {
    super(`The artifact is larger than ${maxBytes} bytes`);
  }
}

export interface ArtifactInfo {
  key: string;
  size: number;
  modifiedAt: Date;
}

/** What a signed URL's request gets: the artifact, or why not. */
export type SignedRead =
  | { status: 'ok'; info: ArtifactInfo; body: Readable }
  /** A signature that is not the key's, or one whose time has passed: the same answer for both. */
  | { status: 'forbidden'; reason: 'signature' | 'expired' }
  | { status: 'not_found' }
  /** Not an artifact key (artifactKeyProblem says why): nothing was looked up. */
  | { status: 'invalid_key'; problem: string };

/** Longest life of a signed URL: long enough for a slow pod start, short enough not to be a credential. */
export const MAX_URL_TTL_SECONDS = 24 * 3600;

export interface ArtifactStore {
  readonly name: string;
  /**
   * Stores `body` under `key`, replacing what was there, all at once: until the whole body is read and
   * written nothing of it is visible under the key, and a body that fails (an error, a disconnect, more
   * than `maxBytes`: ArtifactTooLargeError) leaves nothing behind.
   */
  put(key: string, body: Readable, options: { maxBytes: number }): Promise<ArtifactInfo>;
  /** The artifact's bytes, or undefined when there is none. */
  open(key: string): Promise<Readable | undefined>;
  stat(key: string): Promise<ArtifactInfo | undefined>;
  exists(key: string): Promise<boolean>;
  /** Removes one artifact (nothing when it is gone). */
  remove(key: string): Promise<void>;
  /** Removes every artifact of the application (it is being deleted). */
  removeApplication(appId: number): Promise<void>;
  /**
   * A URL another host can GET the artifact from without any other credential, until `ttlSeconds`
   * (1 to MAX_URL_TTL_SECONDS) from now.
   */
  url(key: string, ttlSeconds: number): string;
  /**
   * A file on this host with the artifact's bytes, for work that needs a file (reading a zip's
   * directory at its end, a build on this host): the local store's own file, which the caller must
   * not change; a remote store would download it. `release` when done. Undefined when there is none.
   */
  localFile(key: string): Promise<{ path: string; release(): Promise<void> } | undefined>;
  /**
   * For a store whose URLs Berth serves itself (local): checks a URL's signature and time and opens
   * the artifact. A store whose URLs point elsewhere (an object storage's presigned URLs) omits it.
   */
  openSigned?(key: string, query: { expires?: string; signature?: string }): Promise<SignedRead>;
  /**
   * For a store elsewhere (an upstream bucket): fails when it cannot be used, naming the setting to
   * fix; the start runs it before Berth serves.
   */
  check?(): Promise<void>;
}
