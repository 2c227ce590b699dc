// Credit periods of the tools API: calendar months in UTC. Pure functions, no I/O.
// The reset "on the 1st" needs no cron: each month is its own period, so the first call of a new month
// finds no usage yet and sees the full allowance.

/** The period (`YYYY-MM`, UTC) that an instant falls in. */
export function creditPeriodOf(at: Date): string {
  const year = at.getUTCFullYear();
  const month = at.getUTCMonth() + 1;
  return `${String(year).padStart(4, '0')}-${String(month).padStart(2, '0')}`;
}

/** First instant of the period containing `at`. */
export function periodStart(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

/** The next reset: 00:00 UTC on the 1st of the month after `at`. */
export function nextReset(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
}

export interface CreditBalance {
  allowance: number;
  used: number;
  remaining: number;
  period: string;
  periodStart: string;
  resetsAt: string;
}

export function creditBalance(allowance: number, used: number, at: Date): CreditBalance {
  return {
    allowance,
    used,
    // If the operator lowers the allowance mid-month, a user may have used more than the new value.
    remaining: Math.max(0, allowance - used),
    period: creditPeriodOf(at),
    periodStart: periodStart(at).toISOString(),
    resetsAt: nextReset(at).toISOString(),
  };
}
