// The job runner: claims due jobs under a lease, runs their handlers, retries with capped exponential
// backoff, and marks a job dead after its last attempt. On PostgreSQL any number of runners share the
// table through FOR UPDATE SKIP LOCKED; on SQLite the single writer makes the claim atomic.
import { hostname } from 'node:os';
import { sql, type Kysely } from 'kysely';
import { iso, type Clock, type IdGenerator } from '../domain/clock.js';
import type { Dialect } from '../db/dialect.js';
import type { JobState } from '../db/schema/foundation.js';
import type { Database } from '../db/schema/index.js';

export interface RunningJob {
  id: number;
  type: string;
  key: string;
  payload: unknown;
  attempts: number;
  maxAttempts: number;
}

export interface JobContext {
  signal: AbortSignal;
}

/** A handler may ask to run again later (a reconciler waiting on something) instead of finishing. */
export type JobResult = void | { runAgainAt: Date };
export type JobHandler = (job: RunningJob, ctx: JobContext) => Promise<JobResult>;

export interface JobRunnerOptions {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  ids: IdGenerator;
  handlers: Record<string, JobHandler>;
  concurrency?: number;
  pollMs?: number;
  leaseMs?: number;
  backoffBaseMs?: number;
  backoffCapMs?: number;
  onError?: (job: RunningJob, error: unknown) => void;
  /** Called once a run of a job ends, with how it ended and how long the handler took (metrics). */
  onFinished?: (job: RunningJob, outcome: JobOutcome, seconds: number) => void;
}

/**
 * How one run of a job ended: done, asked to run again later, failed with attempts left (retried
 * with backoff), or failed its last attempt (dead).
 */
export type JobOutcome = 'succeeded' | 'rescheduled' | 'retried' | 'dead';

export interface JobRunner {
  readonly owner: string;
  start(): void;
  /** Claims and runs what is due now; resolves when those jobs are finished. For tests and sweeps. */
  runDue(): Promise<number>;
  /** Polls at once (after an enqueue in this process). */
  wake(): void;
  /** Stops claiming and waits for jobs in flight. Idempotent. */
  stop(): Promise<void>;
  /** Test hook: vanish as a crashed process would, leaving leases to expire. */
  crash(): void;
}

interface JobRow {
  id: number;
  type: string;
  key: string;
  payload: string;
  attempts: number;
  max_attempts: number;
}

export function createJobRunner(options: JobRunnerOptions): JobRunner {
  const { db, dialect, clock, handlers } = options;
  const concurrency = options.concurrency ?? 4;
  const pollMs = options.pollMs ?? 1000;
  const leaseMs = options.leaseMs ?? 60_000;
  const backoffBaseMs = options.backoffBaseMs ?? 1000;
  const backoffCapMs = options.backoffCapMs ?? 5 * 60_000;
  const owner = `${hostname()}:${process.pid}:${options.ids.token(6)}`;
  const inFlight = new Set<Promise<void>>();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let running = false;
  let stopped = false;
  let crashed = false;
  let polling: Promise<number> | undefined;

  async function claim(limit: number): Promise<JobRow[]> {
    const now = iso(clock.now());
    const expires = iso(new Date(clock.now().getTime() + leaseMs));
    const types = Object.keys(handlers);
    if (types.length === 0 || limit <= 0) return [];
    const lock = dialect === 'postgres' ? sql`FOR UPDATE SKIP LOCKED` : sql``;
    const result = await sql<JobRow>`
      UPDATE jobs SET state = 'running', lease_owner = ${owner}, lease_expires_at = ${expires},
        attempts = attempts + 1, updated_at = ${now}
      WHERE id IN (
        SELECT id FROM jobs
        WHERE type IN (${sql.join(types)})
          AND ((state = 'queued' AND run_at <= ${now}) OR (state = 'running' AND lease_expires_at < ${now}))
        ORDER BY run_at, id
        LIMIT ${limit}
        ${lock}
      )
      RETURNING id, type, key, payload, attempts, max_attempts`.execute(db);
    return result.rows;
  }

  async function finish(row: JobRow, result: JobResult): Promise<void> {
    const now = clock.now();
    const runAgainAt = result && 'runAgainAt' in result ? result.runAgainAt : undefined;
    await db
      .updateTable('jobs')
      .set((eb) => ({
        state: runAgainAt ? 'queued' : sql<JobState>`CASE WHEN rerun = 1 THEN 'queued' ELSE 'done' END`,
        // Enqueued again while it ran: the new request runs now, not at the handler's later time.
        run_at: runAgainAt
          ? sql<string>`CASE WHEN rerun = 1 THEN ${iso(now)} ELSE ${iso(runAgainAt)} END`
          : iso(now),
        attempts: runAgainAt ? 0 : eb.ref('attempts'),
        rerun: 0,
        lease_owner: null,
        lease_expires_at: null,
        last_error: null,
        updated_at: iso(now),
      }))
      .where('id', '=', row.id)
      .where('lease_owner', '=', owner)
      .execute();
  }

  async function fail(row: JobRow, error: unknown): Promise<void> {
    const now = clock.now();
    const dead = row.attempts >= row.max_attempts;
    const delay = Math.min(backoffCapMs, backoffBaseMs * 2 ** Math.max(0, row.attempts - 1));
    const message = error instanceof Error ? error.message : String(error);
    await db
      .updateTable('jobs')
      .set(() => ({
        state: dead ? sql<JobState>`CASE WHEN rerun = 1 THEN 'queued' ELSE 'dead' END` : 'queued',
        run_at: iso(new Date(now.getTime() + delay)),
        rerun: 0,
        lease_owner: null,
        lease_expires_at: null,
        last_error: message.slice(0, 2000),
        updated_at: iso(now),
      }))
      .where('id', '=', row.id)
      .where('lease_owner', '=', owner)
      .execute();
  }

  async function runOne(row: JobRow): Promise<void> {
    const handler = handlers[row.type];
    const job: RunningJob = {
      id: row.id,
      type: row.type,
      key: row.key,
      payload: JSON.parse(row.payload) as unknown,
      attempts: row.attempts,
      maxAttempts: row.max_attempts,
    };
    // Long jobs keep their lease alive; a crashed runner stops renewing and another takes over.
    const heartbeat = setInterval(() => {
      if (crashed) return;
      db.updateTable('jobs')
        .set({ lease_expires_at: iso(new Date(clock.now().getTime() + leaseMs)) })
        .where('id', '=', row.id)
        .where('lease_owner', '=', owner)
        .execute()
        .catch(() => undefined);
    }, leaseMs / 3);
    const started = performance.now();
    const ended = (outcome: JobOutcome) =>
      options.onFinished?.(job, outcome, (performance.now() - started) / 1000);
    try {
      if (!handler) throw new Error(`no handler for job type '${row.type}'`);
      const result = await handler(job, { signal: abort.signal });
      ended(result && 'runAgainAt' in result ? 'rescheduled' : 'succeeded');
      if (!crashed) await finish(row, result);
    } catch (error) {
      ended(row.attempts >= row.max_attempts ? 'dead' : 'retried');
      options.onError?.(job, error);
      if (!crashed) await fail(row, error);
    } finally {
      clearInterval(heartbeat);
    }
  }

  async function poll(): Promise<number> {
    if (crashed) return 0;
    const rows = await claim(concurrency - inFlight.size);
    for (const row of rows) {
      const p: Promise<void> = runOne(row).finally(() => {
        inFlight.delete(p);
        if (running && !stopped) schedule(0);
      });
      inFlight.add(p);
    }
    return rows.length;
  }

  function schedule(delay: number): void {
    if (!running || stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      if (polling) return schedule(pollMs);
      polling = poll()
        .catch((error: unknown) => {
          options.onError?.(
            { id: 0, type: 'poll', key: '', payload: null, attempts: 0, maxAttempts: 0 },
            error,
          );
          return 0;
        })
        .finally(() => {
          polling = undefined;
        });
      void polling.then((n) => schedule(n > 0 && inFlight.size < concurrency ? 0 : pollMs));
    }, delay);
    timer.unref?.();
  }

  return {
    owner,
    start() {
      if (running || stopped) return;
      running = true;
      schedule(0);
    },
    async runDue() {
      let total = 0;
      for (;;) {
        const n = await poll();
        total += n;
        await Promise.all([...inFlight]);
        if (n === 0) return total;
      }
    },
    wake() {
      schedule(0);
    },
    async stop() {
      if (crashed) return; // a crashed runner has abandoned its jobs to their leases
      stopped = true;
      running = false;
      if (timer) clearTimeout(timer);
      await polling;
      await Promise.all([...inFlight]);
    },
    crash() {
      crashed = true;
      stopped = true;
      running = false;
      if (timer) clearTimeout(timer);
      abort.abort();
    },
  };
}
