// Durable jobs: enqueue inside the caller's transaction so a state change and the work that follows
// it commit together. Keys are deterministic: enqueueing the same key again updates the one job.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { JobState } from '../db/schema/foundation.js';
import { iso } from '../domain/clock.js';
import type { Database } from '../db/schema/index.js';

export interface NewJob {
  type: string;
  key: string;
  payload?: unknown;
  runAt: Date;
  maxAttempts?: number;
}

export const DEFAULT_MAX_ATTEMPTS = 10;

/**
 * Inserts the job, or updates the job with the same key: a finished or dead job is queued again;
 * a running one is marked to run once more after it finishes, so no request is lost.
 */
export async function enqueueJob(
  db: Kysely<Database> | Transaction<Database>,
  job: NewJob,
  now: Date,
): Promise<void> {
  const payload = JSON.stringify(job.payload ?? {});
  const runAt = iso(job.runAt);
  const at = iso(now);
  await db
    .insertInto('jobs')
    .values({
      type: job.type,
      key: job.key,
      payload,
      state: 'queued',
      run_at: runAt,
      attempts: 0,
      max_attempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      rerun: 0,
      created_at: at,
      updated_at: at,
    })
    .onConflict((oc) =>
      oc.column('key').doUpdateSet((eb) => ({
        type: eb.ref('excluded.type'),
        payload: eb.ref('excluded.payload'),
        run_at: eb.ref('excluded.run_at'),
        max_attempts: eb.ref('excluded.max_attempts'),
        updated_at: eb.ref('excluded.updated_at'),
        rerun: sql<number>`CASE WHEN jobs.state = 'running' THEN 1 ELSE 0 END`,
        state: sql<JobState>`CASE WHEN jobs.state = 'running' THEN 'running' ELSE 'queued' END`,
        attempts: sql<number>`CASE WHEN jobs.state = 'running' THEN jobs.attempts ELSE 0 END`,
        last_error: sql<string | null>`CASE WHEN jobs.state = 'running' THEN jobs.last_error ELSE NULL END`,
      })),
    )
    .execute();
}

/** Removes a queued job (e.g. a warning that is no longer wanted). A running job is left to finish. */
export async function cancelJob(db: Kysely<Database> | Transaction<Database>, key: string): Promise<void> {
  await db.deleteFrom('jobs').where('key', '=', key).where('state', '<>', 'running').execute();
}

/** Removes the jobs with these keys, running or not (what they work on is gone). */
export async function deleteJobs(
  db: Kysely<Database> | Transaction<Database>,
  keys: string[],
): Promise<void> {
  if (keys.length === 0) return;
  await db.deleteFrom('jobs').where('key', 'in', keys).execute();
}

/** Whether a job with this key exists, in any state. */
export async function jobExists(db: Kysely<Database> | Transaction<Database>, key: string): Promise<boolean> {
  return (await db.selectFrom('jobs').select('id').where('key', '=', key).executeTakeFirst()) !== undefined;
}

/** Whether an enqueue arrived while the job ran (its `rerun` mark): it must run again at once. */
export async function rerunRequested(
  db: Kysely<Database> | Transaction<Database>,
  id: number,
): Promise<boolean> {
  return (await db.selectFrom('jobs').select('rerun').where('id', '=', id).executeTakeFirst())?.rerun === 1;
}
