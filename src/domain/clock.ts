// Time and ids come from injected sources so tests can fix both.
import { randomBytes, randomUUID } from 'node:crypto';

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };

/** A clock that tests move by hand. */
export function createManualClock(
  start: Date | string,
): Clock & { set(t: Date | string): void; advance(ms: number): void } {
  let current = new Date(start).getTime();
  return {
    now: () => new Date(current),
    set: (t) => {
      current = new Date(t).getTime();
    },
    advance: (ms) => {
      current += ms;
    },
  };
}

export interface IdGenerator {
  uuid(): string;
  /** URL-safe random token of `bytes` bytes of entropy. */
  token(bytes?: number): string;
}

export const randomIds: IdGenerator = {
  uuid: () => randomUUID(),
  token: (bytes = 32) => randomBytes(bytes).toString('base64url'),
};

/** Timestamps are stored as ISO 8601 UTC text: portable across SQLite and PostgreSQL and sortable. */
export const iso = (date: Date): string => date.toISOString();
