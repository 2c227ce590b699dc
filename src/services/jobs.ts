// Every job type Berth runs, with its payload and its key, in one map: a job name is written once,
// `enqueue` derives the key from the payload, and `handles` hands a handler its payload typed.
// Keys are deterministic (docs/architecture.md, "Jobs"): enqueueing the same key updates the one job.
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema/index.js';
import { enqueueJob, type NewJob } from '../jobs/queue.js';
import type { JobContext, JobHandler, JobResult, RunningJob } from '../jobs/runner.js';

export interface ProvisionPayload {
  uuid: string;
  /**
   * Work that must finish before the database is ready (a clone's data copy): enqueued once the server
   * runs, with the database left in `setup-service`; that job sets `running` itself.
   */
  followUp?: Omit<NewJob, 'runAt'>;
}

export interface UpgradePayload {
  uuid: string;
  targetVersion: string;
}

/** What the clone job copies: from `source` into the freshly provisioned `target`. */
export interface ClonePayload {
  source: string;
  target: string;
  /** PostgreSQL point in time (ISO-8601) and the driver's base backup chosen for it. */
  recoveryTime?: string;
  backup?: { name: string; startedAt: string; finishedAt: string };
}

export interface JobPayloads {
  'managed_database.provision': ProvisionPayload;
  'managed_database.base_backup': { uuid: string };
  'managed_database.delete': { uuid: string };
  'managed_database.power': { uuid: string };
  'object_storage.provision': { uuid: string };
  'db_operation.task': { id: string };
  'db_operation.migration': { uuid: string };
  'db_operation.upgrade': UpgradePayload;
  'db_operation.clone': ClonePayload;
  'notifications.send': { id: number };
  'scheduled_deletion.sweep': Record<string, never>;
  'scheduled_deletion.delete': { applicationId: number; scheduledFor: string };
  'deployment.run': { id: number };
  'app_service.provision': { applicationId: number };
  'webhook.deliver': { id: number };
  'audit.prune': Record<string, never>;
}

export type JobType = keyof JobPayloads;

/** Each type's key: one job per database, task, notification… (the same formulas as ever: stored keys match). */
const JOB_KEYS: { [T in JobType]: (payload: JobPayloads[T]) => string } = {
  'managed_database.provision': (p) => `managed_database.provision:${p.uuid}`,
  'managed_database.base_backup': (p) => `managed_database.base_backup:${p.uuid}`,
  'managed_database.delete': (p) => `managed_database.delete:${p.uuid}`,
  'managed_database.power': (p) => `managed_database.power:${p.uuid}`,
  'object_storage.provision': (p) => `object_storage.provision:${p.uuid}`,
  'db_operation.task': (p) => `db_operation.task:${p.id}`,
  'db_operation.migration': (p) => `db_operation.migration:${p.uuid}`,
  'db_operation.upgrade': (p) => `db_operation.upgrade:${p.uuid}`,
  'db_operation.clone': (p) => `db_operation.clone:${p.target}`,
  'notifications.send': (p) => `notifications.send:${p.id}`,
  'scheduled_deletion.sweep': () => 'scheduled_deletion.sweep',
  'scheduled_deletion.delete': (p) => `scheduled_deletion.delete:${p.applicationId}:${p.scheduledFor}`,
  'deployment.run': (p) => `deployment.run:${p.id}`,
  'app_service.provision': (p) => `app_service.provision:${p.applicationId}`,
  'webhook.deliver': (p) => `webhook.deliver:${p.id}`,
  'audit.prune': () => 'audit.prune',
};

export const jobKey = <T extends JobType>(type: T, payload: JobPayloads[T]): string =>
  JOB_KEYS[type](payload);

export interface EnqueueOptions {
  now: Date;
  /** Default: now. */
  runAt?: Date;
  maxAttempts?: number;
}

/** Enqueues a job of `type` inside the caller's transaction, keyed by its payload. */
export function enqueue<T extends JobType>(
  db: Kysely<Database> | Transaction<Database>,
  type: T,
  payload: JobPayloads[T],
  options: EnqueueOptions,
): Promise<void> {
  return enqueueJob(
    db,
    {
      type,
      key: jobKey(type, payload),
      payload,
      runAt: options.runAt ?? options.now,
      ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
    },
    options.now,
  );
}

/** A job of `type` as enqueue left it, for a followUp that another job enqueues later. */
export function jobOf<T extends JobType>(type: T, payload: JobPayloads[T], maxAttempts?: number) {
  return { type, key: jobKey(type, payload), payload, ...(maxAttempts !== undefined ? { maxAttempts } : {}) };
}

/** The handler entry of a job type: the one place a stored payload is read as its type. */
export function handles<T extends JobType>(
  type: T,
  run: (payload: JobPayloads[T], job: RunningJob, context: JobContext) => Promise<JobResult>,
): Record<T, JobHandler> {
  const handler: JobHandler = (job, context) => run(job.payload as JobPayloads[T], job, context);
  return { [type]: handler } as Record<T, JobHandler>;
}
