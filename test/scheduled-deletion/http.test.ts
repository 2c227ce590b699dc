// The HTTP rules of scheduled deletion: validation (422), ownership (403/404), the dashboard's rule 1
// (409 without a schedule) and the team's outbox.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { insertApplication } from './helpers.js';

const NOW = '2026-06-01T12:00:00.000Z';

interface Body {
  message?: string;
  errors?: Record<string, string[]>;
  data?: { state: string; scheduled_deletion_at: string | null };
}

describe.each(DIALECTS)('scheduled deletion over HTTP (%s)', (dialect) => {
  let t: TestApp;
  let other: CreatedUser;
  let own: number;
  let foreign: number;
  const clock = createManualClock(NOW);

  const call = (method: 'PATCH' | 'PUT' | 'POST' | 'GET', url: string, payload?: unknown, as?: CreatedUser) =>
    t.request({
      method,
      url,
      headers: as ? authHeaders(as).platform : t.auth.platform,
      ...(payload === undefined ? {} : { payload: payload as object }),
    });

  beforeAll(async () => {
    t = await createTestApp(dialect, { clock });
    other = await t.ctx.identity.createUser({ email: 'other@example.org', team: 'globex' });
    own = await insertApplication(t.ctx.db, { teamId: t.user.team_id, name: 'web' });
    foreign = await insertApplication(t.ctx.db, {
      teamId: other.team_id,
      name: 'web',
      domains: ['web.globex.example'],
    });
  });
  afterAll(() => t.close());

  it('rejects what is not a future ISO 8601 time with 422, naming the field', async () => {
    const bad: unknown[] = [
      'tomorrow',
      '', // not a way to cancel: only null is
      '2026-13-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-06-02T12:00:00', // no zone: local time of an unknown place
      '2026-06-01T12:00:00Z', // now is not the future
      '2026-05-31T00:00:00Z',
      12345,
      true,
    ];
    for (const value of bad) {
      const res = await call('PATCH', `/api/v1/applications/${own}`, { scheduled_deletion_at: value });
      expect(res.statusCode, JSON.stringify(value)).toBe(422);
      expect(res.json<Body>().errors?.scheduled_deletion_at?.length).toBe(1);
    }
    const missing = await call('PATCH', `/api/v1/applications/${own}`, {});
    expect(missing.statusCode).toBe(422);
    expect(missing.json<Body>().errors).toEqual({
      scheduled_deletion_at: ['The scheduled_deletion_at field is required.'],
    });
    const extra = await call('PUT', `/api/v1/applications/${own}`, {
      scheduled_deletion_at: null,
      webroot_path: '/public',
    });
    expect(extra.statusCode).toBe(422);
    expect(Object.keys(extra.json<Body>().errors ?? {})).toEqual(['webroot_path']);
    const stored = await t.ctx.db
      .selectFrom('applications')
      .select('scheduled_deletion_at')
      .where('id', '=', own)
      .executeTakeFirstOrThrow();
    expect(stored.scheduled_deletion_at).toBeNull();
  });

  it('normalises accepted times to UTC and answers with the schedule', async () => {
    const accepted: Array<[string, string]> = [
      ['2026-06-01T12:01Z', '2026-06-01T12:01:00.000Z'],
      ['2026-06-10T08:30:15.5+02:00', '2026-06-10T06:30:15.500Z'],
      ['2026-06-10T08:30:00-0530', '2026-06-10T14:00:00.000Z'],
      ['2026-07-01', '2026-07-01T00:00:00.000Z'],
    ];
    for (const [input, normalised] of accepted) {
      const res = await call('PATCH', `/api/v1/applications/${own}`, { scheduled_deletion_at: input });
      expect(res.statusCode, input).toBe(200);
      expect(res.json<Body>().data).toMatchObject({ state: 'scheduled', scheduled_deletion_at: normalised });
    }
    const read = await call('GET', `/api/v1/applications/${own}/scheduled-deletion`);
    expect(read.json<Body>().data?.scheduled_deletion_at).toBe('2026-07-01T00:00:00.000Z');
    const cleared = await call('PATCH', `/api/v1/applications/${own}`, { scheduled_deletion_at: null });
    expect(cleared.json<Body>().data).toMatchObject({ state: 'no_schedule', scheduled_deletion_at: null });
  });

  it('answers 404 for no application and 403 for another team’s', async () => {
    for (const id of ['999999', 'abc', '1e3']) {
      const res = await call('PATCH', `/api/v1/applications/${id}`, { scheduled_deletion_at: null });
      expect(res.statusCode, id).toBe(404);
    }
    for (const [method, url] of [
      ['PATCH', `/api/v1/applications/${foreign}`],
      ['PUT', `/api/v1/applications/${foreign}`],
      ['GET', `/api/v1/applications/${foreign}/scheduled-deletion`],
      ['POST', `/api/v1/applications/${foreign}/scheduled-deletion/reschedule`],
      ['POST', `/api/v1/applications/${foreign}/scheduled-deletion/cancel`],
      ['GET', `/api/v1/teams/${other.team_id}/notifications`],
      ['GET', `/api/v1/teams/globex/notifications`],
    ] as const) {
      const res = await call(method, url, method === 'GET' ? undefined : { scheduled_deletion_at: null });
      expect(res.statusCode, `${method} ${url}`).toBe(403);
      // Team ids are sequential: a 403 names nothing the caller may not see.
      expect(res.body, `${method} ${url}`).not.toContain('globex');
    }
    expect((await call('GET', '/api/v1/teams/nobody/notifications')).statusCode).toBe(404);
    const untouched = await t.ctx.db
      .selectFrom('applications')
      .select('scheduled_deletion_at')
      .where('id', '=', foreign)
      .executeTakeFirstOrThrow();
    expect(untouched.scheduled_deletion_at).toBeNull();
  });

  it('rule 1: the dashboard endpoints change or cancel a schedule but never create one (409)', async () => {
    const reschedule = `/api/v1/applications/${own}/scheduled-deletion/reschedule`;
    const cancel = `/api/v1/applications/${own}/scheduled-deletion/cancel`;
    const none = await call('POST', reschedule, { scheduled_deletion_at: '2026-06-20T00:00:00Z' });
    expect(none.statusCode).toBe(409);
    expect(none.json<Body>().message).toMatch(/no scheduled deletion/);
    expect((await call('POST', cancel)).statusCode).toBe(409);

    await call('PATCH', `/api/v1/applications/${own}`, { scheduled_deletion_at: '2026-06-20T00:00:00Z' });
    expect((await call('POST', reschedule, { scheduled_deletion_at: null })).statusCode).toBe(422);
    expect((await call('POST', reschedule, { scheduled_deletion_at: 'soon' })).statusCode).toBe(422);
    const moved = await call('POST', reschedule, { scheduled_deletion_at: '2026-06-25T00:00:00Z' });
    expect(moved.statusCode).toBe(200);
    expect(moved.json<Body>().data?.scheduled_deletion_at).toBe('2026-06-25T00:00:00.000Z');
    const cancelled = await call('POST', cancel);
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json<Body>().data?.state).toBe('no_schedule');
    expect((await call('POST', cancel)).statusCode).toBe(409);
  });

  it("lists a team's outbox, newest first, without other teams' messages", async () => {
    // No SMTP configured here: the warnings stay unsent and are shown.
    await call('PATCH', `/api/v1/applications/${own}`, { scheduled_deletion_at: '2026-06-03T12:00:00Z' });
    await t.ctx.db
      .updateTable('applications')
      .set({ scheduled_deletion_at: '2026-06-01T15:00:00.000Z' })
      .where('id', '=', foreign)
      .execute();
    clock.set('2026-06-01T12:01:00.000Z');
    await t.ctx.services.jobs.runner().runDue();
    const res = await call('GET', `/api/v1/teams/${t.user.team_id}/notifications`);
    expect(res.statusCode).toBe(200);
    const data = res.json<{ data: Array<Record<string, unknown>> }>().data;
    expect(data).toHaveLength(1);
    expect(data[0]).toMatchObject({
      kind: 'deletion_warning_7d',
      application_id: own,
      recipient: 'owner@example.com',
      state: 'unsent',
      attempts: 0,
      last_error: null,
      scheduled_for: '2026-06-03T12:00:00.000Z',
      sent_at: null,
    });
    expect(data[0]?.subject).toContain('"web" (team acme)');
    const theirs = await call('GET', '/api/v1/teams/globex/notifications', undefined, other);
    const theirData = theirs.json<{ data: Array<Record<string, unknown>> }>().data;
    expect(theirData.map((n) => [n.kind, n.recipient])).toEqual([
      ['deletion_warning_1d', 'other@example.org'],
    ]);
  });
});
