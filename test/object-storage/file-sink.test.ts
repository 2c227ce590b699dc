// Where object bodies land on disk: every byte at its place, on the disk before the sink finishes,
// no replaced file, no descriptor left open on failure; and a placed file's directory entry flushed.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileSink } from '../../src/drivers/objectstorage/local/file-sink.js';
import { createObjectFiles } from '../../src/drivers/objectstorage/local/files.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-file-sink-'));
});
afterEach(() => {
  vi.restoreAllMocks();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Chunks of uneven sizes, as a socket delivers them. */
function chunksOf(data: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0, i = 0; at < data.length; i += 1) {
    const size = [65_536, 1, 300_000, 4_096, 1_048_576][i % 5]!;
    chunks.push(data.subarray(at, at + size));
    at += size;
  }
  return chunks;
}

/** The paths this process holds open, from /proc. */
function openPaths(): string[] {
  return fs.readdirSync('/proc/self/fd').flatMap((fd) => {
    try {
      return [fs.readlinkSync(`/proc/self/fd/${fd}`)];
    } catch {
      return [];
    }
  });
}

describe('FileSink', () => {
  it('writes every chunk at its offset and flushes the data before it finishes', async () => {
    const data = randomBytes(40 * 1024 * 1024 + 123);
    const file = path.join(dir, 'object');
    const events: string[] = [];
    const fdatasync = fs.fdatasync;
    const close = fs.close;
    vi.spyOn(fs, 'fdatasync').mockImplementation((fd, callback) => {
      events.push('fdatasync');
      fdatasync(fd, callback);
    });
    vi.spyOn(fs, 'close').mockImplementation((fd, callback) => {
      events.push('close');
      close(fd, callback);
    });

    await pipeline(Readable.from(chunksOf(data)), new FileSink(file));

    expect(fs.readFileSync(file).equals(data)).toBe(true);
    // Background flushes while 40 MiB arrived (one per 16 MiB at most), then the last one, then close.
    expect(events.at(-1)).toBe('close');
    expect(events.at(-2)).toBe('fdatasync');
    expect(events.filter((e) => e === 'fdatasync').length).toBeGreaterThanOrEqual(2);
    expect(events.filter((e) => e === 'close')).toHaveLength(1);
  });

  it('refuses to replace a file that exists', async () => {
    const file = path.join(dir, 'taken');
    fs.writeFileSync(file, 'first');
    await expect(pipeline(Readable.from([Buffer.from('second')]), new FileSink(file))).rejects.toMatchObject({
      code: 'EEXIST',
    });
    expect(fs.readFileSync(file, 'utf8')).toBe('first');
  });

  it('closes its file when the body fails midway', async () => {
    const file = path.join(dir, 'broken');
    async function* failing() {
      yield randomBytes(3 * 1024 * 1024);
      yield randomBytes(3 * 1024 * 1024);
      await new Promise((resolve) => setImmediate(resolve)); // writes are in flight when it fails
      throw new Error('client went away');
    }
    const sink = new FileSink(file);
    await expect(pipeline(Readable.from(failing()), sink)).rejects.toThrow('client went away');
    // The descriptor is closed once the writes still running have ended; 'close' says so.
    if (!sink.closed) await new Promise((resolve) => sink.once('close', resolve));
    expect(openPaths()).not.toContain(file);
  });
});

describe('object files', () => {
  it('flushes the directory a file is placed in', async () => {
    const files = createObjectFiles(dir);
    const temp = await files.temp();
    await pipeline(Readable.from([Buffer.from('bytes')]), new FileSink(temp));
    const opened: Array<{ path: string; flags: unknown }> = [];
    const open = fs.promises.open;
    vi.spyOn(fs.promises, 'open').mockImplementation((file, flags, mode) => {
      opened.push({ path: String(file), flags });
      return open(file, flags, mode);
    });

    const relative = await files.place(temp, 'data', 7);

    expect(fs.readFileSync(files.absolute(relative), 'utf8')).toBe('bytes');
    expect(opened).toContainEqual({
      path: path.dirname(files.absolute(relative)),
      flags: fs.constants.O_RDONLY | fs.constants.O_DIRECTORY,
    });
  });
});
