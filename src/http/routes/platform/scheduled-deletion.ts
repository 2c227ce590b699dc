// Scheduled deletion over the platform API: set, change or cancel an application's deletion time
// (PATCH/PUT), the dashboard's own rule-1 endpoints that only change or cancel an existing schedule,
// and a team's outbox of notifications. The use cases are in services/scheduled-deletion/schedules.ts.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import { NotificationsResponse, ScheduleResponse } from '../../schemas/platform.js';

const AppParam = Type.Object({ id: Type.String({ maxLength: 40 }) });
const TeamParam = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const NotificationsQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
  before: Type.Optional(Type.Integer({ minimum: 1 })),
});
const Timestamp = Type.String({
  description: 'ISO 8601 with a time zone (or a bare date, 00:00 UTC), in the future',
  examples: ['2030-01-31T12:00:00Z'],
});
// One `type: [string, null]` rather than a union: with type coercion on, a union's string branch
// would turn null into "" and a null branch would turn "" into null.
const SetBody = Type.Object(
  {
    scheduled_deletion_at: Type.Unsafe<string | null>({
      type: ['string', 'null'],
      description: 'ISO 8601 with a time zone (or a bare date, 00:00 UTC), in the future; null cancels',
      examples: ['2030-01-31T12:00:00Z', null],
    }),
  },
  { additionalProperties: false },
);
const RescheduleBody = Type.Object({ scheduled_deletion_at: Timestamp }, { additionalProperties: false });
const tags = ['applications'];
const security = [{ bearer: [] }];

export function registerScheduledDeletionRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // Reading a schedule and the notifications is any member's; setting, changing or cancelling one is owners'.
  const config = { auth: 'api_token' as const, role: 'member' as const };
  const owner = { auth: 'api_token' as const, role: 'owner' as const };
  const schedules = () => deps.services.schedules;

  for (const method of ['PATCH', 'PUT'] as const) {
    app.route<{ Params: Static<typeof AppParam>; Body: unknown }>({
      method,
      url: '/api/v1/applications/:id',
      config: { ...owner, audit: 'scheduled_deletion.update' },
      schema: {
        tags,
        security,
        summary: 'Set, change or cancel (null) the scheduled deletion',
        params: AppParam,
        body: SetBody,
        response: { 200: ScheduleResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
      handler: async (request) => ({
        data: await schedules().change(principalOf(request).userId, request.params.id, request.body, 'set'),
      }),
    });
  }

  app.get<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/scheduled-deletion',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'The scheduled deletion and its warnings',
        params: AppParam,
        response: { 200: ScheduleResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await schedules().view(principalOf(request).userId, request.params.id) }),
  );

  app.post<{ Params: Static<typeof AppParam>; Body: unknown }>(
    '/api/v1/applications/:id/scheduled-deletion/reschedule',
    {
      config: { ...owner, audit: 'scheduled_deletion.update' },
      schema: {
        tags,
        security,
        summary: 'Change the date of an existing schedule (409 without one)',
        params: AppParam,
        body: RescheduleBody,
        response: { 200: ScheduleResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await schedules().change(
        principalOf(request).userId,
        request.params.id,
        request.body,
        'reschedule',
      ),
    }),
  );

  app.post<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/scheduled-deletion/cancel',
    {
      config: { ...owner, audit: 'scheduled_deletion.cancel' },
      schema: {
        tags,
        security,
        summary: 'Cancel an existing schedule (409 without one)',
        params: AppParam,
        response: { 200: ScheduleResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await schedules().change(principalOf(request).userId, request.params.id, undefined, 'cancel'),
    }),
  );

  app.get<{ Params: Static<typeof TeamParam>; Querystring: Static<typeof NotificationsQuery> }>(
    '/api/v1/teams/:team/notifications',
    {
      config,
      schema: {
        tags: ['notifications'],
        security,
        summary: "The team's notifications (deletion warnings and notices), newest first (limit, before)",
        params: TeamParam,
        querystring: NotificationsQuery,
        response: { 200: NotificationsResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const team = await deps.identity.requireTeam(principalOf(request).userId, request.params.team);
      const limit = request.query.limit ?? 50;
      const data = await deps.services.notifications.listForTeam(team.id, {
        limit,
        beforeId: request.query.before,
      });
      return { data, meta: { limit, next_before: data.length === limit ? data[data.length - 1]?.id : null } };
    },
  );
}
