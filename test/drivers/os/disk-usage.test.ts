// The size of a service's data dir for the metrics (src/drivers/os/disk-usage.ts), on real files: the
// walk sums regular files without following links, and the cache answers at once, walks a directory at
// most once per minute (on the clock it is given) and forgets directories no longer asked for.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createTreeSizeCache, treeBytes } from '../../../src/drivers/os/disk-usage.js';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});
function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-disk-usage-'));
  made.push(dir);
  return dir;
}

describe('treeBytes', () => {
  it('sums the regular files of the tree and does not follow links', async () => {
    const dir = tempDir();
    const outside = tempDir();
    fs.writeFileSync(path.join(outside, 'big'), Buffer.alloc(50_000));
    fs.mkdirSync(path.join(dir, 'a', 'b'), { recursive: true });
    fs.writeFileSync(path.join(dir, 'one'), Buffer.alloc(1000));
    fs.writeFileSync(path.join(dir, 'a', 'b', 'two'), Buffer.alloc(234));
    fs.symlinkSync(outside, path.join(dir, 'a', 'elsewhere'));
    fs.symlinkSync(path.join(outside, 'big'), path.join(dir, 'big-link'));
    expect(await treeBytes(dir)).toBe(1234);
    expect(await treeBytes(path.join(dir, 'missing'))).toBe(0);
  });
});

describe('the tree size cache', () => {
  it('answers at once, walks each directory at most once per minute, and forgets what is not asked', async () => {
    let now = 1_000_000;
    const cache = createTreeSizeCache({ now: () => now });
    const dir = tempDir();
    const other = tempDir();
    fs.writeFileSync(path.join(dir, 'data'), Buffer.alloc(1000));
    fs.writeFileSync(path.join(other, 'data'), Buffer.alloc(7));

    // The first read starts the walks; their values come with the next read.
    expect(cache.read([dir, other])).toEqual(new Map());
    await cache.settled();
    expect(cache.read([dir, other])).toEqual(
      new Map([
        [dir, 1000],
        [other, 7],
      ]),
    );

    // Within the minute the measurement stands: no walk starts.
    fs.writeFileSync(path.join(dir, 'more'), Buffer.alloc(2000));
    now += 59_999;
    expect(cache.read([dir])).toEqual(new Map([[dir, 1000]]));
    await cache.settled();
    expect(cache.read([dir])).toEqual(new Map([[dir, 1000]]));

    // After it, the old value is answered while the new walk runs.
    now += 1;
    expect(cache.read([dir])).toEqual(new Map([[dir, 1000]]));
    await cache.settled();
    expect(cache.read([dir])).toEqual(new Map([[dir, 3000]]));

    // `other` was not asked for meanwhile: forgotten, it is measured afresh.
    expect(cache.read([other])).toEqual(new Map());
  });
});
