// Scheduled-deletion benchmark: the time of one sweep with 100,000 scheduled applications of which 10
// are due, against the same sweep with 1,000 (ratio), on SQLite and PostgreSQL. The sweep reads the
// schedule index and the partial "warning pending" indexes, so its cost follows the due work, not the
// number of applications. Each pass resets the 10 due applications (not timed) so every timed sweep
// does the same work: 4 deletions queued, 3 seven-day and 3 one-day warnings written to the outbox.
// Run: npx tsx bench/schedule/index.ts   (BENCH_PASSES=50, BENCH_DIALECTS=sqlite,postgres)
import { pino } from 'pino';
import { sql, type Insertable, type Kysely } from 'kysely';
import { openStore, type Store } from '../../src/db/connect.js';
import type { Database } from '../../src/db/schema/index.js';
import { createManualClock, iso, randomIds } from '../../src/domain/clock.js';
import { createScheduledDeletionService } from '../../src/services/scheduled-deletion/index.js';
import { createWebhookEmitter } from '../../src/services/webhooks/index.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import pg from 'pg';

const PASSES = Number(process.env.BENCH_PASSES ?? 50);
const DIALECTS = (process.env.BENCH_DIALECTS ?? 'sqlite,postgres').split(',');
const NOW = new Date('2027-01-01T00:00:00.000Z');
const DAY = 86_400_000;
const DUE = 10;

/** Fills the store: `total` scheduled applications, 10 of them due; 2% already warned inside the 7-day window. */
async function fill(db: Kysely<Database>, dialect: string, total: number): Promise<number[]> {
  const at = iso(NOW);
  const team = await db
    .insertInto('teams')
    .values({ name: `bench-${total}`, created_at: at })
    .returning('id')
    .executeTakeFirstOrThrow();
  const user = await db
    .insertInto('users')
    .values({ email: `owner-${total}@example.com`, created_at: at })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('memberships')
    .values({ team_id: team.id, user_id: user.id, role: 'owner', created_at: at })
    .execute();
  const rows: Array<Insertable<Database['applications']>> = [];
  for (let i = 0; i < total; i++) {
    let when: number;
    let handled = false;
    if (i < 4)
      when = NOW.getTime() - (i + 1) * 60_000; // deletion due
    else if (i < 7)
      when = NOW.getTime() + 3 * DAY + i * 60_000; // 7-day warning due
    else if (i < DUE)
      when = NOW.getTime() + 5 * 3_600_000 + i * 60_000; // 1-day warning due
    else if (i % 50 === 0) {
      when = NOW.getTime() + 1 * DAY + (i % 500) * 60_000 + 3_600_000; // in the window, warned already
      handled = true;
    } else when = NOW.getTime() + 8 * DAY + (i % 400) * DAY + (i % 1440) * 60_000;
    const t = iso(new Date(when));
    rows.push({
      team_id: team.id,
      name: `app-${i}`,
      type: 'nodejs',
      version: null,
      label: null,
      tags: '[]',
      repository: '{}',
      runtime: '{}',
      commands: '{}',
      health_check_enabled: 1,
      health_check_path: null,
      scheduler_enabled: null,
      replicas: null,
      memory: null,
      php: '{}',
      scheduled_deletion_at: t,
      deletion_warning_7d_for: handled ? t : null,
      deletion_warning_1d_for: null,
      created_at: at,
      updated_at: at,
    });
  }
  const chunk = dialect === 'postgres' ? 2000 : 1000;
  const ids: number[] = [];
  await db.transaction().execute(async (trx) => {
    for (let i = 0; i < rows.length; i += chunk) {
      const inserted = await trx
        .insertInto('applications')
        .values(rows.slice(i, i + chunk))
        .returning('id')
        .execute();
      ids.push(...inserted.map((r) => r.id));
    }
  });
  if (dialect === 'postgres') await sql`ANALYZE applications`.execute(db);
  else await sql`ANALYZE`.execute(db);
  return ids.slice(0, DUE);
}

async function reset(db: Kysely<Database>, due: number[]): Promise<void> {
  await db
    .updateTable('applications')
    .set({ deletion_warning_7d_for: null, deletion_warning_1d_for: null })
    .where('id', 'in', due)
    .execute();
  await db.deleteFrom('notifications').execute();
  await db.deleteFrom('jobs').execute();
}

async function measure(store: Store, total: number): Promise<{ medianMs: number; p90Ms: number }> {
  const due = await fill(store.db, store.dialect, total);
  const clock = createManualClock(NOW);
  const logger = pino({ level: 'silent' });
  const service = createScheduledDeletionService({
    db: store.db,
    clock,
    logger,
    publicUrl: 'http://127.0.0.1:8080',
    // Each warning asks for its team's webhooks, as in Berth (the teams here have none).
    events: createWebhookEmitter({ db: store.db, clock, ids: randomIds, logger, wakeJobs: () => undefined }),
  });
  const times: number[] = [];
  for (let pass = 0; pass < PASSES + 3; pass++) {
    await reset(store.db, due);
    const started = performance.now();
    const result = await service.sweep();
    const elapsed = performance.now() - started;
    if (result.deletionsQueued !== 4 || result.warningsSent !== 6) {
      throw new Error(`unexpected sweep: ${JSON.stringify(result)}`);
    }
    if (pass >= 3) times.push(elapsed); // the first passes warm caches and statement plans
  }
  times.sort((a, b) => a - b);
  return {
    medianMs: times[Math.floor(times.length / 2)] ?? 0,
    p90Ms: times[Math.floor(times.length * 0.9)] ?? 0,
  };
}

/** The planner's choice for each of the sweep's queries (the predicates are the sweep's own). */
async function plans(store: Store): Promise<string[]> {
  const now = iso(NOW);
  const day = iso(new Date(NOW.getTime() + DAY));
  const week = iso(new Date(NOW.getTime() + 7 * DAY));
  const pending7d = sql`scheduled_deletion_at IS NOT NULL
  AND (deletion_warning_7d_for IS NULL OR deletion_warning_7d_for <> scheduled_deletion_at)`;
  const pending1d = sql`scheduled_deletion_at IS NOT NULL
  AND (deletion_warning_1d_for IS NULL OR deletion_warning_1d_for <> scheduled_deletion_at)`;
  const queries = {
    'due deletions': sql`SELECT id FROM applications WHERE scheduled_deletion_at IS NOT NULL
      AND scheduled_deletion_at <= ${now} ORDER BY scheduled_deletion_at LIMIT 500`,
    '7-day warnings': sql`SELECT id, scheduled_deletion_at FROM applications
      WHERE ${pending7d} AND scheduled_deletion_at > ${now} AND scheduled_deletion_at <= ${week}
      ORDER BY scheduled_deletion_at LIMIT 500`,
    'next 1-day moment': sql`SELECT MIN(scheduled_deletion_at) AS t FROM applications
      WHERE ${pending1d} AND scheduled_deletion_at > ${day}`,
  };
  const lines: string[] = [];
  for (const [name, query] of Object.entries(queries)) {
    if (store.dialect === 'sqlite') {
      const rows = await sql<{ detail: string }>`EXPLAIN QUERY PLAN ${query}`.execute(store.db);
      lines.push(`${name}: ${rows.rows.map((r) => r.detail).join(' | ')}`);
    } else {
      const rows = await sql<{ 'QUERY PLAN': string }>`EXPLAIN ${query}`.execute(store.db);
      lines.push(`${name}: ${rows.rows.map((r) => r['QUERY PLAN'].trim()).join(' | ')}`);
    }
  }
  return lines;
}

async function withStore<T>(dialect: string, fn: (store: Store) => Promise<T>): Promise<T> {
  if (dialect === 'sqlite') {
    const store = await openStore({ sqlitePath: ':memory:' });
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  }
  const server = await startPostgres();
  try {
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('CREATE DATABASE bench_schedule');
    await admin.end();
    const url = new URL(server.url);
    url.pathname = '/bench_schedule';
    const store = await openStore({ databaseUrl: url.toString(), poolSize: 2 });
    try {
      return await fn(store);
    } finally {
      await store.close();
    }
  } finally {
    await server.stop();
  }
}

for (const dialect of DIALECTS) {
  // Separate stores so that the small run is not helped or hurt by the large one's pages.
  const small = await withStore(dialect, (store) => measure(store, 1_000));
  const { large, plan } = await withStore(dialect, async (store) => ({
    large: await measure(store, 100_000),
    plan: await plans(store),
  }));
  console.log(
    `\n${dialect}: one sweep, ${DUE} due (4 deletions, 3 seven-day, 3 one-day warnings), ${PASSES} passes`,
  );
  console.log(
    `  1,000 scheduled:   median ${small.medianMs.toFixed(2)} ms, p90 ${small.p90Ms.toFixed(2)} ms`,
  );
  console.log(
    `  100,000 scheduled: median ${large.medianMs.toFixed(2)} ms, p90 ${large.p90Ms.toFixed(2)} ms`,
  );
  console.log(`  ratio 100,000 / 1,000 (median): ${(large.medianMs / small.medianMs).toFixed(2)}x`);
  for (const line of plan) console.log(`  plan, ${line}`);
}
