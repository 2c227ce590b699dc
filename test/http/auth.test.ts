// Every route answers 401 without, with a malformed, a revoked, or another kind's credential.
import { AUTH_FAILURES_PER_NAME } from '../../src/http/plugins/auth.js';
import { PANEL_PATHS } from '../../src/http/routes/panel.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../helpers/store.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import type { CreatedUser } from '../../src/services/identity.js';

const OPEN = [
  '/healthz',
  '/readyz',
  '/openapi.json',
  // Signing in (test/http/accounts.test.ts): a password or a link token is what they check.
  '/api/v1/auth/sign-in',
  '/api/v1/auth/sign-in-links',
  '/api/v1/auth/sign-in-links/consume',
  // Artifacts by the short-lived URL Berth signed (test/runtime/artifacts.test.ts): the signature is
  // the credential.
  '/internal/artifacts/*',
  // A forge's push event (POST; test/runtime/git-webhook.test.ts): the application's git webhook
  // secret signs it. Reading that secret (GET, same path) needs an owner's token.
  '/api/v1/applications/:id/git-webhook',
  // The dashboard's page and assets (src/http/routes/panel.ts): it signs in through the routes above.
  ...PANEL_PATHS,
];

describe.each(DIALECTS)('authentication (%s)', (dialect) => {
  let t: TestApp;
  let revoked: CreatedUser;
  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_TRUSTED_PROXIES: '127.0.0.1/32' } });
    revoked = await t.ctx.identity.createUser({ email: 'gone@example.com', team: 'acme' });
    for (const row of await t.ctx.identity.listCredentials(revoked.user_id)) {
      await t.ctx.identity.revokeCredential(revoked.user_id, row.id);
    }
  });
  afterAll(() => t.close());

  it('only probes, the OpenAPI document, the docs UI and the sign-in routes are open', () => {
    const open = t.app.routeTable.filter((r) => r.auth === 'none').map((r) => r.url);
    for (const url of open)
      expect(OPEN.includes(url) || url.startsWith('/docs') || url.startsWith('/schemas/')).toBe(true);
  });

  it('answers 401 on every route for a missing, malformed, revoked or wrong-kind credential', async () => {
    const good = authHeaders(t.user);
    const gone = authHeaders(revoked);
    const guarded = t.app.routeTable.filter((r) => r.auth !== 'none' && r.method !== 'HEAD');
    expect(guarded.length).toBeGreaterThan(5);
    // Each route from its own address, so the failed-authentication throttle (auth-throttle.test.ts)
    // is not what answers; the revoked /1.3 username is tried on the first routes only, for the same reason.
    let revokedNameTries = 0;
    for (const [index, { method, url, auth }] of guarded.entries()) {
      const path = url.replace(/:(\w+)/g, '1');
      const own = auth === 'db_api' ? good.dbApi : auth === 'tools_key' ? good.tools : good.platform;
      const wrongKinds = [good.platform, good.tools, good.dbApi].filter((h) => h !== own);
      const variants: Array<Record<string, string>> = [
        {},
        { authorization: '' },
        { authorization: 'Bearer' },
        { authorization: 'Basic !!!' },
        { authorization: 'two words here' },
        ...(auth !== 'db_api' || (revokedNameTries += 1) < AUTH_FAILURES_PER_NAME
          ? [auth === 'db_api' ? gone.dbApi : auth === 'tools_key' ? gone.tools : gone.platform]
          : []),
        ...wrongKinds,
      ];
      for (const headers of variants) {
        // The session probe answers signed out (200, data null) when nothing is presented: accounts.test.ts.
        if (url === '/api/v1/auth/session' && Object.keys(headers).length === 0) continue;
        const res = await t.request({
          method: method,
          url: path,
          // Each case from an address of its own (through a trusted proxy), so the throttle stays out of it.
          headers: { ...headers, 'x-forwarded-for': `10.9.${index >> 8}.${index & 255}` },
        });
        expect(res.statusCode, `${method} ${path} with ${JSON.stringify(headers)}`).toBe(401);
        expect(res.json()).toHaveProperty(path.startsWith('/1.3') ? 'error_code' : 'message');
      }
    }
  });

  it('accepts the right credential', async () => {
    const res = await t.request({ url: '/api/v1/user', headers: t.auth.platform });
    expect(res.statusCode).toBe(200);
    expect(res.json<{ data: { email: string } }>().data.email).toBe('owner@example.com');
  });
});
