// GET /1.3/database and /1.3/database/{uuid}: the caller's managed databases as UpCloud service
// objects. Databases of the caller's teams are visible; passwords only to the teams' owners.
// DELETE and PATCH {powered} as UpCloud has them, for the teams' owners.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { AppError } from '../../../domain/errors.js';
import { principalOf } from '../../types.js';
import { NoContent } from '../../schemas/common.js';
import { ServiceListResponse, ServiceResponse } from '../../schemas/dbapi.js';
import { dbApiErrors } from '../../schemas/errors.js';

const UuidParam = Type.Object({ uuid: Type.String({ minLength: 1, maxLength: 64 }) });
const ListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
});

/** The part of UpCloud's PATCH that Berth carries out; the rest is changed by apply. */
const PatchBody = Type.Object(
  { powered: Type.Boolean({ description: 'false stops the server (state `stopped`), true starts it' }) },
  { additionalProperties: false },
);

const tags = ['managed databases'];
const security = [{ basic: [] }];

export function registerManagedDatabaseApiRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // Reading is any member's (passwords for owners only); deleting and powering are owners'.
  const config = { auth: 'db_api' as const, role: 'member' as const };
  const owner = { auth: 'db_api' as const, role: 'owner' as const };

  app.get<{ Querystring: Static<typeof ListQuery> }>(
    '/1.3/database',
    {
      config,
      schema: {
        tags,
        security,
        summary: "Your teams' managed databases as UpCloud service objects (limit, offset)",
        querystring: ListQuery,
        response: { 200: ServiceListResponse, ...dbApiErrors(400, 401) },
      },
    },
    async (request) => {
      const service = deps.services.managedDatabases;
      const page = await service.databasesOfUser(principalOf(request).userId, {
        offset: request.query.offset ?? 0,
        limit: request.query.limit ?? 100,
      });
      return page.map(({ row, instance, role }) => {
        const owner = role === 'owner';
        return service.serviceObject(
          row,
          instance,
          owner && instance ? service.credentialsOf(instance) : undefined,
        );
      });
    },
  );

  app.get<{ Params: Static<typeof UuidParam> }>(
    '/1.3/database/:uuid',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'One managed database, with the updates its next maintenance applies',
        params: UuidParam,
        response: { 200: ServiceResponse, ...dbApiErrors(400, 401, 403, 404) },
      },
    },
    async (request) => {
      const { row, role } = await deps.services.managedDatabases.databaseFor(
        principalOf(request).userId,
        request.params.uuid,
        'member',
      );
      const instance = await deps.services.managedDatabases.findInstance(row.id);
      const secrets =
        role === 'owner' && instance ? deps.services.managedDatabases.credentialsOf(instance) : undefined;
      const object = deps.services.managedDatabases.serviceObject(row, instance, secrets);
      // Asked live for the one database shown (not for listings): what the next maintenance applies.
      const pending = await deps.services.dbOperations.pendingUpdates(row, instance);
      return { ...object, maintenance: { ...(object.maintenance as object), pending_updates: pending } };
    },
  );

  app.delete<{ Params: Static<typeof UuidParam> }>(
    '/1.3/database/:uuid',
    {
      config: { ...owner, audit: 'managed_database.delete' },
      schema: {
        tags,
        security,
        params: UuidParam,
        summary: 'Delete the database: 204, then state `delete-service` until it is gone (404)',
        response: { 204: NoContent, ...dbApiErrors(400, 401, 403, 404) },
      },
    },
    async (request, reply) => {
      const userId = principalOf(request).userId;
      const service = deps.services.managedDatabases;
      const { row } = await service.databaseFor(userId, request.params.uuid, 'owner');
      await service.requestDeletion(row.uuid, userId);
      return reply.code(204).send();
    },
  );

  app.patch<{ Params: Static<typeof UuidParam>; Body: Static<typeof PatchBody> }>(
    '/1.3/database/:uuid',
    {
      config: { ...owner, audit: 'managed_database.power' },
      schema: {
        tags,
        security,
        params: UuidParam,
        body: PatchBody,
        summary: 'Power the database off or on: `pending`, then `stopped` or `running`',
        response: { 200: ServiceResponse, ...dbApiErrors(400, 401, 403, 404, 409) },
      },
    },
    async (request) => {
      const userId = principalOf(request).userId;
      const service = deps.services.managedDatabases;
      const { row } = await service.databaseFor(userId, request.params.uuid, 'owner');
      if (row.state === 'delete-service') {
        throw new AppError('conflict', `Managed database ${row.uuid} is being deleted`, {
          apiCode: 'SERVICE_NOT_RUNNING',
        });
      }
      await service.requestPower(row.uuid, request.body.powered);
      const fresh = await service.databaseFor(userId, row.uuid, 'owner');
      const instance = await deps.services.managedDatabases.findInstance(row.id);
      return service.serviceObject(
        fresh.row,
        instance,
        instance ? service.credentialsOf(instance) : undefined,
      );
    },
  );
}
