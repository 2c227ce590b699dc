// MD5 of large bodies on worker threads (md5-pool.ts): the digest is MD5's, and the pool never keeps
// a process alive (it did: s3-compat.ts hung after the suite once a large body had been hashed).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { startMd5 } from '../../src/drivers/objectstorage/local/md5-pool.js';

const MODULE = path.resolve(import.meta.dirname, '../../src/drivers/objectstorage/local/md5-pool.ts');

describe('the MD5 worker pool', () => {
  it('gives the MD5 of what it was fed, chunk by chunk', async () => {
    const body = randomBytes(3 * 1024 * 1024 + 5);
    const job = startMd5();
    for (let offset = 0; offset < body.length; offset += 64 * 1024) {
      await new Promise<void>((resolve) => job.update(body.subarray(offset, offset + 64 * 1024), resolve));
    }
    expect((await job.digest()).toString('hex')).toBe(createHash('md5').update(body).digest('hex'));
  });

  it('lets a process that used it exit by itself', async () => {
    const script = [
      `const { startMd5 } = await import(${JSON.stringify(MODULE)});`,
      // What keeps a process alive while it hashes (Berth's server); gone once the digest is in.
      'const server = setInterval(() => undefined, 1000);',
      'const job = startMd5();',
      'job.update(Buffer.alloc(1024 * 1024, 1), () => undefined);',
      'console.log((await job.digest()).toString("hex"));',
      'clearInterval(server);',
    ].join('\n');
    // A file, not `-e`: the pool's workers would inherit `--input-type=module` and read their
    // CommonJS source as a module.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-md5-pool-'));
    const file = path.join(dir, 'hash.mjs');
    fs.writeFileSync(file, script);
    const child = spawn(process.execPath, ['--import', 'tsx', file], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    // Still running long after its last line (a hang): killed, and the test fails on the signal.
    const watchdog = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    clearTimeout(watchdog);
    fs.rmSync(dir, { recursive: true, force: true });
    expect(exit).toEqual({ code: 0, signal: null });
    expect(out.trim()).toBe(
      createHash('md5')
        .update(Buffer.alloc(1024 * 1024, 1))
        .digest('hex'),
    );
  }, 30_000);
});
