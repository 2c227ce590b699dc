// The pure rules: which warning is due (nearest only, never after the deletion), timestamp parsing,
// and the SMTP URL's own `from` parameter.
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { defaultSender, parseSmtpUrl } from '../../src/drivers/mail/index.js';
import {
  DAY_MS,
  describeTimeLeft,
  dueWarning,
  formatUtc,
  parseScheduleTimestamp,
} from '../../src/services/scheduled-deletion/policy.js';

const NOW = new Date('2026-01-01T00:00:00.000Z');
const after = (ms: number) => new Date(NOW.getTime() + ms);

describe('dueWarning', () => {
  it('is the nearest warning whose moment has passed, and none at or after the deletion time', () => {
    expect(dueWarning(after(7 * DAY_MS + 1), NOW)).toBeUndefined();
    expect(dueWarning(after(7 * DAY_MS), NOW)).toBe('7d');
    expect(dueWarning(after(2 * DAY_MS), NOW)).toBe('7d');
    expect(dueWarning(after(DAY_MS + 1), NOW)).toBe('7d');
    expect(dueWarning(after(DAY_MS), NOW)).toBe('1d');
    expect(dueWarning(after(3 * 3_600_000), NOW)).toBe('1d');
    expect(dueWarning(after(1), NOW)).toBe('1d');
    expect(dueWarning(after(0), NOW)).toBeUndefined();
    expect(dueWarning(after(-60_000), NOW)).toBeUndefined();
  });

  it('never asks for the 7-day warning inside the last day, nor for anything more than 7 days out', () => {
    fc.assert(
      fc.property(fc.integer({ min: -30 * DAY_MS, max: 30 * DAY_MS }), (left) => {
        const kind = dueWarning(after(left), NOW);
        if (left <= 0 || left > 7 * DAY_MS) return kind === undefined;
        return kind === (left <= DAY_MS ? '1d' : '7d');
      }),
    );
  });
});

describe('parseScheduleTimestamp', () => {
  it('normalises to UTC milliseconds and rejects zone-less, impossible and past times', () => {
    expect(parseScheduleTimestamp('2026-01-02T03:04:05Z', NOW)).toEqual({
      ok: true,
      value: '2026-01-02T03:04:05.000Z',
    });
    expect(parseScheduleTimestamp('2026-01-02T03:04+01:00', NOW)).toEqual({
      ok: true,
      value: '2026-01-02T02:04:00.000Z',
    });
    expect(parseScheduleTimestamp('2026-01-02', NOW)).toEqual({
      ok: true,
      value: '2026-01-02T00:00:00.000Z',
    });
    for (const bad of ['2026-01-02T03:04:05', '2026-02-29T00:00Z', '2026-01-02T24:00Z', 'x', '', null, 1]) {
      expect(parseScheduleTimestamp(bad, NOW).ok, String(bad)).toBe(false);
    }
    expect(parseScheduleTimestamp('2026-01-01T00:00:00Z', NOW).ok).toBe(false);
  });

  it('agrees with Date on every valid instant it accepts', () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('2026-01-02T00:00:00Z'),
          max: new Date('2099-12-31T00:00:00Z'),
          noInvalidDate: true,
        }),
        (date) => {
          const parsed = parseScheduleTimestamp(date.toISOString(), NOW);
          return parsed.ok && parsed.value === date.toISOString();
        },
      ),
    );
  });
});

describe('texts', () => {
  it('describes the time left and the time in UTC', () => {
    expect(describeTimeLeft(7 * DAY_MS)).toBe('7 days');
    expect(describeTimeLeft(DAY_MS)).toBe('1 day');
    expect(describeTimeLeft(3 * 3_600_000 + 5)).toBe('3 hours');
    expect(describeTimeLeft(90_000)).toBe('1 minute');
    expect(formatUtc('2026-01-02T03:04:00.000Z')).toBe('2026-01-02 03:04 UTC');
    expect(formatUtc('2026-01-02T03:04:05.000Z')).toBe('2026-01-02 03:04:05 UTC');
  });
});

describe('SMTP URL', () => {
  it('takes the sender from ?from= and leaves nodemailer its own parameters', () => {
    expect(parseSmtpUrl('smtp://u:p@mail.example.com:587/?from=a%40b.c&ignoreTLS=true', 'x')).toEqual({
      transportUrl: 'smtp://u:p@mail.example.com:587/?ignoreTLS=true',
      from: 'a@b.c',
    });
    expect(parseSmtpUrl('smtps://mail.example.com', 'Berth <d@e.f>').from).toBe('Berth <d@e.f>');
    expect(defaultSender('https://berth.example.com')).toBe('Berth <no-reply@berth.example.com>');
    expect(defaultSender('http://127.0.0.1:8080')).toBe('Berth <no-reply@berth.local>');
  });
});
