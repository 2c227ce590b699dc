// The SQL of the mail outbox (src/services/notifications/index.ts): one row per message, written in the
// transaction of the change that caused it, then marked sent, failed or cancelled by its send job.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';
import type { NotificationsTable } from '../schema/scheduled-deletion.js';

type Db = Kysely<Database> | Transaction<Database>;

export type NotificationRow = Selectable<NotificationsTable>;

export function createNotificationRepository(db: Db) {
  return {
    async insert(values: Insertable<NotificationsTable>): Promise<number> {
      const row = await db
        .insertInto('notifications')
        .values(values)
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    find: (id: number): Promise<NotificationRow | undefined> =>
      db.selectFrom('notifications').selectAll().where('id', '=', id).executeTakeFirst(),

    /** A team's messages, newest first, `limit` at most, before the id `beforeId` when given. */
    listForTeam(teamId: number, limit: number, beforeId?: number) {
      let query = db
        .selectFrom('notifications')
        .select([
          'id',
          'kind',
          'application_id',
          'recipient',
          'subject',
          'body',
          'state',
          'attempts',
          'last_error',
          'scheduled_for',
          'created_at',
          'sent_at',
        ])
        .where('team_id', '=', teamId);
      if (beforeId !== undefined) query = query.where('id', '<', beforeId);
      return query.orderBy('id', 'desc').limit(limit).execute();
    },

    /** Ids of the messages still to send, oldest first. */
    unsentIds: async (limit: number): Promise<number[]> =>
      (
        await db
          .selectFrom('notifications')
          .select('id')
          .where('state', '=', 'unsent')
          .orderBy('id')
          .limit(limit)
          .execute()
      ).map((row) => row.id),

    /** Cancels the message if it is still unsent. */
    cancelUnsent: (id: number, at: string) =>
      db
        .updateTable('notifications')
        .set({ state: 'cancelled', updated_at: at })
        .where('id', '=', id)
        .where('state', '=', 'unsent')
        .execute(),

    /**
     * Closes the application's messages still unsent: cancelled, or, when they could never have been
     * sent (no mail server), `not_sent` with that reason.
     */
    closeUnsentOfApplication: (applicationId: number, at: string, notSentReason: string | undefined) =>
      db
        .updateTable('notifications')
        .set(
          notSentReason !== undefined
            ? { state: 'not_sent', last_error: notSentReason, updated_at: at }
            : { state: 'cancelled', updated_at: at },
        )
        .where('application_id', '=', applicationId)
        .where('state', '=', 'unsent')
        .execute(),

    /** A failed attempt: counted, with its error; `last` marks the message failed for good. */
    recordFailure: (id: number, error: string, last: boolean, at: string) =>
      db
        .updateTable('notifications')
        .set((eb) => ({
          attempts: eb('attempts', '+', 1),
          last_error: error,
          state: last ? 'failed' : 'unsent',
          updated_at: at,
        }))
        .where('id', '=', id)
        .execute(),

    markSent: (id: number, at: string) =>
      db
        .updateTable('notifications')
        .set((eb) => ({
          state: 'sent',
          attempts: eb('attempts', '+', 1),
          last_error: null,
          sent_at: at,
          updated_at: at,
        }))
        .where('id', '=', id)
        .execute(),
  };
}
