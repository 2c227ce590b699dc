// The /1.3 managed-database operations: check tasks and migrations run as jobs, their requests sealed
// (source URIs hold passwords), the engine work done by the DatabaseOperationsDriver (whose results
// are redacted) and, for physical clones, by the managed-database driver. This file keeps the use
// cases: rows, jobs, progress and errors.
import { auditChange } from '../audit.js';
import {
  OperationError,
  isOperationError,
  type DatabaseOperationsDriver,
  type MigrationMethod,
  type MigrationStatus,
  type OperationInstance,
  type RestorableBackup,
  type ResultCode,
} from '../../drivers/databases/types.js';
import { engineOf } from '../managed-databases/declared.js';
import { handles, type ClonePayload, type UpgradePayload } from '../jobs.js';
import type { Kysely, Selectable } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/schema/index.js';
import { createDbOperationsRepository } from '../../db/repositories/db-operations.js';
import type { ManagedDatabaseTasksTable } from '../../db/schema/db-operations.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { ManagedDatabaseService } from '../managed-databases/service.js';
import { AppError } from '../../domain/errors.js';
import type { JobHandler, JobResult } from '../../jobs/runner.js';
import type { WebhookEmitter } from '../webhooks/index.js';
import {
  createManagedDatabaseRepository,
  type ManagedDatabaseRow,
  type ManagedInstanceRow,
} from '../../db/repositories/managed-databases.js';

// Declared with the job map, which the payloads' modules use (and so cannot be used by it).
export type { ClonePayload, UpgradePayload } from '../jobs.js';

/** What the /1.3 operations use; src/composition.ts builds it. */
export interface DbOperationsDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  secretBox: SecretBox;
  /** The managed-database service: its driver, credentials, restarts, upgrades and adopted copies. */
  managedDatabases: ManagedDatabaseService;
  /**
   * The operations' driver (it reaches tenants' sources under BERTH_TOOLS_ALLOW_PRIVATE's rule); read
   * when an operation runs, so that a context whose managed-database driver has none still starts.
   */
  operations: DatabaseOperationsDriver;
  /** Team webhooks' events (database.operation.finished). */
  events: WebhookEmitter;
}

/** The driver's base backups of a PostgreSQL instance, oldest first. */
export async function restorableBackups(
  deps: Pick<DbOperationsDeps, 'managedDatabases'>,
  row: ManagedDatabaseRow,
): Promise<RestorableBackup[]> {
  const driver = deps.managedDatabases.driver;
  return (await driver.restorableBackups?.({ id: row.uuid, engine: engineOf(row.type) })) ?? [];
}

export type TaskOperation = 'migration_check' | 'upgrade_check';

/** What a task was asked to do; stored sealed because `sourceUri` carries the source's password. */
export interface TaskRequest {
  operation: TaskOperation;
  sourceUri?: string;
  /** TLS to the source, as the migration started later will use it; unset: checked both ways. */
  ssl?: boolean;
  method?: MigrationMethod;
  ignoreDbs?: string;
  targetVersion?: string;
}

export interface MigrationRequest {
  sourceUri: string;
  method: MigrationMethod;
  ignoreDbs?: string;
  ssl: boolean;
}

export type TaskRow = Selectable<ManagedDatabaseTasksTable>;

/** UpCloud's task object; the operation carries the engine prefix (`pg_migration_check`). */
export function taskObject(task: TaskRow, type: string): Record<string, unknown> {
  const prefix = type === 'pg' ? 'pg' : 'mysql';
  const details = task.details ? (JSON.parse(task.details) as Record<string, unknown>) : {};
  return {
    id: task.id,
    create_time: task.create_time,
    operation: `${prefix}_${task.operation}`,
    result: task.result,
    result_codes: JSON.parse(task.result_codes) as ResultCode[],
    success: task.success === null ? null : task.success === 1,
    ...details,
  };
}

/** A managed database as the operations address it: its instance, running on its port. */
export function operationInstance(row: ManagedDatabaseRow, instance: ManagedInstanceRow): OperationInstance {
  if (!instance.port) throw new Error(`managed database ${row.uuid} has no port yet`);
  return { id: row.uuid, engine: engineOf(row.type), port: instance.port, version: instance.version };
}

function majorOf(version: string | null): number | undefined {
  const major = Number.parseInt(version ?? '', 10);
  return Number.isFinite(major) ? major : undefined;
}

async function loadDatabase(db: Kysely<Database>, uuid: string) {
  const repo = createManagedDatabaseRepository(db);
  const row = await repo.findDatabase(uuid);
  const instance = row ? await repo.findInstance(row.id) : undefined;
  return { row, instance };
}

function failureOf(error: unknown): { result: string; codes: ResultCode[] } {
  if (isOperationError(error)) {
    return { result: error.message, codes: [{ code: error.code, message: error.message }] };
  }
  // Unexpected errors may quote anything: the owner gets a generic sentence, the log the detail.
  return {
    result: 'The check failed unexpectedly',
    codes: [{ code: 'INTERNAL_ERROR', message: 'The check failed unexpectedly' }],
  };
}

export function dbOperationJobHandlers(deps: DbOperationsDeps): Record<string, JobHandler> {
  const log = deps.logger.child({ component: 'db-operations' });
  const now = () => iso(deps.clock.now());

  /** Tells the database's team webhooks that an operation ended, and how. */
  async function finished(
    row: ManagedDatabaseRow | undefined,
    operation: string,
    outcome: { success: boolean; result?: string | null },
  ): Promise<void> {
    if (!row) return;
    await deps.events.notify({
      teamId: row.team_id,
      event: 'database.operation.finished',
      data: {
        database: { uuid: row.uuid, name: row.name },
        operation,
        success: outcome.success,
        result: outcome.result ?? null,
      },
    });
  }

  async function runTask(id: string): Promise<void> {
    const task = await createDbOperationsRepository(deps.db).findTaskById(id);
    if (!task || task.success !== null) return;
    const request = JSON.parse(deps.secretBox.decrypt(task.request)) as TaskRequest;
    const { row, instance } = await loadDatabase(deps.db, task.database_uuid);
    let success = false;
    let result: string;
    let codes: ResultCode[];
    let details: Record<string, unknown> | null = null;
    try {
      if (!row || !instance) throw new Error(`managed database ${task.database_uuid} is gone`);
      const engine = row.type === 'pg' ? 'pg' : 'mysql';
      if (request.operation === 'migration_check') {
        const targetMajor = majorOf(instance.version);
        const check = await deps.operations.checkMigration({
          sourceUri: request.sourceUri ?? '',
          engine,
          ...(request.ssl !== undefined ? { ssl: request.ssl } : {}),
          ...(request.method ? { method: request.method } : {}),
          ...(request.ignoreDbs ? { ignoreDbs: request.ignoreDbs } : {}),
          ...(engine === 'pg' && targetMajor ? { targetMajor } : {}),
        });
        success = check.success;
        result = check.result;
        codes = check.resultCodes;
      } else {
        const version = request.targetVersion ?? '';
        const check = await deps.operations.checkUpgrade(operationInstance(row, instance), version);
        success = check.success;
        result = check.result;
        codes = check.resultCodes;
        details = {
          source_pg_version: String(check.sourceMajor),
          // The version asked for: the answer is about it, whatever binaries were found.
          target_pg_version: version,
        };
      }
    } catch (error) {
      if (!isOperationError(error)) log.warn({ err: error, task: id }, 'database task failed');
      ({ result, codes } = failureOf(error));
    }
    await createDbOperationsRepository(deps.db).updateTask(id, {
      state: 'done',
      success: success ? 1 : 0,
      result,
      result_codes: JSON.stringify(codes),
      details: details ? JSON.stringify(details) : null,
      update_time: now(),
    });
    await finished(row, request.operation, { success, result });
  }

  async function saveStatus(uuid: string, status: MigrationStatus): Promise<void> {
    await createDbOperationsRepository(deps.db).updateMigration(
      uuid,
      {
        status: status.status,
        status_json: JSON.stringify(status),
        error: status.error ?? null,
        updated_at: now(),
      },
      // A stop during the job wins over the job's late status.
      { unlessStopped: true },
    );
  }

  async function runMigration(uuid: string, signal: AbortSignal): Promise<void> {
    const migration = await createDbOperationsRepository(deps.db).migrationOf(uuid);
    if (!migration || migration.status !== 'running') return;
    const { row, instance } = await loadDatabase(deps.db, uuid);
    const method: MigrationStatus['method'] =
      migration.method === 'replication' ? 'replication' : row?.type === 'pg' ? 'pg_dump' : 'mysqldump';
    // Progress writes run one after the other and all end before the final status is written: on a
    // pool, a late progress write could otherwise land after it and leave a finished migration `running`.
    let progressSaved = Promise.resolve();
    try {
      if (!row || !instance) throw new Error(`managed database ${uuid} is gone`);
      const input = {
        sourceUri: deps.secretBox.decrypt(migration.source),
        target: operationInstance(row, instance),
        ssl: migration.ssl === 1,
        ...(migration.ignore_dbs ? { ignoreDbs: migration.ignore_dbs } : {}),
        signal,
      };
      const status =
        migration.method === 'replication'
          ? await deps.operations.startReplication(input)
          : await deps.operations.dumpMigrate({
              ...input,
              onProgress: (progress) => {
                // Progress is informative (a failed write is dropped); the final status below is what counts.
                progressSaved = progressSaved.then(() => saveStatus(uuid, progress)).catch(() => undefined);
              },
            });
      await progressSaved;
      await saveStatus(uuid, status);
      await finished(row, 'migration', { success: status.status !== 'failed', result: status.error ?? null });
    } catch (error) {
      await progressSaved;
      if (!isOperationError(error)) log.warn({ err: error, database: uuid }, 'migration failed');
      const message = isOperationError(error) ? error.message : 'The migration failed unexpectedly';
      await saveStatus(uuid, {
        status: 'failed',
        method,
        error: message,
        seconds_behind_master: 0,
        source_active: false,
        databases: [],
      });
      await finished(row, 'migration', { success: false, result: message });
    }
  }

  /**
   * A clone without pg_dump: the source recovered (to the time, or to now) by the managed-database
   * driver for the target, and the target's instance then runs on that copy with its own credentials
   * (driver.adoptCopy). The clone is on the source's major, with the source's roles and data.
   */
  async function physicalCopy(
    source: { row: ManagedDatabaseRow; instance: ManagedInstanceRow },
    target: ManagedDatabaseRow,
    payload: ClonePayload,
  ): Promise<void> {
    const driver = deps.managedDatabases.driver;
    const backup = payload.backup ?? (await restorableBackups(deps, source.row)).at(-1);
    if (!backup) throw new OperationError('NO_BASE_BACKUP', 'The source has no base backup yet');
    if (!driver.recoverCopy || !source.instance.port)
      throw new OperationError('PITR_NOT_SUPPORTED', 'The source keeps no WAL archive');
    const copy = await driver.recoverCopy(
      { id: source.row.uuid, engine: engineOf(source.row.type) },
      {
        backup,
        recoveryTime: payload.recoveryTime,
        for: { id: target.uuid, engine: engineOf(target.type) },
        major: majorOf(source.instance.version),
        port: source.instance.port,
      },
    );
    try {
      await deps.managedDatabases.adoptCopy(target.uuid, copy);
    } finally {
      await driver.discardCopy?.(copy);
    }
  }

  async function runClone(payload: ClonePayload, signal: AbortSignal): Promise<JobResult> {
    // Enqueued by the target's provisioning once its server runs (the target waits in `setup-service`).
    const target = await loadDatabase(deps.db, payload.target);
    if (!target.row || target.row.state === 'error' || target.row.state === 'deleted') return; // reason stands
    if (!target.instance?.port) {
      return { runAgainAt: new Date(deps.clock.now().getTime() + 1000) }; // restarting meanwhile
    }
    const targetRow = target.row;
    const repo = createManagedDatabaseRepository(deps.db);
    try {
      const source = await loadDatabase(deps.db, payload.source);
      if (!source.row || !source.instance?.port) {
        throw new OperationError('CLONE_FAILED', 'The source database is not running');
      }
      const from = operationInstance(source.row, source.instance);
      const to = operationInstance(targetRow, target.instance);
      if (await deps.operations.needsPhysicalCopy(from)) {
        await physicalCopy({ row: source.row, instance: source.instance }, targetRow, payload);
      } else {
        if (from.engine === 'pg' && payload.recoveryTime && !payload.backup) {
          throw new OperationError('PITR_NOT_SUPPORTED', 'The source keeps no WAL archive');
        }
        const status = await deps.operations.copyData(from, to, {
          ...(payload.recoveryTime && payload.backup
            ? { pointInTime: { backup: payload.backup, recoveryTime: payload.recoveryTime } }
            : {}),
          signal,
        });
        if (status.status === 'failed') {
          throw new OperationError('CLONE_FAILED', status.error ?? 'Copying the data failed');
        }
      }
      await repo.setState(targetRow.id, 'running', null, now());
      await finished(targetRow, 'clone', { success: true });
    } catch (error) {
      if (!isOperationError(error)) log.warn({ err: error, database: payload.target }, 'clone failed');
      const reason = isOperationError(error) ? `${error.code}: ${error.message}` : 'The clone failed';
      await repo.setState(targetRow.id, 'error', reason, now());
      await finished(targetRow, 'clone', { success: false, result: reason });
    }
  }

  async function runUpgrade(payload: UpgradePayload): Promise<void> {
    // The route set `rebalancing`; a job claimed again after a crash finds it so and resumes.
    const { row } = await loadDatabase(deps.db, payload.uuid);
    if (row?.state !== 'rebalancing') return;
    await deps.managedDatabases.upgradeMajor(row.uuid, Number.parseInt(payload.targetVersion, 10));
    await finished(row, 'upgrade', { success: true, result: `upgraded to ${payload.targetVersion}` });
  }

  return {
    ...handles('db_operation.upgrade', (payload) => runUpgrade(payload)),
    ...handles('db_operation.clone', (payload, _job, { signal }) => runClone(payload, signal)),
    ...handles('db_operation.task', async ({ id }) => {
      await runTask(id);
    }),
    ...handles('db_operation.migration', async ({ uuid }, _job, { signal }) => {
      await runMigration(uuid, signal);
    }),
  };
}

/** The stored migration status; a replication migration is asked live (lag, source reachability). */
export async function migrationStatusOf(
  deps: DbOperationsDeps,
  row: ManagedDatabaseRow,
  instance: ManagedInstanceRow | undefined,
): Promise<MigrationStatus | undefined> {
  const migration = await createDbOperationsRepository(deps.db).migrationOf(row.uuid);
  if (!migration) return undefined;
  const stored = JSON.parse(migration.status_json) as MigrationStatus;
  // Only a replication that still runs is asked live; a stopped one keeps its final status.
  const active = migration.status === 'running' || migration.status === 'done';
  if (migration.method !== 'replication' || !active || !instance) return stored;
  if (stored.databases.length === 0) return stored; // the subscriptions are still being created
  try {
    return await deps.operations.replicationStatus({
      sourceUri: deps.secretBox.decrypt(migration.source),
      target: operationInstance(row, instance),
      ssl: migration.ssl === 1,
    });
  } catch (error) {
    return isOperationError(error) ? { ...stored, status: 'failed', error: error.message } : stored;
  }
}

/**
 * Stops a migration, UpCloud's `properties.migration: null`: a replication's subscriptions are dropped on
 * the target (and with them their slots on the source), then the publications on the source. A finished
 * dump has nothing to drop. The row stays, `stopped`, so migration-status shows the end with
 * `source_active: false`. Throws 409 NO_MIGRATION when nothing is left to stop, 409 MIGRATION_IN_PROGRESS
 * while a dump still copies (it runs to its end).
 */
export async function stopMigration(
  deps: DbOperationsDeps,
  row: ManagedDatabaseRow,
  instance: ManagedInstanceRow | undefined,
  /** The audit action: the route's (DELETE …/migration, or POST …/migration with a null source). */
  action = 'db_migration.delete',
): Promise<MigrationStatus> {
  const migration = await createDbOperationsRepository(deps.db).migrationOf(row.uuid);
  if (!migration || migration.status === 'stopped') {
    throw new AppError('conflict', 'No migration is running that can be stopped', {
      apiCode: 'NO_MIGRATION',
    });
  }
  const stored = JSON.parse(migration.status_json) as MigrationStatus;
  if (migration.method !== 'replication' && migration.status === 'running') {
    throw new AppError('conflict', 'A dump migration cannot be stopped; it ends by itself', {
      apiCode: 'MIGRATION_IN_PROGRESS',
    });
  }
  let databases = stored.databases;
  if (migration.method === 'replication') {
    if (!instance?.port) {
      throw new AppError('conflict', `Managed database ${row.uuid} is not running (state ${row.state})`, {
        apiCode: 'SERVICE_NOT_RUNNING',
      });
    }
    try {
      const stopped = await deps.operations.stopReplication({
        sourceUri: deps.secretBox.decrypt(migration.source),
        target: operationInstance(row, instance),
        ssl: migration.ssl === 1,
      });
      if (stopped.orphanedSlots.length > 0) {
        deps.logger.warn(
          { database: row.uuid, slots: stopped.orphanedSlots },
          'source unreachable: replication slots left on the source',
        );
      }
    } catch (error) {
      // No subscription yet (the job has not created them; `stopped` keeps it from doing so) is fine.
      if (!isOperationError(error) || error.code !== 'REPLICATION_NOT_RUNNING') throw error;
    }
    databases = databases.map((d) => ({ dbname: d.dbname, method: d.method, status: 'done' as const }));
  }
  const status: MigrationStatus = {
    status: 'done',
    method: stored.method,
    seconds_behind_master: 0,
    source_active: false,
    databases,
  };
  await deps.db.transaction().execute(async (trx) => {
    await createDbOperationsRepository(trx).updateMigration(row.uuid, {
      status: 'stopped',
      status_json: JSON.stringify(status),
      error: null,
      updated_at: iso(deps.clock.now()),
    });
    await auditChange(trx, {
      at: deps.clock.now(),
      action,
      teamId: row.team_id,
      target: { kind: 'managed_database', id: row.uuid },
      before: { migration: migration.status, method: migration.method },
      after: { migration: 'stopped' },
    });
  });
  return status;
}
