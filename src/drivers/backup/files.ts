// The data dir's files in a backup: which are kept (applications' releases, sources and volumes,
// artifacts, services' files; not what the store, the key and the databases' dumps cover, nor what a
// start makes again), each read once into a staging file while its SHA-256 is computed (a file
// written meanwhile is kept as it was read), and put back on restore with its mode and time.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';

export type FileEntry =
  | { path: string; kind: 'file'; size: number; sha256: string; mode: number; mtime: number }
  | { path: string; kind: 'link'; target: string }
  | { path: string; kind: 'dir'; mode: number };

/** Top-level entries of the data dir that a backup covers otherwise, or that are made again. */
const SKIPPED_TOP = new Set([
  'berth.sqlite',
  'berth.sqlite-wal',
  'berth.sqlite-shm',
  'berth.sqlite-journal',
  'secret.key', // sealed with the passphrase instead
  'berth.pid',
  'databases', // dumped through the managed-database driver
  'runtimes', // language runtimes, downloaded again
  'objects', // only the files the store's snapshot names (objectFiles)
]);

/** Of an application's directory (apps/<id>/), what a restore needs: the rest is a running replica's. */
const KEPT_IN_APP = new Set(['releases', 'sources', 'volumes']);

function skipped(relative: string): boolean {
  const parts = relative.split(path.sep);
  if (parts.length === 1) return SKIPPED_TOP.has(parts[0]!);
  if (parts[0] === 'apps' && parts.length === 3) return !KEPT_IN_APP.has(parts[2]!);
  if (parts[0] === 'artifacts' && parts[1] === '.tmp') return true;
  return parts[parts.length - 1] === 'lost+found';
}

/**
 * Every directory, regular file and symbolic link of the data dir a backup keeps, parents first; only
 * those below `under` (a path relative to the data dir) when given.
 */
export async function* dataDirEntries(
  dataDir: string,
  under = '',
): AsyncGenerator<{ relative: string; stat: fs.Stats; kind: 'file' | 'link' | 'dir' }> {
  async function* walk(relative: string): AsyncGenerator<{
    relative: string;
    stat: fs.Stats;
    kind: 'file' | 'link' | 'dir';
  }> {
    let names: string[];
    try {
      names = (await fs.promises.readdir(path.join(dataDir, relative))).sort();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return; // removed meanwhile
      throw error;
    }
    for (const name of names) {
      const child = relative === '' ? name : path.join(relative, name);
      if (skipped(child)) continue;
      let stat: fs.Stats;
      try {
        stat = await fs.promises.lstat(path.join(dataDir, child));
      } catch {
        continue; // removed meanwhile
      }
      if (stat.isDirectory()) {
        yield { relative: child, stat, kind: 'dir' };
        yield* walk(child);
      } else if (stat.isFile()) yield { relative: child, stat, kind: 'file' };
      else if (stat.isSymbolicLink()) yield { relative: child, stat, kind: 'link' };
      // Sockets and FIFOs are a running process's, made again by it.
    }
  }
  yield* walk(under);
}

/**
 * Reads `file` once into a new file under `stagingDir`, hashing what it reads: the staged copy is
 * exactly the bytes of the SHA-256 returned. undefined when the file is gone.
 */
export async function stageFile(
  file: string,
  stagingDir: string,
): Promise<{ staged: string; sha256: string; size: number } | undefined> {
  const staged = path.join(stagingDir, randomBytes(9).toString('hex'));
  const hash = createHash('sha256');
  let size = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      size += chunk.length;
      done(null, chunk);
    },
  });
  try {
    await pipeline(fs.createReadStream(file), tap, fs.createWriteStream(staged, { mode: 0o600 }));
  } catch (error) {
    await fs.promises.rm(staged, { force: true });
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  return { staged, sha256: hash.digest('hex'), size };
}

/** The SHA-256 of a local file. */
export async function hashFile(file: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

/** Writes a buffer to a staging file (a table's rows, the sealed key) and stages it. */
export async function stageBuffer(
  data: Buffer,
  stagingDir: string,
): Promise<{ staged: string; sha256: string; size: number }> {
  const staged = path.join(stagingDir, randomBytes(9).toString('hex'));
  await fs.promises.writeFile(staged, data, { mode: 0o600 });
  return { staged, sha256: createHash('sha256').update(data).digest('hex'), size: data.length };
}

export const removeFile = (file: string): Promise<void> => fs.promises.rm(file, { force: true });

export function makeStagingDir(parent: string): string {
  fs.mkdirSync(parent, { recursive: true, mode: 0o700 });
  return fs.mkdtempSync(path.join(parent, '.berth-backup-'));
}

export const removeTree = (dir: string): Promise<void> =>
  fs.promises.rm(dir, { recursive: true, force: true });

/** Puts one entry back under `root` (the file's bytes are already in `from`). */
export async function restoreEntry(root: string, entry: FileEntry, from?: string): Promise<void> {
  const target = path.join(root, entry.path);
  if (!path.resolve(target).startsWith(path.resolve(root) + path.sep))
    throw new Error(`the backup names a path outside the data dir: ${entry.path}`);
  await fs.promises.mkdir(path.dirname(target), { recursive: true, mode: 0o700 });
  if (entry.kind === 'dir') {
    await fs.promises.mkdir(target, { recursive: true, mode: entry.mode & 0o777 });
    await fs.promises.chmod(target, entry.mode & 0o777);
  } else if (entry.kind === 'link') {
    await fs.promises.rm(target, { force: true });
    await fs.promises.symlink(entry.target, target);
  } else {
    if (from === undefined) throw new Error(`no bytes for ${entry.path}`);
    await fs.promises.copyFile(from, target);
    await fs.promises.chmod(target, entry.mode & 0o777);
    const time = new Date(entry.mtime);
    await fs.promises.utimes(target, time, time);
  }
}

export const readFile = (file: string): Promise<Buffer> => fs.promises.readFile(file);
export const writeFile = (file: string, data: string | Buffer, mode = 0o600): Promise<void> =>
  fs.promises
    .mkdir(path.dirname(file), { recursive: true, mode: 0o700 })
    .then(() => fs.promises.writeFile(file, data, { mode, flag: 'wx' }));
