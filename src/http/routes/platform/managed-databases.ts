// The panel's action for a plan or zone change that apply reported but did not carry out (spec,
// apply rule 5): the database restarts with the new plan's limits; a zone change is recorded.
// And deletion (apply never deletes): the same as DELETE /1.3/database/{uuid}, with an API token;
// and one database with how to connect to it, so that an API token is enough to find credentials.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import {
  ManagedDatabaseAcceptedResponse,
  ManagedDatabaseDeletingResponse,
  ManagedDatabaseResponse,
} from '../../schemas/infrastructure.js';

const UuidParam = Type.Object({ uuid: Type.String({ minLength: 1, maxLength: 64 }) });
const tags = ['managed databases'];
const security = [{ bearer: [] }];

export function registerManagedDatabasePanelRoutes(app: FastifyInstance, deps: RouteDeps): void {
  app.get<{ Params: Static<typeof UuidParam> }>(
    '/api/v1/managed-databases/:uuid',
    {
      config: { auth: 'api_token', role: 'member' },
      schema: {
        tags,
        security,
        params: UuidParam,
        summary: 'A managed database with its connection details (passwords for the team’s owners)',
        response: { 200: ManagedDatabaseResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const service = deps.services.managedDatabases;
      const { row, role } = await service.databaseFor(
        principalOf(request).userId,
        request.params.uuid,
        'member',
      );
      const instance = await service.findInstance(row.id);
      const secrets = role === 'owner' && instance ? service.credentialsOf(instance) : undefined;
      const object = service.serviceObject(row, instance, secrets);
      return {
        data: {
          uuid: row.uuid,
          name: row.name,
          type: object.type,
          plan: row.plan,
          zone: row.zone,
          state: row.state,
          version: (object.properties as { version: string | null }).version,
          // The same values /1.3/database/{uuid} answers (UpCloud's fields), under one name.
          connection: {
            uri: object.service_uri,
            params: object.service_uri_params,
            users: object.users,
            databases: object.databases ?? [],
          },
          pending_changes:
            row.pending_plan === null && row.pending_zone === null
              ? null
              : { plan: row.pending_plan, zone: row.pending_zone },
        },
      };
    },
  );

  app.post<{ Params: Static<typeof UuidParam> }>(
    '/api/v1/managed-databases/:uuid/apply-pending-change',
    {
      config: { auth: 'api_token', role: 'owner', audit: 'managed_database.apply_pending_change' },
      schema: {
        tags,
        security,
        params: UuidParam,
        summary:
          'Carry out the plan or zone change that apply reported as needing action in the panel (409 without one)',
        response: { 202: ManagedDatabaseAcceptedResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const row = await deps.services.managedDatabases.applyPendingChange(
        principalOf(request).userId,
        request.params.uuid,
      );
      // Accepted: the restart with the new limits runs as a job; the state shows its progress.
      return reply.code(202).send({
        data: {
          uuid: row.uuid,
          name: row.name,
          type: row.type,
          plan: row.plan,
          zone: row.zone,
          state: row.state,
        },
      });
    },
  );

  app.delete<{ Params: Static<typeof UuidParam> }>(
    '/api/v1/managed-databases/:uuid',
    {
      config: { auth: 'api_token', role: 'owner', audit: 'managed_database.delete' },
      schema: {
        tags,
        security,
        params: UuidParam,
        summary: 'Delete a managed database (owners): 202, state `delete-service` until it is gone',
        response: { 202: ManagedDatabaseDeletingResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const { userId } = principalOf(request);
      const service = deps.services.managedDatabases;
      const { row } = await service.databaseFor(userId, request.params.uuid, 'owner');
      await service.requestDeletion(row.uuid, userId);
      return reply.code(202).send({ data: { uuid: row.uuid, name: row.name, state: 'delete-service' } });
    },
  );
}
