// Managed databases end to end on the local driver: rows and jobs as apply writes them, real servers,
// real clients (node-postgres, mysql2, redis), the /1.3 API, the panel action, the supervisor, and a
// restart of Berth on the same store and data dir.
import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import { type Supervisor } from '../../src/services/managed-databases/index.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { waitFor } from '../helpers/processes.js';
import { applyManagedDatabase, openManagedEnv, sharedTemplateDir, type ManagedEnv } from './helpers.js';

interface ServiceObject {
  uuid: string;
  name: string;
  type: string;
  state: string;
  plan: string;
  zone: string;
  powered: boolean;
  node_count: number;
  create_time: string;
  service_uri: string;
  service_uri_params: Record<string, string>;
  properties: { version: string | null };
  metadata: Record<string, unknown>;
  users: Array<{ username: string; type: string; password?: string; authentication?: string }>;
  databases?: Array<{ name: string }>;
  backups: Array<{ backup_name: string; data_size: number }>;
  state_error?: { message: string };
}

type Berth = Awaited<ReturnType<ManagedEnv['boot']>>;

const PG_PLAN = '1x1xCPU-2GB-25GB';

const templates = sharedTemplateDir();
afterAll(() => templates.remove());

describe.each(DIALECTS)('managed databases on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Berth;
  let owner: CreatedUser;
  let member: CreatedUser;
  let stranger: CreatedUser;
  const uuid: Record<'pg' | 'mysql' | 'valkey', string> = { pg: '', mysql: '', valkey: '' };
  const statesBefore: string[] = [];

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const get = async (url: string, user: CreatedUser = owner) =>
    berth.request({ method: 'GET', url, headers: authHeaders(user).dbApi });
  const service = async (engine: keyof typeof uuid, user: CreatedUser = owner): Promise<ServiceObject> =>
    (await get(`/1.3/database/${uuid[engine]}`, user)).json<ServiceObject>();
  const row = (engine: keyof typeof uuid) =>
    berth.ctx.db
      .selectFrom('managed_databases')
      .selectAll()
      .where('uuid', '=', uuid[engine])
      .executeTakeFirstOrThrow();
  const instance = async (engine: keyof typeof uuid) =>
    berth.ctx.db
      .selectFrom('managed_instances')
      .selectAll()
      .where('managed_database_id', '=', (await row(engine)).id)
      .executeTakeFirstOrThrow();
  const password = (object: ServiceObject, username: string) =>
    object.users.find((u) => u.username === username)?.password ?? '';
  const port = (object: ServiceObject) => Number(object.service_uri_params.port);

  async function pgQuery<T extends pg.QueryResultRow>(
    object: ServiceObject,
    user: string,
    database: string,
    text: string,
  ) {
    const client = new pg.Client({
      host: '127.0.0.1',
      port: port(object),
      user,
      password: password(object, user),
      database,
    });
    await client.connect();
    try {
      return (await client.query<T>(text)).rows;
    } finally {
      await client.end();
    }
  }

  async function redisAs(object: ServiceObject, username?: string) {
    const client = createClient({
      socket: { host: '127.0.0.1', port: port(object), reconnectStrategy: false },
      ...(username ? { username, password: password(object, username) } : {}),
    });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch (error) {
      client.destroy();
      throw error;
    }
    return client;
  }

  beforeAll(async () => {
    env = await openManagedEnv(dialect, templates.dir);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    member = await berth.ctx.identity.createUser({
      email: 'member@example.com',
      team: 'acme',
      role: 'member',
    });
    stranger = await berth.ctx.identity.createUser({ email: 'other@example.com', team: 'other' });
    uuid.pg = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'main-pg',
      type: 'pg',
      plan: PG_PLAN,
      users: [
        { username: 'alice', authentication: 'scram-sha-256' },
        { username: 'bob', authentication: 'md5' },
      ],
      logical_databases: [
        { name: 'appdb', character_set: 'UTF8', collation: 'C.UTF-8' },
        // No such locale here: provisioning fails until the entry is corrected.
        { name: 'legacy', character_set: 'LATIN1', collation: 'xx_NOPE' },
      ],
    });
    uuid.mysql = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'shop-db',
      type: 'mysql',
      plan: '1x1xCPU-2GB-25GB',
      users: [{ username: 'carol' }, { username: 'dave', authentication: 'caching_sha2_password' }],
      logical_databases: [
        { name: 'shop', character_set: 'utf8mb4', collation: 'utf8mb4_unicode_ci' },
        { name: 'old', character_set: 'latin1', collation: 'latin1_swedish_ci' },
      ],
    });
    uuid.valkey = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'cache',
      type: 'valkey',
      plan: '1x1xCPU-2GB',
      users: [{ username: 'cache' }],
    });
    for (const engine of ['pg', 'mysql', 'valkey'] as const) statesBefore.push((await row(engine)).state);
    await runJobs();
  });

  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
  });

  it('provisions every engine; a failure is an error with its reason, retried by the job runner', async () => {
    expect(statesBefore).toEqual(['pending', 'pending', 'pending']);
    expect((await row('mysql')).state).toBe('running');
    expect((await row('valkey')).state).toBe('running');
    const failed = await row('pg');
    expect(failed.state).toBe('error');
    expect(failed.state_reason).toContain('xx_NOPE');
    const job = await berth.ctx.db
      .selectFrom('jobs')
      .selectAll()
      .where('key', '=', `managed_database.provision:${uuid.pg}`)
      .executeTakeFirstOrThrow();
    expect(job).toMatchObject({ state: 'queued', attempts: 1 });
    expect(job.last_error).toContain('xx_NOPE');

    await berth.ctx.db
      .updateTable('managed_databases')
      .set({
        logical_databases: JSON.stringify([
          { name: 'appdb', character_set: 'UTF8', collation: 'C.UTF-8' },
          { name: 'legacy', character_set: 'LATIN1', collation: 'C' },
        ]),
      })
      .where('uuid', '=', uuid.pg)
      .execute();
    // A request the engine cannot honour fails at once, before anything is created, and is not retried.
    const invalid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'bad-auth',
      type: 'pg',
      plan: PG_PLAN,
      users: [{ username: 'eve', authentication: 'password' }],
    });
    env.clock.advance(5_000); // past the retry backoff
    await runJobs(); // the retry, then the first base backup it enqueues
    expect((await row('pg')).state).toBe('running');
    expect(JSON.parse((await instance('pg')).backups)).toHaveLength(1);

    const rejected = await berth.ctx.db
      .selectFrom('managed_databases')
      .select(['state', 'state_reason'])
      .where('uuid', '=', invalid)
      .executeTakeFirstOrThrow();
    const rejectedJob = await berth.ctx.db
      .selectFrom('jobs')
      .select(['state'])
      .where('key', '=', `managed_database.provision:${invalid}`)
      .executeTakeFirstOrThrow();
    expect(rejectedJob.state).toBe('done');
    expect(rejected.state).toBe('error');
    expect(rejected.state_reason).toContain("authentication 'password' is not supported");
    expect(fs.existsSync(path.join(env.config.dataDir, 'databases', invalid))).toBe(false);
  });

  it('GET /1.3/database returns UpCloud service objects with working credentials to the owner', async () => {
    const list = await get('/1.3/database');
    expect(list.statusCode).toBe(200);
    const objects = list.json<ServiceObject[]>();
    expect(objects.map((o) => [o.name, o.type, o.state])).toEqual([
      ['main-pg', 'pg', 'running'],
      ['shop-db', 'mysql', 'running'],
      ['cache', 'valkey', 'running'],
      ['bad-auth', 'pg', 'error'],
    ]);
    const failed = objects.find((o) => o.name === 'bad-auth');
    expect(failed?.state_error?.message).toContain('authentication');
    expect(failed?.service_uri).toBe('');
    // The platform API's team list shows the same states.
    const team = await berth.request({
      method: 'GET',
      url: `/api/v1/teams/${owner.team_id}/managed-databases`,
      headers: authHeaders(owner).platform,
    });
    expect(
      team.json<{ data: Array<{ name: string; state: string }> }>().data.map((d) => [d.name, d.state]),
    ).toEqual(
      expect.arrayContaining([
        ['main-pg', 'running'],
        ['shop-db', 'running'],
        ['cache', 'running'],
      ]),
    );
    const pgObject = await service('pg');
    expect(pgObject).toMatchObject({
      uuid: uuid.pg,
      plan: PG_PLAN,
      zone: 'fi-hel1',
      powered: true,
      node_count: 1,
      properties: { version: '15' },
      service_uri_params: { host: '127.0.0.1', dbname: 'defaultdb', user: 'upadmin', ssl_mode: 'disable' },
    });
    expect(pgObject.create_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(pgObject.metadata.pg_version).toMatch(/^15\.\d+$/);
    expect(Number(pgObject.metadata.storage_limit_bytes)).toBe(25 * 1024 ** 3);
    expect(pgObject.users.map((u) => [u.username, u.type, u.authentication])).toEqual([
      ['upadmin', 'primary', undefined],
      ['alice', 'normal', 'scram-sha-256'],
      ['bob', 'normal', 'md5'],
    ]);
    expect(pgObject.users.every((u) => (u.password ?? '').length >= 20)).toBe(true);
    expect(pgObject.databases?.map((d) => d.name)).toEqual(['defaultdb', 'appdb', 'legacy']);
    expect(pgObject.backups).toHaveLength(1);
    expect(pgObject.backups[0]?.data_size).toBeGreaterThan(0);

    // The service URI is what a client uses as is.
    const client = new pg.Client({ connectionString: pgObject.service_uri });
    await client.connect();
    expect((await client.query<{ one: number }>('SELECT 1 AS one')).rows[0]?.one).toBe(1);
    await client.end();

    const mysqlObject = await service('mysql');
    expect(mysqlObject.service_uri).toMatch(/^mysql:\/\/upadmin:[^@]+@127\.0\.0\.1:\d+\/defaultdb/);
    expect(mysqlObject.properties.version).toBe('10.11');
    const valkeyObject = await service('valkey');
    expect(valkeyObject.service_uri).toMatch(/^redis:\/\/upadmin:[^@]+@127\.0\.0\.1:\d+$/);
    expect(valkeyObject.databases).toBeUndefined();
  });

  it('pg: every user logs into every logical database with its encoding and collation; a wrong password fails', async () => {
    const object = await service('pg');
    const expected = { appdb: ['UTF8', 'C.UTF-8'], legacy: ['LATIN1', 'C'] } as const;
    for (const user of ['alice', 'bob']) {
      for (const [database, [encoding, collation]] of Object.entries(expected)) {
        const [info] = await pgQuery<{ who: string; encoding: string; collate: string }>(
          object,
          user,
          database,
          `SELECT current_user AS who, pg_encoding_to_char(encoding) AS encoding, datcollate AS collate
             FROM pg_database WHERE datname = current_database()`,
        );
        expect(info).toEqual({ who: user, encoding, collate: collation });
      }
    }
    // Declared users may create in `public` (PostgreSQL 15 no longer lets everyone).
    await pgQuery(object, 'alice', 'appdb', 'CREATE TABLE notes (id int)');
    const wrong = new pg.Client({
      host: '127.0.0.1',
      port: port(object),
      user: 'alice',
      password: 'wrong',
      database: 'appdb',
    });
    await expect(wrong.connect()).rejects.toThrow(/password authentication failed/);

    // `authentication` decides how the password is stored, hence the method the user logs in with.
    const stored = await pgQuery<{ rolname: string; method: string }>(
      object,
      'upadmin',
      'postgres',
      `SELECT rolname, split_part(rolpassword, '$', 1) AS method FROM pg_authid WHERE rolname IN ('alice', 'bob') ORDER BY rolname`,
    );
    expect(stored.map((r) => [r.rolname, r.method.startsWith('md5') ? 'md5' : r.method])).toEqual([
      ['alice', 'SCRAM-SHA-256'],
      ['bob', 'md5'],
    ]);
    // The plan's limits (2 GB / 16 = 128 MiB budget, a quarter of it as shared buffers) and archiving.
    const settings = await pgQuery<{ name: string; setting: string }>(
      object,
      'upadmin',
      'postgres',
      `SELECT name, current_setting(name) AS setting FROM pg_settings
        WHERE name IN ('shared_buffers', 'archive_mode', 'wal_level') ORDER BY name`,
    );
    expect(settings.map((s) => s.setting)).toEqual(['on', '32MB', 'replica']);
  });

  it('mysql: every user logs into every logical database with its character set; a wrong password fails', async () => {
    const object = await service('mysql');
    const expected = {
      shop: ['utf8mb4', 'utf8mb4_unicode_ci'],
      old: ['latin1', 'latin1_swedish_ci'],
    } as const;
    for (const user of ['carol', 'dave']) {
      for (const [database, [charset, collation]] of Object.entries(expected)) {
        const connection = await mysql.createConnection({
          host: '127.0.0.1',
          port: port(object),
          user,
          password: password(object, user),
          database,
        });
        const [rows] = await connection.query<mysql.RowDataPacket[]>(
          'SELECT CURRENT_USER() AS who, @@character_set_database AS cs, @@collation_database AS co',
        );
        await connection.end();
        expect(rows[0]).toEqual({ who: `${user}@%`, cs: charset, co: collation });
      }
    }
    await expect(
      mysql.createConnection({
        host: '127.0.0.1',
        port: port(object),
        user: 'carol',
        password: 'wrong',
        database: 'shop',
      }),
    ).rejects.toMatchObject({ code: 'ER_ACCESS_DENIED_ERROR' });
    const admin = await mysql.createConnection(object.service_uri.replace(/\?.*$/, ''));
    const [rows] = await admin.query<mysql.RowDataPacket[]>('SELECT @@innodb_buffer_pool_size AS pool');
    await admin.end();
    expect(Number(rows[0]?.pool)).toBe(64 * 1024 * 1024);
  });

  it('valkey: a user is confined to its key pattern without dangerous commands; the default user is off', async () => {
    const object = await service('valkey');
    const user = await redisAs(object, 'cache');
    try {
      await user.set('cache:greeting', 'hello');
      expect(await user.get('cache:greeting')).toBe('hello');
      await expect(user.set('other:key', 'x')).rejects.toThrow(/NOPERM/);
      await expect(user.flushAll()).rejects.toThrow(/NOPERM/);
      await expect(user.sendCommand(['CONFIG', 'GET', 'maxmemory'])).rejects.toThrow(/NOPERM/);
    } finally {
      user.destroy();
    }
    // The default user is off: a client without credentials cannot even say HELLO.
    await expect(redisAs(object)).rejects.toThrow(/NOAUTH/);
    const admin = await redisAs(object, 'upadmin');
    try {
      // 128 MiB budget, 70 % of it for data as on UpCloud's key-value plans; the admin reads it but
      // cannot lift it (no CONFIG for a team's users: docs/security.md).
      expect(await admin.info('memory')).toContain(`maxmemory:${89 * 1024 * 1024}\r\n`);
      await expect(admin.configSet('maxmemory', '0')).rejects.toThrow(/NOPERM/);
    } finally {
      admin.destroy();
    }
  });

  it('shows databases only to their team: another team gets 403, an unknown uuid 404, members no passwords', async () => {
    expect((await get('/1.3/database', stranger)).json()).toEqual([]);
    const forbidden = await get(`/1.3/database/${uuid.pg}`, stranger);
    expect(forbidden.statusCode).toBe(403);
    expect(forbidden.json()).toMatchObject({ error: { error_code: 'ACCOUNT_FORBIDDEN' } });
    const missing = await get('/1.3/database/09000000-0000-4000-8000-000000000000');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error_code: 'SERVICE_NOT_FOUND' });
    expect((await berth.request({ method: 'GET', url: '/1.3/database' })).statusCode).toBe(401);
    const seen = await service('pg', member);
    expect(seen.state).toBe('running');
    expect(seen.service_uri).toMatch(/^postgres:\/\/upadmin@127\.0\.0\.1:\d+\//);
    expect(seen.users.some((u) => u.password !== undefined)).toBe(false);
    expect(seen.service_uri_params.password).toBeUndefined();
  });

  it('the panel action carries out a pending plan and zone change: restart with the new limits', async () => {
    const action = (user: CreatedUser, id = uuid.pg) =>
      berth.request({
        method: 'POST',
        url: `/api/v1/managed-databases/${id}/apply-pending-change`,
        headers: authHeaders(user).platform,
      });
    expect((await action(owner)).statusCode).toBe(409); // nothing pending yet
    await berth.ctx.db
      .updateTable('managed_databases')
      .set({ pending_plan: '1x2xCPU-4GB-50GB', pending_zone: 'de-fra1' })
      .where('uuid', '=', uuid.pg)
      .execute();
    expect((await service('pg')).plan).toBe(PG_PLAN);
    expect((await action(stranger)).statusCode).toBe(403);
    expect((await action(owner, '09000000-0000-4000-8000-000000000000')).statusCode).toBe(404);
    const accepted = await action(owner);
    expect(accepted.statusCode).toBe(202);
    expect(accepted.json()).toMatchObject({
      data: { plan: '1x2xCPU-4GB-50GB', zone: 'de-fra1', state: 'pending' },
    });
    await runJobs();
    const object = await service('pg');
    expect(object).toMatchObject({ state: 'running', plan: '1x2xCPU-4GB-50GB', zone: 'de-fra1' });
    expect(await row('pg')).toMatchObject({ pending_plan: null, pending_zone: null });
    const [buffers] = await pgQuery<{ shared_buffers: string }>(
      object,
      'alice',
      'appdb',
      'SHOW shared_buffers',
    );
    expect(buffers?.shared_buffers).toBe('64MB');
    expect((await action(owner)).statusCode).toBe(409);
  });

  it('takes a daily base backup and keeps a bounded number, dropping WAL no kept backup needs', async () => {
    const root = (await instance('pg')).data_dir as string;
    env.clock.advance(24 * 60 * 60 * 1000 + 1000);
    await runJobs(); // the daily job: a one-node plan keeps up to three
    const daily = JSON.parse((await instance('pg')).backups) as Array<{
      backup_name: string;
      start_wal: string;
    }>;
    expect(daily).toHaveLength(2);
    const job = await berth.ctx.db
      .selectFrom('jobs')
      .select(['state', 'run_at'])
      .where('key', '=', `managed_database.base_backup:${uuid.pg}`)
      .executeTakeFirstOrThrow();
    expect(job.state).toBe('queued');
    expect(new Date(job.run_at).getTime()).toBe(env.clock.now().getTime() + 24 * 60 * 60 * 1000);

    // What an interrupted backup leaves (no manifest) is removed by the next one.
    fs.mkdirSync(path.join(root, 'base-backups', '2020-01-01T00-00-00-000Z'));
    fs.writeFileSync(path.join(root, 'base-backups', '2020-01-01T00-00-00-000Z', 'base.tar'), 'partial');
    // Retention: the driver keeps the newest `retain` and cleans the archive up to the oldest kept.
    const databases = berth.ctx.services.managedDatabases;
    const current = await instance('pg');
    const secrets = databases.credentialsOf(current);
    const kept = await databases.driver.baseBackup(
      {
        id: uuid.pg,
        engine: 'pg',
        plan: '1x2xCPU-4GB-50GB',
        adminUser: 'upadmin',
        adminPassword: secrets.admin,
        users: [],
        databases: [],
      },
      1,
    );
    expect(kept).toHaveLength(1);
    expect(daily.map((b) => b.backup_name)).not.toContain(kept[0]?.backup_name);
    expect(fs.readdirSync(path.join(root, 'base-backups'))).toEqual([kept[0]?.backup_name]);
    const archived = fs.readdirSync(path.join(root, 'wal-archive')).filter((f) => /^[0-9A-F]{24}$/.test(f));
    expect(archived.length).toBeGreaterThan(0);
    expect(archived.every((f) => f >= (kept[0]?.start_wal as string))).toBe(true);
    expect(archived.some((f) => f < (daily[1]?.start_wal as string))).toBe(false);
  });

  it('restarts a killed server within seconds and reports it', async () => {
    const supervisor: Supervisor = berth.ctx.services.managedDatabases.startSupervisor({ intervalMs: 100 });
    try {
      const killed = {
        pg: (await instance('pg')).pid as number,
        valkey: (await instance('valkey')).pid as number,
      };
      process.kill(killed.pg, 'SIGKILL');
      process.kill(killed.valkey, 'SIGKILL');
      const started = Date.now();
      for (const engine of ['pg', 'valkey'] as const) {
        await waitFor(async () => {
          const current = await instance(engine);
          const state = (await row(engine)).state;
          return state === 'running' && current.restarts === 1 && isAlive(current.pid) ? current : undefined;
        }, 20_000);
      }
      expect(Date.now() - started).toBeLessThan(10_000);
      const restarted = await service('pg');
      expect(restarted.metadata.process_restarts).toBe(1);
      expect(restarted.metadata.last_process_restart).toMatchObject({
        reason: `process ${killed.pg} exited`,
      });
      const audit = await berth.ctx.db
        .selectFrom('audit_log')
        .select(['target'])
        .where('action', '=', 'managed_database.process_restarted')
        .execute();
      expect(audit.map((a) => a.target).sort()).toEqual([uuid.pg, uuid.valkey].sort());
      const [data] = await pgQuery<{ n: string }>(
        restarted,
        'alice',
        'appdb',
        'SELECT count(*)::text AS n FROM notes',
      );
      expect(data?.n).toBe('0');
    } finally {
      await supervisor.stop();
    }
  });

  it('powers an instance off and on', async () => {
    const databases = berth.ctx.services.managedDatabases;
    const pid = (await instance('valkey')).pid as number;
    await databases.powerOff(uuid.valkey);
    expect(isAlive(pid)).toBe(false);
    expect(await service('valkey')).toMatchObject({ state: 'stopped', powered: false });
    await databases.powerOn(uuid.valkey);
    expect(await service('valkey')).toMatchObject({ state: 'running', powered: true });
    const client = await redisAs(await service('valkey'), 'cache');
    expect(await client.get('cache:greeting')).toBe('hello'); // the append-only file kept it
    client.destroy();
  });

  it('after a restart of Berth every instance runs again; closing leaves no process and delete no files', async () => {
    const before = await Promise.all(
      (['pg', 'mysql', 'valkey'] as const).map(async (e) => (await instance(e)).pid as number),
    );
    await berth.close();
    expect(before.filter((pid) => isAlive(pid))).toEqual([]);

    berth = await env.boot();
    const supervisor = berth.ctx.services.managedDatabases.startSupervisor({ intervalMs: 60_000 });
    await supervisor.tick(); // the reconcile pass at start
    for (const engine of ['pg', 'mysql', 'valkey'] as const) {
      const current = await instance(engine);
      expect((await row(engine)).state).toBe('running');
      expect(isAlive(current.pid)).toBe(true);
    }
    expect((await instance('pg')).restarts).toBe(1); // a clean stop and start is not a crash
    const pgObject = await service('pg');
    expect((await pgQuery<{ n: string }>(pgObject, 'bob', 'legacy', 'SELECT 1::text AS n'))[0]?.n).toBe('1');
    const mysqlObject = await service('mysql');
    const connection = await mysql.createConnection({
      host: '127.0.0.1',
      port: port(mysqlObject),
      user: 'carol',
      password: password(mysqlObject, 'carol'),
      database: 'shop',
    });
    await connection.end();

    const valkeyDir = (await instance('valkey')).data_dir as string;
    await berth.ctx.services.managedDatabases.remove(uuid.valkey);
    expect(fs.existsSync(valkeyDir)).toBe(false);
    expect((await get(`/1.3/database/${uuid.valkey}`)).statusCode).toBe(404);

    const running = await Promise.all(
      (['pg', 'mysql'] as const).map(async (e) => (await instance(e)).pid as number),
    );
    await berth.close();
    expect(running.filter((pid) => isAlive(pid))).toEqual([]);
    berth = await env.boot(); // for afterAll
  });
});
