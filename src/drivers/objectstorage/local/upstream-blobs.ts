// Object and part bytes in an upstream S3 bucket (BERTH_OBJECT_STORAGE_DRIVER=s3): Berth's endpoint
// keeps authentication, buckets, keys, policies and metadata; the bytes of a blob named `data/7/ab/…`
// live upstream under `objects/data/7/ab/…`, a key Berth makes up (never the tenant's key).
//
// A body of known length streams straight into one upstream PutObject under a fresh key; the rows name
// that key only after the upstream acknowledged it, and a body refused after it arrived (a checksum
// that does not match) is deleted again, so a failed write leaves nothing a tenant can see. What a
// crash leaves between the upstream PUT and the commit no row names; the orphan sweep removes it.
// A body whose length is not declared (a browser form upload) is spooled to the data directory first:
// an upstream PUT needs its length. Reads are upstream GETs, ranges upstream Range GETs. Object GETs
// and PUTs go over plain HTTP (upstream-http.ts, upstream-get.ts), everything else through the SDK.
import fs from 'node:fs';
import { Transform, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CopyObjectCommand, DeleteObjectCommand } from '@aws-sdk/client-s3';
import { blobGone, type BlobArea, type BlobStore, type BlobWrite } from './blobs.js';
import type { Logger } from 'pino';
import { errors, S3Error } from './errors.js';
import { FileSink } from './file-sink.js';
import { createObjectFiles } from './files.js';
import { UpstreamRefusal } from './upstream-get.js';
import { upstreamHttp, type UpstreamHttp, type UpstreamPut } from './upstream-http.js';
import {
  checkUpstreamBucket,
  createUpstreamClient,
  deleteUpstreamKeys,
  isMissingUpstream,
  listUpstreamKeys,
  type UpstreamSettings,
} from '../upstream-client.js';

export type { UpstreamSettings };

/** Every upstream key starts so: the bucket may hold other things beside Berth's blobs. */
const PREFIX = 'objects/';
/** The most one upstream PutObject takes (S3's limit). */
const MAX_PUT = 5 * 1024 ** 3;

const keyOf = (name: string) => PREFIX + name;

/** Streams bytes into one upstream PUT of `length` bytes; finishes once the upstream has them. */
class UpstreamSink extends Writable {
  private readonly put: UpstreamPut;
  private abandoned = false;
  private written = 0;
  private failure: Error | undefined;
  /** The write callback held back until the request drains (or the PUT fails). */
  private waiting: ((error?: Error | null) => void) | undefined;

  constructor(
    upstream: UpstreamHttp,
    key: string,
    private readonly length: number,
    failed: (error: unknown) => Error,
  ) {
    super({ highWaterMark: 1024 * 1024 });
    this.put = upstream.put(key, length);
    // Abandoned by Berth (the client went away): not the upstream's failure.
    this.put.done = this.put.done.catch((error: unknown) => {
      throw this.abandoned ? error : failed(error);
    });
    this.put.done.catch((error: unknown) => {
      this.failure ??= error as Error;
      this.resume();
    });
    this.put.request.on('drain', () => this.resume());
  }

  /** Settles when the PUT does, never rejecting (discard waits for it before deleting). */
  settled(): Promise<void> {
    return this.put.done.then(
      () => undefined,
      () => undefined,
    );
  }

  private resume(): void {
    const callback = this.waiting;
    this.waiting = undefined;
    callback?.(this.failure);
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.failure) return callback(this.failure);
    this.written += chunk.length;
    // More than declared would be cut off by the upstream: refused here as S3 refuses it.
    if (this.written > this.length) return callback(errors.incompleteBody());
    if (this.put.request.write(chunk)) callback();
    else this.waiting = callback;
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.written !== this.length) return callback(errors.incompleteBody());
    this.put.request.end();
    this.put.done.then(
      () => callback(),
      (error: unknown) => callback(error as Error),
    );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A body cut short must not reach the upstream as an object: the request is cut off before its
    // declared length, which the upstream refuses.
    if (error || !this.writableFinished) {
      this.abandoned = true;
      this.put.request.destroy();
    }
    callback(error);
  }
}

export function upstreamBlobStore(settings: UpstreamSettings, dataDir: string, logger: Logger): BlobStore {
  const client = createUpstreamClient(settings);
  const Bucket = settings.bucket;
  // Spools for bodies of unknown length, named as the local driver names its blobs.
  const spool = createObjectFiles(dataDir);

  const isMissing = isMissingUpstream;

  /**
   * An upstream failure as the tenant sees it: 503, which clients retry. What went wrong upstream
   * (its address, its answer) goes to Berth's log, not to the tenant.
   */
  function unavailable(error: unknown): Error {
    if (error instanceof S3Error) return error;
    logger.warn({ err: error, upstream: settings.url, bucket: Bucket }, 'the upstream S3 service failed');
    return new S3Error(
      'ServiceUnavailable',
      503,
      'The storage behind this endpoint is unavailable. Try again.',
    );
  }
  /** For .catch: a missing key stays what it is (the caller answers NoSuchKey), anything else is a 503. */
  const failed = (error: unknown): never => {
    throw isMissing(error) ? error : unavailable(error);
  };

  const deleteKeys = (keys: string[]) =>
    deleteUpstreamKeys(client, Bucket, keys, (error) => {
      throw unavailable(error);
    });
  /** Every key under a prefix with its age, page by page. */
  const listed = (prefix: string) => listUpstreamKeys(client, Bucket, prefix, failed);

  /** A new blob's name, shaped like the local driver's (`<area>/<owner>/<xx>/<token>`). */
  const freshName = (area: BlobArea, owner: number) => spool.name(area, owner);

  const upstream = upstreamHttp(settings);

  /** Upstream bytes of a blob: the body stream and its length. */
  async function get(name: string, range?: { start: number; end: number }) {
    try {
      return await upstream.get(keyOf(name), range);
    } catch (error) {
      if (error instanceof UpstreamRefusal && error.status === 404) throw blobGone(name);
      throw unavailable(error);
    }
  }

  async function begin(area: BlobArea, owner: number, length?: number): Promise<BlobWrite> {
    // One upstream PUT holds one blob, and S3 takes at most 5 GiB in one PUT (an object completed
    // from larger parts too): refused here as the S3 error it is, not as an upstream failure.
    if (length !== undefined && length > MAX_PUT) throw errors.entityTooLarge();
    const name = freshName(area, owner);
    if (length !== undefined) {
      const sink = new UpstreamSink(upstream, keyOf(name), length, unavailable);
      return {
        sink,
        place: () => Promise.resolve(name),
        async discard() {
          sink.destroy();
          await sink.settled();
          await client.send(new DeleteObjectCommand({ Bucket, Key: keyOf(name) })).catch(() => undefined);
        },
      };
    }
    const temp = await spool.temp();
    return {
      sink: new FileSink(temp),
      async place() {
        try {
          const { size } = await fs.promises.stat(temp);
          await pipeline(
            fs.createReadStream(temp, { highWaterMark: 1024 * 1024 }),
            new UpstreamSink(upstream, keyOf(name), size, unavailable),
          );
          return name;
        } finally {
          await spool.removeTemp(temp);
        }
      },
      discard: () => spool.removeTemp(temp),
    };
  }

  return {
    kind: 's3',
    begin,

    open: (name, range) => get(name, range),

    async copy(name, area, owner, options = {}) {
      const { range, observe } = options;
      if (!range && !observe) {
        // The whole blob, unseen: the upstream copies it without the bytes passing through Berth.
        const target = freshName(area, owner);
        try {
          await client.send(
            new CopyObjectCommand({ Bucket, Key: keyOf(target), CopySource: `${Bucket}/${keyOf(name)}` }),
          );
        } catch (error) {
          if (isMissing(error)) throw blobGone(name);
          throw unavailable(error);
        }
        return target;
      }
      const source = await get(name, range);
      const blob = await begin(area, owner, source.length);
      try {
        await pipeline(
          source,
          new Transform({
            transform(chunk: Buffer, _encoding, callback) {
              observe?.(chunk);
              callback(null, chunk);
            },
          }),
          blob.sink,
        );
      } catch (error) {
        await blob.discard();
        throw error;
      }
      return blob.place();
    },

    async remove(...names) {
      const keys = names.filter((n): n is string => n !== undefined).map(keyOf);
      if (keys.length === 1)
        await client.send(new DeleteObjectCommand({ Bucket, Key: keys[0] })).catch(failed);
      else if (keys.length > 1) await deleteKeys(keys);
    },

    async removeTree(area, owner) {
      const keys: string[] = [];
      for await (const { key } of listed(`${PREFIX}${area}/${owner}/`)) keys.push(key);
      await deleteKeys(keys);
    },

    sweepTemp: (now, ageMs) => spool.sweepTemp(now, ageMs),

    async sweepOrphans(named, now, ageMs) {
      let removed = 0;
      const old: string[] = [];
      const check = async (): Promise<void> => {
        const keep = await named(old);
        const gone = old.filter((name) => !keep.has(name));
        await deleteKeys(gone.map(keyOf));
        removed += gone.length;
        old.length = 0;
      };
      for (const area of ['data', 'parts']) {
        for await (const { key, modified } of listed(`${PREFIX}${area}/`)) {
          if (!modified || now.getTime() - modified.getTime() <= ageMs) continue;
          old.push(key.slice(PREFIX.length));
          if (old.length >= 500) await check();
        }
      }
      await check();
      return removed;
    },

    check: () => checkUpstreamBucket(client, settings),
  };
}
