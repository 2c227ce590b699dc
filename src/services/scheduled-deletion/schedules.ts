// An application's deletion schedule over the platform API: read it with its warnings, set, change or
// cancel it (PATCH/PUT), and the dashboard's rule-1 actions that only change or cancel an existing one.
import type { Kysely } from 'kysely';
import { auditChange, auditUnchanged } from '../audit.js';
import { createScheduleRepository, type ScheduleRow } from '../../db/repositories/schedules.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock } from '../../domain/clock.js';
import { AppError, FieldErrorCollector } from '../../domain/errors.js';
import type { IdentityService } from '../identity.js';
import { wakeSweep } from './index.js';
import { parseScheduleTimestamp, warningMoment } from './policy.js';

/** `set`: PATCH/PUT, any schedule or none; `reschedule` and `cancel`: only an existing schedule. */
export type ScheduleChange = 'set' | 'reschedule' | 'cancel';

export function scheduleView(app: ScheduleRow) {
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

export function createScheduleService(deps: {
  db: Kysely<Database>;
  clock: Clock;
  identity: IdentityService;
}) {
  const repo = createScheduleRepository(deps.db);

  async function load(userId: number, idText: string): Promise<ScheduleRow> {
    const id = /^\d{1,15}$/.test(idText) ? Number(idText) : NaN;
    const row = Number.isSafeInteger(id) ? await repo.find(id) : undefined;
    if (!row) throw new AppError('not_found', `Application ${idText} not found`);
    try {
      await deps.identity.requireTeam(userId, row.team_id);
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
      const parsed = parseScheduleTimestamp(fields.scheduled_deletion_at, deps.clock.now());
      if (parsed.ok) value = parsed.value;
      else errors.add('scheduled_deletion_at', parsed.message);
    }
    errors.throwIfAny();
    return value;
  }

  return {
    /** The schedule and its warnings, for a member of the application's team. */
    async view(userId: number, applicationId: string) {
      return scheduleView(await load(userId, applicationId));
    },

    /** Sets, changes or cancels the schedule as `kind` allows; audited; wakes the sweep. */
    async change(userId: number, applicationId: string, body: unknown, kind: ScheduleChange) {
      const current = await load(userId, applicationId);
      const value = kind === 'cancel' ? null : requestedTime(body, kind === 'set');
      const now = deps.clock.now();
      const at = iso(now);
      return deps.db.transaction().execute(async (trx) => {
        const r = createScheduleRepository(trx);
        if (!(await r.set(current.id, value, at, kind !== 'set'))) {
          if (!(await r.find(current.id)))
            throw new AppError('not_found', `Application ${current.id} not found`);
          throw new AppError(
            'conflict',
            'This application has no scheduled deletion; a schedule can only be set through apply or PATCH /api/v1/applications/{id}',
          );
        }
        const before = current.scheduled_deletion_at;
        if (before !== value) {
          await auditChange(trx, {
            at,
            userId,
            action: kind === 'cancel' ? 'scheduled_deletion.cancel' : 'scheduled_deletion.update',
            teamId: current.team_id,
            target: { kind: 'application', id: current.id },
            before: { scheduled_deletion_at: before },
            after: { scheduled_deletion_at: value },
          });
          // A schedule set close to its time gets its warning at once, not at the next minute's sweep.
          await wakeSweep(trx, now);
        } else auditUnchanged();
        return scheduleView((await r.find(current.id))!);
      });
    },
  };
}

export type ScheduleService = ReturnType<typeof createScheduleService>;
