// Apply benchmark: throughput of a representative dry run and of a real (unchanged) apply, as a
// ratio of a bare authenticated no-op route measured in the same run; and the time to validate and
// plan a document of 1,000 entries. Run: npx tsx bench/apply/index.ts [--duration 2] [--rounds 3] [--connections 10]
// Uses SQLite in a temporary data directory; PostgreSQL with BERTH_DATABASE_URL, or with --postgres
// (a throwaway PostgreSQL 15 cluster on a free loopback port).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { stringify } from 'yaml';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { parseInfrastructureYaml } from '../../src/domain/infrastructure/parse.js';
import { planApply, type CurrentState } from '../../src/domain/infrastructure/plan.js';
import { validateDocument } from '../../src/domain/infrastructure/validate.js';
import { MANAGED_DATABASE_PLANS } from '../../src/domain/plans.js';
import { representative } from './document.js';
import { startPostgres, type PostgresServer } from '../../test/helpers/postgres-server.js';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
    postgres: { type: 'boolean', default: false },
  },
});
const duration = Number(values.duration);
const connections = Number(values.connections);
const rounds = Number(values.rounds);

const ENGINES = ['mysql', 'pg', 'valkey'] as const;

/** 1,000 entries across every block. */
function thousand(team: number): Record<string, unknown> {
  const range = (n: number) => Array.from({ length: n }, (_, i) => i);
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'big', team },
    spec: {
      application: { type: 'nodejs', settings: { replicas: 3 } },
      domains: range(200).map((i) => ({ domain: `d${i}.big.example.com` })),
      secrets: range(200).map((i) => ({ key: `KEY_${i}`, value: `value-${i}` })),
      volumes: range(100).map((i) => ({ name: `vol-${i}`, mount_path: `/data/${i}`, volume_size: 5 })),
      services: range(150).map((i) => ({ name: `svc-${i}`, type: 'redis', version: '7', memory: '256Mi' })),
      container_services: range(100).map((i) => ({
        name: `cs-${i}`,
        type: 'meilisearch',
        settings: { MEILI_ENV: 'production' },
      })),
      managed_databases: range(150).map((i) => ({
        name: `db-${i}`,
        type: ENGINES[i % 3],
        plan: MANAGED_DATABASE_PLANS[ENGINES[i % 3] ?? 'pg'][0],
        zone: 'fi-hel1',
        users: [{ username: 'app' }],
      })),
      object_storage: range(100).map((i) => ({
        name: `os-${i}`,
        zone: 'europe-2',
        buckets: [`bucket-${i}`],
      })),
    },
  };
}

const EMPTY: CurrentState = {
  domains: new Set(),
  domainsHeldElsewhere: new Set(),
  secrets: new Map(),
  volumes: new Map(),
  services: new Map(),
  containerServices: new Map(),
  managedDatabases: new Map(),
  objectStorages: new Map(),
};

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

async function load(url: string, options: Partial<autocannon.Options>): Promise<number> {
  const result = await autocannon({ url, connections, duration, ...options });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result.requests.average;
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-'));
  let server: PostgresServer | undefined;
  if (values.postgres) server = await startPostgres();
  const databaseUrl = server?.url ?? process.env.BERTH_DATABASE_URL;
  const config = loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_LOG_LEVEL: 'silent',
    BERTH_RATE_LIMIT_PER_MINUTE: '0',
    ...(databaseUrl ? { BERTH_DATABASE_URL: databaseUrl } : {}),
  });
  const ctx = await createContext(config);
  try {
    const app = await buildApp(ctx);
    // The baseline: authentication and the protocol hooks, nothing else.
    app.get('/bench/noop', { config: { auth: 'api_token' }, schema: { hide: true } }, () => ({ ok: true }));
    const user = await ctx.identity.createUser({
      email: `bench-${Date.now()}@example.com`,
      team: `bench${Date.now()}`,
    });
    const address = await app.listen({ host: '127.0.0.1', port: 0 });
    const headers = { authorization: `Bearer ${user.api_token}`, 'content-type': 'application/yaml' };
    const body = stringify(representative(user.team_id));

    const first = await app.inject({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers,
      payload: body,
    });
    if (first.statusCode !== 200) throw new Error(`setup apply failed: ${first.body}`);

    // Warm-up, then the measurements; the baseline is measured before and after and averaged,
    // because the machine's load drifts during a run.
    const applyUrl = `${address}/api/v1/infrastructure/apply`;
    // JIT warm-up of both paths, so that the first measured run does not pay for compilation.
    await autocannon({ url: `${address}/bench/noop`, connections, duration: 2, headers });
    await autocannon({
      url: `${applyUrl}?dry_run=true`,
      connections,
      duration: 2,
      method: 'POST',
      headers,
      body,
    });
    // Load on a shared machine drifts within seconds, so the runs are interleaved in rounds
    // (baseline, then each apply variant, then baseline again) and each variant is compared with
    // the baselines around it; the median ratio over the rounds is reported.
    let counter = 0;
    const distinct: Partial<autocannon.Options> = {
      method: 'POST',
      headers,
      // Every request a different text (a trailing comment): nothing comes from the document cache.
      requests: [
        {
          setupRequest: (request) => {
            counter += 1;
            return { ...request, body: `${body}# ${counter}\n` };
          },
        },
      ],
    };
    const variants: Array<[string, string, Partial<autocannon.Options>]> = [
      ['dry', `${applyUrl}?dry_run=true`, { method: 'POST', headers, body }],
      ['distinct', `${applyUrl}?dry_run=true`, distinct],
      ['real', applyUrl, { method: 'POST', headers, body }],
    ];
    const rates: Record<string, number[]> = { noop: [], dry: [], distinct: [], real: [] };
    const ratios: Record<string, number[]> = { dry: [], distinct: [], real: [] };
    for (let round = 0; round < rounds; round += 1) {
      for (const [name, url, options] of variants) {
        const before = await load(`${address}/bench/noop`, { headers });
        const rate = await load(url, options);
        const after = await load(`${address}/bench/noop`, { headers });
        rates.noop?.push(before, after);
        rates[name]?.push(rate);
        ratios[name]?.push(rate / ((before + after) / 2));
      }
    }
    await app.close();

    // 1,000 entries: parse, validate, plan, pure (no store).
    const bigText = stringify(thousand(user.team_id));
    const hash = (v: string) => ctx.secretBox.keyedHash(v);
    const parseTimes: number[] = [];
    const validatePlanTimes: number[] = [];
    for (let i = 0; i < 30; i += 1) {
      const t0 = performance.now();
      const raw = parseInfrastructureYaml(bigText);
      const t1 = performance.now();
      const doc = validateDocument(raw);
      const plan = planApply({ document: doc, state: EMPTY, now: new Date(), hash });
      const t2 = performance.now();
      if (plan.ops.length < 1000) throw new Error('plan too small');
      parseTimes.push(t1 - t0);
      validatePlanTimes.push(t2 - t1);
    }

    const row = (label: string, name: string, note: string) => {
      const ratio = median(ratios[name] ?? []);
      console.log(
        `  ${label.padEnd(38)} ${median(rates[name] ?? [])
          .toFixed(0)
          .padStart(7)} req/s  ${(ratio * 100).toFixed(1)}% of baseline${note}`,
      );
    };
    console.log(
      `apply benchmark (${ctx.store.dialect}, ${connections} connections, ${rounds} rounds of ${duration}s runs; medians)`,
    );
    console.log(
      `  ${'no-op authenticated route (baseline)'.padEnd(38)} ${median(rates.noop ?? [])
        .toFixed(0)
        .padStart(7)} req/s`,
    );
    row('dry run, representative document', 'dry', ' (target >= 30%)');
    row('dry run, distinct text per request', 'distinct', ' (no document cache)');
    row('real apply, unchanged', 'real', '');
    console.log(
      `  1,000 entries: validate + plan median ${median(validatePlanTimes).toFixed(1)} ms (target < 50 ms); ` +
        `YAML parse median ${median(parseTimes).toFixed(1)} ms (${(bigText.length / 1024).toFixed(0)} KiB)`,
    );
  } finally {
    await ctx.close();
    await server?.stop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
