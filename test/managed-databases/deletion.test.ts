// Deleting and powering managed databases as UpCloud does: DELETE answers 204 and the database is
// `delete-service` until a job has removed its server, files, backups and credentials (then 404);
// PATCH {powered} stops and starts the real server, keeping its data. Owners only.
import fs from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenanceFile } from '../../src/drivers/databases/local/accounts.js';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { applyManagedDatabase, openManagedEnv, sharedTemplateDir, type ManagedEnv } from './helpers.js';

interface ServiceObject {
  state: string;
  powered: boolean;
  service_uri: string;
}

const templates = sharedTemplateDir();
afterAll(() => templates.remove());

describe.each(DIALECTS)('deleting and powering managed databases on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let owner: CreatedUser;
  let member: CreatedUser;
  let stranger: CreatedUser;

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const call = (method: 'GET' | 'DELETE' | 'PATCH', uuid: string, user = owner, payload?: object) =>
    berth.request({
      method,
      url: `/1.3/database/${uuid}`,
      headers: authHeaders(user).dbApi,
      ...(payload ? { payload } : {}),
    });
  const instanceOf = async (uuid: string) => {
    const row = await berth.ctx.db
      .selectFrom('managed_databases')
      .select('id')
      .where('uuid', '=', uuid)
      .executeTakeFirstOrThrow();
    return berth.ctx.db
      .selectFrom('managed_instances')
      .selectAll()
      .where('managed_database_id', '=', row.id)
      .executeTakeFirstOrThrow();
  };
  const query = async (uri: string, text: string) => {
    const client = new pg.Client({ connectionString: uri });
    await client.connect();
    try {
      return (await client.query<{ n: string }>(text)).rows;
    } finally {
      await client.end();
    }
  };

  beforeAll(async () => {
    env = await openManagedEnv(dialect, templates.dir);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    member = await berth.ctx.identity.createUser({ email: 'm@example.com', team: 'acme', role: 'member' });
    stranger = await berth.ctx.identity.createUser({ email: 's@example.com', team: 'globex' });
  }, 60_000);
  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
  });

  it('powers a database off and on again with PATCH {powered}, keeping its data', async () => {
    const uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'power',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    await runJobs();
    const running = (await call('GET', uuid)).json<ServiceObject>();
    expect(running.state).toBe('running');
    await query(running.service_uri, 'CREATE TABLE kept (n int); INSERT INTO kept VALUES (42)');
    const pid = (await instanceOf(uuid)).pid;
    expect(isAlive(pid)).toBe(true);

    expect((await call('PATCH', uuid, member, { powered: false })).statusCode).toBe(403);
    expect((await call('PATCH', uuid, owner, { powered: 'no' })).statusCode).toBe(400);
    const off = await call('PATCH', uuid, owner, { powered: false });
    expect(off.statusCode).toBe(200);
    expect(off.json<ServiceObject>()).toMatchObject({ state: 'pending', powered: false });
    await runJobs();
    expect((await call('GET', uuid)).json<ServiceObject>()).toMatchObject({
      state: 'stopped',
      powered: false,
    });
    expect(isAlive(pid)).toBe(false);

    expect((await call('PATCH', uuid, owner, { powered: true })).statusCode).toBe(200);
    await runJobs();
    const on = (await call('GET', uuid)).json<ServiceObject>();
    expect(on).toMatchObject({ state: 'running', powered: true });
    expect(await query(on.service_uri, 'SELECT n FROM kept')).toEqual([{ n: 42 }]);
  });

  it('deletes a database: 204, delete-service, then 404 with its server, files and records gone', async () => {
    const uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'doomed',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    await runJobs();
    const before = await instanceOf(uuid);
    const dir = before.data_dir as string;
    expect(fs.existsSync(dir)).toBe(true);
    await berth.ctx.db
      .insertInto('managed_database_tasks')
      .values({
        id: berth.ctx.ids.uuid(),
        database_uuid: uuid,
        operation: 'migration_check',
        request: '{}',
        state: 'done',
        success: 1,
        result: '',
        result_codes: '[]',
        target_version: null,
        details: null,
        create_time: '2026-01-01T00:00:00Z',
        update_time: '2026-01-01T00:00:00Z',
      })
      .execute();

    expect((await call('DELETE', uuid, stranger)).statusCode).toBe(403);
    expect((await call('DELETE', uuid, member)).statusCode).toBe(403);
    const deleted = await call('DELETE', uuid);
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect((await call('GET', uuid)).json<ServiceObject>().state).toBe('delete-service');
    expect((await call('DELETE', uuid)).statusCode).toBe(204); // again: still on its way out
    expect((await call('PATCH', uuid, owner, { powered: false })).statusCode).toBe(409);

    await runJobs();
    const gone = await call('GET', uuid);
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toMatchObject({ error_code: 'SERVICE_NOT_FOUND' });
    expect(isAlive(before.pid)).toBe(false);
    expect(fs.existsSync(dir)).toBe(false);
    expect(fs.existsSync(maintenanceFile(dir))).toBe(false); // Berth's password for it, too
    const left = await berth.ctx.db
      .selectFrom('managed_database_tasks')
      .select('id')
      .where('database_uuid', '=', uuid)
      .execute();
    expect(left).toEqual([]);
    const audit = await berth.ctx.db
      .selectFrom('audit_log')
      .select(['action', 'user_id'])
      .where('target', '=', uuid)
      .execute();
    expect(audit).toContainEqual({ action: 'managed_database.delete', user_id: owner.user_id });
  });

  it('shows how to connect on the platform API: the URI and users, passwords for owners only', async () => {
    const uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'shown',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
      users: [{ username: 'app' }],
    });
    await runJobs();
    const view = (user: CreatedUser) =>
      berth.request({ url: `/api/v1/managed-databases/${uuid}`, headers: authHeaders(user).platform });
    type View = {
      data: {
        state: string;
        connection: { uri: string; users: Array<{ username: string; password?: string }> };
      };
    };
    const mine = (await view(owner)).json<View>().data;
    expect(mine.state).toBe('running');
    expect(mine.connection.uri).toMatch(/^postgres:\/\/upadmin:[^@]+@127\.0\.0\.1:\d+\/defaultdb/);
    expect(mine.connection.users.map((u) => [u.username, typeof u.password])).toEqual([
      ['upadmin', 'string'],
      ['app', 'string'],
    ]);
    // The URI the view gives opens the database.
    expect(await query(mine.connection.uri, 'SELECT 1 AS n')).toEqual([{ n: 1 }]);
    const members = (await view(member)).json<View>().data;
    expect(members.connection.users.every((u) => u.password === undefined)).toBe(true);
    expect(members.connection.uri).not.toContain(':' + (mine.connection.users[0]?.password ?? 'x'));
    expect((await view(stranger)).statusCode).toBe(403);
  });

  it('deletes through the platform API too, for owners only', async () => {
    const uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'cache',
      type: 'valkey',
      plan: '1x1xCPU-2GB',
    });
    await runJobs();
    const del = (user: CreatedUser) =>
      berth.request({
        method: 'DELETE',
        url: `/api/v1/managed-databases/${uuid}`,
        headers: authHeaders(user).platform,
      });
    expect((await del(member)).statusCode).toBe(403);
    expect((await del(stranger)).statusCode).toBe(403);
    const accepted = await del(owner);
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toEqual({ data: { uuid, name: 'cache', state: 'delete-service' } });
    await runJobs();
    expect((await call('GET', uuid)).statusCode).toBe(404);
    expect((await del(owner)).statusCode).toBe(404);
  });
});
