// The s3 artifact store (BERTH_ARTIFACT_STORE=s3): artifacts in the upstream bucket of
// BERTH_S3_UPSTREAM_* under `artifacts/<key>`, beside the s3 object-storage driver's objects/. A body is
// spooled to <dataDir>/artifacts/.tmp first (its length is not known before, an upload counts it
// against its cap), then sent as one PutObject: the upstream makes the key hold the whole body or its
// previous one, never part of it. URLs are presigned GETs of the upstream (s3-url.ts): other hosts
// fetch from the upstream, not from Berth, so there is no openSigned.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import type { Clock } from '../../domain/clock.js';
import {
  checkUpstreamBucket,
  createUpstreamClient,
  deleteUpstreamKeys,
  isMissingUpstream,
  listUpstreamKeys,
  type UpstreamSettings,
} from '../objectstorage/upstream-client.js';
import { removeStaleTemporaries } from './local.js';
import { ARTIFACT_PREFIX, presignedArtifactUrl, upstreamArtifactKey } from './s3-url.js';
import { ArtifactTooLargeError, type ArtifactInfo, type ArtifactStore } from './types.js';

export interface S3ArtifactStoreOptions {
  settings: UpstreamSettings;
  /** Spools and downloads go to <dataDir>/artifacts/.tmp (0700, files 0600). */
  dataDir: string;
  /** The URLs' signing time is read from it. */
  clock: Clock;
}

export function createS3ArtifactStore(options: S3ArtifactStoreOptions): ArtifactStore {
  const { settings, clock } = options;
  const client = createUpstreamClient(settings);
  const Bucket = settings.bucket;
  const temp = path.join(options.dataDir, 'artifacts', '.tmp');
  fs.mkdirSync(temp, { recursive: true, mode: 0o700 });
  fs.chmodSync(path.dirname(temp), 0o700);
  removeStaleTemporaries(temp, Date.now());
  const tempFile = (suffix: string) => path.join(temp, `${randomBytes(12).toString('hex')}.${suffix}`);

  /** An upstream failure, said as one (the SDK's own message alone names neither store nor upstream). */
  const failed = (error: unknown): never => {
    throw new Error(
      `the artifact store's upstream S3 service (${settings.url}, bucket ${Bucket}) failed: ${(error as Error).message || (error as Error).name}`,
      { cause: error },
    );
  };

  async function stat(key: string): Promise<ArtifactInfo | undefined> {
    try {
      const out = await client.send(new HeadObjectCommand({ Bucket, Key: upstreamArtifactKey(key) }));
      return { key, size: out.ContentLength ?? 0, modifiedAt: out.LastModified ?? clock.now() };
    } catch (error) {
      if (isMissingUpstream(error)) return undefined;
      return failed(error);
    }
  }

  async function open(key: string): Promise<Readable | undefined> {
    try {
      const out = await client.send(new GetObjectCommand({ Bucket, Key: upstreamArtifactKey(key) }));
      return out.Body as Readable;
    } catch (error) {
      if (isMissingUpstream(error)) return undefined;
      return failed(error);
    }
  }

  return {
    name: 's3',

    async put(key, body, { maxBytes }) {
      const Key = upstreamArtifactKey(key);
      const spool = tempFile('part');
      let size = 0;
      const cap = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > maxBytes) done(new ArtifactTooLargeError(maxBytes));
          else done(null, chunk);
        },
      });
      try {
        await pipeline(body, cap, fs.createWriteStream(spool, { flags: 'wx', mode: 0o600 }));
        // One PUT of a known length: the upstream stores all of it or nothing.
        await client
          .send(
            new PutObjectCommand({
              Bucket,
              Key,
              Body: fs.createReadStream(spool, { highWaterMark: 1024 * 1024 }),
              ContentLength: size,
            }),
          )
          .catch(failed);
      } finally {
        await fsp.rm(spool, { force: true });
      }
      return { key, size, modifiedAt: clock.now() };
    },

    open,
    stat,

    async exists(key) {
      return (await stat(key)) !== undefined;
    },

    async remove(key) {
      // Deleting a key that is not there is no error in S3.
      await client.send(new DeleteObjectCommand({ Bucket, Key: upstreamArtifactKey(key) })).catch(failed);
    },

    async removeApplication(appId) {
      if (!Number.isSafeInteger(appId) || appId < 1) throw new Error(`not an application id: ${appId}`);
      const keys: string[] = [];
      for await (const { key } of listUpstreamKeys(
        client,
        Bucket,
        `${ARTIFACT_PREFIX}apps/${appId}/`,
        failed,
      ))
        keys.push(key);
      await deleteUpstreamKeys(client, Bucket, keys, failed);
    },

    url: (key, ttlSeconds) => presignedArtifactUrl(settings, clock, key, ttlSeconds),

    async localFile(key) {
      const body = await open(key);
      if (!body) return undefined;
      // A copy on this host, for work that needs a file (a zip is read from its end); removed on release.
      const file = tempFile('download');
      try {
        await pipeline(body, fs.createWriteStream(file, { flags: 'wx', mode: 0o600 }));
      } catch (error) {
        await fsp.rm(file, { force: true });
        throw error;
      }
      return { path: file, release: () => fsp.rm(file, { force: true }) };
    },

    check: () => checkUpstreamBucket(client, settings),
  };
}
