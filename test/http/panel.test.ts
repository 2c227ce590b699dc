// The dashboard's serving (src/http/routes/panel.ts): its page at `/` and its own paths, hashed assets
// cached for a year, a CSP, a page that says how to build when there is no build, and no API path
// shadowed. And the two sets of routes the panel added to /api/v1 so that it needs no other
// credential: the /1.3 operations under /api/v1/managed-databases/{uuid}/… and the tools under
// /api/v1/user/tools/…, each with its owner checks.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { PANEL_CSP } from '../../src/http/routes/panel.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { listenOnSocket, type RequestOverSocket } from '../helpers/http.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from '../infrastructure/helpers.js';

describe('the dashboard is served at / and its own paths only', () => {
  let t: TestApp;
  let dir: string;
  let app: Awaited<ReturnType<typeof buildApp>>;
  let bare: Awaited<ReturnType<typeof buildApp>>;
  let appRequest: RequestOverSocket;
  let bareRequest: RequestOverSocket;
  beforeAll(async () => {
    t = await createTestApp('sqlite');
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-panel-'));
    fs.mkdirSync(path.join(dir, 'assets'));
    fs.writeFileSync(
      path.join(dir, 'index.html'),
      '<!doctype html><script src="/assets/index-abc123.js"></script>',
    );
    fs.writeFileSync(path.join(dir, 'assets', 'index-abc123.js'), 'console.log(1)');
    fs.writeFileSync(path.join(dir, 'secret.txt'), 'not an asset');
    app = await buildApp(t.ctx, { panelDir: dir, checkResponses: true });
    bare = await buildApp(t.ctx, { panelDir: path.join(dir, 'missing') });
    appRequest = (await listenOnSocket(app)).request;
    bareRequest = (await listenOnSocket(bare)).request;
  });
  afterAll(async () => {
    await app.close();
    await bare.close();
    await t.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('answers the page at / and under the panel prefixes, never cached, with a CSP', async () => {
    for (const url of ['/', '/apps', '/apps/12', '/sign-in/link', '/databases/abc/def', '/account']) {
      const response = await appRequest({ url, headers: { accept: 'text/html' } });
      expect(response.statusCode, url).toBe(200);
      expect(response.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(response.headers['cache-control']).toBe('no-cache');
      expect(response.headers['content-security-policy']).toBe(PANEL_CSP);
      expect(response.headers['x-content-type-options']).toBe('nosniff');
      expect(response.body).toContain('/assets/index-abc123.js');
    }
    expect(PANEL_CSP).toContain("script-src 'self'");
    expect(PANEL_CSP).not.toContain('unsafe');
  });

  it('serves hashed assets for a year and nothing outside the assets folder', async () => {
    const asset = await appRequest({ url: '/assets/index-abc123.js' });
    expect(asset.statusCode).toBe(200);
    expect(asset.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    for (const url of [
      '/assets/missing.js',
      '/assets/..%2Fsecret.txt',
      '/assets/../secret.txt',
      '/assets/x.txt',
    ]) {
      const response = await appRequest({ url });
      expect(response.statusCode, url).toBe(404);
      expect(response.body).not.toContain('not an asset');
    }
  });

  it('shadows no API path: unknown ones keep their JSON 404', async () => {
    for (const url of ['/api/v1/nothing', '/1.3/nothing', '/schemas/nothing', '/appsx', '/nothing']) {
      const response = await appRequest({ url });
      expect(response.statusCode, url).toBe(404);
      expect(response.headers['content-type']).toContain('application/json');
    }
    expect((await appRequest({ url: '/readyz' })).json()).toEqual({ status: 'ready' });
    expect((await appRequest({ url: '/openapi.json' })).statusCode).toBe(200);
  });

  it('says how to build the panel when it is not built', async () => {
    const response = await bareRequest({ url: '/' });
    expect(response.statusCode).toBe(200);
    expect(response.body).toContain('npm run build');
    expect((await bareRequest({ url: '/assets/index-abc123.js' })).statusCode).toBe(404);
  });
});

describe.each(DIALECTS)('routes the panel added to /api/v1 (%s)', (dialect) => {
  let t: TestApp;
  let uuid: string;
  let stranger: ReturnType<typeof authHeaders>;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    expect((await apply(t, fullDocument(t.user.team_id))).statusCode).toBe(200);
    const list = await t.request({
      url: `/api/v1/teams/${t.user.team_id}/managed-databases`,
      headers: t.auth.platform,
    });
    uuid = list.json<{ data: Array<{ uuid: string }> }>().data[0]!.uuid;
    stranger = authHeaders(await t.ctx.identity.createUser({ email: 'eve@example.com', team: 'eve' }));
  });
  afterAll(() => t.close());

  it('serves the /1.3 operations to the database team, refuses others before the body, and needs a credential', async () => {
    const operations: Array<[string, string, Record<string, unknown> | undefined]> = [
      ['POST', 'tasks', { operation: 'upgrade_check', target_version: '16' }],
      ['GET', 'tasks/some-task', undefined],
      ['POST', 'migration', { source_service_uri: 'postgres://u:p@example.com/db' }],
      ['DELETE', 'migration', undefined],
      ['GET', 'migration-status', undefined],
      ['POST', 'upgrade', { target_version: '16' }],
      ['POST', 'maintenance', undefined],
      ['POST', 'clone', { name: 'copy' }],
    ];
    for (const [method, tail, body] of operations) {
      const url = `/api/v1/managed-databases/${uuid}/${tail}`;
      const send = (headers: Record<string, string>, payload = body) =>
        t.request({
          method: method,
          url,
          headers,
          ...(payload === undefined ? {} : { payload }),
        });
      const other = await send(
        stranger.platform,
        method === 'GET' || method === 'DELETE' ? undefined : { bad: 1 },
      );
      expect(other.statusCode, `${method} ${tail} by another team`).toBe(403);
      expect(Object.keys(other.json<object>()), 'the platform API’s error shape').toEqual(['message']);
      expect((await send({}, undefined)).statusCode, `${method} ${tail} without a credential`).toBe(401);
      // The /1.3 credential is not this API's.
      expect((await send(t.auth.dbApi)).statusCode).toBe(401);
      const unknown = await t.request({
        method: method,
        url: `/api/v1/managed-databases/00000000-0000-0000-0000-000000000000/${tail}`,
        headers: t.auth.platform,
        ...(body === undefined ? {} : { payload: body }),
      });
      expect(unknown.statusCode).toBe(404);
    }
    // The team's own call reaches the use case: the database is not provisioned, so the migration
    // status is the idle one, as on /1.3.
    const status = await t.request({
      url: `/api/v1/managed-databases/${uuid}/migration-status`,
      headers: t.auth.platform,
    });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({ status: 'done', method: '' });
    const same = await t.request({ url: `/1.3/database/${uuid}/migration-status`, headers: t.auth.dbApi });
    expect(status.json()).toEqual(same.json());
    const invalid = await t.request({
      method: 'POST',
      url: `/api/v1/managed-databases/${uuid}/clone`,
      headers: t.auth.platform,
      payload: { name: 'Not A Name' },
    });
    expect(invalid.statusCode).toBe(422);
    expect(invalid.json<{ errors: Record<string, unknown> }>().errors).toHaveProperty('name');
  });

  it('serves the tools balance and usage to an API token, with the same credits as the tools key', async () => {
    const viaToken = await t.request({ url: '/api/v1/user/tools/balance', headers: t.auth.platform });
    const viaKey = await t.request({ url: '/api/v1/tools/balance', headers: t.auth.tools });
    expect(viaToken.statusCode).toBe(200);
    expect(viaToken.json()).toEqual(viaKey.json());
    expect((await t.request({ url: '/api/v1/user/tools/balance', headers: t.auth.tools })).statusCode).toBe(
      401,
    );
    expect((await t.request({ url: '/api/v1/tools/balance', headers: t.auth.platform })).statusCode).toBe(
      401,
    );
    const usage = await t.request({ url: '/api/v1/user/tools/usage', headers: t.auth.platform });
    expect(usage.statusCode).toBe(200);
    expect(usage.json()).toMatchObject({ data: [] });
  });
});
