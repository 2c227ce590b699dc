// The SQL of the scheduled-deletion sweep (src/services/scheduled-deletion/index.ts): the schedule
// index of applications, the warning markers set by compare-and-set, what a deleted application
// held, and its tombstone.
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ApplicationTombstonesTable } from '../schema/scheduled-deletion.js';

type Db = Kysely<Database> | Transaction<Database>;

/** Which warning: seven days or one day before the deletion. */
export type WarningMarker = '7d' | '1d';

export interface ScheduledApplication {
  id: number;
  scheduled_deletion_at: string;
}

/** An application about to be deleted, with the names and counts of what goes with it. */
export interface ApplicationContents {
  id: number;
  name: string;
  team_id: number;
  team_name: string;
  scheduled_deletion_at: string;
  domains: string[];
  services: string[];
  volumes: string[];
  secrets: number;
  deployments: number;
}

// Kept textually identical to the partial indexes of migration 004 so both planners use them.
const PENDING: Record<WarningMarker, ReturnType<typeof sql>> = {
  '7d': sql`scheduled_deletion_at IS NOT NULL
  AND (deletion_warning_7d_for IS NULL OR deletion_warning_7d_for <> scheduled_deletion_at)`,
  '1d': sql`scheduled_deletion_at IS NOT NULL
  AND (deletion_warning_1d_for IS NULL OR deletion_warning_1d_for <> scheduled_deletion_at)`,
};

export function createScheduledDeletionRepository(db: Db) {
  return {
    /** Applications whose deletion time has come, earliest first. */
    due: async (now: string, limit: number): Promise<ScheduledApplication[]> =>
      (
        await db
          .selectFrom('applications')
          .select(['id', 'scheduled_deletion_at'])
          .where('scheduled_deletion_at', 'is not', null)
          .where('scheduled_deletion_at', '<=', now)
          .orderBy('scheduled_deletion_at')
          .limit(limit)
          .execute()
      ).map((row) => ({ id: row.id, scheduled_deletion_at: row.scheduled_deletion_at ?? '' })),

    /** Applications due in (from, to] whose `marker` warning is not sent for their schedule, earliest first. */
    async pendingWarnings(
      marker: WarningMarker,
      from: string,
      to: string,
      limit: number,
    ): Promise<ScheduledApplication[]> {
      const result = await sql<ScheduledApplication>`
      SELECT id, scheduled_deletion_at FROM applications
      WHERE ${PENDING[marker]} AND scheduled_deletion_at > ${from} AND scheduled_deletion_at <= ${to}
      ORDER BY scheduled_deletion_at LIMIT ${limit}`.execute(db);
      return result.rows;
    },

    /** The earliest schedule after `after` (of those whose `marker` warning is pending, when given). */
    async nextSchedule(after: string, marker?: WarningMarker): Promise<string | undefined> {
      const row = await sql<{ t: string | null }>`
      SELECT MIN(scheduled_deletion_at) AS t FROM applications
      WHERE ${marker ? PENDING[marker] : sql`scheduled_deletion_at IS NOT NULL`} AND scheduled_deletion_at > ${after}`.execute(
        db,
      );
      return row.rows[0]?.t ?? undefined;
    },

    /**
     * Marks the warning as handled for exactly this schedule; the WHERE is the compare-and-set, so only
     * one runner flips it. The 1-day marker supersedes a 7-day one not yet sent: that one is never sent
     * late. False when another runner (or a changed schedule) came first.
     */
    async markWarned(id: number, scheduledFor: string, marker: WarningMarker): Promise<boolean> {
      const t = scheduledFor;
      const flip =
        marker === '1d'
          ? sql`UPDATE applications SET deletion_warning_1d_for = ${t}, deletion_warning_7d_for = ${t}
                WHERE id = ${id} AND scheduled_deletion_at = ${t}
                  AND (deletion_warning_1d_for IS NULL OR deletion_warning_1d_for <> ${t})`
          : sql`UPDATE applications SET deletion_warning_7d_for = ${t}
                WHERE id = ${id} AND scheduled_deletion_at = ${t}
                  AND (deletion_warning_7d_for IS NULL OR deletion_warning_7d_for <> ${t})`;
      const result = await flip.execute(db);
      return Number(result.numAffectedRows ?? 0) === 1;
    },

    /** The application if it is still scheduled for exactly `scheduledFor` and that time (≤ now) has come. */
    findDue: (id: number, scheduledFor: string, now: string) =>
      db
        .selectFrom('applications')
        .select(['id', 'name', 'team_id'])
        .where('id', '=', id)
        .where('scheduled_deletion_at', '=', scheduledFor)
        .where('scheduled_deletion_at', '<=', now)
        .executeTakeFirst(),

    /**
     * The claim of a due deletion: a compare-and-set that also takes the row lock on PostgreSQL, so a
     * second runner waits here and then finds the row gone or changed. False when not claimed.
     */
    async claimDue(id: number, scheduledFor: string, now: string): Promise<boolean> {
      const claimed = await db
        .updateTable('applications')
        .set({ updated_at: now })
        .where('id', '=', id)
        .where('scheduled_deletion_at', '=', scheduledFor)
        .where('scheduled_deletion_at', '<=', now)
        .executeTakeFirst();
      return Number(claimed.numUpdatedRows) === 1;
    },

    /** The scheduled application with what it holds; undefined when it has no schedule (or is gone). */
    async contents(id: number): Promise<ApplicationContents | undefined> {
      const app = await db
        .selectFrom('applications')
        .innerJoin('teams', 'teams.id', 'applications.team_id')
        .select([
          'applications.id',
          'applications.name',
          'applications.scheduled_deletion_at',
          'applications.team_id',
          'teams.name as team_name',
        ])
        .where('applications.id', '=', id)
        .executeTakeFirst();
      if (!app?.scheduled_deletion_at) return undefined;
      const names = async (table: 'services' | 'container_services' | 'volumes') =>
        (
          await db.selectFrom(table).select('name').where('application_id', '=', id).orderBy('name').execute()
        ).map((r) => r.name);
      const count = async (table: 'secrets' | 'deployments') =>
        Number(
          (
            await db
              .selectFrom(table)
              .select((eb) => eb.fn.countAll().as('n'))
              .where('application_id', '=', id)
              .executeTakeFirstOrThrow()
          ).n,
        );
      const domains = await db
        .selectFrom('domains')
        .select('domain')
        .where('application_id', '=', id)
        .orderBy('domain')
        .execute();
      return {
        id: app.id,
        name: app.name,
        team_id: app.team_id,
        team_name: app.team_name,
        scheduled_deletion_at: app.scheduled_deletion_at,
        domains: domains.map((d) => d.domain),
        services: [...(await names('services')), ...(await names('container_services'))],
        volumes: await names('volumes'),
        secrets: await count('secrets'),
        deployments: await count('deployments'),
      };
    },

    /** Deletes the application; its children go with it by cascade. */
    deleteApplication: (id: number) => db.deleteFrom('applications').where('id', '=', id).execute(),

    insertTombstone: (values: Insertable<ApplicationTombstonesTable>) =>
      db.insertInto('application_tombstones').values(values).execute(),

    /** The application's current schedule (null without one, undefined without the application). */
    scheduleOf: async (id: number): Promise<string | null | undefined> =>
      (
        await db
          .selectFrom('applications')
          .select('scheduled_deletion_at')
          .where('id', '=', id)
          .executeTakeFirst()
      )?.scheduled_deletion_at,
  };
}
