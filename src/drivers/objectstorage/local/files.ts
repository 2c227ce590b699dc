// Object bytes on disk: `<dataDir>/objects/data/<bucket id>/<xx>/<token>` for objects,
// `…/parts/<upload row id>/…` for multipart parts, `…/tmp/` while a body is arriving. A new file is
// written for every PUT and swapped in by the metadata commit, so readers never see a half-written object.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export function createObjectFiles(dataDir: string) {
  const root = path.join(dataDir, 'objects');
  const made = new Set<string>();

  async function ensureDir(dir: string): Promise<void> {
    if (made.has(dir)) return;
    await fs.promises.mkdir(dir, { recursive: true });
    made.add(dir);
  }

  const token = () => randomBytes(12).toString('hex');

  /** One unlink (fs.rm would lstat first); a file already gone is fine. */
  async function unlink(file: string): Promise<void> {
    try {
      await fs.promises.unlink(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
  }

  return {
    root,
    absolute: (relative: string): string => path.join(root, relative),

    /** A fresh temporary file path (the directory exists). */
    async temp(): Promise<string> {
      const dir = path.join(root, 'tmp');
      await ensureDir(dir);
      return path.join(dir, token());
    },

    /** Moves a finished temporary file to its place; returns the path relative to the root. */
    async place(tempFile: string, area: 'data' | 'parts', owner: number): Promise<string> {
      const name = token();
      const relative = path.join(area, String(owner), name.slice(0, 2), name);
      await ensureDir(path.dirname(path.join(root, relative)));
      await fs.promises.rename(tempFile, path.join(root, relative));
      return relative;
    },

    /** Removes files; a file already gone is fine. */
    async remove(...relative: Array<string | undefined>): Promise<void> {
      await Promise.all(
        relative.filter((r): r is string => r !== undefined).map((r) => unlink(path.join(root, r))),
      );
    },

    removeTemp: unlink,

    /**
     * Removes temporary files older than `ageMs`, left behind by a process that stopped mid-upload.
     * The age keeps uploads in flight in another process on the same data directory safe.
     */
    async sweepTemp(now: Date, ageMs: number): Promise<number> {
      const dir = path.join(root, 'tmp');
      let names: string[];
      try {
        names = await fs.promises.readdir(dir);
      } catch {
        return 0;
      }
      let removed = 0;
      for (const name of names) {
        const file = path.join(dir, name);
        const stat = await fs.promises.stat(file).catch(() => undefined);
        if (stat && now.getTime() - stat.mtimeMs > ageMs) {
          await fs.promises.rm(file, { force: true });
          removed += 1;
        }
      }
      return removed;
    },

    async removeTree(area: 'data' | 'parts', owner: number): Promise<void> {
      await fs.promises.rm(path.join(root, area, String(owner)), { recursive: true, force: true });
    },
  };
}

export type ObjectFiles = ReturnType<typeof createObjectFiles>;
