// The background work of one Berth process: the job runner with every feature's handlers. The handlers
// come from the services (src/composition.ts collects them as `services.jobs.handlers()`); this folder
// knows no service.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Dialect } from '../db/dialect.js';
import type { Database } from '../db/schema/index.js';
import type { Clock, IdGenerator } from '../domain/clock.js';
import { createJobRunner, type JobHandler, type JobOutcome, type JobRunner } from './runner.js';

export interface BackgroundWorkDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  /** Every job type and its handler. */
  handlers: Record<string, JobHandler>;
  /** Each run of a job as it ends: its type, how it ended, how long it took (metrics). */
  onJobFinished?: (type: string, outcome: JobOutcome, seconds: number) => void;
}

export function createBackgroundWork(deps: BackgroundWorkDeps, options: { pollMs?: number } = {}): JobRunner {
  return createJobRunner({
    db: deps.db,
    dialect: deps.dialect,
    clock: deps.clock,
    ids: deps.ids,
    handlers: deps.handlers,
    pollMs: options.pollMs ?? 1000,
    ...(deps.onJobFinished
      ? { onFinished: (job, outcome, seconds) => deps.onJobFinished?.(job.type, outcome, seconds) }
      : {}),
    onError: (job, error) =>
      deps.logger.warn({ err: error, job: { id: job.id, type: job.type } }, 'job failed'),
  });
}
