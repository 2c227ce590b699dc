// The credit ledger: reserve one credit before the work, refund it if the work fails.
// Atomicity comes from one conditional UPDATE (`used + 1 <= allowance`) inside a transaction: on
// PostgreSQL the row lock makes concurrent reservations (also from other replicas) queue on the row and
// re-check the condition; on SQLite writers are serialised. So the balance can never go below zero.
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema/index.js';
import type { ToolsLedgerKind } from '../../db/schema/tools.js';
import type { Clock } from '../../domain/clock.js';
import { creditBalance, creditPeriodOf, nextReset, type CreditBalance } from '../../domain/credits.js';
import { AppError } from '../../domain/errors.js';

export interface Reservation {
  chargeId: number;
  userId: number;
  period: string;
  /** Remaining credits right after this reservation. */
  remaining: number;
}

export interface LedgerEntry {
  id: number;
  type: ToolsLedgerKind;
  operation: string;
  amount: number;
  period: string;
  refund_of: number | null;
  reason: string | null;
  request_id: string | null;
  created_at: string;
}

export interface CreditLedger {
  reserve(userId: number, operation: string, requestId?: string): Promise<Reservation>;
  refund(reservation: Reservation, reason: string): Promise<void>;
  balance(userId: number): Promise<CreditBalance>;
  usage(userId: number, options: { limit: number; beforeId?: number | undefined }): Promise<LedgerEntry[]>;
  /** Sets one user's monthly allowance; null returns the user to the server-wide default. */
  setAllowance(userId: number, credits: number | null): Promise<void>;
}

export function createCreditLedger(deps: {
  db: Kysely<Database>;
  clock: Clock;
  /** The server-wide monthly allowance, for users without one of their own. */
  allowance: () => number;
}): CreditLedger {
  const { db, clock } = deps;

  async function allowanceOf(userId: number): Promise<number> {
    const row = await db
      .selectFrom('users')
      .select('tools_monthly_credits')
      .where('id', '=', userId)
      .executeTakeFirst();
    return row?.tools_monthly_credits ?? deps.allowance();
  }

  function noCredits(now: Date, allowance: number): AppError {
    const resetsAt = nextReset(now).toISOString();
    return new AppError(
      'insufficient_credits',
      `Insufficient credits: the monthly allowance of ${allowance} credits is used up. Credits reset on ${resetsAt}.`,
      { headers: { 'x-credits-remaining': '0', 'x-credits-reset': resetsAt } },
    );
  }

  return {
    async reserve(userId, operation, requestId) {
      const now = clock.now();
      const period = creditPeriodOf(now);
      const allowance = await allowanceOf(userId);
      const at = now.toISOString();
      const result = await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('tools_credit_usage')
          .values({ user_id: userId, period, used: 0, updated_at: at })
          .onConflict((oc) => oc.columns(['user_id', 'period']).doNothing())
          .execute();
        const updated = await trx
          .updateTable('tools_credit_usage')
          .set((eb) => ({ used: eb('used', '+', 1), updated_at: at }))
          .where('user_id', '=', userId)
          .where('period', '=', period)
          .where((eb) => eb(eb('used', '+', 1), '<=', allowance))
          .returning('used')
          .executeTakeFirst();
        if (!updated) return undefined;
        const charge = await trx
          .insertInto('tools_ledger')
          .values({
            user_id: userId,
            period,
            kind: 'charge',
            operation,
            amount: 1,
            refund_of: null,
            reason: null,
            request_id: requestId ?? null,
            created_at: at,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        return { chargeId: charge.id, used: updated.used };
      });
      if (!result) throw noCredits(now, allowance);
      return { chargeId: result.chargeId, userId, period, remaining: Math.max(0, allowance - result.used) };
    },

    async refund(reservation, reason) {
      const at = clock.now().toISOString();
      await db.transaction().execute(async (trx) => {
        const charge = await trx
          .selectFrom('tools_ledger')
          .select(['operation', 'request_id'])
          .where('id', '=', reservation.chargeId)
          .executeTakeFirst();
        if (!charge) return;
        // refund_of is unique: a second refund of the same charge fails here and changes nothing.
        const inserted = await trx
          .insertInto('tools_ledger')
          .values({
            user_id: reservation.userId,
            period: reservation.period,
            kind: 'refund',
            operation: charge.operation,
            amount: -1,
            refund_of: reservation.chargeId,
            reason: reason.slice(0, 500),
            request_id: charge.request_id,
            created_at: at,
          })
          .onConflict((oc) => oc.column('refund_of').doNothing())
          .returning('id')
          .executeTakeFirst();
        if (!inserted) return;
        await trx
          .updateTable('tools_credit_usage')
          .set((eb) => ({ used: eb('used', '-', 1), updated_at: at }))
          .where('user_id', '=', reservation.userId)
          .where('period', '=', reservation.period)
          .where('used', '>', 0)
          .execute();
      });
    },

    async balance(userId) {
      const now = clock.now();
      const row = await db
        .selectFrom('tools_credit_usage')
        .select('used')
        .where('user_id', '=', userId)
        .where('period', '=', creditPeriodOf(now))
        .executeTakeFirst();
      return creditBalance(await allowanceOf(userId), row?.used ?? 0, now);
    },

    async setAllowance(userId, credits) {
      if (credits !== null && (!Number.isInteger(credits) || credits < 0)) {
        throw new AppError('validation', 'credits must be a whole number of at least 0');
      }
      await db
        .updateTable('users')
        .set({ tools_monthly_credits: credits })
        .where('id', '=', userId)
        .execute();
    },

    async usage(userId, { limit, beforeId }) {
      let query = db
        .selectFrom('tools_ledger')
        .selectAll()
        .where('user_id', '=', userId)
        .orderBy('id', 'desc')
        .limit(limit);
      if (beforeId !== undefined) query = query.where('id', '<', beforeId);
      const rows = await query.execute();
      return rows.map((r) => ({
        id: r.id,
        type: r.kind,
        operation: r.operation,
        amount: r.amount,
        period: r.period,
        refund_of: r.refund_of,
        reason: r.reason,
        request_id: r.request_id,
        created_at: r.created_at,
      }));
    },
  };
}
