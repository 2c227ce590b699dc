// The /1.3 managed-database operations: check tasks, migrations, upgrade, maintenance and clones.
// These routes parse and answer; the use cases are in src/services/db-operations/requests.ts and the
// engine work in its jobs.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import {
  MaintenanceResponse,
  MigrationStatusResponse,
  ServiceResponse,
  TaskResponse,
} from '../../schemas/dbapi.js';
import { dbApiErrors, platformErrors } from '../../schemas/errors.js';

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

/**
 * Where the operations are served: `/1.3/database` with the managed-database API credentials (UpCloud's
 * API), and the same use cases under `/api/v1/managed-databases` with an API token or a browser session,
 * for the dashboard (same bodies and answers; errors in the platform API's shape).
 */
const APIS = {
  dbapi: {
    prefix: '/1.3/database',
    config: { auth: 'db_api' as const, role: 'member' as const },
    owner: { auth: 'db_api' as const, role: 'owner' as const },
    security: [{ basic: [] }],
    errors: (...statuses: Array<400 | 401 | 403 | 404 | 409>) => dbApiErrors(...statuses),
  },
  platform: {
    prefix: '/api/v1/managed-databases',
    config: { auth: 'api_token' as const, role: 'member' as const },
    owner: { auth: 'api_token' as const, role: 'owner' as const },
    security: [{ bearer: [] }],
    errors: (...statuses: Array<400 | 401 | 403 | 404 | 409>) => platformErrors(...statuses, 422),
  },
};

export function registerDbOperationRoutes(app: FastifyInstance, deps: RouteDeps): void {
  registerOperations(app, deps, APIS.dbapi);
  registerOperations(app, deps, APIS.platform);
}

function registerOperations(
  app: FastifyInstance,
  deps: RouteDeps,
  api: (typeof APIS)['dbapi' | 'platform'],
): void {
  // Reading tasks and a migration's status is any member's; whatever starts work on the database
  // (checks, migrations, upgrades, maintenance, clones) is its team owners' (docs/security.md, "Roles").
  const { config, owner, security, prefix } = api;
  const requests = () => deps.services.dbOperations;

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof TaskBody> }>(
    `${prefix}/:uuid/tasks`,
    {
      config: { ...owner, audit: 'db_task.create' },
      schema: {
        tags,
        security,
        summary: 'Start a check task: migration_check (a source server) or upgrade_check (PostgreSQL)',
        params: UuidParam,
        body: TaskBody,
        response: { 201: TaskResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(await requests().createTask(principalOf(request).userId, request.params.uuid, request.body)),
  );

  app.get<{ Params: Static<typeof TaskParams> }>(
    `${prefix}/:uuid/tasks/:id`,
    {
      config,
      schema: {
        tags,
        security,
        summary: 'One task: its result once it has run',
        params: TaskParams,
        response: { 200: TaskResponse, ...api.errors(400, 401, 403, 404) },
      },
    },
    async (request) => requests().task(principalOf(request).userId, request.params.uuid, request.params.id),
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof MigrationBody> }>(
    `${prefix}/:uuid/migration`,
    {
      config: { ...owner, audit: 'db_migration.create' },
      schema: {
        tags,
        security,
        summary: 'Start a migration from a source server (dump or replication); a null source stops it',
        params: UuidParam,
        body: MigrationBody,
        response: { 200: ServiceResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request) => requests().migrate(principalOf(request).userId, request.params.uuid, request.body),
  );

  // Berth's spelling of stopping; POST …/migration with a null source does the same.
  app.delete<{ Params: Static<typeof UuidParam> }>(
    `${prefix}/:uuid/migration`,
    {
      config: { ...owner, audit: 'db_migration.delete' },
      schema: {
        tags,
        security,
        summary: 'Stop the migration (409 NO_MIGRATION when none is left to stop)',
        params: UuidParam,
        response: { 200: ServiceResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request) => requests().stopMigration(principalOf(request).userId, request.params.uuid),
  );

  app.get<{ Params: Static<typeof UuidParam> }>(
    `${prefix}/:uuid/migration-status`,
    {
      config,
      schema: {
        tags,
        security,
        summary: "The migration's status, per database",
        params: UuidParam,
        response: { 200: MigrationStatusResponse, ...api.errors(400, 401, 403, 404) },
      },
    },
    async (request) => requests().migrationStatus(principalOf(request).userId, request.params.uuid),
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof UpgradeBody> }>(
    `${prefix}/:uuid/upgrade`,
    {
      config: { ...owner, audit: 'managed_database.upgrade' },
      schema: {
        tags,
        security,
        summary: 'Upgrade PostgreSQL to a newer major (after an upgrade_check task for it)',
        params: UuidParam,
        body: UpgradeBody,
        response: { 201: ServiceResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(
          await requests().upgrade(
            principalOf(request).userId,
            request.params.uuid,
            request.body.target_version,
          ),
        ),
  );

  // UpCloud's start-maintenance answers 200 with DatabaseUpCloudApiResponse {message}.
  app.post<{ Params: Static<typeof UuidParam> }>(
    `${prefix}/:uuid/maintenance`,
    {
      config: { ...owner, audit: 'managed_database.maintenance' },
      schema: {
        tags,
        security,
        summary: 'Start maintenance: apply what waits for a restart (settings, a newer minor version)',
        params: UuidParam,
        response: { 200: MaintenanceResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request) => requests().maintenance(principalOf(request).userId, request.params.uuid),
  );

  app.post<{ Params: Static<typeof UuidParam>; Body: Static<typeof CloneBody> }>(
    `${prefix}/:uuid/clone`,
    {
      config: { ...owner, audit: 'managed_database.clone' },
      schema: {
        tags,
        security,
        summary: 'Clone the database (now, or to a point in time for PostgreSQL) into a new one',
        params: UuidParam,
        body: CloneBody,
        response: { 201: ServiceResponse, ...api.errors(400, 401, 403, 404, 409) },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send(await requests().clone(principalOf(request).userId, request.params.uuid, request.body)),
  );
}
