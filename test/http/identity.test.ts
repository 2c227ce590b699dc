import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../helpers/store.js';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe.each(DIALECTS)('identity API (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    await t.ctx.identity.createUser({ email: 'other@example.com', team: 'globex' });
  });
  afterAll(() => t.close());

  it('shows the caller and their teams', async () => {
    const res = await t.request({ url: '/api/v1/user', headers: t.auth.platform });
    expect(res.json()).toMatchObject({
      data: { id: t.user.user_id, email: 'owner@example.com', teams: [{ name: 'acme', role: 'owner' }] },
    });
    const teams = await t.request({ url: '/api/v1/teams', headers: t.auth.platform });
    expect(teams.json<{ data: unknown[] }>().data).toHaveLength(1);
  });

  it('shows a team by id or name, 403 for a team of others, 404 for none', async () => {
    const byId = await t.request({ url: `/api/v1/teams/${t.user.team_id}`, headers: t.auth.platform });
    expect(byId.statusCode).toBe(200);
    expect(byId.json()).toMatchObject({ data: { name: 'acme', members: [{ email: 'owner@example.com' }] } });
    expect((await t.request({ url: '/api/v1/teams/acme', headers: t.auth.platform })).statusCode).toBe(200);
    const other = await t.request({ url: '/api/v1/teams/globex', headers: t.auth.platform });
    expect(other.statusCode).toBe(403);
    expect(other.json()).toEqual({ message: expect.any(String) as string });
    expect((await t.request({ url: '/api/v1/teams/9999', headers: t.auth.platform })).statusCode).toBe(404);
  });

  it.each([
    ['/api/v1/user/tokens', 'token'],
    ['/api/v1/user/tools-keys', 'token'],
    ['/api/v1/user/database-credentials', 'password'],
  ])('creates, lists and revokes credentials at %s; the secret is shown once', async (path, secretField) => {
    const created = await t.request({
      method: 'POST',
      url: path,
      headers: t.auth.platform,
      payload: { name: 'ci' },
    });
    expect(created.statusCode).toBe(201);
    const issued = created.json<{ data: Record<string, string | number> }>().data;
    expect(typeof issued[secretField]).toBe('string');
    const list = await t.request({ url: path, headers: t.auth.platform });
    const listed = list.json<{ data: Array<Record<string, unknown>> }>().data;
    expect(listed.some((c) => c.id === issued.id && c.name === 'ci')).toBe(true);
    expect(JSON.stringify(listed)).not.toContain(String(issued[secretField]));
    const revoke = await t.request({
      method: 'DELETE',
      url: `${path}/${issued.id}`,
      headers: t.auth.platform,
    });
    expect(revoke.statusCode).toBe(204);
    const again = await t.request({
      method: 'DELETE',
      url: `${path}/${issued.id}`,
      headers: t.auth.platform,
    });
    expect(again.statusCode).toBe(404);
  });

  it('a revoked API token stops working at once', async () => {
    const created = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: t.auth.platform,
    });
    const { id, token } = created.json<{ data: { id: number; token: string } }>().data;
    const headers = { authorization: `Bearer ${token}` };
    expect((await t.request({ url: '/api/v1/user', headers })).statusCode).toBe(200);
    await t.request({ method: 'DELETE', url: `/api/v1/user/tokens/${id}`, headers: t.auth.platform });
    expect((await t.request({ url: '/api/v1/user', headers })).statusCode).toBe(401);
  });

  it('cannot revoke another user’s credential', async () => {
    const other = await t.ctx.identity.createUser({ email: 'third@example.com', team: 'initech' });
    const [credential] = await t.ctx.identity.listCredentials(other.user_id, 'api_token');
    const res = await t.request({
      method: 'DELETE',
      url: `/api/v1/user/tokens/${credential?.id ?? 0}`,
      headers: t.auth.platform,
    });
    expect(res.statusCode).toBe(404);
    const still = await t.request({
      url: '/api/v1/user',
      headers: { authorization: `Bearer ${other.api_token}` },
    });
    expect(still.statusCode).toBe(200);
  });

  it('stores credentials only as hashes', async () => {
    const rows = await t.ctx.db.selectFrom('credentials').selectAll().execute();
    const dump = JSON.stringify(rows);
    expect(dump).not.toContain(t.user.api_token);
    expect(dump).not.toContain(t.user.tools_api_key);
    expect(dump).not.toContain(t.user.db_api_password);
  });
});
