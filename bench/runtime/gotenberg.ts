// Gotenberg service benchmark: HTML→PDF through a `gotenberg` instance (multipart, index.html) against the
// tools endpoint `POST /api/v1/tools/pdf/convert/html` (JSON, one credit), both on the same warm engines of
// one context, measured in the same run: median latency one at a time, then throughput with N clients,
// alternating which goes first. Target: the gotenberg route's throughput ≥ 0.9× the tools endpoint's.
// Run: npx tsx bench/runtime/gotenberg.ts [--runs 30] [--jobs 120] [--clients 4] [--rounds 2]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { createGotenbergRunner } from '../../src/drivers/services/gotenberg/index.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '30' },
    jobs: { type: 'string', default: '120' },
    clients: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '2' },
  },
});
const RUNS = Number(values.runs);
const JOBS = Number(values.jobs);
const CLIENTS = Number(values.clients);
const ROUNDS = Number(values.rounds);

// The invoice of bench/tools: heading, table, text.
const INVOICE = `<!doctype html><html><head><meta charset="utf-8"><style>
body { font-family: sans-serif; margin: 40px; } table { border-collapse: collapse; width: 100%; }
td, th { border: 1px solid #ccc; padding: 6px; } h1 { color: #234; }</style></head><body>
<h1>Invoice 2026-0042</h1><p>Acme B.V., Keizersgracht 1, Amsterdam</p>
<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr>
${Array.from({ length: 12 }, (_, i) => `<tr><td>Item ${i + 1}</td><td>${i + 1}</td><td>${(i + 1) * 9.5} EUR</td></tr>`).join('')}
</table><p>Total due within 30 days. Thank you for your business.</p></body></html>`;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-gotenberg-'));
const config = loadConfig({
  BERTH_DATA_DIR: path.join(work, 'data'),
  BERTH_LOG_LEVEL: 'silent',
  BERTH_RATE_LIMIT_PER_MINUTE: '0',
  BERTH_TOOLS_MONTHLY_CREDITS: '1000000000',
});
const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
const app = await buildApp(ctx);
const address = await app.listen({ port: 0, host: '127.0.0.1' });
const user = await ctx.identity.createUser({ email: 'bench@example.com', team: 'bench' });
const runner = createGotenbergRunner(ctx.services.tools);
const ref = { id: 'bench-gotenberg', type: 'gotenberg' };
const runtime = await runner.provision({
  ...ref,
  applicationId: 1,
  teamId: 1,
  version: null,
  name: 'pdf',
  memoryMiB: 256,
  username: 'app',
  password: 'benchbenchbenchbenchbench0123456',
  settings: {},
  secrets: {},
  volumes: [],
});
const gotenbergBase = `http://${runtime.host}:${runtime.port}${runtime.extra?.path ?? ''}`;

async function check(res: Response, what: string): Promise<void> {
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200 || bytes.subarray(0, 5).toString() !== '%PDF-')
    throw new Error(`${what}: ${res.status} ${bytes.toString().slice(0, 200)}`);
}

const tools = async () =>
  check(
    await fetch(`${address}/api/v1/tools/pdf/convert/html`, {
      method: 'POST',
      headers: { authorization: user.tools_api_key, 'content-type': 'application/json' },
      body: JSON.stringify({ html: INVOICE }),
    }),
    'tools',
  );

const gotenberg = async () => {
  const form = new FormData();
  form.append('files', new Blob([INVOICE], { type: 'text/html' }), 'index.html');
  await check(
    await fetch(`${gotenbergBase}/forms/chromium/convert/html`, { method: 'POST', body: form }),
    'gotenberg',
  );
};

async function latency(fn: () => Promise<void>): Promise<number> {
  const out: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await fn();
    out.push(performance.now() - t0);
  }
  return median(out);
}

async function throughput(fn: () => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < JOBS) {
        next += 1;
        await fn();
      }
    }),
  );
  return JOBS / ((performance.now() - t0) / 1000);
}

try {
  // Warm both paths (browser, slots) before measuring.
  for (let i = 0; i < 10; i++) await Promise.all([tools(), gotenberg()]);
  const results = {
    tools: { ms: [] as number[], rps: [] as number[] },
    gotenberg: { ms: [] as number[], rps: [] as number[] },
  };
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? (['tools', 'gotenberg'] as const) : (['gotenberg', 'tools'] as const);
    for (const name of order) {
      const fn = name === 'tools' ? tools : gotenberg;
      results[name].ms.push(await latency(fn));
      results[name].rps.push(await throughput(fn));
    }
  }
  const ms = (name: 'tools' | 'gotenberg') => median(results[name].ms);
  const rps = (name: 'tools' | 'gotenberg') => median(results[name].rps);
  const ratio = rps('gotenberg') / rps('tools');
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}; ${ROUNDS} rounds, ${RUNS} sequential runs and ${JOBS} jobs on ${CLIENTS} clients each`,
  );
  console.log('| HTML→PDF | median latency | throughput |');
  console.log('|---|---|---|');
  console.log(
    `| tools endpoint (JSON, credit) | ${ms('tools').toFixed(1)} ms | ${rps('tools').toFixed(1)} PDFs/s |`,
  );
  console.log(
    `| gotenberg route (multipart) | ${ms('gotenberg').toFixed(1)} ms | ${rps('gotenberg').toFixed(1)} PDFs/s |`,
  );
  console.log(
    `| ratio gotenberg ÷ tools | ${(ms('gotenberg') / ms('tools')).toFixed(2)} | ${ratio.toFixed(2)} (≥ 0.9 ${ratio >= 0.9 ? 'met' : 'MISSED'}) |`,
  );
  console.log(
    `per round, PDFs/s: tools ${results.tools.rps.map((r) => r.toFixed(1)).join(', ')}; gotenberg ${results.gotenberg.rps.map((r) => r.toFixed(1)).join(', ')}`,
  );
} finally {
  await runner.delete(ref);
  await app.close();
  await ctx.close();
  fs.rmSync(work, { recursive: true, force: true });
}
