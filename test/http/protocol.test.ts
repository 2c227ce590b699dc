// The spec's status table on every API: 400, 404, 405, 406, 413, 422, 429, 503, and request ids.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../helpers/store.js';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe.each(DIALECTS)('HTTP protocol rules (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_BODY_LIMIT_BYTES: '4096' } });
  });
  afterAll(() => t.close());

  it('answers 405 with Allow for a known path and the wrong method', async () => {
    const res = await t.request({ method: 'PATCH', url: '/api/v1/user', headers: t.auth.platform });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD');
    expect(res.json()).toEqual({ message: expect.stringContaining('PATCH') as string });
  });

  it('answers 404 {message} for an unknown path', async () => {
    const res = await t.request({ url: '/api/v1/nothing-here', headers: t.auth.platform });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toHaveProperty('message');
  });

  it('answers 406 when Accept excludes everything the route produces', async () => {
    const res = await t.request({
      url: '/api/v1/user',
      headers: { ...t.auth.platform, accept: 'text/html' },
    });
    expect(res.statusCode).toBe(406);
    const ok = await t.request({
      url: '/api/v1/user',
      headers: { ...t.auth.platform, accept: 'application/*' },
    });
    expect(ok.statusCode).toBe(200);
  });

  it('carries a request id on every answer', async () => {
    const a = await t.request({ url: '/healthz' });
    const b = await t.request({ url: '/api/v1/user' });
    expect(a.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(b.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(a.headers['x-request-id']).not.toBe(b.headers['x-request-id']);
  });

  it('answers 400 {success:false} for a body that cannot be parsed', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: { ...t.auth.platform, 'content-type': 'application/json' },
      payload: '{"name":',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ success: false, errors: null });
  });

  it('answers 422 {message, errors} for invalid fields', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: t.auth.platform,
      payload: { name: '', extra: 1 },
    });
    expect(res.statusCode).toBe(422);
    const body = res.json<{ message: string; errors: Record<string, string[]> }>();
    expect(Object.keys(body.errors).sort()).toEqual(['extra', 'name']);
  });

  it('answers 413 past the body limit', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: t.auth.platform,
      payload: { name: 'x'.repeat(10_000) },
    });
    expect(res.statusCode).toBe(413);
  });

  it('answers 503 with Retry-After in maintenance mode, except probes', async () => {
    await t.ctx.maintenance.set(true);
    try {
      const res = await t.request({ url: '/api/v1/user', headers: t.auth.platform });
      expect(res.statusCode).toBe(503);
      expect(res.headers['retry-after']).toBe('60');
      expect(res.json()).toMatchObject({ success: false });
      expect((await t.request({ url: '/healthz' })).statusCode).toBe(200);
    } finally {
      await t.ctx.maintenance.set(false);
    }
    expect((await t.request({ url: '/api/v1/user', headers: t.auth.platform })).statusCode).toBe(200);
  });

  it('serves probes and a generated OpenAPI 3.1 document', async () => {
    expect((await t.request({ url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await t.request({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
    const doc = (await t.request({ url: '/openapi.json' })).json<{ openapi: string; paths: object }>();
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/user', '/api/v1/teams/{team}']));
    const ui = await t.request({ url: '/docs/' });
    expect(ui.statusCode).toBe(200);
  });
});

describe('rate limit', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('sqlite', { env: { BERTH_RATE_LIMIT_PER_MINUTE: '3' } });
  });
  afterAll(() => t.close());

  it('answers 429 with Retry-After past the per-credential limit, counting each credential alone', async () => {
    const codes: number[] = [];
    for (let i = 0; i < 4; i++) {
      codes.push((await t.request({ url: '/api/v1/user', headers: t.auth.platform })).statusCode);
    }
    expect(codes).toEqual([200, 200, 200, 429]);
    const limited = await t.request({ url: '/api/v1/user', headers: t.auth.platform });
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    const other = await t.ctx.identity.issueCredential(t.user.user_id, 'api_token');
    const fresh = await t.request({
      url: '/api/v1/user',
      headers: { authorization: `Bearer ${other.token}` },
    });
    expect(fresh.statusCode).toBe(200);
  });
});
