// Foundation benchmark: requests/s of an authenticated no-op route against a bare Fastify route in the
// same run (ratio), and time from process start to ready (fresh and existing data dir).
// Run: npm run build && npx tsx bench/foundation/index.ts
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import Fastify from 'fastify';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = 20;

async function load(url: string, headers: Record<string, string> = {}): Promise<number> {
  const result = await autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

async function timeToReady(dataDir: string): Promise<number> {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const started = performance.now();
  const child = spawn(
    process.execPath,
    ['dist/cli/index.js', 'serve', '--port', String(port), '--data-dir', dataDir],
    {
      env: { ...process.env, BERTH_LOG_LEVEL: 'silent' },
      stdio: 'ignore',
    },
  );
  try {
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/readyz`)).ok) return performance.now() - started;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}

const bare = Fastify();
bare.get('/noop', () => ({ pong: true }));
const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-'));
const config = loadConfig({
  BERTH_DATA_DIR: dataDir,
  BERTH_LOG_LEVEL: 'silent',
  BERTH_RATE_LIMIT_PER_MINUTE: '0',
});
const ctx = await createContext(config);
const user = await ctx.identity.createUser({ email: 'bench@example.com', team: 'bench' });
const app = await buildApp(ctx);
const berthUrl = await app.listen({ port: 0, host: '127.0.0.1' });

const bareRps = await load(`${bareUrl}/noop`);
const berthRps = await load(`${berthUrl}/api/v1/ping`, { authorization: `Bearer ${user.api_token}` });
await app.close();
await ctx.close();
await bare.close();

const fresh = await timeToReady(fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-fresh-')));
const warm = await timeToReady(dataDir);

console.log(`bare Fastify no-op:              ${bareRps.toFixed(0)} req/s`);
console.log(`Berth authenticated no-op (SQLite): ${berthRps.toFixed(0)} req/s`);
console.log(`ratio Berth / bare:              ${(berthRps / bareRps).toFixed(2)}`);
console.log(`start to ready, empty data dir:  ${fresh.toFixed(0)} ms (migrations + bootstrap)`);
console.log(`start to ready, existing store:  ${warm.toFixed(0)} ms`);
