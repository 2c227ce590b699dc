// People signing in: passwords, browser sessions, sign-in links, account mail, and the membership
// changes a team's owners make. The only SQL about them.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { AccountMailState, Role, SessionsTable } from '../schema/foundation.js';
import type { Database } from '../schema/index.js';

type Db = Kysely<Database> | Transaction<Database>;

/** A browser session as read back: every column but its token's hash. */
export type SessionRow = Pick<Selectable<SessionsTable>, (typeof sessionColumns)[number]>;

const sessionColumns = [
  'id',
  'user_id',
  'user_agent',
  'address',
  'created_at',
  'last_seen_at',
  'expires_at',
  'revoked_at',
] as const;

export function createAccountsRepository(db: Db) {
  return {
    setPasswordHash: async (userId: number, hash: string | null): Promise<void> => {
      await db.updateTable('users').set({ password_hash: hash }).where('id', '=', userId).execute();
    },

    async insertSession(values: {
      user_id: number;
      token_hash: string;
      user_agent: string;
      address: string;
      created_at: string;
      expires_at: string;
    }): Promise<number> {
      const row = await db
        .insertInto('sessions')
        .values({ ...values, last_seen_at: values.created_at })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },
    /** A session that is neither revoked nor expired at `now`. */
    findLiveSession: (tokenHash: string, now: string): Promise<SessionRow | undefined> =>
      db
        .selectFrom('sessions')
        .select(sessionColumns)
        .where('token_hash', '=', tokenHash)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now)
        .executeTakeFirst(),
    listLiveSessions: (userId: number, now: string): Promise<SessionRow[]> =>
      db
        .selectFrom('sessions')
        .select(sessionColumns)
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null)
        .where('expires_at', '>', now)
        .orderBy('id')
        .execute(),
    touchSession: async (id: number, at: string): Promise<void> => {
      await db.updateTable('sessions').set({ last_seen_at: at }).where('id', '=', id).execute();
    },
    /** Revokes one live session of the user; false when there is none such. */
    async revokeSession(userId: number, id: number, at: string): Promise<boolean> {
      const result = await db
        .updateTable('sessions')
        .set({ revoked_at: at })
        .where('id', '=', id)
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },
    /** Revokes every live session of the user but `keep`. */
    revokeOtherSessions: async (userId: number, keep: number | undefined, at: string): Promise<void> => {
      let query = db
        .updateTable('sessions')
        .set({ revoked_at: at })
        .where('user_id', '=', userId)
        .where('revoked_at', 'is', null);
      if (keep !== undefined) query = query.where('id', '!=', keep);
      await query.execute();
    },

    insertSignInLink: async (values: {
      user_id: number;
      token_hash: string;
      created_at: string;
      expires_at: string;
    }): Promise<void> => {
      await db.insertInto('sign_in_links').values(values).execute();
    },
    /** Marks an unused, unexpired link used and returns its user; undefined when there is none such. */
    async useSignInLink(tokenHash: string, now: string): Promise<number | undefined> {
      const row = await db
        .updateTable('sign_in_links')
        .set({ used_at: now })
        .where('token_hash', '=', tokenHash)
        .where('used_at', 'is', null)
        .where('expires_at', '>', now)
        .returning('user_id')
        .executeTakeFirst();
      return row?.user_id;
    },

    async insertMail(values: {
      user_id: number;
      recipient: string;
      subject: string;
      body_encrypted: string;
      created_at: string;
    }): Promise<number> {
      const row = await db
        .insertInto('account_mail')
        .values({ ...values, state: 'outbox' })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },
    markMail: async (
      id: number,
      state: AccountMailState,
      at: string,
      error: string | null,
    ): Promise<void> => {
      await db
        .updateTable('account_mail')
        .set({ state, last_error: error, ...(state === 'sent' ? { sent_at: at } : {}) })
        .where('id', '=', id)
        .execute();
    },
    /** The mail of one user still waiting for a way out (no SMTP server, or sending failed). */
    unsentMail: (userId: number) =>
      db
        .selectFrom('account_mail')
        .selectAll()
        .where('user_id', '=', userId)
        .where('state', '!=', 'sent')
        .orderBy('id')
        .execute(),

    setRole: async (teamId: number, userId: number, role: Role): Promise<void> => {
      await db
        .updateTable('memberships')
        .set({ role })
        .where('team_id', '=', teamId)
        .where('user_id', '=', userId)
        .execute();
    },
    removeMembership: async (teamId: number, userId: number): Promise<void> => {
      await db
        .deleteFrom('memberships')
        .where('team_id', '=', teamId)
        .where('user_id', '=', userId)
        .execute();
    },
    countOwners: async (teamId: number): Promise<number> =>
      Number(
        (
          await db
            .selectFrom('memberships')
            .select((eb) => eb.fn.countAll().as('n'))
            .where('team_id', '=', teamId)
            .where('role', '=', 'owner')
            .executeTakeFirstOrThrow()
        ).n,
      ),
  };
}
