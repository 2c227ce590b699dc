// Scheduled deletion over the platform API: set, change or cancel an application's deletion time
// (PATCH/PUT), the dashboard's own rule-1 endpoints that only change or cancel an existing schedule,
// and a team's outbox of notifications.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../../../context.js';
import { iso } from '../../../domain/clock.js';
import { AppError, FieldErrorCollector } from '../../../domain/errors.js';
import { listTeamNotifications } from '../../../services/notifications/index.js';
import { parseScheduleTimestamp, warningMoment } from '../../../services/scheduled-deletion/policy.js';
import { wakeSweep } from '../../../services/scheduled-deletion/index.js';
import { principalOf } from '../../types.js';

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

interface ApplicationRow {
  id: number;
  name: string;
  team_id: number;
  scheduled_deletion_at: string | null;
  deletion_warning_7d_for: string | null;
  deletion_warning_1d_for: string | null;
}

type Mode = 'set' | 'reschedule' | 'cancel';

export function scheduleView(app: ApplicationRow) {
  const t = app.scheduled_deletion_at;
  const warning = (kind: '7d' | '1d', marker: string | null) =>
    t === null
      ? null
      : {
          due_at: iso(warningMoment(new Date(t), kind)),
          // handled: sent, or superseded by the nearer warning (see docs/api/scheduled-deletion.md).
          status: marker === t ? 'handled' : 'pending',
        };
  return {
    id: app.id,
    name: app.name,
    team_id: app.team_id,
    state: t === null ? 'no_schedule' : 'scheduled',
    scheduled_deletion_at: t,
    warnings: {
      seven_days: warning('7d', app.deletion_warning_7d_for),
      one_day: warning('1d', app.deletion_warning_1d_for),
    },
  };
}

export function registerScheduledDeletionRoutes(app: FastifyInstance, ctx: AppContext): void {
  const config = { auth: 'api_token' as const };

  async function loadApplication(userId: number, idText: string): Promise<ApplicationRow> {
    const id = /^\d{1,15}$/.test(idText) ? Number(idText) : NaN;
    const row = Number.isSafeInteger(id)
      ? await ctx.db
          .selectFrom('applications')
          .select([
            'id',
            'name',
            'team_id',
            'scheduled_deletion_at',
            'deletion_warning_7d_for',
            'deletion_warning_1d_for',
          ])
          .where('id', '=', id)
          .executeTakeFirst()
      : undefined;
    if (!row) throw new AppError('not_found', `Application ${idText} not found`);
    try {
      await ctx.identity.requireTeam(userId, row.team_id);
    } catch (error) {
      // The team exists (the application hangs off it), so the only refusal left is "not yours".
      if (error instanceof AppError && error.code === 'not_found') {
        throw new AppError('forbidden', 'This application belongs to another team');
      }
      throw error;
    }
    return row;
  }

  /** Reads `scheduled_deletion_at` from the body: a normalised future time, or null to cancel. */
  function requestedTime(body: unknown, allowNull: boolean): string | null {
    const errors = new FieldErrorCollector();
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      errors.add('scheduled_deletion_at', 'The scheduled_deletion_at field is required.');
      errors.throwIfAny();
    }
    const fields = body as Record<string, unknown>;
    for (const key of Object.keys(fields)) {
      if (key !== 'scheduled_deletion_at') {
        errors.add(key, `The ${key} field cannot be changed here; only scheduled_deletion_at can.`);
      }
    }
    let value: string | null = null;
    if (!('scheduled_deletion_at' in fields)) {
      errors.add('scheduled_deletion_at', 'The scheduled_deletion_at field is required.');
    } else if (fields.scheduled_deletion_at === null) {
      if (!allowNull)
        errors.add('scheduled_deletion_at', 'The scheduled_deletion_at field must not be null.');
    } else {
      const parsed = parseScheduleTimestamp(fields.scheduled_deletion_at, ctx.clock.now());
      if (parsed.ok) value = parsed.value;
      else errors.add('scheduled_deletion_at', parsed.message);
    }
    errors.throwIfAny();
    return value;
  }

  async function change(userId: number, current: ApplicationRow, value: string | null, mode: Mode) {
    const now = ctx.clock.now();
    const at = iso(now);
    return ctx.db.transaction().execute(async (trx) => {
      let update = trx
        .updateTable('applications')
        .set({ scheduled_deletion_at: value, updated_at: at })
        .where('id', '=', current.id);
      // Rule 1: the dashboard's endpoints act only on an existing schedule; checked in the UPDATE itself
      // so a cancellation racing with this request cannot slip a new schedule in.
      if (mode !== 'set') update = update.where('scheduled_deletion_at', 'is not', null);
      const result = await update.executeTakeFirst();
      if (Number(result.numUpdatedRows) !== 1) {
        const exists = await trx
          .selectFrom('applications')
          .select('id')
          .where('id', '=', current.id)
          .executeTakeFirst();
        if (!exists) throw new AppError('not_found', `Application ${current.id} not found`);
        throw new AppError(
          'conflict',
          'This application has no scheduled deletion; a schedule can only be set through apply or PATCH /api/v1/applications/{id}',
        );
      }
      const before = current.scheduled_deletion_at;
      if (before !== value) {
        await trx
          .insertInto('audit_log')
          .values({
            at,
            user_id: userId,
            team_id: current.team_id,
            action:
              value === null
                ? 'application.scheduled_deletion.cancelled'
                : before === null
                  ? 'application.scheduled_deletion.set'
                  : 'application.scheduled_deletion.changed',
            target: `application:${current.id}`,
            details: JSON.stringify({ from: before, to: value, via: mode }),
          })
          .execute();
        // A schedule set close to its time gets its warning at once, not at the next minute's sweep.
        await wakeSweep(trx, now);
      }
      const row = await trx
        .selectFrom('applications')
        .select([
          'id',
          'name',
          'team_id',
          'scheduled_deletion_at',
          'deletion_warning_7d_for',
          'deletion_warning_1d_for',
        ])
        .where('id', '=', current.id)
        .executeTakeFirstOrThrow();
      return { data: scheduleView(row) };
    });
  }

  for (const method of ['PATCH', 'PUT'] as const) {
    app.route<{ Params: Static<typeof AppParam>; Body: unknown }>({
      method,
      url: '/api/v1/applications/:id',
      config,
      schema: {
        tags,
        security,
        summary: 'Set, change or cancel (null) the scheduled deletion',
        params: AppParam,
        body: SetBody,
      },
      handler: async (request) => {
        const { userId } = principalOf(request);
        const current = await loadApplication(userId, request.params.id);
        const value = requestedTime(request.body, true);
        return change(userId, current, value, 'set');
      },
    });
  }

  app.get<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/scheduled-deletion',
    {
      config,
      schema: { tags, security, summary: 'The scheduled deletion and its warnings', params: AppParam },
    },
    async (request) => {
      const row = await loadApplication(principalOf(request).userId, request.params.id);
      return { data: scheduleView(row) };
    },
  );

  app.post<{ Params: Static<typeof AppParam>; Body: unknown }>(
    '/api/v1/applications/:id/scheduled-deletion/reschedule',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Change the date of an existing schedule (409 without one)',
        params: AppParam,
        body: RescheduleBody,
      },
    },
    async (request) => {
      const { userId } = principalOf(request);
      const current = await loadApplication(userId, request.params.id);
      const value = requestedTime(request.body, false);
      return change(userId, current, value, 'reschedule');
    },
  );

  app.post<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/scheduled-deletion/cancel',
    {
      config,
      schema: { tags, security, summary: 'Cancel an existing schedule (409 without one)', params: AppParam },
    },
    async (request) => {
      const { userId } = principalOf(request);
      return change(userId, await loadApplication(userId, request.params.id), null, 'cancel');
    },
  );

  app.get<{ Params: Static<typeof TeamParam>; Querystring: Static<typeof NotificationsQuery> }>(
    '/api/v1/teams/:team/notifications',
    {
      config,
      schema: { tags: ['notifications'], security, params: TeamParam, querystring: NotificationsQuery },
    },
    async (request) => {
      const team = await ctx.identity.requireTeam(principalOf(request).userId, request.params.team);
      const limit = request.query.limit ?? 50;
      const data = await listTeamNotifications(ctx.db, team.id, { limit, beforeId: request.query.before });
      return { data, meta: { limit, next_before: data.length === limit ? data[data.length - 1]?.id : null } };
    },
  );
}
