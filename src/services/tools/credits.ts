// The credit ledger: reserve one credit before the work, refund it if the work fails.
// Atomicity comes from one conditional UPDATE (`used + 1 <= allowance`) inside a transaction: on
// PostgreSQL the row lock makes concurrent reservations (also from other replicas) queue on the row and
// re-check the condition; on SQLite writers are serialised. So the balance can never go below zero.
import { auditChange } from '../audit.js';
import type { Kysely } from 'kysely';
import { createCreditRepository } from '../../db/repositories/credits.js';
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
    return (await createCreditRepository(db).allowanceOf(userId)) ?? deps.allowance();
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
        const credits = createCreditRepository(trx);
        const used = await credits.takeCredit(userId, period, allowance, at);
        if (used === undefined) return undefined;
        const chargeId = await credits.insertCharge({
          user_id: userId,
          period,
          kind: 'charge',
          operation,
          amount: 1,
          refund_of: null,
          reason: null,
          request_id: requestId ?? null,
          created_at: at,
        });
        return { chargeId, used };
      });
      if (!result) throw noCredits(now, allowance);
      return { chargeId: result.chargeId, userId, period, remaining: Math.max(0, allowance - result.used) };
    },

    async refund(reservation, reason) {
      const at = clock.now().toISOString();
      await db.transaction().execute(async (trx) => {
        const credits = createCreditRepository(trx);
        const charge = await credits.findEntry(reservation.chargeId);
        if (!charge) return;
        // refund_of is unique: a second refund of the same charge fails here and changes nothing.
        const inserted = await credits.insertRefund({
          user_id: reservation.userId,
          period: reservation.period,
          kind: 'refund',
          operation: charge.operation,
          amount: -1,
          refund_of: reservation.chargeId,
          reason: reason.slice(0, 500),
          request_id: charge.request_id,
          created_at: at,
        });
        if (inserted === undefined) return;
        await credits.returnCredit(reservation.userId, reservation.period, at);
      });
    },

    async balance(userId) {
      const now = clock.now();
      const used = await createCreditRepository(db).used(userId, creditPeriodOf(now));
      return creditBalance(await allowanceOf(userId), used, now);
    },

    async setAllowance(userId, credits) {
      if (credits !== null && (!Number.isInteger(credits) || credits < 0)) {
        throw new AppError('validation', 'credits must be a whole number of at least 0');
      }
      await db.transaction().execute(async (trx) => {
        const before = await createCreditRepository(trx).allowanceOf(userId);
        await createCreditRepository(trx).setAllowance(userId, credits);
        await auditChange(trx, {
          at: clock.now(),
          action: 'credits.update',
          teamId: null,
          target: { kind: 'user', id: userId },
          before: { monthly_credits: before ?? 'default' },
          after: { monthly_credits: credits ?? 'default' },
        });
      });
    },

    async usage(userId, { limit, beforeId }) {
      const rows = await createCreditRepository(db).entriesOf(userId, limit, beforeId);
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
