// Reading applications: list, one (settings, domains, secret keys, volumes, services, schedule,
// health check, latest deployment), deployments, and the per-application YAML export (Ploi Cloud's
// GET /applications/{application}/export-yaml). Changes go through apply; PATCH/PUT live elsewhere.
// Removing one domain, secret or volume: Ploi Cloud's DELETE routes.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import type { RemovableKind } from '../../../services/infrastructure/removals.js';
import { principalOf } from '../../types.js';
import { YAML_PRODUCES } from './infrastructure.js';
import { textResponse } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import { ApplicationResponse, ApplicationsResponse, RemovedResponse } from '../../schemas/infrastructure.js';

const IdParam = Type.Object({ id: Type.Integer({ minimum: 1 }) });
const ItemParam = Type.Object({
  id: Type.Integer({ minimum: 1 }),
  item: Type.String({ minLength: 1, maxLength: 253 }),
});
const ListQuery = Type.Object({ team: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) });

const tags = ['applications'];
const security = [{ bearer: [] }];

export function registerApplicationRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // Reading (secret keys, never values) is any member's; removing is owners'.
  const config = { auth: 'api_token' as const, role: 'member' as const };

  for (const [kind, segment, what] of [
    ['domain', 'domains', 'a domain (by name or id)'],
    ['secret', 'secrets', 'a secret (by key)'],
    ['volume', 'volumes', 'a volume (by name)'],
  ] as Array<[RemovableKind, string, string]>) {
    app.delete<{ Params: Static<typeof ItemParam> }>(
      `/api/v1/applications/:id/${segment}/:item`,
      {
        config: { ...config, role: 'owner', audit: `${kind}.delete` },
        schema: {
          tags,
          security,
          summary: `Remove ${what}; apply never removes what a document leaves out`,
          params: ItemParam,
          response: { 200: RemovedResponse, ...platformErrors(401, 403, 404, 422) },
        },
      },
      async (request) => {
        const name = await deps.services.removals.remove(
          principalOf(request).userId,
          request.params.id,
          kind,
          request.params.item,
        );
        return { data: { removed: kind, name } };
      },
    );
  }

  app.get<{ Querystring: Static<typeof ListQuery> }>(
    '/api/v1/applications',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Applications of your teams (filter: ?team=<id or name>)',
        querystring: ListQuery,
        response: { 200: ApplicationsResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await deps.services.resources.listApplications(principalOf(request).userId, request.query.team),
    }),
  );

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'One application with everything attached',
        params: IdParam,
        response: { 200: ApplicationResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await deps.services.resources.getApplication(principalOf(request).userId, request.params.id),
    }),
  );

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/export-yaml',
    {
      config: { ...config, produces: YAML_PRODUCES },
      schema: {
        tags,
        security,
        summary: 'Export one application as an Infrastructure document',
        params: IdParam,
        response: {
          200: textResponse(YAML_PRODUCES, 'The Infrastructure document'),
          ...platformErrors(401, 403, 404, 422),
        },
      },
    },
    async (request, reply) => {
      const yaml = await deps.services.resources.exportApplication(
        principalOf(request).userId,
        request.params.id,
      );
      return reply.type('application/yaml; charset=utf-8').send(yaml);
    },
  );
}
