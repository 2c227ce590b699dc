/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Issue 11, item 8: NUL and other control characters in names and path parameters answered 500 on
// the PostgreSQL store; both stores now answer 404 (path) or 422 (query, body, document).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';

describe.each(DIALECTS)('control characters (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  it.each([
    ['GET', '/api/v1/teams/acme%00'],
    ['GET', '/api/v1/teams/ac%01me/export-yaml'],
    ['GET', '/1.3/database/%00abc'],
  ])('%s %s answers 404', async (method, url) => {
    const headers = url.startsWith('/1.3') ? t.auth.dbApi : t.auth.platform;
    const res = await t.request({ method: method, url, headers });
    expect(res.statusCode).toBe(404);
  });

  it('answers 422 for a query parameter holding one', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/api/v1/applications?team=acme%00',
      headers: t.auth.platform,
    });
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json().errors).toHaveProperty(['querystring.team']);
  });

  it('answers 422 for a YAML document whose team or label holds one', async () => {
    for (const [field, text] of [
      ['metadata.team', 'metadata: {name: x, team: "acme\\0"}'],
      [
        'spec.application.label',
        'metadata: {name: x, team: acme}\nspec: {application: {name: x, type: nodejs, label: "a\\x07b"}}',
      ],
      [
        'spec.secrets.0.value',
        'metadata: {name: x, team: acme}\nspec: {secrets: [{key: K, value: "a\\0b"}]}',
      ],
    ]) {
      const res = await t.request({
        method: 'POST',
        url: '/api/v1/infrastructure/apply',
        headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
        payload: `apiVersion: v1\nkind: Infrastructure\n${text}\n`,
      });
      expect(res.statusCode, res.body).toBe(422);
      expect(res.json().errors).toHaveProperty([field!]);
    }
  });

  it('answers 422 for a JSON body whose name holds one', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: t.auth.platform,
      payload: { apiVersion: 'v1', kind: 'Infrastructure', metadata: { name: 'x\u0000', team: 'acme' } },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toHaveProperty(['metadata.name']);
  });

  it('refuses a credential name holding one', async () => {
    await expect(t.ctx.identity.issueCredential(t.user.user_id, 'api_token', 'ci\u0000')).rejects.toThrow(
      /control characters/,
    );
  });
});
