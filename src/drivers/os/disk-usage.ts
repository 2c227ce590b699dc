// The bytes a directory tree holds, measured without holding the event loop (managed databases' health
// and base backups, services' volumes), and a cache of such measurements for the operator's metrics: a
// scrape reads the last value at once and never waits for a walk.
import type { Dirent } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/** Sum of the sizes of the regular files under `dir` (symbolic links are not followed); 0 when it is gone. */
export async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length > 0) {
    const current = stack.pop() as string;
    let entries: Dirent[];
    try {
      entries = await fs.readdir(current, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const full = path.join(current, entry.name);
      if (entry.isDirectory()) stack.push(full);
      else if (entry.isFile()) {
        // Removed while walking (a log rotated, WAL recycled): not there any more.
        total += await fs.lstat(full).then(
          (stat) => stat.size,
          () => 0,
        );
      }
    }
  }
  return total;
}

export interface TreeSizeCache {
  /**
   * The last measured size of each of `dirs` (absent until its first walk ends). A directory measured
   * longer than the cache's age ago, or never, is walked again in the background, one walk per
   * directory at a time; directories no longer asked for are forgotten.
   */
  read(dirs: readonly string[]): Map<string, number>;
  /** Resolves once the walks running now have ended. */
  settled(): Promise<void>;
}

/** Walks at most once per `maxAgeMs` (default 60 s) per directory, measured on `now` (milliseconds). */
export function createTreeSizeCache(options: { maxAgeMs?: number; now?: () => number } = {}): TreeSizeCache {
  const maxAgeMs = options.maxAgeMs ?? 60_000;
  const now = options.now ?? Date.now;
  const entries = new Map<string, { bytes?: number; measuredAt: number; walking?: Promise<void> }>();
  return {
    read(dirs) {
      const wanted = new Set(dirs);
      for (const dir of entries.keys()) if (!wanted.has(dir)) entries.delete(dir);
      const sizes = new Map<string, number>();
      for (const dir of wanted) {
        let entry = entries.get(dir);
        if (!entry) entries.set(dir, (entry = { measuredAt: -Infinity }));
        if (entry.bytes !== undefined) sizes.set(dir, entry.bytes);
        if (entry.walking || now() - entry.measuredAt < maxAgeMs) continue;
        const started = now();
        const measured = entry;
        measured.walking = treeBytes(dir)
          .then((bytes) => {
            measured.bytes = bytes;
          })
          .finally(() => {
            measured.measuredAt = started;
            measured.walking = undefined;
          });
      }
      return sizes;
    },
    async settled() {
      await Promise.all([...entries.values()].flatMap((entry) => (entry.walking ? [entry.walking] : [])));
    },
  };
}

/**
 * A directory's bytes, walked again only once the last walk is older than `maxAgeMs` (the caller
 * waits for a walk it needs). For callers that ask often and record rarely: a database's health.
 */
export function createRecentTreeBytes(maxAgeMs: number, now: () => number = Date.now) {
  const seen = new Map<string, { bytes: number; at: number }>();
  return {
    async bytes(dir: string): Promise<number> {
      const last = seen.get(dir);
      if (last && now() - last.at < maxAgeMs) return last.bytes;
      const bytes = await treeBytes(dir);
      seen.set(dir, { bytes, at: now() });
      return bytes;
    },
    /** Forgets a directory that is gone. */
    forget(dir: string): void {
      seen.delete(dir);
    },
  };
}
