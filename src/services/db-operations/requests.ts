// The /1.3 managed-database operations as requests: check tasks, migrations, upgrade, maintenance and
// clones. Each checks ownership and the database's state, stores the sealed request and enqueues its
// job in one transaction; the engine work runs in the jobs (index.ts), through the operations'
// driver. Routes parse, call one of these and shape the answer.
import { auditChange } from '../audit.js';
import { createDbOperationsRepository } from '../../db/repositories/db-operations.js';
import {
  OPERATION_ERROR_STATUS,
  OperationError,
  parseRecoveryTime,
  isOperationError,
  type PendingUpdate,
} from '../../drivers/databases/types.js';
import { iso } from '../../domain/clock.js';
import { redactUri } from '../../domain/redact.js';
import { AppError, type ErrorCode } from '../../domain/errors.js';
import { MANAGED_DATABASE_ZONES, isPlanOffered } from '../../domain/plans.js';
import type { ProvisionPayload } from '../managed-databases/jobs.js';
import { enqueue, jobOf } from '../jobs.js';
import {
  createManagedDatabaseRepository,
  type ManagedDatabaseRow,
  type ManagedInstanceRow,
} from '../../db/repositories/managed-databases.js';
import {
  restorableBackups,
  type ClonePayload,
  migrationStatusOf,
  operationInstance,
  stopMigration,
  taskObject,
  type TaskRequest,
  type DbOperationsDeps,
  type UpgradePayload,
} from './index.js';
import type { IdGenerator } from '../../domain/clock.js';
import type { IdentityService } from '../identity.js';

/** The requests' dependencies: the jobs' and who the caller is, and new ids. */
export interface DbOperationRequestsDeps extends DbOperationsDeps {
  ids: IdGenerator;
  identity: Pick<IdentityService, 'teamsOfUser'>;
}

const ERROR_CODE_OF_STATUS: Record<number, ErrorCode> = {
  400: 'bad_request',
  409: 'conflict',
  422: 'validation',
  500: 'internal',
};

/** An engine OperationError as the /1.3 error body, with the status of the one table. */
function asAppError(error: unknown): unknown {
  if (!isOperationError(error)) return error;
  const status = OPERATION_ERROR_STATUS[error.code];
  return new AppError(ERROR_CODE_OF_STATUS[status] ?? 'internal', error.message, { apiCode: error.code });
}

const IDLE_MIGRATION_STATUS = {
  status: 'done',
  method: '',
  seconds_behind_master: 0,
  source_active: false,
  databases: [],
};

/** `15.18` → `15`; `10.11.19-MariaDB` → `10`. */
const majorOf = (version: string | null): number => Number.parseInt(version ?? '', 10);

export interface TaskInput {
  operation: 'migration_check' | 'upgrade_check';
  migration_check?: {
    source_service_uri: string;
    method?: 'dump' | 'replication';
    ignore_dbs?: string;
    ssl?: boolean;
  };
  upgrade_check?: { target_version: string };
  target_version?: string;
}

export interface MigrationInput {
  source_service_uri: string | null;
  method?: 'dump' | 'replication';
  ignore_dbs?: string;
  ssl?: boolean;
}

export interface CloneInput {
  name?: string;
  hostname_prefix?: string;
  title?: string;
  zone?: string;
  plan?: string;
  recovery_time?: string;
  clone_time?: string;
}

type ServiceObject = Record<string, unknown>;

export function createDbOperationRequests(deps: DbOperationRequestsDeps) {
  const repo = createManagedDatabaseRepository(deps.db);
  const ops = createDbOperationsRepository(deps.db);
  const now = () => deps.clock.now();

  /** The database, 404 when unknown, 403 when none of the caller's teams holds it (as GET /1.3/database/{uuid}). */
  async function ownedDatabase(
    userId: number,
    uuid: string,
  ): Promise<{ row: ManagedDatabaseRow; instance: ManagedInstanceRow | undefined; role: string }> {
    const row = await repo.findDatabase(uuid);
    if (!row) {
      throw new AppError('not_found', `Managed database ${uuid} not found`, { apiCode: 'SERVICE_NOT_FOUND' });
    }
    const role = (await deps.identity.teamsOfUser(userId)).find((t) => t.id === row.team_id)?.role;
    if (role === undefined) {
      throw new AppError('forbidden', `Managed database ${row.uuid} belongs to another account`, {
        apiCode: 'ACCOUNT_FORBIDDEN',
      });
    }
    return { row, instance: await repo.findInstance(row.id), role };
  }

  function serviceObjectFor(
    row: ManagedDatabaseRow,
    instance: ManagedInstanceRow | undefined,
    role: string,
  ): ServiceObject {
    const secrets = role === 'owner' && instance ? deps.managedDatabases.credentialsOf(instance) : undefined;
    return deps.managedDatabases.serviceObject(row, instance, secrets);
  }

  function requireSqlEngine(row: ManagedDatabaseRow): 'pg' | 'mysql' {
    if (row.type === 'pg' || row.type === 'mysql') return row.type;
    throw new AppError('bad_request', `Operation is not supported for ${row.type}`, {
      apiCode: 'OPERATION_NOT_SUPPORTED',
    });
  }

  function requirePostgres(row: ManagedDatabaseRow): void {
    if (row.type !== 'pg') {
      throw new AppError('bad_request', 'Upgrades are supported for PostgreSQL only', {
        apiCode: 'OPERATION_NOT_SUPPORTED',
      });
    }
  }

  function requireRunning(
    row: ManagedDatabaseRow,
    instance: ManagedInstanceRow | undefined,
  ): ManagedInstanceRow {
    if (row.state !== 'running' || !instance?.port) {
      throw new AppError('conflict', `Managed database ${row.uuid} is not running (state ${row.state})`, {
        apiCode: 'SERVICE_NOT_RUNNING',
      });
    }
    return instance;
  }

  function validateUri(uri: string, engine: 'pg' | 'mysql', ssl?: boolean) {
    try {
      return deps.operations.parseSource(uri, engine, ssl);
    } catch (error) {
      throw asAppError(error);
    }
  }

  return {
    /**
     * UpCloud's `maintenance.pending_updates` of a running SQL database: settings waiting for a restart
     * and a newer installed minor version, each `{description}`; [] when none or when it cannot be asked.
     */
    async pendingUpdates(
      row: ManagedDatabaseRow,
      instance: ManagedInstanceRow | undefined,
    ): Promise<Array<{ description: string }>> {
      if ((row.type !== 'pg' && row.type !== 'mysql') || row.state !== 'running' || !instance?.port)
        return [];
      try {
        const updates = await deps.operations.pendingMaintenance(operationInstance(row, instance));
        return updates.map((u) => ({ description: u.description }));
      } catch {
        return []; // the server is restarting or unreachable: nothing can be said to be pending
      }
    },

    /** POST /1.3/database/{uuid}/tasks: the task object (201). */
    async createTask(userId: number, uuid: string, body: TaskInput): Promise<ServiceObject> {
      const { row } = await ownedDatabase(userId, uuid);
      const engine = requireSqlEngine(row);
      let task: TaskRequest;
      if (body.operation === 'migration_check') {
        const check = body.migration_check;
        if (!check) {
          throw new AppError('bad_request', 'migration_check.source_service_uri is required', {
            apiCode: 'INVALID_REQUEST',
          });
        }
        validateUri(check.source_service_uri, engine, check.ssl);
        task = {
          operation: 'migration_check',
          sourceUri: check.source_service_uri,
          ...(check.ssl !== undefined ? { ssl: check.ssl } : {}),
          ...(check.method ? { method: check.method } : {}),
          ...(check.ignore_dbs ? { ignoreDbs: check.ignore_dbs } : {}),
        };
      } else {
        requirePostgres(row);
        const version = body.upgrade_check?.target_version ?? body.target_version;
        if (!version) {
          throw new AppError('bad_request', 'target_version is required', { apiCode: 'INVALID_REQUEST' });
        }
        task = { operation: 'upgrade_check', targetVersion: version };
      }
      const id = deps.ids.uuid();
      const at = iso(now());
      const values = {
        id,
        database_uuid: row.uuid,
        operation: task.operation,
        request: deps.secretBox.encrypt(JSON.stringify(task)),
        state: 'running',
        success: null,
        result: '',
        result_codes: '[]',
        target_version: task.targetVersion ?? null,
        details: null,
        create_time: at,
        update_time: at,
      };
      await deps.db.transaction().execute(async (trx) => {
        await createDbOperationsRepository(trx).insertTask(values);
        // The operation only: a migration check's source URI carries a password.
        await auditChange(trx, {
          at,
          action: 'db_task.create',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          after: { task: id, operation: task.operation, target_version: task.targetVersion ?? null },
        });
        await enqueue(trx, 'db_operation.task', { id }, { now: now(), maxAttempts: 1 });
      });
      return taskObject(values, row.type);
    },

    /** GET /1.3/database/{uuid}/tasks/{id}. */
    async task(userId: number, uuid: string, id: string): Promise<ServiceObject> {
      const { row } = await ownedDatabase(userId, uuid);
      const task = await ops.findTask(row.uuid, id);
      if (!task) throw new AppError('not_found', `Task ${id} not found`, { apiCode: 'TASK_NOT_FOUND' });
      return taskObject(task, row.type);
    },

    /** POST /1.3/database/{uuid}/migration: starts one, or stops it with a null source. */
    async migrate(userId: number, uuid: string, body: MigrationInput): Promise<ServiceObject> {
      const { row, instance, role } = await ownedDatabase(userId, uuid);
      const engine = requireSqlEngine(row);
      const existing = await ops.findMigration(row.uuid);
      if (body.source_service_uri === null) {
        await stopMigration(deps, row, instance, 'db_migration.create');
        return serviceObjectFor(row, instance, role);
      }
      const method = body.method ?? 'dump';
      if (method === 'replication' && engine !== 'pg') {
        throw new AppError('bad_request', 'Replication migration is supported for PostgreSQL only', {
          apiCode: 'REPLICATION_NOT_POSSIBLE',
        });
      }
      const ssl = body.ssl ?? true;
      const source = validateUri(body.source_service_uri, engine, ssl);
      requireRunning(row, instance);
      if (
        existing?.status === 'running' ||
        (existing?.method === 'replication' && existing.status === 'done')
      ) {
        throw new AppError('conflict', 'A migration is already running', {
          apiCode: 'MIGRATION_IN_PROGRESS',
        });
      }
      const at = iso(now());
      const initial = {
        status: 'running',
        method: method === 'replication' ? 'replication' : engine === 'pg' ? 'pg_dump' : 'mysqldump',
        seconds_behind_master: 0,
        source_active: true,
        databases: [],
      };
      await deps.db.transaction().execute(async (trx) => {
        await createDbOperationsRepository(trx).replaceMigration({
          database_uuid: row.uuid,
          method,
          source: deps.secretBox.encrypt(body.source_service_uri!),
          ignore_dbs: body.ignore_dbs ?? null,
          ssl: ssl ? 1 : 0,
          status: 'running',
          status_json: JSON.stringify(initial),
          error: null,
          created_at: at,
          updated_at: at,
        });
        await auditChange(trx, {
          at,
          action: 'db_migration.create',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          // The source without its password.
          after: {
            source: redactUri(body.source_service_uri!),
            method,
            ssl,
            ignore_dbs: body.ignore_dbs ?? null,
          },
        });
        await enqueue(trx, 'db_operation.migration', { uuid: row.uuid }, { now: now(), maxAttempts: 1 });
      });
      const object = serviceObjectFor(row, instance, role);
      // UpCloud echoes the migration under properties; Berth leaves the password out.
      const properties = (object.properties ?? {}) as Record<string, unknown>;
      return {
        ...object,
        properties: {
          ...properties,
          migration: {
            host: source.host,
            port: source.port,
            username: source.user,
            dbname: source.database,
            method,
            ignore_dbs: body.ignore_dbs ?? '',
            ssl,
          },
        },
      };
    },

    /** DELETE /1.3/database/{uuid}/migration: Berth's spelling of stopping. */
    async stopMigration(userId: number, uuid: string): Promise<ServiceObject> {
      const { row, instance, role } = await ownedDatabase(userId, uuid);
      requireSqlEngine(row);
      await stopMigration(deps, row, instance);
      return serviceObjectFor(row, instance, role);
    },

    /** GET /1.3/database/{uuid}/migration-status; a database that never migrated is idle and `done`. */
    async migrationStatus(userId: number, uuid: string): Promise<unknown> {
      const { row, instance } = await ownedDatabase(userId, uuid);
      requireSqlEngine(row);
      return (await migrationStatusOf(deps, row, instance)) ?? IDLE_MIGRATION_STATUS;
    },

    /** POST /1.3/database/{uuid}/upgrade: the service object, its version already the target (201). */
    async upgrade(userId: number, uuid: string, target: string): Promise<ServiceObject> {
      const { row, instance, role } = await ownedDatabase(userId, uuid);
      requirePostgres(row);
      if (!(Number.parseInt(target, 10) > majorOf(instance?.version ?? null))) {
        throw new AppError('bad_request', `Version ${target} is not newer than ${instance?.version ?? '?'}`, {
          apiCode: 'UPGRADE_VERSION_NOT_NEWER',
        });
      }
      if (!(await ops.upgradeChecked(row.uuid, target))) {
        throw new AppError('conflict', `Run an upgrade_check task for version ${target} first`, {
          apiCode: 'UPGRADE_CHECK_REQUIRED',
        });
      }
      const running = requireRunning(row, instance);
      const at = now();
      const payload: UpgradePayload = { uuid: row.uuid, targetVersion: target };
      await deps.db.transaction().execute(async (trx) => {
        // `rebalancing` is UpCloud's state while upgrading; it also refuses a second upgrade meanwhile.
        await createManagedDatabaseRepository(trx).setState(
          row.id,
          'rebalancing',
          `upgrading to PostgreSQL ${target}`,
          iso(at),
        );
        await auditChange(trx, {
          at,
          action: 'managed_database.upgrade',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          before: { version: instance?.version ?? null },
          after: { version: target },
        });
        // One attempt: a failed upgrade leaves the old major running with the reason in state_reason.
        await enqueue(trx, 'db_operation.upgrade', payload, { now: at, maxAttempts: 1 });
      });
      const upgrading = (await repo.findDatabase(row.uuid)) ?? row;
      const object = serviceObjectFor(upgrading, running, role);
      // As UpCloud's answer: properties.version is already the target, metadata the running version.
      const properties = (object.properties ?? {}) as Record<string, unknown>;
      return { ...object, properties: { ...properties, version: target } };
    },

    /** POST /1.3/database/{uuid}/maintenance: applies what waits for a restart; UpCloud's `{message}`. */
    async maintenance(userId: number, uuid: string): Promise<{ message: string }> {
      const { row, instance } = await ownedDatabase(userId, uuid);
      const running = requireRunning(row, instance);
      requireSqlEngine(row);
      let updates: PendingUpdate[];
      try {
        updates = await deps.operations.pendingMaintenance(operationInstance(row, running));
        if (updates.length === 0) {
          throw new OperationError(
            'NO_MAINTENANCE_AVAILABLE',
            'There is no pending maintenance for this database',
          );
        }
      } catch (error) {
        throw asAppError(error);
      }
      // A restart applies both kinds: settings waiting for it, and the newest installed minor's binaries.
      await deps.managedDatabases.restart(row.uuid);
      // The change is the restart, which the supervisor records as it does any restart; the entry is
      // written once it succeeded (docs/decisions/0014-audit-log.md).
      await auditChange(deps.db, {
        at: now(),
        action: 'managed_database.maintenance',
        teamId: row.team_id,
        target: { kind: 'managed_database', id: row.uuid },
        after: { applied: updates.map((u) => u.description) },
      });
      return { message: `Maintenance applied: ${updates.map((u) => u.description).join('; ')}` };
    },

    /** POST /1.3/database/{uuid}/clone: the new database's service object (201), provisioning. */
    async clone(userId: number, uuid: string, body: CloneInput): Promise<ServiceObject> {
      const { row, instance } = await ownedDatabase(userId, uuid);
      const engine = requireSqlEngine(row);
      // The copy is the operations' work (its job): a driver without them refuses the clone now.
      void deps.operations.name;
      const name = body.name ?? body.hostname_prefix;
      if (!name) throw new AppError('bad_request', 'name is required', { apiCode: 'INVALID_REQUEST' });
      const zone = body.zone ?? row.zone;
      if (!MANAGED_DATABASE_ZONES.includes(zone)) {
        throw new AppError('bad_request', `Unknown zone ${zone}`, { apiCode: 'ZONE_INVALID' });
      }
      const plan = body.plan ?? row.plan;
      if (!isPlanOffered(engine, plan)) {
        throw new AppError('bad_request', `Unknown plan ${plan}`, { apiCode: 'PLAN_INVALID' });
      }
      requireRunning(row, instance);
      const at = now();
      const payload: ClonePayload = { source: row.uuid, target: deps.ids.uuid() };
      const recovery = body.recovery_time ?? body.clone_time;
      if (recovery !== undefined) {
        if (engine === 'mysql') {
          throw new AppError('bad_request', 'Point-in-time clones are available for PostgreSQL only', {
            apiCode: 'PITR_NOT_SUPPORTED',
          });
        }
        try {
          const time = parseRecoveryTime(recovery, at);
          const backups = await restorableBackups(deps, row);
          if (backups.length === 0) {
            throw new AppError('conflict', 'The database has no base backup yet', {
              apiCode: 'NO_BASE_BACKUP',
            });
          }
          const backup = backups.filter((b) => new Date(b.finishedAt).getTime() <= time.getTime()).at(-1);
          if (!backup) {
            throw new AppError(
              'bad_request',
              `recovery_time ${time.toISOString()} is before the earliest restorable point ${backups[0]?.finishedAt ?? ''}`,
              { apiCode: 'RECOVERY_TIME_BEFORE_BACKUPS' },
            );
          }
          payload.recoveryTime = time.toISOString();
          payload.backup = backup;
        } catch (error) {
          throw asAppError(error);
        }
      }
      if (await ops.nameTaken(row.team_id, name)) {
        throw new AppError('conflict', `A managed database named ${name} already exists`, {
          apiCode: 'SERVICE_EXISTS',
        });
      }
      await deps.db.transaction().execute(async (trx) => {
        await createDbOperationsRepository(trx).insertDatabase({
          uuid: payload.target,
          team_id: row.team_id,
          name,
          title: body.title ?? row.title,
          type: row.type,
          plan,
          zone,
          users: row.users,
          logical_databases: row.logical_databases,
          state: 'pending',
          state_reason: null,
          pending_plan: null,
          pending_zone: null,
          created_at: iso(at),
          updated_at: iso(at),
        });
        const target = payload.target;
        const provision: ProvisionPayload = {
          uuid: target,
          // maxAttempts 1: a failed copy leaves the clone in `error` with its reason rather than retrying.
          followUp: jobOf('db_operation.clone', payload, 1),
        };
        await auditChange(trx, {
          at,
          action: 'managed_database.clone',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: target },
          after: { source: row.uuid, name, plan, zone, recovery_time: payload.recoveryTime ?? null },
        });
        await enqueue(trx, 'managed_database.provision', provision, { now: at });
      });
      const clone = await repo.findDatabase(payload.target);
      if (!clone) throw new AppError('internal', 'The clone vanished');
      return deps.managedDatabases.serviceObject(clone, undefined, undefined);
    },
  };
}

export type DbOperationRequests = ReturnType<typeof createDbOperationRequests>;
