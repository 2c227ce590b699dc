// Managed-database provisioning: time from enqueueing the provisioning job (what apply does) to the
// database's state being `running`, per engine, against a baseline measured in the same run: a bare
// server of the same engine made the plain way (initdb / mariadb-install-db, then start; no store,
// no job, no users or databases, no template). Berth's first instance of an engine builds the
// engine's template; later ones copy it, which is what the median shows. Targets: pg and mysql
// ≤ 2 s, valkey ≤ 1 s.
// Run: npx tsx bench/provisioning/databases.ts   (BENCH_ROUNDS=3 by default)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { iso } from '../../src/domain/clock.js';
import { createLocalDatabaseDriver } from '../../src/drivers/databases/local/index.js';
import type { DatabaseEngine } from '../../src/drivers/databases/types.js';
import { enqueueJob } from '../../src/jobs/queue.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TARGET_MS: Record<DatabaseEngine, number> = { pg: 2000, mysql: 2000, valkey: 1000 };
const PLAN: Record<DatabaseEngine, string> = {
  pg: '1x1xCPU-2GB-25GB',
  mysql: '1x1xCPU-2GB-25GB',
  valkey: '1x1xCPU-2GB',
};
const DOCUMENT: Record<DatabaseEngine, { users: unknown[]; logical_databases: unknown[] }> = {
  pg: {
    users: [{ username: 'app', authentication: 'scram-sha-256' }, { username: 'report' }],
    logical_databases: [{ name: 'appdb', character_set: 'UTF8', collation: 'C.UTF-8' }],
  },
  mysql: {
    users: [{ username: 'app' }, { username: 'report' }],
    logical_databases: [{ name: 'appdb', character_set: 'utf8mb4', collation: 'utf8mb4_unicode_ci' }],
  },
  valkey: { users: [{ username: 'app' }], logical_databases: [] },
};

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
};

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-provisioning-'));
const config = loadConfig({ BERTH_DATA_DIR: dataDir, BERTH_LOG_LEVEL: 'silent', BERTH_S3_PORT: '0' });
const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
const user = await ctx.identity.createUser({ email: 'bench@example.com', team: 'bench' });
const work = ctx.services.jobs.runner({ pollMs: 1000 });
work.start();
const baselineDriver = createLocalDatabaseDriver({
  dataDir: path.join(dataDir, 'baseline'),
  useTemplates: false,
});
fs.mkdirSync(path.join(dataDir, 'baseline'));
fs.chmodSync(dataDir, 0o711); // the baseline's data dir sits one level down

async function baseline(engine: DatabaseEngine, round: number): Promise<number> {
  const id = `baseline-${engine}-${round}`;
  const started = performance.now();
  await baselineDriver.provision({
    id,
    engine,
    plan: PLAN[engine],
    adminUser: 'upadmin',
    adminPassword: 'bench-admin-password',
    users: [],
    databases: [],
  });
  const elapsed = performance.now() - started;
  await baselineDriver.delete({ id, engine });
  return elapsed;
}

async function endToEnd(engine: DatabaseEngine, round: number): Promise<number> {
  const uuid = ctx.ids.uuid();
  const started = performance.now();
  const now = ctx.clock.now();
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('managed_databases')
      .values({
        uuid,
        team_id: user.team_id,
        name: `${engine}-${round}`,
        title: null,
        type: engine,
        plan: PLAN[engine],
        zone: 'fi-hel1',
        users: JSON.stringify(DOCUMENT[engine].users),
        logical_databases: JSON.stringify(DOCUMENT[engine].logical_databases),
        state: 'pending',
        state_reason: null,
        pending_plan: null,
        pending_zone: null,
        created_at: iso(now),
        updated_at: iso(now),
      })
      .execute();
    await enqueueJob(
      trx,
      {
        type: 'managed_database.provision',
        key: `managed_database.provision:${uuid}`,
        payload: { uuid },
        runAt: now,
      },
      now,
    );
  });
  work.wake(); // as a serving Berth does after an apply in the same process
  for (;;) {
    const row = await ctx.db
      .selectFrom('managed_databases')
      .select(['state', 'state_reason'])
      .where('uuid', '=', uuid)
      .executeTakeFirstOrThrow();
    if (row.state === 'running') return performance.now() - started;
    if (row.state === 'error') throw new Error(`${engine}: ${row.state_reason ?? 'error'}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const results: string[] = [];
try {
  for (const engine of ['valkey', 'pg', 'mysql'] as const) {
    const base: number[] = [];
    const berth: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      base.push(await baseline(engine, round));
      berth.push(await endToEnd(engine, round));
    }
    const b = median(base);
    const e = median(berth);
    const verdict = e <= TARGET_MS[engine] ? 'meets' : 'MISSES';
    results.push(
      `${engine.padEnd(6)} apply→running median ${e.toFixed(0).padStart(5)} ms (runs ${berth.map((v) => v.toFixed(0)).join(', ')}; first builds the template); ` +
        `bare init+start median ${b.toFixed(0).padStart(5)} ms; ratio ${(e / b).toFixed(2)}; target ≤ ${TARGET_MS[engine]} ms: ${verdict}`,
    );
    console.log(results.at(-1));
  }
} finally {
  await work.stop();
  await ctx.close(); // stops every instance it started
  fs.rmSync(dataDir, { recursive: true, force: true });
}
console.log(
  `\nload average at end: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} on ${os.cpus().length} cores`,
);
