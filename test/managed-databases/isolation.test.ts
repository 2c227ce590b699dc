// One team's database credentials reach that team's data and nothing else: the admin Berth hands out
// runs no program, reads no server file and cannot lift its limits; each instance runs as its own OS
// account with its files closed to the others; instances made before all this are brought in line at
// start, without losing data.
import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MAINTENANCE_USER,
  maintenanceFile,
  maintenancePassword,
} from '../../src/drivers/databases/local/accounts.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { applyManagedDatabase, openManagedEnv, sharedTemplateDir, type ManagedEnv } from './helpers.js';

interface ServiceObject {
  service_uri: string;
  service_uri_params: Record<string, string>;
  users: Array<{ username: string; password?: string }>;
}

const templates = sharedTemplateDir();
afterAll(() => templates.remove());

const uidOf = (pid: number): number =>
  Number(/^Uid:\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);

describe.each(DIALECTS)('tenant isolation of managed databases on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let alice: CreatedUser;
  let bob: CreatedUser;
  const ids = { pgA: '', pgB: '', myA: '', myB: '', kvA: '' };

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const service = async (uuid: string, user: CreatedUser): Promise<ServiceObject> =>
    (
      await berth.request({ url: `/1.3/database/${uuid}`, headers: authHeaders(user).dbApi })
    ).json<ServiceObject>();
  const instance = async (uuid: string) =>
    berth.ctx.db
      .selectFrom('managed_databases')
      .innerJoin('managed_instances', 'managed_instances.managed_database_id', 'managed_databases.id')
      .select(['managed_instances.pid', 'managed_instances.data_dir', 'managed_instances.port'])
      .where('managed_databases.uuid', '=', uuid)
      .executeTakeFirstOrThrow();
  async function pgAs<T>(uri: string, use: (c: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: uri.replace(/\?.*$/, '') });
    await client.connect();
    try {
      return await use(client);
    } finally {
      await client.end();
    }
  }

  beforeAll(async () => {
    env = await openManagedEnv(dialect, templates.dir);
    berth = await env.boot();
    alice = await berth.ctx.identity.createUser({ email: 'alice@example.com', team: 'alpha' });
    bob = await berth.ctx.identity.createUser({ email: 'bob@example.com', team: 'beta' });
    const plan = '1x1xCPU-2GB-25GB';
    ids.pgA = await applyManagedDatabase(berth.ctx, alice.team_id, {
      name: 'a-pg',
      type: 'pg',
      plan,
      users: [{ username: 'app' }],
    });
    ids.pgB = await applyManagedDatabase(berth.ctx, bob.team_id, { name: 'b-pg', type: 'pg', plan });
    ids.myA = await applyManagedDatabase(berth.ctx, alice.team_id, { name: 'a-my', type: 'mysql', plan });
    ids.myB = await applyManagedDatabase(berth.ctx, bob.team_id, { name: 'b-my', type: 'mysql', plan });
    ids.kvA = await applyManagedDatabase(berth.ctx, alice.team_id, {
      name: 'a-kv',
      type: 'valkey',
      plan: '1x1xCPU-2GB',
    });
    await runJobs();
  }, 120_000);
  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
  });

  it('PostgreSQL: the admin and a declared user run no program and read no server file', async () => {
    const object = await service(ids.pgA, alice);
    const app = new URL(object.service_uri);
    app.username = 'app';
    app.password = encodeURIComponent(object.users.find((u) => u.username === 'app')?.password ?? '');
    const other = await instance(ids.pgB);
    for (const uri of [object.service_uri, app.toString()]) {
      await pgAs(uri, async (c) => {
        expect((await c.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows).toEqual([
          { rolsuper: false },
        ]);
        await c.query('CREATE TEMP TABLE loot (line text)');
        await expect(c.query(`COPY loot FROM PROGRAM 'id'`)).rejects.toThrow(
          /permission denied|must be superuser/,
        );
        await expect(c.query(`COPY loot FROM '/etc/passwd'`)).rejects.toThrow(
          /permission denied|must be superuser/,
        );
        await expect(
          c.query(
            `SELECT pg_read_file(${c.escapeLiteral(path.join(other.data_dir as string, 'data', 'PG_VERSION'))})`,
          ),
        ).rejects.toThrow(/permission denied/);
        await expect(c.query(`SELECT pg_ls_dir('.')`)).rejects.toThrow(/permission denied/);
        await expect(c.query('GRANT pg_execute_server_program TO CURRENT_USER')).rejects.toThrow(
          /permission denied|must have admin option/,
        );
        // On 15, CREATEROLE would allow exactly that grant: the admin has none there.
        await expect(c.query(`CREATE ROLE intruder SUPERUSER`)).rejects.toThrow(
          /permission denied|must be superuser/,
        );
        await expect(c.query('ALTER ROLE CURRENT_USER SUPERUSER')).rejects.toThrow(
          /permission denied|must be superuser/,
        );
      });
    }
    // The admin still does what a team's admin does: databases, roles, tables.
    await pgAs(object.service_uri, async (c) => {
      await c.query('CREATE DATABASE reports');
      await c.query('CREATE TABLE kept (n int)');
      await c.query('INSERT INTO kept VALUES (1)');
    });
    // Team A's credentials open nothing on team B's server.
    const onB = new URL(object.service_uri);
    onB.port = String(other.port);
    await expect(pgAs(onB.toString(), (c) => c.query('SELECT 1'))).rejects.toThrow(
      /password authentication failed/,
    );
  });

  it('MariaDB: the admin reads no server file, cannot stop the server and opens nothing of team B', async () => {
    const object = await service(ids.myA, alice);
    const other = await instance(ids.myB);
    const connection = await mysql.createConnection({
      uri: object.service_uri.replace(/\?.*$/, ''),
      multipleStatements: true,
    });
    try {
      await connection.query('CREATE DATABASE shop; CREATE TABLE shop.t (line text)');
      const theirs = path.join(other.data_dir as string, 'data', 'mysql', 'global_priv.MAD');
      const [rows] = await connection.query<mysql.RowDataPacket[]>(
        'SELECT LOAD_FILE(?) AS f, LOAD_FILE(?) AS g',
        [theirs, '/etc/passwd'],
      );
      expect(rows[0]).toEqual({ f: null, g: null });
      await expect(connection.query(`LOAD DATA INFILE '/etc/passwd' INTO TABLE shop.t`)).rejects.toThrow(
        /denied/i,
      );
      await expect(connection.query('SHUTDOWN')).rejects.toThrow(/denied/i);
      await expect(connection.query(`GRANT FILE ON *.* TO CURRENT_USER`)).rejects.toThrow(/denied/i);
      const [grants] = await connection.query<mysql.RowDataPacket[]>('SHOW GRANTS');
      expect(JSON.stringify(grants)).not.toMatch(/\bFILE\b|\bSUPER\b|\bSHUTDOWN\b|\bPROCESS\b/);
    } finally {
      await connection.end();
    }
    const onB = new URL(object.service_uri.replace(/\?.*$/, ''));
    onB.port = String(other.port);
    await expect(mysql.createConnection({ uri: onB.toString() })).rejects.toMatchObject({
      code: 'ER_ACCESS_DENIED_ERROR',
    });
  });

  it('Valkey: the admin cannot reconfigure, debug, load modules, replicate or stop the server', async () => {
    const object = await service(ids.kvA, alice);
    const client = createClient({ url: object.service_uri });
    await client.connect();
    try {
      await client.set('k', 'v');
      for (const command of [
        ['CONFIG', 'SET', 'maxmemory', '0'],
        ['CONFIG', 'GET', 'dir'],
        ['DEBUG', 'SLEEP', '0'],
        ['MODULE', 'LOAD', '/tmp/x.so'],
        ['REPLICAOF', '127.0.0.1', '1'],
        ['SLAVEOF', '127.0.0.1', '1'],
        ['ACL', 'SETUSER', 'upadmin', '+@all'],
        ['MIGRATE', '127.0.0.1', '1', 'k', '0', '100'],
        ['SHUTDOWN', 'NOSAVE'],
      ]) {
        // NOPERM from the ACL; DEBUG and MODULE are also off in the server's own configuration.
        await expect(client.sendCommand(command), command.join(' ')).rejects.toThrow(/NOPERM|not allowed/);
      }
      expect(await client.get('k')).toBe('v');
    } finally {
      client.destroy();
    }
  });

  it('each instance runs as its own OS account, with its files closed to every other', async () => {
    const seen = new Set<number>();
    for (const uuid of Object.values(ids)) {
      const { pid, data_dir } = await instance(uuid);
      const uid = uidOf(pid as number);
      expect(uid).not.toBe(0);
      seen.add(uid);
      const stat = fs.statSync(data_dir as string);
      expect(stat.uid).toBe(uid);
      expect(stat.mode & 0o777).toBe(0o700);
    }
    expect(seen.size).toBe(Object.keys(ids).length);
  });

  it('brings an instance made before all this in line at start: admin demoted, files re-owned, data kept', async () => {
    // What an instance of an earlier Berth looked like: the admin a superuser, the files the shared
    // `postgres` account's, no maintenance password file.
    const { data_dir: dir } = await instance(ids.pgA);
    const root = dir as string;
    const object = await service(ids.pgA, alice);
    const maintenance = new URL(object.service_uri);
    maintenance.username = MAINTENANCE_USER;
    maintenance.password = encodeURIComponent(maintenancePassword(root));
    await pgAs(maintenance.toString(), (c) => c.query('ALTER ROLE upadmin SUPERUSER'));
    // A document stored before reserved names were refused at apply declared one.
    await berth.ctx.db
      .updateTable('managed_databases')
      .set({ users: JSON.stringify([{ username: 'app' }, { username: 'postgres' }]) })
      .where('uuid', '=', ids.pgA)
      .execute();
    await berth.close();
    fs.rmSync(maintenanceFile(root));
    fs.chmodSync(root, 0o755);
    // chown -R to the shared account, as instances used to be
    const { execFileSync } = await import('node:child_process');
    execFileSync('chown', ['-R', 'postgres:postgres', root]);

    berth = await env.boot();
    await berth.ctx.services.managedDatabases.startSupervisor({ intervalMs: 60_000 }).tick();
    const state = await berth.ctx.db
      .selectFrom('managed_databases')
      .select(['state', 'state_reason'])
      .where('uuid', '=', ids.pgA)
      .executeTakeFirstOrThrow();
    expect(state).toEqual({ state: 'running', state_reason: null });
    const after = await service(ids.pgA, alice);
    await pgAs(after.service_uri, async (c) => {
      expect((await c.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows).toEqual([
        { rolsuper: false },
      ]);
      expect((await c.query('SELECT n FROM kept')).rows).toEqual([{ n: 1 }]);
    });
    const { pid } = await instance(ids.pgA);
    expect(fs.statSync(root).uid).toBe(uidOf(pid as number));
    expect(fs.statSync(root).mode & 0o777).toBe(0o700);
    // Berth's maintenance password lives outside the instance, out of its OS account's reach.
    expect(fs.existsSync(maintenanceFile(root))).toBe(true);
    expect(fs.statSync(maintenanceFile(root)).uid).toBe(0);
    expect(fs.statSync(path.dirname(maintenanceFile(root))).mode & 0o777).toBe(0o700);
    expect(fs.readdirSync(root)).not.toContain('maintenance.password');
  });
});
