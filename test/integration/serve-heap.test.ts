// `berth serve` sets V8's heap growth (src/heap-tuning.ts): a stream of 1 MiB PUTs through the S3
// endpoint sets off far fewer full collections than with V8's default, which an operator gets back by
// passing `node --heap-growing-percent=0` (V8's "not set"). Counted from Berth's own metrics
// (berth_nodejs_gc_duration_seconds_count{kind="major"}), through the built command.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { BIN, ensureBuilt, ROOT } from '../cli-client/helpers.js';
import { waitFor } from '../helpers/processes.js';
import { provisionStorage } from '../object-storage/helpers.js';

const PUTS = 300;
const body = randomBytes(1024 * 1024);
const dirs: string[] = [];

/** A data dir with bucket `heap` and an admin key for it. */
async function prepare(): Promise<{ dataDir: string; key: { id: string; secret: string } }> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-serve-heap-'));
  dirs.push(dataDir);
  const ctx = await createContext(loadConfig({ BERTH_DATA_DIR: dataDir, BERTH_S3_PORT: '0' }), {
    logger: pino({ level: 'silent' }),
  });
  try {
    const user = await ctx.identity.createUser({ email: 'heap@example.com', team: 'heap' });
    const keys = await provisionStorage(ctx, user.team_id, 'heap', [
      { username: 'admin', policies: ['admin'] },
    ]);
    return { dataDir, key: keys.admin! };
  } finally {
    await ctx.close();
  }
}

const majorCollections = async (metrics: string): Promise<number> => {
  const text = await (await fetch(metrics)).text();
  const line = /^berth_nodejs_gc_duration_seconds_count\{kind="major"\} (\d+)/m.exec(text);
  return Number(line?.[1] ?? 0);
};

/** Full collections a `berth serve` (started with `nodeArgs`) ran while taking PUTS 1 MiB objects. */
async function majorsDuringPuts(nodeArgs: string[]): Promise<number> {
  const { dataDir, key } = await prepare();
  const child = spawn(
    process.execPath,
    [...nodeArgs, BIN, 'serve', '--port', '0', '--s3-port', '0', '--edge-port', '0'],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        BERTH_DATA_DIR: dataDir,
        BERTH_LOG_LEVEL: 'info',
        BERTH_METRICS_ADDR: '127.0.0.1:0',
      },
      stdio: ['ignore', 'pipe', 'ignore'],
    },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const client = (endpoint: string) =>
    new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: key.id, secretAccessKey: key.secret },
    });
  try {
    const ready = await waitFor(
      () => Promise.resolve(output.split('\n').find((line) => line.includes('Berth is ready'))),
      30_000,
    );
    const { s3, metrics } = JSON.parse(ready) as { s3: string; metrics: string };
    const s3Client = client(s3);
    const put = (n: number) =>
      s3Client.send(new PutObjectCommand({ Bucket: 'heap', Key: `object-${n}`, Body: body }));
    for (let n = 0; n < 8; n += 1) await put(n); // warm: code compiled, sockets open
    const before = await majorCollections(metrics);
    for (let n = 0; n < PUTS; n += 4) await Promise.all([0, 1, 2, 3].map((i) => put(100 + n + i)));
    const majors = (await majorCollections(metrics)) - before;
    s3Client.destroy();
    return majors;
  } finally {
    child.kill('SIGTERM');
    await exited;
    spawnSync(process.execPath, [BIN, 'admin', 'stop-all', '--data-dir', dataDir], {
      cwd: ROOT,
      timeout: 60_000,
    });
  }
}

describe('berth serve and the heap', { timeout: 180_000 }, () => {
  beforeAll(ensureBuilt, 300_000);
  afterAll(() => {
    for (const dir of dirs) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('lets the heap grow so that bodies passing through do not set off a full collection every few requests', async () => {
    const tuned = await majorsDuringPuts([]);
    const untuned = await majorsDuringPuts(['--heap-growing-percent=0']);
    // Measured: 6–7 against 16–21, and 8 ms of CPU per PUT against 11.
    expect(untuned).toBeGreaterThanOrEqual(10);
    expect(tuned * 2).toBeLessThanOrEqual(untuned);
  });
});
