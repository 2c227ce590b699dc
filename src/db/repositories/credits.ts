// The SQL of the tools' credit ledger (src/services/tools/credits.ts): each user's allowance, the credits
// used per month, and the ledger of every charge and refund.
import type { Insertable, Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ToolsLedgerTable } from '../schema/tools.js';

type Db = Kysely<Database> | Transaction<Database>;

export type LedgerRow = Selectable<ToolsLedgerTable>;

export function createCreditRepository(db: Db) {
  return {
    /** The user's own monthly allowance: null for the server-wide default, undefined without the user. */
    allowanceOf: async (userId: number): Promise<number | null | undefined> =>
      (
        await db
          .selectFrom('users')
          .select('tools_monthly_credits')
          .where('id', '=', userId)
          .executeTakeFirst()
      )?.tools_monthly_credits,

    setAllowance: (userId: number, credits: number | null) =>
      db.updateTable('users').set({ tools_monthly_credits: credits }).where('id', '=', userId).execute(),

    /** Credits the user has used in the period (0 before the first call). */
    used: async (userId: number, period: string): Promise<number> =>
      (
        await db
          .selectFrom('tools_credit_usage')
          .select('used')
          .where('user_id', '=', userId)
          .where('period', '=', period)
          .executeTakeFirst()
      )?.used ?? 0,

    /**
     * Takes one credit of the period when one is left under `allowance`: the condition is in the UPDATE,
     * so concurrent reservations queue on the row and re-check it. The credits now used, or undefined.
     */
    async takeCredit(
      userId: number,
      period: string,
      allowance: number,
      at: string,
    ): Promise<number | undefined> {
      await db
        .insertInto('tools_credit_usage')
        .values({ user_id: userId, period, used: 0, updated_at: at })
        .onConflict((oc) => oc.columns(['user_id', 'period']).doNothing())
        .execute();
      const updated = await db
        .updateTable('tools_credit_usage')
        .set((eb) => ({ used: eb('used', '+', 1), updated_at: at }))
        .where('user_id', '=', userId)
        .where('period', '=', period)
        .where((eb) => eb(eb('used', '+', 1), '<=', allowance))
        .returning('used')
        .executeTakeFirst();
      return updated?.used;
    },

    /** Gives one credit of the period back (never below zero). */
    returnCredit: (userId: number, period: string, at: string) =>
      db
        .updateTable('tools_credit_usage')
        .set((eb) => ({ used: eb('used', '-', 1), updated_at: at }))
        .where('user_id', '=', userId)
        .where('period', '=', period)
        .where('used', '>', 0)
        .execute(),

    async insertCharge(values: Insertable<ToolsLedgerTable>): Promise<number> {
      const row = await db
        .insertInto('tools_ledger')
        .values(values)
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    /** Writes a refund; undefined when the charge was refunded already (refund_of is unique). */
    async insertRefund(values: Insertable<ToolsLedgerTable>): Promise<number | undefined> {
      const row = await db
        .insertInto('tools_ledger')
        .values(values)
        .onConflict((oc) => oc.column('refund_of').doNothing())
        .returning('id')
        .executeTakeFirst();
      return row?.id;
    },

    findEntry: (id: number): Promise<LedgerRow | undefined> =>
      db.selectFrom('tools_ledger').selectAll().where('id', '=', id).executeTakeFirst(),

    /** The user's entries, newest first, before `beforeId` when given. */
    entriesOf(userId: number, limit: number, beforeId?: number): Promise<LedgerRow[]> {
      let query = db
        .selectFrom('tools_ledger')
        .selectAll()
        .where('user_id', '=', userId)
        .orderBy('id', 'desc')
        .limit(limit);
      if (beforeId !== undefined) query = query.where('id', '<', beforeId);
      return query.execute();
    },
  };
}
