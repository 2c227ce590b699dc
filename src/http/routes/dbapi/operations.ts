// The /1.3 managed-database operations: check tasks, migrations, upgrade, maintenance. The engine
// work runs in jobs (src/services/db-operations); these routes validate, check ownership, store the
// sealed request and enqueue in the same transaction.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../../../context.js';
import {
  OPERATION_ERROR_STATUS,
  parseRecoveryTime,
  isOperationError,
  requireMaintenance,
  validateSourceUri,
  type PendingUpdate,
} from '../../../drivers/databases/operations/index.js';
import { iso } from '../../../domain/clock.js';
import { AppError, type ErrorCode } from '../../../domain/errors.js';
import { MANAGED_DATABASE_ZONES, isPlanOffered } from '../../../domain/plans.js';
import { enqueueJob } from '../../../jobs/queue.js';
import {
  PROVISION_JOB,
  provisionJobKey,
  type ProvisionPayload,
} from '../../../services/managed-databases/index.js';
import {
  CLONE_JOB,
  cloneJobKey,
  restorableBackups,
  type ClonePayload,
  MIGRATION_JOB,
  TASK_JOB,
  UPGRADE_JOB,
  adminUriOf,
  migrationJobKey,
  migrationStatusOf,
  pgBinDirFor,
  stopMigration,
  taskJobKey,
  taskObject,
  upgradeJobKey,
  type TaskRequest,
  type UpgradePayload,
} from '../../../services/db-operations/index.js';
import {
  createManagedDatabaseRepository,
  type ManagedDatabaseRow,
  type ManagedInstanceRow,
} from '../../../services/managed-databases/repository.js';
import { serviceObject } from '../../../services/managed-databases/view.js';
import { principalOf } from '../../types.js';

const UuidParam = Type.Object({ uuid: Type.String({ minLength: 1, maxLength: 64 }) });
const TaskParams = Type.Object({
  uuid: Type.String({ minLength: 1, maxLength: 64 }),
  id: Type.String({ minLength: 1, maxLength: 64 }),
});
const Method = Type.Union([Type.Literal('dump'), Type.Literal('replication')]);
const TaskBody = Type.Object(
  {
    operation: Type.Union([Type.Literal('migration_check'), Type.Literal('upgrade_check')]),
    migration_check: Type.Optional(
      Type.Object(
        {
          source_service_uri: Type.String({ minLength: 1, maxLength: 4096 }),
          method: Type.Optional(Method),
          ignore_dbs: Type.Optional(Type.String({ maxLength: 4096 })),
          // As on POST …/migration: given, the check connects exactly as that migration will.
          ssl: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
    upgrade_check: Type.Optional(
      Type.Object(
        { target_version: Type.String({ minLength: 1, maxLength: 16 }) },
        { additionalProperties: false },
      ),
    ),
    target_version: Type.Optional(Type.String({ minLength: 1, maxLength: 16 })),
  },
  { additionalProperties: false },
);
const MigrationBody = Type.Object(
  {
    source_service_uri: Type.Union([Type.String({ minLength: 1, maxLength: 4096 }), Type.Null()]),
    method: Type.Optional(Method),
    ignore_dbs: Type.Optional(Type.String({ maxLength: 4096 })),
    ssl: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const UpgradeBody = Type.Object(
  { target_version: Type.String({ minLength: 1, maxLength: 16 }) },
  { additionalProperties: false },
);

const CloneBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9][a-z0-9-]*$' })),
    hostname_prefix: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9][a-z0-9-]*$' }),
    ),
    title: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    zone: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    plan: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    recovery_time: Type.Optional(Type.String({ maxLength: 64 })),
    clone_time: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
);

const tags = ['managed databases'];
const security = [{ basic: [] }];

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

export function registerDbOperationRoutes(app: FastifyInstance, ctx: AppContext): void {
  const config = { auth: 'db_api' as const };
  const repo = createManagedDatabaseRepository(ctx.db);
  const now = () => ctx.clock.now();

  /** The database, 404 when unknown, 403 when none of the caller's teams holds it (as GET /1.3/database/{uuid}). */
  async function ownedDatabase(
    userId: number,
    uuid: string,
  ): Promise<{ row: ManagedDatabaseRow; instance: ManagedInstanceRow | undefined; role: string }> {
    const row = await repo.findDatabase(uuid);
    if (!row) {
      throw new AppError('not_found', `Managed database ${uuid} not found`, { apiCode: 'SERVICE_NOT_FOUND' });
    }
    const role = (await ctx.identity.teamsOfUser(userId)).find((t) => t.id === row.team_id)?.role;
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
  ): Record<string, unknown> {
    const secrets =
      role === 'owner' && instance ? ctx.services.managedDatabases.credentialsOf(instance) : undefined;
    return serviceObject(row, instance, secrets);
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

  function validateUri(uri: string, engine: 'pg' | 'mysql', ssl?: boolean): void {
    try {
      validateSourceUri(uri, engine, ssl);
    } catch (error) {
      throw asAppError(error);
    }
  }

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof TaskBody> }>(
    '/1.3/database/:uuid/tasks',
    { config, schema: { tags, security, params: UuidParam, body: TaskBody } },
    async (request, reply) => {
      const { row } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      const body = request.body;
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
      const id = ctx.ids.uuid();
      const at = iso(now());
      const values = {
        id,
        database_uuid: row.uuid,
        operation: task.operation,
        request: ctx.secretBox.encrypt(JSON.stringify(task)),
        state: 'running',
        success: null,
        result: '',
        result_codes: '[]',
        target_version: task.targetVersion ?? null,
        details: null,
        create_time: at,
        update_time: at,
      };
      await ctx.db.transaction().execute(async (trx) => {
        await trx.insertInto('managed_database_tasks').values(values).execute();
        await enqueueJob(
          trx,
          { type: TASK_JOB, key: taskJobKey(id), payload: { id }, runAt: now(), maxAttempts: 1 },
          now(),
        );
      });
      return reply.code(201).send(taskObject(values, row.type));
    },
  );

  app.get<{ Params: Static<typeof TaskParams> }>(
    '/1.3/database/:uuid/tasks/:id',
    { config, schema: { tags, security, params: TaskParams } },
    async (request) => {
      const { row } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      const task = await ctx.db
        .selectFrom('managed_database_tasks')
        .selectAll()
        .where('id', '=', request.params.id)
        .where('database_uuid', '=', row.uuid)
        .executeTakeFirst();
      if (!task) {
        throw new AppError('not_found', `Task ${request.params.id} not found`, { apiCode: 'TASK_NOT_FOUND' });
      }
      return taskObject(task, row.type);
    },
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof MigrationBody> }>(
    '/1.3/database/:uuid/migration',
    { config, schema: { tags, security, params: UuidParam, body: MigrationBody } },
    async (request) => {
      const { row, instance, role } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      const engine = requireSqlEngine(row);
      const body = request.body;
      const existing = await ctx.db
        .selectFrom('managed_database_migrations')
        .select(['status', 'method'])
        .where('database_uuid', '=', row.uuid)
        .executeTakeFirst();
      if (body.source_service_uri === null) {
        await stopMigration(ctx, row, instance);
        return serviceObjectFor(row, instance, role);
      }
      const method = body.method ?? 'dump';
      if (method === 'replication' && engine !== 'pg') {
        throw new AppError('bad_request', 'Replication migration is supported for PostgreSQL only', {
          apiCode: 'REPLICATION_NOT_POSSIBLE',
        });
      }
      const ssl = body.ssl ?? true;
      validateUri(body.source_service_uri, engine, ssl);
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
      const values = {
        database_uuid: row.uuid,
        method,
        source: ctx.secretBox.encrypt(body.source_service_uri),
        ignore_dbs: body.ignore_dbs ?? null,
        ssl: ssl ? 1 : 0,
        status: 'running',
        status_json: JSON.stringify(initial),
        error: null,
        created_at: at,
        updated_at: at,
      };
      await ctx.db.transaction().execute(async (trx) => {
        await trx.deleteFrom('managed_database_migrations').where('database_uuid', '=', row.uuid).execute();
        await trx.insertInto('managed_database_migrations').values(values).execute();
        await enqueueJob(
          trx,
          {
            type: MIGRATION_JOB,
            key: migrationJobKey(row.uuid),
            payload: { uuid: row.uuid },
            runAt: now(),
            maxAttempts: 1,
          },
          now(),
        );
      });
      const object = serviceObjectFor(row, instance, role);
      const source = validateSourceUri(body.source_service_uri, engine, ssl);
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
  );

  // Berth's spelling of stopping; POST …/migration with a null source does the same.
  app.delete<{ Params: Static<typeof UuidParam> }>(
    '/1.3/database/:uuid/migration',
    { config, schema: { tags, security, params: UuidParam } },
    async (request) => {
      const { row, instance, role } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      requireSqlEngine(row);
      await stopMigration(ctx, row, instance);
      return serviceObjectFor(row, instance, role);
    },
  );

  app.get<{ Params: Static<typeof UuidParam> }>(
    '/1.3/database/:uuid/migration-status',
    { config, schema: { tags, security, params: UuidParam } },
    async (request) => {
      const { row, instance } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      requireSqlEngine(row);
      // UpCloud answers a database that never migrated with an idle `done` status, not an error.
      return (await migrationStatusOf(ctx, row, instance)) ?? IDLE_MIGRATION_STATUS;
    },
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof UpgradeBody> }>(
    '/1.3/database/:uuid/upgrade',
    { config, schema: { tags, security, params: UuidParam, body: UpgradeBody } },
    async (request, reply) => {
      const { row, instance, role } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      requirePostgres(row);
      const target = request.body.target_version;
      if (!(Number.parseInt(target, 10) > majorOf(instance?.version ?? null))) {
        throw new AppError('bad_request', `Version ${target} is not newer than ${instance?.version ?? '?'}`, {
          apiCode: 'UPGRADE_VERSION_NOT_NEWER',
        });
      }
      const checked = await ctx.db
        .selectFrom('managed_database_tasks')
        .select('id')
        .where('database_uuid', '=', row.uuid)
        .where('operation', '=', 'upgrade_check')
        .where('target_version', '=', target)
        .where('success', '=', 1)
        .executeTakeFirst();
      if (!checked) {
        throw new AppError('conflict', `Run an upgrade_check task for version ${target} first`, {
          apiCode: 'UPGRADE_CHECK_REQUIRED',
        });
      }
      const running = requireRunning(row, instance);
      const at = now();
      const payload: UpgradePayload = { uuid: row.uuid, targetVersion: target };
      await ctx.db.transaction().execute(async (trx) => {
        // `rebalancing` is UpCloud's state while upgrading; it also refuses a second upgrade meanwhile.
        await createManagedDatabaseRepository(trx).setState(
          row.id,
          'rebalancing',
          `upgrading to PostgreSQL ${target}`,
          iso(at),
        );
        // One attempt: a failed upgrade leaves the old major running with the reason in state_reason.
        await enqueueJob(
          trx,
          { type: UPGRADE_JOB, key: upgradeJobKey(row.uuid), payload, runAt: at, maxAttempts: 1 },
          at,
        );
      });
      const upgrading = (await repo.findDatabase(row.uuid)) ?? row;
      const object = serviceObjectFor(upgrading, running, role);
      // As UpCloud's answer: properties.version is already the target, metadata the running version.
      const properties = (object.properties ?? {}) as Record<string, unknown>;
      return reply.code(201).send({ ...object, properties: { ...properties, version: target } });
    },
  );

  app.post<{ Params: Static<typeof UuidParam> }>(
    '/1.3/database/:uuid/maintenance',
    { config, schema: { tags, security, params: UuidParam } },
    async (request) => {
      const { row, instance } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      const running = requireRunning(row, instance);
      requireSqlEngine(row);
      let updates: PendingUpdate[];
      try {
        updates = await requireMaintenance({
          uri: adminUriOf(ctx, row, running),
          ...(row.type === 'pg' ? { binDir: pgBinDirFor(String(majorOf(running.version))) } : {}),
        });
      } catch (error) {
        throw asAppError(error);
      }
      // A restart applies both kinds: settings waiting for it, and the newest installed minor's binaries.
      await ctx.services.managedDatabases.restart(row.uuid);
      // UpCloud's start-maintenance answers 200 with DatabaseUpCloudApiResponse {message}.
      return { message: `Maintenance applied: ${updates.map((u) => u.description).join('; ')}` };
    },
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof CloneBody> }>(
    '/1.3/database/:uuid/clone',
    { config, schema: { tags, security, params: UuidParam, body: CloneBody } },
    async (request, reply) => {
      const { row, instance } = await ownedDatabase(principalOf(request).userId, request.params.uuid);
      const engine = requireSqlEngine(row);
      const body = request.body;
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
      const running = requireRunning(row, instance);
      const at = now();
      const payload: ClonePayload = { source: row.uuid, target: ctx.ids.uuid() };
      const recovery = body.recovery_time ?? body.clone_time;
      if (recovery !== undefined) {
        if (engine === 'mysql') {
          throw new AppError('bad_request', 'Point-in-time clones are available for PostgreSQL only', {
            apiCode: 'PITR_NOT_SUPPORTED',
          });
        }
        try {
          const time = parseRecoveryTime(recovery, at);
          const backups = restorableBackups(running);
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
      const taken = await ctx.db
        .selectFrom('managed_databases')
        .select('id')
        .where('team_id', '=', row.team_id)
        .where('name', '=', name)
        .executeTakeFirst();
      if (taken) {
        throw new AppError('conflict', `A managed database named ${name} already exists`, {
          apiCode: 'SERVICE_EXISTS',
        });
      }
      await ctx.db.transaction().execute(async (trx) => {
        await trx
          .insertInto('managed_databases')
          .values({
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
          })
          .execute();
        const target = payload.target;
        const provision: ProvisionPayload = {
          uuid: target,
          // maxAttempts 1: a failed copy leaves the clone in `error` with its reason rather than retrying.
          followUp: { type: CLONE_JOB, key: cloneJobKey(target), payload, maxAttempts: 1 },
        };
        await enqueueJob(
          trx,
          { type: PROVISION_JOB, key: provisionJobKey(target), payload: provision, runAt: at },
          at,
        );
      });
      const clone = await repo.findDatabase(payload.target);
      if (!clone) throw new AppError('internal', 'The clone vanished');
      return reply.code(201).send(serviceObject(clone, undefined, undefined));
    },
  );
}
