// The SQL of an application's deletion schedule (src/services/scheduled-deletion/schedules.ts).
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';

type Db = Kysely<Database> | Transaction<Database>;

/** An application's deletion schedule: its columns of `applications` (the markers are scheduled deletion's). */
export type ScheduleRow = Pick<
  Selectable<Database['applications']>,
  'id' | 'name' | 'team_id' | 'scheduled_deletion_at' | 'deletion_warning_7d_for' | 'deletion_warning_1d_for'
>;

export function createScheduleRepository(db: Db) {
  return {
    find: (applicationId: number): Promise<ScheduleRow | undefined> =>
      db
        .selectFrom('applications')
        .select([
          'id',
          'name',
          'team_id',
          'scheduled_deletion_at',
          'deletion_warning_7d_for',
          'deletion_warning_1d_for',
        ])
        .where('id', '=', applicationId)
        .executeTakeFirst(),

    /**
     * Sets (or, with null, clears) the schedule; `onlyExisting` changes only a schedule that exists, in
     * the UPDATE itself, so a cancellation racing with the request cannot slip a new schedule in.
     * False when no row was changed.
     */
    async set(
      applicationId: number,
      value: string | null,
      at: string,
      onlyExisting: boolean,
    ): Promise<boolean> {
      let update = db
        .updateTable('applications')
        .set({ scheduled_deletion_at: value, updated_at: at })
        .where('id', '=', applicationId);
      if (onlyExisting) update = update.where('scheduled_deletion_at', 'is not', null);
      const result = await update.executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },
  };
}
