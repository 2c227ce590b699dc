/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Issue 11, items 13 and 14: another team's resource answers 403 whatever the body holds (the
// ownership check runs before body validation), and the 403 does not name the other team.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply } from '../infrastructure/helpers.js';

describe.each(DIALECTS)('authorization before validation (%s)', (dialect) => {
  let t: TestApp;
  let databaseUuid: string;
  let applicationId: number;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    const other = await t.ctx.identity.createUser({ email: 'b@example.com', team: 'teamB' });
    const b = { ...t, user: other, auth: authHeaders(other) };
    const res = await apply(b, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'bapp', team: 'teamB' },
      spec: {
        application: { name: 'bapp', type: 'nodejs' },
        managed_databases: [{ name: 'bdb', type: 'pg', plan: '1x1xCPU-2GB-25GB', zone: 'de-fra1' }],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    applicationId = res.json().application_id;
    const list = await t.request({ url: '/1.3/database', headers: b.auth.dbApi });
    databaseUuid = list.json()[0].uuid;
  });
  afterAll(() => t.close());

  it.each([
    ['/1.3 upgrade', 'POST', () => `/1.3/database/${databaseUuid}/upgrade`, { target_version: 7 }],
    ['/1.3 clone', 'POST', () => `/1.3/database/${databaseUuid}/clone`, { nope: true }],
    ['/1.3 migration', 'POST', () => `/1.3/database/${databaseUuid}/migration`, { nope: 1 }],
    [
      'platform reschedule',
      'POST',
      () => `/api/v1/applications/${applicationId}/scheduled-deletion/reschedule`,
      { scheduled_deletion_at: 12, extra: true },
    ],
  ] as const)('%s of another team with a bad body answers 403', async (_name, method, url, payload) => {
    const path = url();
    const headers = path.startsWith('/1.3') ? t.auth.dbApi : t.auth.platform;
    const res = await t.request({ method, url: path, headers, payload });
    expect(res.statusCode, res.body).toBe(403);
  });

  it('does not name the other team in a 403', async () => {
    const byId = await t.request({ url: `/api/v1/teams/${t.user.team_id + 1}`, headers: t.auth.platform });
    expect(byId.statusCode).toBe(403);
    expect(byId.body).not.toContain('teamB');
  });
});
