// A team's managed databases and object storage with their states (credentials never appear).
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import { TeamManagedDatabasesResponse, TeamObjectStoragesResponse } from '../../schemas/infrastructure.js';

const TeamRef = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const tags = ['infrastructure'];
const security = [{ bearer: [] }];

export function registerTeamResourceRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const config = { auth: 'api_token' as const, role: 'member' as const };

  app.get<{ Params: Static<typeof TeamRef> }>(
    '/api/v1/teams/:team/managed-databases',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The team's managed databases and their states",
        params: TeamRef,
        response: { 200: TeamManagedDatabasesResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await deps.services.resources.listManagedDatabases(
        principalOf(request).userId,
        request.params.team,
      ),
    }),
  );

  app.get<{ Params: Static<typeof TeamRef> }>(
    '/api/v1/teams/:team/object-storage',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The team's object storage and their states",
        params: TeamRef,
        response: { 200: TeamObjectStoragesResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await deps.services.resources.listObjectStorages(
        principalOf(request).userId,
        request.params.team,
      ),
    }),
  );
}
