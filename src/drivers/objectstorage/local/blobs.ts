// Where object and part bytes live, behind one small interface: the S3 endpoint (objects.ts,
// multipart.ts, post-object.ts) keeps authentication, buckets, keys, policies and metadata, and asks a
// BlobStore only for bytes. `local` keeps them as files in the data directory (files.ts); `s3` in an
// upstream bucket (upstream.ts). A blob is named by a path relative to the store (`data/<bucket id>/…`,
// `parts/<upload row id>/…`), which is what the metadata rows keep in their `file` column.
import fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { FileSink } from './file-sink.js';
import { createObjectFiles, type ObjectFiles } from './files.js';

export type BlobArea = 'data' | 'parts';
export interface ByteRange {
  start: number;
  end: number;
}

/** A blob being written: whole or nothing. */
export interface BlobWrite {
  /** Where the bytes go; it finishes only once they are stored for good (flushed, or acknowledged upstream). */
  readonly sink: Writable;
  /** After the sink finished: the blob in its place, by the name the rows keep. */
  place(): Promise<string>;
  /** Drops what was written: the sink failed, or the body was refused after it arrived. */
  discard(): Promise<void>;
}

/**
 * A blob's bytes as a stream. A store may also let them write themselves out without a copy
 * (`sendTo`: the s3 store's GET, upstream-get.ts); sendBlob uses that when it is there.
 */
export type BlobBytes = Readable & { sendTo?(to: Writable): Promise<void> };

export interface CopyOptions {
  range?: ByteRange;
  /** Sees every chunk on the way (hashing in the same pass). */
  observe?: (chunk: Buffer) => void;
}

export interface BlobStore {
  readonly kind: 'local' | 's3';
  /** A new blob of `owner` (a bucket id for data, an upload row id for parts); `length` when known. */
  begin(area: BlobArea, owner: number, length?: number): Promise<BlobWrite>;
  /** The blob's bytes (an inclusive range of them); rejects with code ENOENT when it is gone. */
  open(name: string, range?: ByteRange): Promise<BlobBytes>;
  /** A new blob of `owner` holding the blob `name` (or a range of it), placed; ENOENT when it is gone. */
  copy(name: string, area: BlobArea, owner: number, options?: CopyOptions): Promise<string>;
  /** Removes blobs; one already gone is fine. */
  remove(...names: Array<string | undefined>): Promise<void>;
  /** Removes every blob of an owner (a deleted bucket, a completed or aborted upload). */
  removeTree(area: BlobArea, owner: number): Promise<void>;
  /** Removes what interrupted writes left (temporary files older than `ageMs`). */
  sweepTemp(now: Date, ageMs: number): Promise<number>;
  /** Removes blobs older than `ageMs` that no row names (see files.sweepOrphans). */
  sweepOrphans(named: (names: string[]) => Promise<Set<string>>, now: Date, ageMs: number): Promise<number>;
  /** Checks at start that the store is reachable; throws a message naming the setting at fault. */
  check(): Promise<void>;
}

/** Writes a blob's bytes from `open` to `to`: by themselves when they can, else piped. */
export function sendBlob(bytes: BlobBytes, to: Writable): Promise<void> {
  return bytes.sendTo ? bytes.sendTo(to) : pipeline(bytes, to);
}

/** An error like fs's for a blob that is not there: callers answer NoSuchKey. */
export const blobGone = (name: string): NodeJS.ErrnoException =>
  Object.assign(new Error(`blob ${name} does not exist`), { code: 'ENOENT' });

/** The bytes as files in `<dataDir>/objects` (files.ts): written to a temp file, then moved into place. */
export function localBlobStore(dataDir: string, files: ObjectFiles = createObjectFiles(dataDir)): BlobStore {
  return {
    kind: 'local',
    async begin(area, owner) {
      const temp = await files.temp();
      return {
        sink: new FileSink(temp),
        place: () => files.place(temp, area, owner),
        discard: () => files.removeTemp(temp),
      };
    },
    async open(name, range) {
      // Open before answering: a file replaced after the lookup stays readable through its handle.
      const handle = await fs.promises.open(files.absolute(name), 'r');
      return handle.createReadStream({ ...range, highWaterMark: 1024 * 1024 });
    },
    async copy(name, area, owner, options) {
      return files.place(await files.copyToTemp(name, options), area, owner);
    },
    remove: (...names) => files.remove(...names),
    removeTree: (area, owner) => files.removeTree(area, owner),
    sweepTemp: (now, ageMs) => files.sweepTemp(now, ageMs),
    sweepOrphans: (named, now, ageMs) => files.sweepOrphans(named, now, ageMs),
    check: () => Promise.resolve(),
  };
}

/**
 * A store made on first use: the s3 store's SDK takes ~0.1 s to load, which a Berth on the local
 * driver should not pay at every start.
 */
export function lazyBlobStore(kind: BlobStore['kind'], load: () => Promise<BlobStore>): BlobStore {
  let loading: Promise<BlobStore> | undefined;
  const store = () => (loading ??= load());
  return {
    kind,
    begin: async (area, owner, length) => (await store()).begin(area, owner, length),
    open: async (name, range) => (await store()).open(name, range),
    copy: async (name, area, owner, options) => (await store()).copy(name, area, owner, options),
    remove: async (...names) => (await store()).remove(...names),
    removeTree: async (area, owner) => (await store()).removeTree(area, owner),
    sweepTemp: async (now, ageMs) => (await store()).sweepTemp(now, ageMs),
    sweepOrphans: async (named, now, ageMs) => (await store()).sweepOrphans(named, now, ageMs),
    check: async () => (await store()).check(),
  };
}
