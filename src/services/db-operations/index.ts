// The /1.3 managed-database operations on top of the engine functions in
// src/drivers/databases/operations: check tasks and migrations run as jobs, their requests sealed
// (source URIs hold passwords) and their results redacted by the engine functions.
import type { RecoveredCopy, RestorableBackup } from '../../drivers/databases/types.js';
import { engineOf } from '../managed-databases/declared.js';
import { handles, type ClonePayload, type UpgradePayload } from '../jobs.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/schema/index.js';
import { createDbOperationsRepository } from '../../db/repositories/db-operations.js';
import type { ManagedDatabaseTasksTable } from '../../db/schema/db-operations.js';
import { stopCluster } from '../../drivers/databases/operations/cluster.js';
import { createAddressGuard, type AddressGuard } from '../../drivers/net/guard.js';
import {
  OperationError,
  pgBinDirFor,
  pgBinaryMajor,
  pgToolDir,
  checkMigrationSource,
  cloneMysql,
  dumpMigrate,
  isOperationError,
  replicationStatus,
  startReplication,
  stopReplication,
  upgradeCheck,
  type MigrationMethod,
  type MigrationStatus,
  type ResultCode,
} from '../../drivers/databases/operations/index.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { ManagedDatabaseService } from '../managed-databases/service.js';
import { AppError } from '../../domain/errors.js';
import type { JobHandler, JobResult } from '../../jobs/runner.js';
import {
  createManagedDatabaseRepository,
  type ManagedDatabaseRow,
  type ManagedInstanceRow,
} from '../../db/repositories/managed-databases.js';

// Moved to the drivers (the local driver needs it); re-exported for the routes.
export { pgBinDirFor };

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
  /** BERTH_TOOLS_ALLOW_PRIVATE: the private addresses a migration source may have. */
  toolsAllowPrivate: readonly string[];
}

/** The driver's base backups of a PostgreSQL instance, oldest first. */
export function restorableBackups(
  deps: Pick<DbOperationsDeps, 'managedDatabases'>,
  row: ManagedDatabaseRow,
): RestorableBackup[] {
  return deps.managedDatabases.driver.restorableBackups?.({ id: row.uuid, engine: engineOf(row.type) }) ?? [];
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

export type TaskRow = ManagedDatabaseTasksTable;

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

/**
 * Berth's own connection URI of a managed instance on this host (PostgreSQL or MariaDB): its
 * maintenance account, never the admin a team receives (which has no superuser rights).
 */
export function adminUriOf(
  deps: Pick<DbOperationsDeps, 'managedDatabases'>,
  row: ManagedDatabaseRow,
  instance: ManagedInstanceRow,
): string {
  const driver = deps.managedDatabases.driver;
  if (!instance.port || !driver.maintenanceUri)
    throw new Error(`managed database ${row.uuid} has no port yet`);
  return driver.maintenanceUri({ id: row.uuid, engine: engineOf(row.type) }, instance.port);
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

/**
 * A tenant's source server is reached under the tools' address rule and its operator allowance
 * (BERTH_TOOLS_ALLOW_PRIVATE): loopback, private and link-local addresses are refused otherwise, so
 * that a tenant cannot map the network behind Berth. Berth's own instances need no such rule.
 */
const sourceGuard = (deps: Pick<DbOperationsDeps, 'toolsAllowPrivate'>): AddressGuard =>
  createAddressGuard({ allow: deps.toolsAllowPrivate });

export function dbOperationJobHandlers(deps: DbOperationsDeps): Record<string, JobHandler> {
  const guard = sourceGuard(deps);
  const log = deps.logger.child({ component: 'db-operations' });
  const now = () => iso(deps.clock.now());

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
        const check = await checkMigrationSource({
          guard,
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
        const check = await upgradeCheck({
          sourceUri: adminUriOf(deps, row, instance),
          targetBinDir: pgBinDirFor(version),
          targetVersion: version,
        });
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
        targetUri: adminUriOf(deps, row, instance),
        ssl: migration.ssl === 1,
        ...(migration.ignore_dbs ? { ignoreDbs: migration.ignore_dbs } : {}),
        signal,
        guard,
      };
      const status =
        migration.method === 'replication'
          ? await startReplication(input)
          : await dumpMigrate({
              ...input,
              onProgress: (progress) => {
                // Progress is informative (a failed write is dropped); the final status below is what counts.
                progressSaved = progressSaved.then(() => saveStatus(uuid, progress)).catch(() => undefined);
              },
            });
      await progressSaved;
      await saveStatus(uuid, status);
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
    }
  }

  /**
   * The source's data at a point in time, or as it is now: the driver's base backup (lz4 tar) restored
   * into `<work>/data` and the source's WAL archive replayed onto it (to the time, or to its end), on the
   * source's own major, then promoted. The cluster is left running on a free port, or stopped.
   */
  async function recoverSourceCopy(
    source: { row: ManagedDatabaseRow; instance: ManagedInstanceRow },
    backup: RestorableBackup,
    recoveryTime: string | undefined,
    work: string,
    keepRunning: boolean,
  ): Promise<RecoveredCopy> {
    const driver = deps.managedDatabases.driver;
    if (!driver.recoverCopy || !source.instance.port)
      throw new OperationError('PITR_NOT_SUPPORTED', 'The source keeps no WAL archive');
    return driver.recoverCopy(
      { id: source.row.uuid, engine: engineOf(source.row.type) },
      {
        backup,
        recoveryTime,
        work,
        keepRunning,
        major: majorOf(source.instance.version),
        port: source.instance.port,
      },
    );
  }

  /**
   * A point in time of PostgreSQL: a scratch cluster recovered to the time (recoverSourceCopy); the
   * clone is then filled from it by dump, so the clone keeps the driver's own layout and configuration.
   */
  async function pointInTimeCopy(
    source: { row: ManagedDatabaseRow; instance: ManagedInstanceRow },
    targetUri: string,
    payload: ClonePayload,
  ): Promise<MigrationStatus> {
    if (!payload.backup || !payload.recoveryTime) {
      throw new OperationError('PITR_NOT_SUPPORTED', 'The source keeps no WAL archive');
    }
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-clone-'));
    fs.chmodSync(work, 0o711);
    try {
      const scratch = await recoverSourceCopy(source, payload.backup, payload.recoveryTime, work, true);
      try {
        // The scratch cluster is a copy of the source: same admin and password.
        const scratchUri = new URL(adminUriOf(deps, source.row, source.instance));
        scratchUri.port = String(scratch.port);
        return await dumpMigrate({ sourceUri: scratchUri.toString(), targetUri, ssl: false });
      } finally {
        await stopCluster(
          { binDir: scratch.binDir, dataDir: scratch.dataDir, runAs: scratch.runAs },
          'fast',
        ).catch(() => undefined);
      }
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }

  /** True when no pg_dump here reads the source's major (16 from npm ships none): clone physically. */
  async function needsPhysicalCopy(instance: ManagedInstanceRow): Promise<boolean> {
    const major = majorOf(instance.version);
    if (major === undefined) return false;
    return (await pgBinaryMajor(pgToolDir(major, 'pg_dump'), 'pg_dump')) < major;
  }

  /**
   * A clone without pg_dump: the source recovered (to the time, or to now) next to the target's files,
   * and the target's instance then runs on that copy with its own credentials (driver.adoptCopy). The
   * clone is on the source's major, with the source's roles and data.
   */
  async function physicalCopy(
    source: { row: ManagedDatabaseRow; instance: ManagedInstanceRow },
    target: { row: ManagedDatabaseRow; instance: ManagedInstanceRow },
    payload: ClonePayload,
  ): Promise<void> {
    const backup = payload.backup ?? restorableBackups(deps, source.row).at(-1);
    if (!backup) throw new OperationError('NO_BASE_BACKUP', 'The source has no base backup yet');
    if (!target.instance.data_dir)
      throw new OperationError('CLONE_FAILED', 'The clone has no data directory');
    // Beside the target's files, on their file system: the copy is moved into place, not copied.
    const work = path.join(target.instance.data_dir, 'clone-work');
    fs.rmSync(work, { recursive: true, force: true });
    fs.mkdirSync(work, { mode: 0o711 });
    try {
      const copy = await recoverSourceCopy(source, backup, payload.recoveryTime, work, false);
      await deps.managedDatabases.adoptCopy(target.row.uuid, {
        dataDir: copy.dataDir,
        // The copy's superuser is the source's maintenance account, with the source's password.
        adminPassword: copy.adminPassword,
      });
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
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
      const sourceUri = adminUriOf(deps, source.row, source.instance);
      const targetUri = adminUriOf(deps, targetRow, target.instance);
      const from = { row: source.row, instance: source.instance };
      if (source.row.type === 'pg' && (await needsPhysicalCopy(source.instance))) {
        await physicalCopy(from, { row: targetRow, instance: target.instance }, payload);
      } else {
        const status =
          source.row.type === 'mysql'
            ? await cloneMysql({ sourceUri, targetUri })
            : payload.recoveryTime
              ? await pointInTimeCopy(from, targetUri, payload)
              : await dumpMigrate({ sourceUri, targetUri, ssl: false, signal });
        if (status.status === 'failed') {
          throw new OperationError('CLONE_FAILED', status.error ?? 'Copying the data failed');
        }
      }
      await repo.setState(targetRow.id, 'running', null, now());
    } catch (error) {
      if (!isOperationError(error)) log.warn({ err: error, database: payload.target }, 'clone failed');
      const reason = isOperationError(error) ? `${error.code}: ${error.message}` : 'The clone failed';
      await repo.setState(targetRow.id, 'error', reason, now());
    }
  }

  async function runUpgrade(payload: UpgradePayload): Promise<void> {
    // The route set `rebalancing`; a job claimed again after a crash finds it so and resumes.
    const { row } = await loadDatabase(deps.db, payload.uuid);
    if (row?.state !== 'rebalancing') return;
    await deps.managedDatabases.upgradeMajor(row.uuid, Number.parseInt(payload.targetVersion, 10));
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
    const live = await replicationStatus({
      sourceUri: deps.secretBox.decrypt(migration.source),
      targetUri: adminUriOf(deps, row, instance),
      ssl: migration.ssl === 1,
      guard: sourceGuard(deps),
    });
    const { lag_bytes: _lag, ...status } = live;
    return status;
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
      const stopped = await stopReplication({
        sourceUri: deps.secretBox.decrypt(migration.source),
        targetUri: adminUriOf(deps, row, instance),
        ssl: migration.ssl === 1,
        guard: sourceGuard(deps),
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
  await createDbOperationsRepository(deps.db).updateMigration(row.uuid, {
    status: 'stopped',
    status_json: JSON.stringify(status),
    error: null,
    updated_at: iso(deps.clock.now()),
  });
  return status;
}
