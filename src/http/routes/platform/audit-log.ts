// A team's audit log (issue 31, item 2): owners only, newest first, filtered by action, actor, target and
// time, paged like the notifications (limit, before). The entries are written by the services.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import { AuditLogResponse } from '../../schemas/audit.js';

const TeamParam = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const Time = Type.String({ format: 'date-time', description: 'ISO 8601 with a time zone' });
const AuditQuery = Type.Object({
  action: Type.Optional(
    Type.String({
      pattern: '^[a-z0-9_.]+\\*?$',
      maxLength: 100,
      description: 'An action, or a prefix ending in * (application.*)',
    }),
  ),
  actor: Type.Optional(
    Type.String({ minLength: 1, maxLength: 254, description: 'An e-mail, operator, or berth' }),
  ),
  target: Type.Optional(
    Type.String({ minLength: 1, maxLength: 300, description: 'A target id or name, or kind:id' }),
  ),
  since: Type.Optional(Time),
  until: Type.Optional(Time),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
  before: Type.Optional(Type.Integer({ minimum: 1, description: 'Only entries older than this id' })),
});

export function registerAuditLogRoutes(app: FastifyInstance, deps: RouteDeps): void {
  app.get<{ Params: Static<typeof TeamParam>; Querystring: Static<typeof AuditQuery> }>(
    '/api/v1/teams/:team/audit-log',
    {
      // Who did what may name people and addresses: owners only (the ownership hook answers 403).
      config: { auth: 'api_token', role: 'owner' },
      schema: {
        tags: ['audit log'],
        security: [{ bearer: [] }],
        summary: "The team's audit log, newest first (owners; filters action, actor, target, since, until)",
        params: TeamParam,
        querystring: AuditQuery,
        response: { 200: AuditLogResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { limit = 50, before, since, until, ...filters } = request.query;
      const data = await deps.services.audit.forTeam(principalOf(request).userId, request.params.team, {
        ...filters,
        limit,
        ...(before !== undefined ? { beforeId: before } : {}),
        // Stored times are UTC ISO text: a filter in another zone is compared in the same form.
        ...(since !== undefined ? { since: new Date(since).toISOString() } : {}),
        ...(until !== undefined ? { until: new Date(until).toISOString() } : {}),
      });
      return { data, meta: { limit, next_before: data.length === limit ? (data.at(-1)?.id ?? null) : null } };
    },
  );
}
