// The durable job runner: exactly-once across runners, leases, retries, dead jobs, graceful stop.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock, randomIds, systemClock } from '../../src/domain/clock.js';
import { openStore, type Store } from '../../src/db/connect.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import { createJobRunner, type JobHandler, type JobRunner } from '../../src/jobs/runner.js';
import { waitFor } from '../helpers/processes.js';
import { createTestPostgresDatabase, DIALECTS, openTestStore } from '../helpers/store.js';

const jobState = (store: Store, key: string) =>
  store.db.selectFrom('jobs').selectAll().where('key', '=', key).executeTakeFirstOrThrow();

describe.each(DIALECTS)('job runner (%s)', (dialect) => {
  let store: Store;
  const runners: JobRunner[] = [];
  beforeAll(async () => {
    store = await openTestStore(dialect);
  });
  afterEach(async () => {
    await Promise.all(runners.splice(0).map((r) => r.stop()));
    await store.db.deleteFrom('jobs').execute();
  });
  afterAll(() => store.close());

  function runner(handlers: Record<string, JobHandler>, clock = systemClock, extra = {}): JobRunner {
    const r = createJobRunner({
      db: store.db,
      dialect,
      clock,
      ids: randomIds,
      handlers,
      pollMs: 20,
      ...extra,
    });
    runners.push(r);
    return r;
  }

  it('runs a due job once and leaves a future one alone', async () => {
    const clock = createManualClock('2026-01-01T00:00:00Z');
    const seen: unknown[] = [];
    const r = runner({ hello: (job) => Promise.resolve(void seen.push(job.payload)) }, clock);
    await enqueueJob(
      store.db,
      { type: 'hello', key: 'a', payload: { n: 1 }, runAt: clock.now() },
      clock.now(),
    );
    await enqueueJob(
      store.db,
      { type: 'hello', key: 'b', payload: { n: 2 }, runAt: new Date('2026-01-02T00:00:00Z') },
      clock.now(),
    );
    expect(await r.runDue()).toBe(1);
    expect(seen).toEqual([{ n: 1 }]);
    expect((await jobState(store, 'a')).state).toBe('done');
    clock.set('2026-01-02T00:00:00Z');
    expect(await r.runDue()).toBe(1);
    expect(seen).toEqual([{ n: 1 }, { n: 2 }]);
  });

  it('retries with capped exponential backoff and marks the job dead after its last attempt', async () => {
    const clock = createManualClock('2026-01-01T00:00:00Z');
    const r = runner({ flaky: () => Promise.reject(new Error('boom')) }, clock, {
      backoffBaseMs: 1000,
      backoffCapMs: 3000,
    });
    await enqueueJob(store.db, { type: 'flaky', key: 'f', runAt: clock.now(), maxAttempts: 4 }, clock.now());
    const delays: number[] = [];
    for (let attempt = 1; attempt <= 4; attempt++) {
      await r.runDue();
      const row = await jobState(store, 'f');
      expect(row.attempts).toBe(attempt);
      expect(row.last_error).toBe('boom');
      if (attempt < 4) {
        expect(row.state).toBe('queued');
        delays.push(new Date(row.run_at).getTime() - clock.now().getTime());
        clock.set(row.run_at);
      } else {
        expect(row.state).toBe('dead');
      }
    }
    expect(delays).toEqual([1000, 2000, 3000]);
    clock.advance(3_600_000);
    expect(await r.runDue()).toBe(0);
  });

  it('a handler can ask to run again later, and enqueueing a running job runs it once more', async () => {
    const clock = createManualClock('2026-01-01T00:00:00Z');
    let calls = 0;
    const r = runner(
      {
        poll: async () => {
          calls += 1;
          if (calls === 1) {
            await enqueueJob(store.db, { type: 'poll', key: 'p', runAt: clock.now() }, clock.now());
            return;
          }
          if (calls === 2) return { runAgainAt: new Date(clock.now().getTime() + 5000) };
        },
      },
      clock,
    );
    await enqueueJob(store.db, { type: 'poll', key: 'p', runAt: clock.now() }, clock.now());
    await r.runDue();
    expect(calls).toBe(2); // the re-enqueue during run 1 caused run 2
    expect((await jobState(store, 'p')).state).toBe('queued');
    clock.advance(5000);
    await r.runDue();
    expect(calls).toBe(3);
    expect((await jobState(store, 'p')).state).toBe('done');
  });

  it('a job enqueued again while it runs is not pushed back by the handler asking for a later run', async () => {
    const clock = createManualClock('2026-01-01T00:00:00Z');
    let calls = 0;
    const r = runner(
      {
        sweep: async () => {
          calls += 1;
          if (calls === 1)
            await enqueueJob(store.db, { type: 'sweep', key: 'sw', runAt: clock.now() }, clock.now());
          return { runAgainAt: new Date(clock.now().getTime() + 60_000) };
        },
      },
      clock,
    );
    await enqueueJob(store.db, { type: 'sweep', key: 'sw', runAt: clock.now() }, clock.now());
    await r.runDue();
    expect(calls).toBe(2);
    const row = await jobState(store, 'sw');
    expect(row.state).toBe('queued');
    expect(row.run_at).toBe('2026-01-01T00:01:00.000Z');
  });

  it('a job whose runner died is re-run by another after the lease expires', async () => {
    const clock = createManualClock('2026-01-01T00:00:00Z');
    let started = 0;
    const dying = runner(
      {
        work: () => {
          started += 1;
          return new Promise<void>(() => undefined); // never finishes: the process "dies" mid-job
        },
      },
      clock,
      { leaseMs: 30_000 },
    );
    await enqueueJob(store.db, { type: 'work', key: 'w', runAt: clock.now() }, clock.now());
    dying.start();
    await waitFor(() => Promise.resolve(started === 1 ? true : undefined));
    dying.crash();
    const done: string[] = [];
    const rescuer = runner({ work: () => Promise.resolve(void done.push('rescued')) }, clock, {
      leaseMs: 30_000,
    });
    expect(await rescuer.runDue()).toBe(0); // lease still held
    clock.advance(30_001);
    expect(await rescuer.runDue()).toBe(1);
    expect(done).toEqual(['rescued']);
    const row = await jobState(store, 'w');
    expect(row.state).toBe('done');
    expect(row.attempts).toBe(2);
  });

  it('stop() waits for jobs in flight', async () => {
    let finished = false;
    const r = runner({
      slow: async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        finished = true;
      },
    });
    await enqueueJob(store.db, { type: 'slow', key: 's', runAt: new Date() }, new Date());
    r.start();
    await waitFor(async () => ((await jobState(store, 's')).state === 'running' ? true : undefined));
    await r.stop();
    expect(finished).toBe(true);
    expect((await jobState(store, 's')).state).toBe('done');
  });
});

describe.runIf(DIALECTS.includes('postgres'))('two runners on one PostgreSQL', () => {
  it('run each of 1,000 jobs exactly once', async () => {
    const database = await createTestPostgresDatabase();
    const a = await openStore({ databaseUrl: database.url, poolSize: 5 });
    const b = await openStore({ databaseUrl: database.url, poolSize: 5, migrate: false });
    const runs = new Map<string, number>();
    const byRunner = { a: 0, b: 0 };
    const handler =
      (who: 'a' | 'b'): JobHandler =>
      async (job) => {
        runs.set(job.key, (runs.get(job.key) ?? 0) + 1);
        byRunner[who] += 1;
        await new Promise((resolve) => setTimeout(resolve, 1));
      };
    const now = new Date();
    await a.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 1000; i++)
        await enqueueJob(trx, { type: 'count', key: `job-${i}`, runAt: now }, now);
    });
    const runnerA = createJobRunner({
      db: a.db,
      dialect: 'postgres',
      clock: systemClock,
      ids: randomIds,
      handlers: { count: handler('a') },
      pollMs: 5,
      concurrency: 8,
    });
    const runnerB = createJobRunner({
      db: b.db,
      dialect: 'postgres',
      clock: systemClock,
      ids: randomIds,
      handlers: { count: handler('b') },
      pollMs: 5,
      concurrency: 8,
    });
    runnerA.start();
    runnerB.start();
    await waitFor(async () => {
      const left = await a.db
        .selectFrom('jobs')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('state', '<>', 'done')
        .executeTakeFirstOrThrow();
      return Number(left.n) === 0 ? true : undefined;
    }, 60_000);
    await Promise.all([runnerA.stop(), runnerB.stop()]);
    expect(runs.size).toBe(1000);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(byRunner.a).toBeGreaterThan(0);
    expect(byRunner.b).toBeGreaterThan(0);
    await a.close();
    await b.close();
    await database.drop();
  });
});
