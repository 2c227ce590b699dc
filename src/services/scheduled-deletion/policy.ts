// The rules of scheduled deletion as pure functions of time: which warning is due, when the next
// thing happens, what counts as a valid schedule. No I/O here.

export const MINUTE_MS = 60_000;
export const DAY_MS = 24 * 60 * MINUTE_MS;
export const SEVEN_DAYS_MS = 7 * DAY_MS;
export const ONE_DAY_MS = DAY_MS;

export type WarningKind = '7d' | '1d';

export const WARNING_LEAD_MS: Record<WarningKind, number> = { '7d': SEVEN_DAYS_MS, '1d': ONE_DAY_MS };

/**
 * The warning to send now for a deletion at `scheduledAt`, or undefined.
 *
 * Nearest-only: of the warnings whose moment has passed, only the nearest one to the deletion is sent.
 * A schedule set 2 days ahead sends the 7-day warning at once (the 1-day one follows at its moment); a
 * schedule set 3 hours ahead sends only the 1-day warning. At or after the deletion time no warning is
 * due at all: the deletion itself is, so a Berth that was down over the deletion time never sends a
 * warning late.
 */
export function dueWarning(scheduledAt: Date, now: Date): WarningKind | undefined {
  const left = scheduledAt.getTime() - now.getTime();
  if (left <= 0) return undefined;
  if (left <= ONE_DAY_MS) return '1d';
  if (left <= SEVEN_DAYS_MS) return '7d';
  return undefined;
}

/** The moment a warning becomes due for a deletion at `scheduledAt`. */
export const warningMoment = (scheduledAt: Date, kind: WarningKind): Date =>
  new Date(scheduledAt.getTime() - WARNING_LEAD_MS[kind]);

// Date, optional time with optional fraction, and a zone. A date-time without a zone is local time in
// ISO 8601, which a server cannot know, so it is rejected rather than guessed.
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?))?$/;

export type ParsedSchedule = { ok: true; value: string } | { ok: false; message: string };

/**
 * Validates a requested deletion time: ISO 8601 with a zone (or a bare date, taken as 00:00 UTC), a real
 * calendar date, and strictly in the future. Returns it normalised to UTC milliseconds
 * (`YYYY-MM-DDTHH:MM:SS.sssZ`), the form every stored timestamp has, so that text order is time order.
 */
export function parseScheduleTimestamp(input: unknown, now: Date): ParsedSchedule {
  if (typeof input !== 'string') {
    return { ok: false, message: 'The scheduled_deletion_at field must be an ISO 8601 timestamp or null.' };
  }
  const match = ISO_8601.exec(input.trim());
  if (!match) {
    return {
      ok: false,
      message:
        'The scheduled_deletion_at field must be an ISO 8601 timestamp with a time zone, e.g. 2030-01-31T12:00:00Z.',
    };
  }
  const [, y, mo, d, h = '00', mi = '00', s = '00', frac = '', zone = 'Z'] = match;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (
    month < 1 ||
    month > 12 ||
    day < 1 ||
    day > daysInMonth ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 59
  ) {
    return {
      ok: false,
      message: `The scheduled_deletion_at field is not a valid date and time: '${input}'.`,
    };
  }
  let offsetMinutes = 0;
  if (zone !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const zh = Number(digits.slice(0, 2));
    const zm = Number(digits.slice(2) || '0');
    if (zh > 23 || zm > 59) {
      return { ok: false, message: `The scheduled_deletion_at field has an invalid time zone: '${zone}'.` };
    }
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (zh * 60 + zm);
  }
  const ms = Number((frac + '000').slice(0, 3));
  const utc =
    Date.UTC(year, month - 1, day, Number(h), Number(mi), Number(s), ms) - offsetMinutes * MINUTE_MS;
  if (!Number.isFinite(utc)) {
    return {
      ok: false,
      message: `The scheduled_deletion_at field is not a valid date and time: '${input}'.`,
    };
  }
  if (utc <= now.getTime()) {
    return { ok: false, message: 'The scheduled_deletion_at field must be a time in the future.' };
  }
  return { ok: true, value: new Date(utc).toISOString() };
}

/** "3 days", "5 hours", "12 minutes": the time left, rounded down to its largest unit. */
export function describeTimeLeft(ms: number): string {
  const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;
  if (ms >= DAY_MS) return plural(Math.floor(ms / DAY_MS), 'day');
  if (ms >= 60 * MINUTE_MS) return plural(Math.floor(ms / (60 * MINUTE_MS)), 'hour');
  return plural(Math.max(1, Math.floor(ms / MINUTE_MS)), 'minute');
}

/** "2030-01-31 12:00 UTC" (seconds shown only when not zero). */
export function formatUtc(timestamp: string): string {
  const date = new Date(timestamp);
  const text = date.toISOString();
  const seconds = date.getUTCSeconds() !== 0 || date.getUTCMilliseconds() !== 0;
  return `${text.slice(0, 10)} ${text.slice(11, seconds ? 19 : 16)} UTC`;
}
