// The audit log (issue 31, item 2): every change route declares its action, and each one exercised here
// with valid input writes exactly one entry (action, team, actor, credential, address); a refused
// request writes none; secret values never reach before/after; a change whose transaction fails leaves
// no entry; the team's log is its owners' to read, with filters and paging.
//
// Routes whose valid input needs running engines (deployments, one-off commands, managed-database
// operations) are exercised by the test files named in ELSEWHERE: the test app is strict
// (buildApp's checkResponses), so each of their 2xx answers is a 500 there unless the route recorded
// exactly its declared action.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import type { AuditedRoutes } from '../../src/http/plugins/audit.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from '../infrastructure/helpers.js';

const SECRET_VALUE = 'sk-live-AUDIT-never-logged-7f3c';
const PASSWORD = 'correct horse battery staple';

/** Change routes whose valid input needs engines, and the test file that exercises each. */
const ELSEWHERE: Record<string, string> = {
  'PATCH /1.3/database/:uuid': 'test/dbapi/replay.test.ts',
  'POST /1.3/database/:uuid/tasks': 'test/dbapi/operations.test.ts',
  'POST /1.3/database/:uuid/migration': 'test/dbapi/operations.test.ts',
  'DELETE /1.3/database/:uuid/migration': 'test/dbapi/migration-stop.test.ts',
  'POST /1.3/database/:uuid/upgrade': 'test/dbapi/upgrade.test.ts',
  'POST /1.3/database/:uuid/maintenance': 'test/dbapi/operations.test.ts',
  'POST /1.3/database/:uuid/clone': 'test/dbapi/operations.test.ts',
  'DELETE /1.3/database/:uuid': 'test/dbapi/replay.test.ts',
  'POST /api/v1/managed-databases/:uuid/tasks': 'test/dbapi/operations.test.ts',
  'POST /api/v1/managed-databases/:uuid/migration': 'test/dbapi/operations.test.ts',
  'DELETE /api/v1/managed-databases/:uuid/migration': 'test/dbapi/migration-stop.test.ts',
  'POST /api/v1/managed-databases/:uuid/upgrade': 'test/dbapi/upgrade.test.ts',
  'POST /api/v1/managed-databases/:uuid/maintenance': 'test/dbapi/operations.test.ts',
  'POST /api/v1/managed-databases/:uuid/clone': 'test/dbapi/operations.test.ts',
  'POST /api/v1/managed-databases/:uuid/apply-pending-change':
    'test/managed-databases/managed-databases.test.ts',
  'POST /api/v1/teams/:team/object-storage/:storage/apply-pending-change':
    'test/infrastructure/pending-changes.test.ts',
  'POST /api/v1/applications/:id/deploy': 'test/runtime/applications.test.ts',
  'POST /api/v1/applications/:id/rollback': 'test/runtime/applications.test.ts',
  'POST /api/v1/applications/:id/exec': 'test/runtime/sandbox.test.ts',
  'POST /api/v1/applications/:id/source': 'test/runtime/source.test.ts',
  'POST /api/v1/applications/:id/services/:service/restart': 'test/app-services/services.test.ts',
  'POST /api/v1/teams/:team/webhooks': 'test/http/webhooks.test.ts',
  'DELETE /api/v1/teams/:team/webhooks/:id': 'test/http/webhooks.test.ts',
  'POST /api/v1/applications/:id/git-webhook': 'test/runtime/git-webhook.test.ts',
  'POST /api/v1/applications/:id/git-webhook/rotate': 'test/runtime/git-webhook.test.ts',
  'PUT /api/v1/teams/:team/object-storage/:storage/buckets/:bucket/acl':
    'test/infrastructure/bucket-acls.test.ts',
};

interface Row {
  id: number;
  action: string;
  team_id: number | null;
  actor: string | null;
  credential: string | null;
  address: string | null;
  target_kind: string | null;
  target: string;
  before_state: string | null;
  after_state: string | null;
}

describe.each(DIALECTS)('audit log (%s)', (dialect) => {
  let t: TestApp;
  let routes: AuditedRoutes;
  let member: Record<string, string>;
  let appId: number;

  const entries = (afterId = 0): Promise<Row[]> =>
    t.ctx.db
      .selectFrom('audit_log')
      .select([
        'id',
        'action',
        'team_id',
        'actor',
        'credential',
        'address',
        'target_kind',
        'target',
        'before_state',
        'after_state',
      ])
      .where('id', '>', afterId)
      .orderBy('id')
      .execute();
  const lastId = async () => (await entries()).at(-1)?.id ?? 0;

  beforeAll(async () => {
    t = await createTestApp(dialect);
    routes = new Map();
    // The route table as Berth registers it (a second instance on the same context; it never listens).
    const table = await buildApp(t.ctx, { auditedRoutes: routes });
    await table.close();
    member = authHeaders(
      await t.ctx.identity.createUser({ email: 'member@example.com', team: 'acme', role: 'member' }),
    ).platform;
    const doc = fullDocument(t.user.team_id, 'audited') as { spec: Record<string, unknown> };
    doc.spec.secrets = [{ key: 'API_KEY', value: SECRET_VALUE }];
    doc.spec.managed_databases = [];
    const applied = await apply(t, doc);
    expect(applied.statusCode).toBe(200);
    appId = applied.json<{ application_id: number }>().application_id;
  });
  afterAll(() => t.close());

  it('refuses to register a change route that declares no audit action', async () => {
    const Fastify = (await import('fastify')).default;
    const { registerAuditLog } = await import('../../src/http/plugins/audit.js');
    const app = Fastify();
    registerAuditLog(app);
    app.post('/declared', { config: { audit: 'thing.create' } }, () => ({}));
    app.get('/read', () => ({}));
    expect(() => app.delete('/undeclared', () => ({}))).toThrow(/declares no audit action/);
    await app.close();
  });

  it('writes exactly one entry for each change route, with its action, team, actor and credential', async () => {
    const owner = t.auth.platform;
    const team = t.user.team_id;
    const email = t.user.email;
    await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
    const json = <T>(response: { json<U>(): U }) => response.json<T>();
    const signIn = () =>
      t.request({ method: 'POST', url: '/api/v1/auth/sign-in', payload: { email, password: PASSWORD } });
    const session = async () => {
      const response = await signIn();
      const body = json<{ data: { csrf_token: string; session: { id: number } } }>(response);
      return {
        headers: {
          cookie: String(response.headers['set-cookie']).split(';')[0]!,
          'x-csrf-token': body.data.csrf_token,
        },
        id: body.data.session.id,
      };
    };

    type Exercise = () => Promise<{
      status: number;
      team: number | null;
      actor?: string;
      credential?: RegExp;
    }>;
    const token = /^api_token:\d+$/;
    const call =
      (method: string, url: string | (() => Promise<string> | string), payload?: unknown, headers = owner) =>
      async (expected: { team: number | null; actor?: string; credential?: RegExp } = { team }) => {
        const path = typeof url === 'string' ? url : await url();
        const response = await t.request({ method, url: path, headers, ...(payload ? { payload } : {}) });
        return { status: response.statusCode, credential: token, ...expected };
      };
    const credentialId = async (path: string) =>
      json<{ data: { id: number } }>(await t.request({ method: 'POST', url: path, headers: owner })).data.id;
    const storage = async () => {
      const list = await t.request({ url: `/api/v1/teams/${team}/object-storage`, headers: owner });
      return json<{ data: Array<{ name: string }> }>(list).data[0]!.name;
    };
    let newTeam = 0;
    let invited = 0;

    const exercises: Record<string, Exercise> = {
      'POST /api/v1/user/tokens': () => call('POST', '/api/v1/user/tokens', { name: 'ci' })({ team: null }),
      'DELETE /api/v1/user/tokens/:id': async () =>
        call('DELETE', `/api/v1/user/tokens/${await credentialId('/api/v1/user/tokens')}`)({ team: null }),
      'POST /api/v1/user/tools-keys': () => call('POST', '/api/v1/user/tools-keys')({ team: null }),
      'DELETE /api/v1/user/tools-keys/:id': async () =>
        call(
          'DELETE',
          `/api/v1/user/tools-keys/${await credentialId('/api/v1/user/tools-keys')}`,
        )({ team: null }),
      'POST /api/v1/user/database-credentials': () =>
        call('POST', '/api/v1/user/database-credentials')({ team: null }),
      'DELETE /api/v1/user/database-credentials/:id': async () =>
        call(
          'DELETE',
          `/api/v1/user/database-credentials/${await credentialId('/api/v1/user/database-credentials')}`,
        )({ team: null }),
      'POST /api/v1/auth/sign-in': async () => ({
        status: (await signIn()).statusCode,
        team: null,
        actor: email,
        credential: /^none$/,
      }),
      'POST /api/v1/auth/sign-in-links': async () => {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/auth/sign-in-links',
          payload: { email },
        });
        return { status: response.statusCode, team: null, actor: email, credential: /^none$/ };
      },
      'POST /api/v1/auth/sign-in-links/consume': async () => {
        const link = await t.ctx.services.accounts.signInLinkFor(t.user.user_id);
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/auth/sign-in-links/consume',
          payload: { token: link.split('#token=')[1] },
        });
        return { status: response.statusCode, team: null, actor: email, credential: /^none$/ };
      },
      'POST /api/v1/auth/sign-out': async () => {
        const browser = await session();
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/auth/sign-out',
          headers: browser.headers,
        });
        return { status: response.statusCode, team: null, credential: new RegExp(`^session:${browser.id}$`) };
      },
      'DELETE /api/v1/user/sessions/:id': async () => {
        const browser = await session();
        return call('DELETE', `/api/v1/user/sessions/${browser.id}`)({ team: null });
      },
      'PUT /api/v1/user/password': () =>
        call('PUT', '/api/v1/user/password', { password: PASSWORD, current_password: PASSWORD })({
          team: null,
        }),
      'POST /api/v1/teams': async () => {
        const response = await t.request({
          method: 'POST',
          url: '/api/v1/teams',
          headers: owner,
          payload: { name: 'audited-team' },
        });
        newTeam = json<{ data: { id: number } }>(response).data.id;
        return { status: response.statusCode, team: newTeam, credential: token };
      },
      'POST /api/v1/teams/:team/members': async () => {
        const response = await t.request({
          method: 'POST',
          url: `/api/v1/teams/${newTeam}/members`,
          headers: owner,
          payload: { email: 'invited@example.com' },
        });
        invited = json<{ data: { id: number } }>(response).data.id;
        return { status: response.statusCode, team: newTeam, credential: token };
      },
      'PATCH /api/v1/teams/:team/members/:user': () =>
        call('PATCH', () => `/api/v1/teams/${newTeam}/members/${invited}`, { role: 'owner' })({
          team: newTeam,
        }),
      'DELETE /api/v1/teams/:team/members/:user': () =>
        call('DELETE', () => `/api/v1/teams/${newTeam}/members/${invited}`)({ team: newTeam }),
      'POST /api/v1/teams/:team/leave': async () => {
        // The member leaves their team (acme keeps its owner).
        const response = await t.request({
          method: 'POST',
          url: `/api/v1/teams/${team}/leave`,
          headers: member,
        });
        return { status: response.statusCode, team, actor: 'member@example.com', credential: token };
      },
      'POST /api/v1/infrastructure/apply': async () => {
        const doc = fullDocument(team, 'audited') as { spec: Record<string, unknown> };
        doc.spec.secrets = [{ key: 'API_KEY', value: `${SECRET_VALUE}-2` }];
        doc.spec.managed_databases = [];
        return { status: (await apply(t, doc)).statusCode, team, credential: token };
      },
      'DELETE /api/v1/applications/:id/domains/:item': () =>
        call('DELETE', `/api/v1/applications/${appId}/domains/audited.example.com`)(),
      'DELETE /api/v1/applications/:id/secrets/:item': () =>
        call('DELETE', `/api/v1/applications/${appId}/secrets/API_KEY`)(),
      'DELETE /api/v1/applications/:id/volumes/:item': () =>
        call('DELETE', `/api/v1/applications/${appId}/volumes/storage`)(),
      'PATCH /api/v1/applications/:id': () =>
        call('PATCH', `/api/v1/applications/${appId}`, { scheduled_deletion_at: '2030-01-01T00:00:00Z' })(),
      'PUT /api/v1/applications/:id': () =>
        call('PUT', `/api/v1/applications/${appId}`, { scheduled_deletion_at: '2030-02-01T00:00:00Z' })(),
      'POST /api/v1/applications/:id/scheduled-deletion/reschedule': () =>
        call('POST', `/api/v1/applications/${appId}/scheduled-deletion/reschedule`, {
          scheduled_deletion_at: '2030-03-01T00:00:00Z',
        })(),
      'POST /api/v1/applications/:id/scheduled-deletion/cancel': () =>
        call('POST', `/api/v1/applications/${appId}/scheduled-deletion/cancel`)(),
      'POST /api/v1/applications/:id/suspend': () => call('POST', `/api/v1/applications/${appId}/suspend`)(),
      'POST /api/v1/applications/:id/resume': () => call('POST', `/api/v1/applications/${appId}/resume`)(),
      'DELETE /api/v1/teams/:team/object-storage/:storage': async () =>
        call('DELETE', `/api/v1/teams/${team}/object-storage/${await storage()}`)(),
      'DELETE /api/v1/managed-databases/:uuid': async () => {
        const doc = fullDocument(team, 'audited') as { spec: Record<string, unknown> };
        doc.spec.secrets = [{ key: 'API_KEY', value: `${SECRET_VALUE}-2` }];
        expect((await apply(t, doc)).statusCode).toBe(200);
        const list = await t.request({ url: `/api/v1/teams/${team}/managed-databases`, headers: owner });
        const uuid = json<{ data: Array<{ uuid: string }> }>(list).data[0]!.uuid;
        return call('DELETE', `/api/v1/managed-databases/${uuid}`)();
      },
      // Last: the application is being deleted afterwards.
      'DELETE /api/v1/applications/:id': () => call('DELETE', `/api/v1/applications/${appId}`)(),
    };

    // Every change route is exercised here, elsewhere (named), or changes nothing by its declaration.
    const changeRoutes = [...routes].filter(([, audit]) => typeof audit === 'string').map(([key]) => key);
    expect(changeRoutes.filter((key) => !exercises[key] && !ELSEWHERE[key])).toEqual([]);
    expect(Object.keys(exercises).filter((key) => !routes.has(key))).toEqual([]);

    for (const [key, exercise] of Object.entries(exercises)) {
      const before = await lastId();
      const expected = await exercise();
      expect(expected.status, key).toBeLessThan(300);
      // Only what the route itself wrote: the exercise's own preparations are before `mark`.
      const written = (await entries(before)).filter((e) => e.action === routes.get(key));
      expect(
        written.map((e) => e.action),
        key,
      ).toEqual([routes.get(key)]);
      const [entry] = written;
      expect(entry!.team_id, key).toBe(expected.team);
      expect(entry!.actor, key).toBe(expected.actor ?? email);
      expect(entry!.credential, key).toMatch(expected.credential ?? token);
      expect(entry!.address, key).toBe('127.0.0.1');
      expect(entry!.target, key).not.toBe('');
    }
  });

  it('writes nothing for a refused request (401, 403, 404, 409, 422)', async () => {
    const before = await lastId();
    const refused = [
      await t.request({ method: 'POST', url: '/api/v1/user/tokens', payload: { name: 'x' } }),
      await t.request({
        method: 'POST',
        url: `/api/v1/teams/${t.user.team_id}/members`,
        headers: member,
        payload: { email: 'y@example.com' },
      }),
      await t.request({
        method: 'DELETE',
        url: '/api/v1/applications/999999/secrets/API_KEY',
        headers: t.auth.platform,
      }),
      await t.request({
        method: 'POST',
        url: `/api/v1/teams/${t.user.team_id}/members`,
        headers: t.auth.platform,
        payload: { email: t.user.email },
      }),
      await t.request({
        method: 'POST',
        url: '/api/v1/teams',
        headers: t.auth.platform,
        payload: { name: '' },
      }),
    ];
    expect(refused.map((r) => r.statusCode)).toEqual([401, 403, 404, 409, 422]);
    expect(await entries(before)).toEqual([]);
  });

  it('keeps secret values out of before and after', async () => {
    const all = JSON.stringify(await entries());
    expect(all).not.toContain(SECRET_VALUE);
    expect(all).not.toContain(PASSWORD);
    expect(all).not.toContain(t.user.api_token);
    const secretRemoved = (await entries()).find((e) => e.action === 'secret.delete');
    expect(JSON.parse(secretRemoved!.before_state!)).toMatchObject({ name: 'API_KEY' });
  });

  it('leaves no entry when the change fails inside its transaction', async () => {
    const doc = fullDocument(t.user.team_id, 'rolled-back') as { spec: Record<string, unknown> };
    doc.spec.managed_databases = [];
    doc.spec.object_storage = [];
    doc.spec.domains = [{ domain: 'rolled-back.example.com' }];
    const applied = await apply(t, doc);
    expect(applied.statusCode).toBe(200);
    const id = applied.json<{ application_id: number }>().application_id;
    // The deletion's job is the transaction's last write, after the audit entry: the store refuses it.
    if (dialect === 'sqlite') {
      await sql`CREATE TRIGGER refuse_deletion BEFORE INSERT ON jobs WHEN NEW.type = 'scheduled_deletion.delete'
        BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`.execute(t.ctx.db);
    } else {
      await sql`CREATE FUNCTION refuse_deletion() RETURNS trigger AS $$
        BEGIN RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql`.execute(t.ctx.db);
      await sql`CREATE TRIGGER refuse_deletion BEFORE INSERT ON jobs FOR EACH ROW
        WHEN (NEW.type = 'scheduled_deletion.delete') EXECUTE FUNCTION refuse_deletion()`.execute(t.ctx.db);
    }
    try {
      const before = await lastId();
      const response = await t.request({
        method: 'DELETE',
        url: `/api/v1/applications/${id}`,
        headers: t.auth.platform,
      });
      expect(response.statusCode).toBe(500);
      expect(await entries(before)).toEqual([]);
      const row = await t.ctx.db
        .selectFrom('applications')
        .select('status')
        .where('id', '=', id)
        .executeTakeFirst();
      expect(row?.status).not.toBe('destroying');
    } finally {
      await sql`DROP TRIGGER refuse_deletion${sql.raw(dialect === 'postgres' ? ' ON jobs' : '')}`.execute(
        t.ctx.db,
      );
    }
  });

  it("shows the team's log to its owners only, newest first, filtered and paged", async () => {
    const url = `/api/v1/teams/${t.user.team_id}/audit-log`;
    const stranger = authHeaders(
      await t.ctx.identity.createUser({ email: 'member2@example.com', team: 'acme', role: 'member' }),
    ).platform;
    expect((await t.request({ url, headers: stranger })).statusCode).toBe(403);
    const read = async (query: string) => {
      const response = await t.request({ url: `${url}${query}`, headers: t.auth.platform });
      expect(response.statusCode, response.body).toBe(200);
      return response.json<{
        data: Array<{
          id: number;
          action: string;
          actor: string;
          team_id: number;
          target: { kind: string; id: string };
        }>;
        meta: { limit: number; next_before: number | null };
      }>();
    };
    const all = await read('?limit=500');
    expect(all.data.length).toBeGreaterThan(5);
    expect(all.data.every((e) => e.team_id === t.user.team_id)).toBe(true);
    expect(all.data.map((e) => e.id)).toEqual([...all.data.map((e) => e.id)].sort((a, b) => b - a));

    expect((await read('?action=secret.delete')).data.map((e) => e.action)).toEqual(['secret.delete']);
    const scheduled = (await read('?action=scheduled_deletion.*')).data.map((e) => e.action);
    expect(scheduled).toEqual([
      'scheduled_deletion.cancel',
      'scheduled_deletion.update',
      'scheduled_deletion.update',
      'scheduled_deletion.update',
    ]);
    expect((await read('?actor=member%40example.com')).data.map((e) => e.action)).toEqual(['member.delete']);
    const byTarget = (await read(`?target=application:${appId}&action=application.*`)).data;
    expect(byTarget.map((e) => e.action)).toEqual([
      'application.delete',
      'application.resume',
      'application.suspend',
    ]);
    expect((await read('?since=2999-01-01T00:00:00Z')).data).toEqual([]);
    expect((await read('?until=2000-01-01T00:00:00Z')).data).toEqual([]);

    const first = await read('?limit=2');
    expect(first.meta.next_before).toBe(first.data[1]!.id);
    const second = await read(`?limit=2&before=${first.meta.next_before}`);
    expect(second.data.map((e) => e.id)).toEqual(all.data.slice(2, 4).map((e) => e.id));

    const bad = await t.request({
      url: `${url}?action=DROP%20TABLE&since=yesterday`,
      headers: t.auth.platform,
    });
    expect(bad.statusCode).toBe(422);
  });

  it('prunes entries past BERTH_AUDIT_RETENTION_DAYS', async () => {
    const old = '2000-01-01T00:00:00.000Z';
    await t.ctx.db
      .insertInto('audit_log')
      .values({
        at: old,
        user_id: null,
        team_id: t.user.team_id,
        action: 'old.thing',
        target: 'x',
        details: '{}',
      })
      .execute();
    const total = (await entries()).length;
    expect(await t.ctx.services.audit.prune()).toBe(1);
    expect((await entries()).length).toBe(total - 1);
    expect((await entries()).some((e) => e.action === 'old.thing')).toBe(false);
  });
});
