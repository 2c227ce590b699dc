// The background work of one Berth process: the job runner with every feature's handlers.
import type { AppContext } from '../context.js';
import { createJobRunner, type JobHandler, type JobRunner } from './runner.js';
import { provisionObjectStorageHandler } from '../services/object-storage/index.js';
import { scheduledDeletionJobHandlers } from '../services/scheduled-deletion/index.js';
import { managedDatabaseJobHandlers } from '../services/managed-databases/index.js';
import { dbOperationJobHandlers } from '../services/db-operations/index.js';

/** Every job type and its handler. Features add theirs here. */
export function jobHandlers(ctx: AppContext): Record<string, JobHandler> {
  return {
    ...provisionObjectStorageHandler(ctx),
    ...scheduledDeletionJobHandlers(ctx),
    ...managedDatabaseJobHandlers(ctx),
    ...dbOperationJobHandlers(ctx),
    ...ctx.services.deployments.jobHandlers(),
  };
}

export function createBackgroundWork(ctx: AppContext, options: { pollMs?: number } = {}): JobRunner {
  return createJobRunner({
    db: ctx.db,
    dialect: ctx.store.dialect,
    clock: ctx.clock,
    ids: ctx.ids,
    handlers: jobHandlers(ctx),
    pollMs: options.pollMs ?? 1000,
    onError: (job, error) =>
      ctx.logger.warn({ err: error, job: { id: job.id, type: job.type } }, 'job failed'),
  });
}
