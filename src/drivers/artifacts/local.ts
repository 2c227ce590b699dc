// The local artifact store: files under <dataDir>/artifacts/<key> (0700 directories, 0600 files,
// Berth's own), written to a temporary file beside them and renamed into place once whole. Its URLs are
// Berth's own API: GET /internal/artifacts/<key>?expires=<unix seconds>&signature=<hex HMAC-SHA256 of
// key and expiry>, under a key derived from Berth's secret key; the signature is the credential.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Clock } from '../../domain/clock.js';
import {
  artifactKeyProblem,
  ArtifactTooLargeError,
  checkArtifactKey,
  MAX_URL_TTL_SECONDS,
  sourceKey,
  type ArtifactInfo,
  type ArtifactStore,
  type SignedRead,
} from './types.js';

export interface LocalArtifactStoreOptions {
  dataDir: string;
  /** Where Berth's API is reached from other hosts (BERTH_PUBLIC_URL): the URLs' base. */
  publicUrl: string;
  /** The URLs' expiry is read from it (tests move it). */
  clock: Clock;
  /** At least 32 bytes; derived from Berth's secret key, so every replica on the same key signs alike. */
  signingKey: Buffer;
  /** What was moved from the layout before the store (see moveLegacyUploads). */
  onLegacyMoved?: (count: number) => void;
}

/** The path of the signed-URL route (src/http/routes/artifacts.ts). */
export const ARTIFACT_ROUTE_PREFIX = '/internal/artifacts/';

/** Temporary files older than this are a crashed write's and are removed when a store starts. */
const STALE_TEMP_MS = 24 * 3600_000;

export type LocalArtifactStore = ArtifactStore & { readonly root: string };

export function createLocalArtifactStore(options: LocalArtifactStoreOptions): LocalArtifactStore {
  if (options.signingKey.length < 32) throw new Error('the artifact signing key must be at least 32 bytes');
  const root = path.join(options.dataDir, 'artifacts');
  // Keys never start with '.', so no key reaches the temporary files.
  const temp = path.join(root, '.tmp');
  fs.mkdirSync(temp, { recursive: true, mode: 0o700 });
  fs.chmodSync(root, 0o700);
  // Files' times are the host's, not the (test-movable) clock's.
  removeStaleTemporaries(temp, Date.now());
  const moved = moveLegacyUploads(options.dataDir, root);
  if (moved > 0) options.onLegacyMoved?.(moved);
  const base = options.publicUrl.replace(/\/+$/, '');

  const fileOf = (key: string) => path.join(root, checkArtifactKey(key));
  const appDir = (appId: number) => {
    if (!Number.isSafeInteger(appId) || appId < 1) throw new Error(`not an application id: ${appId}`);
    return path.join(root, 'apps', String(appId));
  };
  const signature = (key: string, expires: number) =>
    createHmac('sha256', options.signingKey).update(`${key}\n${expires}`).digest();

  async function stat(key: string): Promise<ArtifactInfo | undefined> {
    try {
      const found = await fsp.stat(fileOf(key));
      return found.isFile() ? { key, size: found.size, modifiedAt: found.mtime } : undefined;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  /** The file opened before it is answered with, so one removed meanwhile is a 404, not a broken stream. */
  async function openFile(key: string): Promise<{ info: ArtifactInfo; body: Readable } | undefined> {
    let handle: fsp.FileHandle;
    try {
      handle = await fsp.open(fileOf(key), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const found = await handle.stat();
    if (!found.isFile()) {
      await handle.close();
      return undefined;
    }
    return {
      info: { key, size: found.size, modifiedAt: found.mtime },
      body: handle.createReadStream({ autoClose: true }),
    };
  }

  return {
    name: 'local',
    root,

    async put(key, body, { maxBytes }) {
      const file = fileOf(key);
      await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      const partial = path.join(temp, `${randomBytes(12).toString('hex')}.part`);
      let size = 0;
      const cap = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > maxBytes) done(new ArtifactTooLargeError(maxBytes));
          else done(null, chunk);
        },
      });
      try {
        // flush: the bytes are on disk before the rename makes them the artifact.
        await pipeline(body, cap, fs.createWriteStream(partial, { flags: 'wx', mode: 0o600, flush: true }));
        await fsp.rename(partial, file);
      } catch (error) {
        await fsp.rm(partial, { force: true });
        throw error;
      }
      return { key, size, modifiedAt: options.clock.now() };
    },

    async open(key) {
      return (await openFile(key))?.body;
    },

    stat,

    async exists(key) {
      return (await stat(key)) !== undefined;
    },

    async remove(key) {
      await fsp.rm(fileOf(key), { force: true });
    },

    async removeApplication(appId) {
      await fsp.rm(appDir(appId), { recursive: true, force: true });
    },

    url(key, ttlSeconds) {
      checkArtifactKey(key);
      if (!Number.isInteger(ttlSeconds) || ttlSeconds < 1 || ttlSeconds > MAX_URL_TTL_SECONDS)
        throw new RangeError(`ttlSeconds must be an integer from 1 to ${MAX_URL_TTL_SECONDS}`);
      const expires = Math.floor(options.clock.now().getTime() / 1000) + ttlSeconds;
      const query = new URLSearchParams({
        expires: String(expires),
        signature: signature(key, expires).toString('hex'),
      });
      return `${base}${ARTIFACT_ROUTE_PREFIX}${key}?${query.toString()}`;
    },

    async localFile(key) {
      // Its own file: nothing to clean up afterwards.
      return (await stat(key)) ? { path: fileOf(key), release: () => Promise.resolve() } : undefined;
    },

    async openSigned(key, query): Promise<SignedRead> {
      const problem = artifactKeyProblem(key);
      if (problem !== undefined) return { status: 'invalid_key', problem };
      const expires = /^[0-9]{1,12}$/.test(query.expires ?? '') ? Number(query.expires) : undefined;
      const given = /^[0-9a-f]{64}$/.test(query.signature ?? '')
        ? Buffer.from(query.signature!, 'hex')
        : undefined;
      // Constant-time: a wrong signature says nothing of how close it was.
      if (expires === undefined || given === undefined || !timingSafeEqual(given, signature(key, expires)))
        return { status: 'forbidden', reason: 'signature' };
      if (options.clock.now().getTime() >= expires * 1000) return { status: 'forbidden', reason: 'expired' };
      const opened = await openFile(key);
      return opened ? { status: 'ok', ...opened } : { status: 'not_found' };
    },
  };
}

/** Removes temporary files older than a day in `temp` (a crashed write's; the s3 store's spools too). */
export function removeStaleTemporaries(temp: string, now: number): void {
  for (const name of fs.readdirSync(temp)) {
    const file = path.join(temp, name);
    try {
      if (now - fs.statSync(file).mtimeMs > STALE_TEMP_MS) fs.rmSync(file, { force: true });
    } catch (error) {
      // Another process's write that finished meanwhile.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
}

/**
 * Before the artifact store, uploaded sources were <dataDir>/uploads/<application id>-<name>: each is
 * moved to its key (a rename on the same file system: whole or not at all), so nothing uploaded then is
 * lost and only one layout is ever read. What is not such a file stays where it is.
 */
function moveLegacyUploads(dataDir: string, root: string): number {
  const legacy = path.join(dataDir, 'uploads');
  let names: string[];
  try {
    names = fs.readdirSync(legacy);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  let moved = 0;
  for (const name of names) {
    const match = /^([1-9][0-9]{0,15})-(.+)$/.exec(name);
    if (!match) continue;
    let key: string;
    try {
      key = sourceKey(Number(match[1]), match[2]!);
    } catch {
      continue;
    }
    const file = path.join(root, key);
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    try {
      fs.renameSync(path.join(legacy, name), file);
      moved += 1;
    } catch (error) {
      // Another Berth process on the same data dir moved it first.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }
  try {
    fs.rmdirSync(legacy);
  } catch (error) {
    // Something that was not an upload is left in it, or another process removed it first.
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOENT') throw error;
  }
  return moved;
}
