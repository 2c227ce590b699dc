// Object bytes on disk: `<dataDir>/objects/data/<bucket id>/<xx>/<token>` for objects,
// `…/parts/<upload row id>/…` for multipart parts, `…/tmp/` while a body is arriving. A new file is
// written for every PUT and swapped in by the metadata commit, so readers never see a half-written object.
//
// Durability: a file's data is flushed before it is placed (FileSink, syncData), and placing it
// flushes the directory it moves into, so by the time the metadata commit names a file, its bytes
// and its name are on the disk.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { FileSink } from './file-sink.js';
import { isRunning, ownIdentity } from '../../os/processes.js';

/**
 * While `berth admin backup` copies the object files its snapshot of the store names (src/backup.ts),
 * a file that a later commit replaces or deletes must stay readable: `<objects>/backup-hold/` exists
 * then, with the backup's pid and start time in `owner`, and files are moved into it instead of being
 * removed. The backup removes it when done; a hold whose process is gone is ignored.
 */
const HOLD = 'backup-hold';
const heldName = (relative: string): string => relative.split(path.sep).join('__');

async function holding(root: string): Promise<boolean> {
  const owner = await fs.promises.readFile(path.join(root, HOLD, 'owner'), 'utf8').catch(() => undefined);
  return owner !== undefined && isRunning(owner);
}

/** Holds removals of object files of `dataDir` until the returned function is called. */
export async function holdObjectRemovals(dataDir: string): Promise<() => Promise<void>> {
  const dir = path.join(dataDir, 'objects', HOLD);
  await fs.promises.rm(dir, { recursive: true, force: true });
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
  // The owner last: a hold without it holds nothing yet.
  await fs.promises.writeFile(path.join(dir, 'owner.tmp'), ownIdentity());
  await fs.promises.rename(path.join(dir, 'owner.tmp'), path.join(dir, 'owner'));
  return () => fs.promises.rm(dir, { recursive: true, force: true });
}

/** Where an object file named `relative` is now: in place, or moved into the hold (or undefined). */
export async function heldOrPlacedObjectFile(dataDir: string, relative: string): Promise<string | undefined> {
  const root = path.join(dataDir, 'objects');
  const [area, owner, ...rest] = relative.split(path.sep);
  const candidates = [
    path.join(root, relative),
    path.join(root, HOLD, heldName(relative)),
    path.join(root, HOLD, `${area}__${owner}`, ...rest),
  ];
  for (const file of candidates) {
    const stat = await fs.promises.lstat(file).catch(() => undefined);
    if (stat?.isFile()) return file;
  }
  return undefined;
}

/** How many files sweepOrphans asks the store about at once (bound parameters per query). */
const SWEEP_BATCH = 500;

export function createObjectFiles(dataDir: string) {
  const root = path.join(dataDir, 'objects');
  const made = new Set<string>();

  async function ensureDir(dir: string): Promise<void> {
    if (made.has(dir)) return;
    // Only Berth's own user reads object data (0700 directories, 0600 files, see FileSink).
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 });
    made.add(dir);
  }

  const token = () => randomBytes(12).toString('hex');

  /** A new blob's path relative to the root: `<area>/<owner>/<xx>/<token>` (xx shards the directory). */
  function freshName(area: 'data' | 'parts', owner: number): string {
    const name = token();
    return path.join(area, String(owner), name.slice(0, 2), name);
  }

  /** A directory's entries; none when it does not exist (yet). */
  async function entries(dir: string): Promise<string[]> {
    try {
      return await fs.promises.readdir(dir);
    } catch {
      return [];
    }
  }

  async function flush(file: string, flags: number): Promise<void> {
    const handle = await fs.promises.open(file, flags);
    try {
      await handle.datasync();
    } finally {
      await handle.close();
    }
  }

  /** One unlink (fs.rm would lstat first); a file already gone is fine. */
  async function unlink(file: string): Promise<void> {
    try {
      await fs.promises.unlink(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  /** Removes an object or part file, or moves it into a backup's hold. */
  async function discard(relative: string): Promise<void> {
    if (await holding(root)) {
      try {
        await fs.promises.rename(path.join(root, relative), path.join(root, HOLD, heldName(relative)));
        return;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
    }
    await unlink(path.join(root, relative));
  }

  return {
    root,
    absolute: (relative: string): string => path.join(root, relative),
    name: freshName,

    /** A fresh temporary file path (the directory exists). */
    async temp(): Promise<string> {
      const dir = path.join(root, 'tmp');
      await ensureDir(dir);
      return path.join(dir, token());
    },

    /**
     * Moves a finished temporary file (its data already flushed) to its place and flushes the
     * directory entry; returns the path relative to the root.
     */
    async place(tempFile: string, area: 'data' | 'parts', owner: number): Promise<string> {
      const relative = freshName(area, owner);
      const dir = path.dirname(path.join(root, relative));
      await ensureDir(dir);
      await fs.promises.rename(tempFile, path.join(root, relative));
      await flush(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
      return relative;
    },

    /** Flushes a file written by other means than FileSink (a copy) to the disk. */
    syncData: (file: string) => flush(file, fs.constants.O_RDONLY),

    /**
     * Copies a stored file, or the inclusive byte range of it, to a fresh temporary file whose data
     * is on the disk; `observe` sees every chunk on the way (hashing in the same pass). On failure
     * (the source gone, say) nothing is left behind and the error is thrown.
     */
    async copyToTemp(
      relative: string,
      options: { range?: { start: number; end: number }; observe?: (chunk: Buffer) => void } = {},
    ): Promise<string> {
      const dir = path.join(root, 'tmp');
      await ensureDir(dir);
      const temp = path.join(dir, token());
      const { range, observe } = options;
      try {
        if (range || observe) {
          await pipeline(
            fs.createReadStream(path.join(root, relative), { ...range, highWaterMark: 1024 * 1024 }),
            async function* (chunks: AsyncIterable<Buffer>) {
              for await (const chunk of chunks) {
                observe?.(chunk);
                yield chunk;
              }
            },
            new FileSink(temp),
          );
        } else {
          await fs.promises.copyFile(path.join(root, relative), temp);
          await flush(temp, fs.constants.O_RDONLY);
        }
        return temp;
      } catch (error) {
        await unlink(temp);
        throw error;
      }
    },

    /** Removes files; a file already gone is fine. */
    async remove(...relative: Array<string | undefined>): Promise<void> {
      await Promise.all(relative.filter((r): r is string => r !== undefined).map((r) => discard(r)));
    },

    removeTemp: unlink,

    /**
     * Removes temporary files older than `ageMs`, left behind by a process that stopped mid-upload.
     * The age keeps uploads in flight in another process on the same data directory safe.
     */
    async sweepTemp(now: Date, ageMs: number): Promise<number> {
      const dir = path.join(root, 'tmp');
      let removed = 0;
      for (const name of await entries(dir)) {
        const file = path.join(dir, name);
        const stat = await fs.promises.stat(file).catch(() => undefined);
        if (stat && now.getTime() - stat.mtimeMs > ageMs) {
          await fs.promises.rm(file, { force: true });
          removed += 1;
        }
      }
      return removed;
    },

    /**
     * Removes object and part files older than `ageMs` that no row names: left behind when a process
     * stopped between placing a file and committing its row, or between a commit and removing the file
     * it replaced or the bucket or upload it deleted. The age keeps files of PUTs in flight safe (a
     * file is placed right after its last write and committed right after that). Asks `named` about
     * at most SWEEP_BATCH files at a time.
     */
    async sweepOrphans(named: (files: string[]) => Promise<Set<string>>, now: Date, ageMs: number) {
      let removed = 0;
      const old: string[] = [];
      const check = async (): Promise<void> => {
        const keep = await named(old);
        for (const relative of old) {
          if (keep.has(relative)) continue;
          await discard(relative);
          removed += 1;
        }
        old.length = 0;
      };
      for (const area of ['data', 'parts']) {
        for (const owner of await entries(path.join(root, area))) {
          for (const shard of await entries(path.join(root, area, owner))) {
            for (const name of await entries(path.join(root, area, owner, shard))) {
              const relative = path.join(area, owner, shard, name);
              const stat = await fs.promises.stat(path.join(root, relative)).catch(() => undefined);
              if (!stat?.isFile() || now.getTime() - stat.mtimeMs <= ageMs) continue;
              old.push(relative);
              if (old.length >= SWEEP_BATCH) await check();
            }
          }
        }
      }
      await check();
      return removed;
    },

    async removeTree(area: 'data' | 'parts', owner: number): Promise<void> {
      const tree = path.join(root, area, String(owner));
      if (await holding(root)) {
        const held = path.join(root, HOLD, `${area}__${owner}`);
        await fs.promises.rm(held, { recursive: true, force: true });
        const moved = await fs.promises.rename(tree, held).then(
          () => true,
          () => false,
        );
        if (moved) return;
      }
      await fs.promises.rm(tree, { recursive: true, force: true });
    },
  };
}

export type ObjectFiles = ReturnType<typeof createObjectFiles>;
