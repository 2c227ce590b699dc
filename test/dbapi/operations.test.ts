// The /1.3 operation routes end to end: a managed PostgreSQL on the local driver, an external
// PostgreSQL started here (not managed by Berth) as the migration source, jobs driven by runDue.
import { pgQuery, withDb } from '../db-operations/fixtures.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { freePort } from '../helpers/processes.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { DIALECTS } from '../helpers/store.js';
import { startWebhookSink } from '../helpers/webhook-sink.js';
import {
  applyManagedDatabase,
  openManagedEnv,
  sharedTemplateDir,
  type ManagedEnv,
} from '../managed-databases/helpers.js';

const SOURCE_PASSWORD = 'Src-pa55/w0rd';
const templates = sharedTemplateDir();
afterAll(() => templates.remove());

interface Task {
  id: string;
  operation: string;
  success: boolean | null;
  result: string;
  result_codes: Array<{ code: string; message: string }>;
  target_version?: string;
  target_pg_version?: string;
}

describe.each(DIALECTS)('/1.3 database operations on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let owner: CreatedUser;
  let stranger: CreatedUser;
  let source: PostgresServer;
  let uuid = '';

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown, user?: CreatedUser) =>
    berth.request({
      method,
      url,
      headers: authHeaders(user ?? owner).dbApi,
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
  const managedUrl = async (db: string): Promise<string> => {
    const object = (await call('GET', `/1.3/database/${uuid}`)).json<{ service_uri: string }>();
    return withDb(object.service_uri.replace(/\?.*$/, ''), db);
  };
  const finishedTask = async (body: unknown): Promise<Task> => {
    const created = await call('POST', `/1.3/database/${uuid}/tasks`, body);
    expect(created.statusCode).toBe(201);
    const task = created.json<Task>();
    expect(task).toMatchObject({ success: null, result: '', result_codes: [] });
    await runJobs();
    const read = await call('GET', `/1.3/database/${uuid}/tasks/${task.id}`);
    expect(read.statusCode).toBe(200);
    expect(read.body).not.toContain(SOURCE_PASSWORD);
    return read.json<Task>();
  };

  beforeAll(async () => {
    [env, source] = await Promise.all([
      openManagedEnv(dialect, templates.dir),
      startPostgres({ password: SOURCE_PASSWORD }),
    ]);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    stranger = await berth.ctx.identity.createUser({ email: 'other@example.com', team: 'other' });
    uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'target-pg',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
      users: [{ username: 'app' }],
    });
    for (const db of ['shop', 'crm']) await pgQuery(source.url, `CREATE DATABASE ${db}`);
    await pgQuery(
      withDb(source.url, 'shop'),
      `CREATE TABLE items (id int PRIMARY KEY, name text);
       INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 300) g;`,
    );
    await pgQuery(
      withDb(source.url, 'crm'),
      `CREATE TABLE people (id int PRIMARY KEY); INSERT INTO people SELECT generate_series(1, 40);`,
    );
    await runJobs();
  }, 60_000);

  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
    await source?.stop();
  });

  it('refuses unknown databases (404), other accounts (403) and malformed bodies (400)', async () => {
    const missing = await call('POST', `/1.3/database/${berth.ctx.ids.uuid()}/tasks`, {
      operation: 'upgrade_check',
      target_version: '16',
    });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({
      error_code: 'SERVICE_NOT_FOUND',
      error: { error_code: 'SERVICE_NOT_FOUND' },
    });
    const foreign = await call('GET', `/1.3/database/${uuid}/migration-status`, undefined, stranger);
    expect(foreign.statusCode).toBe(403);
    expect(foreign.json()).toMatchObject({ error_code: 'ACCOUNT_FORBIDDEN' });
    const unknownField = await call('POST', `/1.3/database/${uuid}/tasks`, {
      operation: 'upgrade_check',
      target_version: '16',
      extra: 1,
    });
    expect(unknownField.statusCode).toBe(400);
    expect(unknownField.json()).toMatchObject({ error_code: 'INVALID_REQUEST' });
    const badOperation = await call('POST', `/1.3/database/${uuid}/tasks`, { operation: 'vacuum' });
    expect(badOperation.json()).toMatchObject({ error_code: 'INVALID_REQUEST' });
    const badUri = await call('POST', `/1.3/database/${uuid}/tasks`, {
      operation: 'migration_check',
      migration_check: { source_service_uri: 'ftp://u:p@host/db' },
    });
    expect(badUri.statusCode).toBe(400);
    expect(badUri.json()).toMatchObject({ error_code: 'INVALID_SOURCE_URI' });
    const mismatch = await call('POST', `/1.3/database/${uuid}/migration`, {
      source_service_uri: 'mysql://root:x@127.0.0.1:3306/',
    });
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json()).toMatchObject({ error_code: 'ENGINE_MISMATCH' });
    const noTask = await call('GET', `/1.3/database/${uuid}/tasks/${berth.ctx.ids.uuid()}`);
    expect(noTask.statusCode).toBe(404);
    expect(noTask.json()).toMatchObject({ error_code: 'TASK_NOT_FOUND' });
  });

  it('runs a migration check against a real source; the password is sealed at rest', async () => {
    const task = await finishedTask({
      operation: 'migration_check',
      migration_check: { source_service_uri: source.url, method: 'dump', ignore_dbs: 'crm' },
    });
    expect(task).toMatchObject({ operation: 'pg_migration_check', success: true });
    // The source has no TLS, which the migration's default (ssl: true) needs: the check says so.
    expect(task.result_codes.map((c) => c.code)).toContain('SSL_NOT_SUPPORTED');
    expect(task.result).toContain('start the migration with "ssl": false');
    // With ssl given, the check connects exactly as that migration will.
    const withTls = await finishedTask({
      operation: 'migration_check',
      migration_check: { source_service_uri: source.url, method: 'dump', ssl: true },
    });
    expect(withTls.success).toBe(false);
    const plain = await finishedTask({
      operation: 'migration_check',
      migration_check: { source_service_uri: source.url, method: 'dump', ssl: false },
    });
    expect(plain).toMatchObject({ success: true });
    expect(plain.result).toContain('passed successfully without TLS');
    expect(plain.result_codes.map((c) => c.code)).not.toContain('SSL_NOT_SUPPORTED');
    const stored = await berth.ctx.db
      .selectFrom('managed_database_tasks')
      .select('request')
      .where('id', '=', task.id)
      .executeTakeFirstOrThrow();
    expect(stored.request).not.toContain(SOURCE_PASSWORD);
    expect(stored.request).not.toContain(encodeURIComponent(SOURCE_PASSWORD));
  });

  it('fails a migration check against an unreachable source with SOURCE_UNREACHABLE', async () => {
    const port = await freePort();
    const task = await finishedTask({
      operation: 'migration_check',
      migration_check: {
        source_service_uri: `postgres://postgres:${SOURCE_PASSWORD}@127.0.0.1:${port}/postgres`,
      },
    });
    expect(task.success).toBe(false);
    expect(task.result_codes.map((c) => c.code)).toContain('SOURCE_UNREACHABLE');
  });

  it("tells the team's webhooks that a task finished, without the source's password", async () => {
    const sink = await startWebhookSink();
    try {
      const registered = await berth.request({
        method: 'POST',
        url: '/api/v1/teams/acme/webhooks',
        headers: authHeaders(owner).platform,
        payload: { url: sink.url, events: ['database.operation.finished'] },
      });
      expect(registered.statusCode, registered.body).toBe(201);
      const port = await freePort();
      const task = await finishedTask({
        operation: 'migration_check',
        migration_check: {
          source_service_uri: `postgres://postgres:${SOURCE_PASSWORD}@127.0.0.1:${port}/postgres`,
        },
      });
      // finishedTask ran the jobs: the task's, then the delivery it queued.
      expect(sink.received).toHaveLength(1);
      const body = JSON.parse(sink.received[0]!.body) as { event: string; data: unknown };
      expect(body.event).toBe('database.operation.finished');
      expect(body.data).toEqual({
        database: { uuid, name: 'target-pg' },
        operation: 'migration_check',
        success: false,
        result: task.result,
      });
      expect(sink.received[0]!.body).not.toContain(SOURCE_PASSWORD);
    } finally {
      await sink.close();
    }
  });

  it('gates the upgrade on a successful upgrade_check for that version', async () => {
    const notNewer = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '15' });
    expect(notNewer.statusCode).toBe(400);
    expect(notNewer.json()).toMatchObject({ error_code: 'UPGRADE_VERSION_NOT_NEWER' });
    const unchecked = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '16' });
    expect(unchecked.statusCode).toBe(409);
    expect(unchecked.json()).toMatchObject({ error_code: 'UPGRADE_CHECK_REQUIRED' });

    const task = await finishedTask({ operation: 'upgrade_check', upgrade_check: { target_version: '16' } });
    expect(task).toMatchObject({
      operation: 'pg_upgrade_check',
      success: true,
      source_pg_version: '15',
      target_pg_version: '16',
    });
    const missing = await finishedTask({ operation: 'upgrade_check', target_version: '17' });
    expect(missing).toMatchObject({ success: false, target_pg_version: '17' });
    expect(missing.result_codes.map((c) => c.code)).toContain('UPGRADE_BINARIES_MISSING');
    expect(missing.result).toBe('PostgreSQL 17 is not installed on this host (the nearest is 16)');
    // A downgrade is refused as such, whatever is installed; no answer shows a server path.
    const older = await finishedTask({ operation: 'upgrade_check', target_version: '14' });
    expect(older).toMatchObject({ success: false, target_pg_version: '14' });
    expect(older.result_codes.map((c) => c.code)).toEqual(['UPGRADE_VERSION_NOT_NEWER']);
    for (const task of [missing, older])
      expect(JSON.stringify(task)).not.toMatch(/\/usr\/|\/tmp\/|node_modules/);
    // A failed check does not open the gate. The upgrade itself runs in test/dbapi/upgrade.test.ts:
    // this suite's database stays on 15 for the clone tests below.
    const failedCheck = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '99' });
    expect(failedCheck.statusCode).toBe(409);
    expect(failedCheck.json()).toMatchObject({ error_code: 'UPGRADE_CHECK_REQUIRED' });
  });

  it('answers maintenance with NO_MAINTENANCE_AVAILABLE when nothing is pending', async () => {
    const response = await call('POST', `/1.3/database/${uuid}/maintenance`);
    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ error_code: 'NO_MAINTENANCE_AVAILABLE' });
  });

  it('migrates by dump: rows equal in the managed database', async () => {
    // Never migrated: UpCloud's idle status, not an error.
    const none = await call('GET', `/1.3/database/${uuid}/migration-status`);
    expect(none.statusCode).toBe(200);
    expect(none.json()).toEqual({
      status: 'done',
      method: '',
      seconds_behind_master: 0,
      source_active: false,
      databases: [],
    });
    const nothingToStop = await call('POST', `/1.3/database/${uuid}/migration`, {
      source_service_uri: null,
    });
    expect(nothingToStop.statusCode).toBe(409);
    expect(nothingToStop.json()).toMatchObject({ error_code: 'NO_MIGRATION' });

    const started = await call('POST', `/1.3/database/${uuid}/migration`, {
      source_service_uri: source.url,
      method: 'dump',
      ssl: false,
    });
    expect(started.statusCode).toBe(200);
    expect(started.body).not.toContain(SOURCE_PASSWORD);
    expect(started.json()).toMatchObject({
      uuid,
      properties: { migration: { method: 'dump', username: 'postgres', ssl: false } },
    });
    const again = await call('POST', `/1.3/database/${uuid}/migration`, {
      source_service_uri: source.url,
      ssl: false,
    });
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ error_code: 'MIGRATION_IN_PROGRESS' });

    await runJobs();
    const status = await call('GET', `/1.3/database/${uuid}/migration-status`);
    expect(status.statusCode).toBe(200);
    const body = status.json<{
      status: string;
      method: string;
      databases: Array<{ dbname: string; status: string }>;
    }>();
    expect(body).toMatchObject({ status: 'done', method: 'pg_dump' });
    expect(body.databases.map((d) => d.dbname)).toEqual(expect.arrayContaining(['shop', 'crm']));

    const rows = await pgQuery<{ n: string }>(await managedUrl('shop'), 'SELECT count(*) AS n FROM items');
    expect(Number(rows[0]?.n)).toBe(300);
    const people = await pgQuery<{ n: string }>(await managedUrl('crm'), 'SELECT count(*) AS n FROM people');
    expect(Number(people[0]?.n)).toBe(40);
  });

  it('validates clone requests', async () => {
    const clone = (body: Record<string, unknown>) => call('POST', `/1.3/database/${uuid}/clone`, body);
    expect((await clone({ title: 'x' })).json()).toMatchObject({ error_code: 'INVALID_REQUEST' });
    expect((await clone({ name: 'target-pg' })).json()).toMatchObject({ error_code: 'SERVICE_EXISTS' });
    expect((await clone({ name: 'c1', zone: 'mars-1' })).json()).toMatchObject({
      error_code: 'ZONE_INVALID',
    });
    expect((await clone({ name: 'c1', plan: 'huge' })).json()).toMatchObject({ error_code: 'PLAN_INVALID' });
    const invalid = await clone({ name: 'c1', recovery_time: 'yesterday' });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toMatchObject({ error_code: 'RECOVERY_TIME_INVALID' });
    const future = await clone({ name: 'c1', clone_time: new Date(Date.now() + 3_600_000).toISOString() });
    expect(future.json()).toMatchObject({ error_code: 'RECOVERY_TIME_IN_FUTURE' });
    const early = await clone({ hostname_prefix: 'c1', recovery_time: '2001-01-01T00:00:00Z' });
    expect(early.json()).toMatchObject({ error_code: 'RECOVERY_TIME_BEFORE_BACKUPS' });
  });

  it('clones to a point in time between two inserts; the clone joins the same team', async () => {
    const appUrl = await managedUrl('postgres');
    await pgQuery(appUrl, 'CREATE TABLE events (id int PRIMARY KEY)');
    await pgQuery(appUrl, 'INSERT INTO events VALUES (1)');
    await new Promise((r) => setTimeout(r, 1100));
    const between = new Date();
    await new Promise((r) => setTimeout(r, 1100));
    await pgQuery(appUrl, 'INSERT INTO events VALUES (2)');
    env.clock.set(new Date());

    const response = await call('POST', `/1.3/database/${uuid}/clone`, {
      name: 'pitr-copy',
      recovery_time: between.toISOString(),
    });
    expect(response.statusCode).toBe(201);
    const clone = response.json<{ uuid: string; name: string; state: string; type: string }>();
    expect(clone).toMatchObject({ name: 'pitr-copy', state: 'pending', type: 'pg' });
    await runJobs();
    const row = await berth.ctx.db
      .selectFrom('managed_databases')
      .selectAll()
      .where('uuid', '=', clone.uuid)
      .executeTakeFirstOrThrow();
    expect(row.state_reason).toBeNull();
    expect(row).toMatchObject({ state: 'running', team_id: owner.team_id });
    const object = (await call('GET', `/1.3/database/${clone.uuid}`)).json<{ service_uri: string }>();
    const ids = await pgQuery<{ id: number }>(
      withDb(object.service_uri.replace(/\?.*$/, ''), 'postgres'),
      'SELECT id FROM events ORDER BY id',
    );
    expect(ids.map((r) => r.id)).toEqual([1]);

    // The clone is the team's like any other managed database: the export lists it, password as placeholder.
    const exported = await berth.request({
      url: `/api/v1/teams/${owner.team_id}/export-yaml`,
      headers: authHeaders(owner).platform,
    });
    expect(exported.statusCode).toBe(200);
    expect(exported.body).toContain('name: pitr-copy');
    expect(exported.body).toContain('${DB_PITR_COPY_PASSWORD}');
  });
});
