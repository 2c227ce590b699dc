// Database servers hold their connection limits under a flood (docs/security.md, "Database servers:
// limits that hold under a flood"): PostgreSQL drops connections that never authenticate after
// authentication_timeout and keeps superuser slots Berth's maintenance account can always take from
// the owner's sessions; MariaDB keeps its CONNECTION ADMIN slot for Berth; Valkey closes idle clients
// and counts them against a maxclients sized to the instance. Real servers; no fixed ports.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { maintenancePassword } from '../../src/drivers/databases/local/accounts.js';
import {
  createLocalDatabaseDriver,
  type LocalDatabaseDriver,
} from '../../src/drivers/databases/local/index.js';
import { respCommands } from '../../src/drivers/databases/local/resp.js';
import {
  MYSQL_CONNECT_TIMEOUT_S,
  PG_AUTHENTICATION_TIMEOUT_S,
  PG_SUPERUSER_RESERVED_CONNECTIONS,
  VALKEY_IDLE_TIMEOUT_S,
  connectionLimit,
  limitsFor,
  limitsForMemory,
} from '../../src/drivers/databases/plan-limits.js';
import type { InstanceSpec } from '../../src/drivers/databases/types.js';
import { detectCgroups } from '../../src/drivers/os/cgroups.js';
import { isRoot } from '../../src/drivers/os/users.js';
import { DIALECTS } from '../helpers/store.js';
import { applyManagedDatabase, openManagedEnv, sharedTemplateDir, type ManagedEnv } from './helpers.js';

let dataDir: string;
let templates: ReturnType<typeof sharedTemplateDir>;
let driver: LocalDatabaseDriver;
const made: InstanceSpec[] = [];
const opened: Array<{ destroy(): void }> = [];

function spec(engine: InstanceSpec['engine'], sizing: Pick<InstanceSpec, 'plan' | 'limits'>): InstanceSpec {
  const instance: InstanceSpec = {
    id: randomUUID(),
    engine,
    ...sizing,
    adminUser: engine === 'valkey' ? 'owner' : 'upadmin',
    adminPassword: `owner-password-${randomUUID().slice(0, 8)}`,
    users: [],
    databases: engine === 'valkey' ? [] : [{ name: 'defaultdb' }],
  };
  made.push(instance);
  return instance;
}

const waitFor = async (probe: () => boolean, timeoutMs: number, what: string): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

/** A raw client: what it was sent back and whether the server closed it. */
interface Raw {
  received: Buffer;
  closed: boolean;
  destroy(): void;
}

function rawConnection(port: number, hello?: Buffer): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    const raw: Raw = { received: Buffer.alloc(0), closed: false, destroy: () => socket.destroy() };
    opened.push(raw);
    socket.on('data', (chunk: Buffer) => {
      raw.received = Buffer.concat([raw.received, chunk]);
    });
    socket.on('close', () => {
      raw.closed = true;
    });
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      if (hello) socket.write(hello);
      resolve(raw);
    });
    socket.once('error', reject);
  });
}

/** PostgreSQL's StartupMessage (protocol 3.0) for `user` on `database`. */
function startupMessage(user: string, database: string): Buffer {
  const body = Buffer.concat([
    Buffer.from([0, 3, 0, 0]),
    Buffer.from(`user\0${user}\0database\0${database}\0\0`),
  ]);
  const length = Buffer.alloc(4);
  length.writeInt32BE(body.length + 4);
  return Buffer.concat([length, body]);
}

async function pgClient(port: number, user: string, password: string, database = 'defaultdb') {
  const client = new pg.Client({ host: '127.0.0.1', port, user, password, database });
  opened.push({ destroy: () => void client.end().catch(() => undefined) });
  await client.connect();
  return client;
}

async function pgConnectError(port: number, user: string, password: string): Promise<string> {
  try {
    const client = await pgClient(port, user, password);
    await client.end();
    return 'connected';
  } catch (error) {
    return String((error as { code?: string }).code ?? error);
  }
}

describe('connection limits under a flood', () => {
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-floods-'));
    templates = sharedTemplateDir();
    driver = createLocalDatabaseDriver({ dataDir, templateDir: templates.dir });
  });

  afterAll(async () => {
    for (const connection of opened) connection.destroy();
    for (const instance of made) await driver.delete(instance).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
    templates.remove();
  });

  it('sizes connection limits to the plan, or to a service memory', () => {
    expect(limitsFor('pg', '2x2xCPU-4GB-100GB').maxConnections).toBe(100); // as UpCloud reports
    expect(limitsFor('pg', '1x1xCPU-2GB-25GB').maxConnections).toBe(100);
    expect(limitsFor('pg', '2x16xCPU-64GB-1000GB').maxConnections).toBe(1000);
    expect(limitsFor('mysql', '1x1xCPU-2GB-25GB').settings['max-connections']).toBe('150');
    expect(limitsFor('mysql', '1x2xCPU-4GB-50GB').settings['max-connections']).toBe('400');
    expect(limitsFor('valkey', '1x1xCPU-2GB').settings.maxclients).toBe('10000');
    expect(limitsFor('valkey', '1x2xCPU-4GB').settings.maxclients).toBe('16384');
    expect(connectionLimit('mysql', 8192)).toBe(800);
    expect(limitsForMemory('valkey', 32).settings.maxclients).toBe('256');
    expect(limitsForMemory('mysql', 64).settings['max-connections']).toBe('75');
    expect(limitsForMemory('pg', 128).settings.max_connections).toBe('48');
    expect(limitsForMemory('pg', 4096).settings.max_connections).toBe('1000');
  });

  it('PostgreSQL: connections that never answer the password request are dropped after authentication_timeout', async () => {
    const instance = spec('pg', { plan: '1x1xCPU-2GB-25GB' });
    const { port } = await driver.provision(instance);
    const maintenance = maintenancePassword(driver.instanceDir(instance.id));
    const maint = await pgClient(port, 'berth_maint', maintenance, 'postgres');
    const setting = async (name: string) =>
      (await maint.query<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]))
        .rows[0]?.setting;
    expect(await setting('max_connections')).toBe('100');
    expect(await setting('authentication_timeout')).toBe(String(PG_AUTHENTICATION_TIMEOUT_S));
    expect(await setting('superuser_reserved_connections')).toBe(String(PG_SUPERUSER_RESERVED_CONNECTIONS));
    await maint.end();

    // 110 clients send a StartupMessage for the admin and then never answer the password request.
    const flood = await Promise.all(
      Array.from({ length: 110 }, () => rawConnection(port, startupMessage(instance.adminUser, 'defaultdb'))),
    );
    await waitFor(
      () => flood.every((c) => c.received.length > 0),
      10_000,
      'every flooding client to be answered',
    );
    const started = Date.now();
    const askedForPassword = flood.filter((c) => c.received[0] === 'R'.charCodeAt(0));
    expect(askedForPassword.length).toBeGreaterThanOrEqual(95);

    // While they hold the slots nobody gets in, Berth's superuser neither: unauthenticated backends
    // take their slot before the reserved-slot check (docs/security.md says what holds).
    expect(await pgConnectError(port, instance.adminUser, instance.adminPassword)).toBe('53300');
    expect(await pgConnectError(port, 'berth_maint', maintenance)).toBe('53300');

    // The server closes them within authentication_timeout (plus the time the last one took to start).
    await waitFor(
      () => askedForPassword.every((c) => c.closed),
      PG_AUTHENTICATION_TIMEOUT_S * 1000 + 3000,
      'the server to drop the unauthenticated clients',
    );
    expect(Date.now() - started).toBeLessThan(PG_AUTHENTICATION_TIMEOUT_S * 1000 + 3000);
    const owner = await pgClient(port, instance.adminUser, instance.adminPassword);
    expect((await owner.query('SELECT 1 AS one')).rows[0]).toEqual({ one: 1 });

    // The owner's own sessions stop short of the reserved slots: Berth's maintenance still connects.
    const sessions = [owner];
    for (let i = sessions.length; i < 100 - PG_SUPERUSER_RESERVED_CONNECTIONS; i += 1) {
      sessions.push(await pgClient(port, instance.adminUser, instance.adminPassword));
    }
    expect(await pgConnectError(port, instance.adminUser, instance.adminPassword)).toBe('53300');
    const during = await pgClient(port, 'berth_maint', maintenance, 'postgres');
    expect((await during.query('SELECT current_user AS u')).rows[0]).toEqual({ u: 'berth_maint' });
    await during.end();
    // …and so does the driver's own maintenance path (ensureAccess through the maintenance account).
    await expect(driver.start(instance)).resolves.toMatchObject({ port });
    await Promise.all(sessions.map((s) => s.end()));
  }, 60_000);

  it.runIf(isRoot() && detectCgroups())(
    'PostgreSQL service: a flood of unauthenticated connections fits in its memory cap',
    async () => {
      // 64 MiB: 24 connections. With 100 (the plans' least), 105 such connections took ~90 MiB and
      // the kernel killed the server.
      const instance = spec('pg', { plan: 'service', limits: { memoryMiB: 64 } });
      const { port, pid } = await driver.provision(instance);
      const flood = await Promise.all(
        Array.from({ length: 105 }, () =>
          rawConnection(port, startupMessage(instance.adminUser, 'defaultdb')),
        ),
      );
      await waitFor(
        () => flood.every((c) => c.received.length > 0),
        10_000,
        'every flooding client to be answered',
      );
      expect(flood.filter((c) => c.received[0] === 'R'.charCodeAt(0)).length).toBe(24);
      expect(await pgConnectError(port, instance.adminUser, instance.adminPassword)).toBe('53300');
      for (const c of flood) c.destroy();
      const owner = await pgClient(port, instance.adminUser, instance.adminPassword);
      expect((await owner.query('SELECT pg_postmaster_start_time() <= now() AS up')).rows[0]).toEqual({
        up: true,
      });
      await owner.end();
      expect((await driver.status(instance)).pid).toBe(pid);
    },
    60_000,
  );

  it("MariaDB: max_connections follows the service's memory and Berth connects when the owner holds them all", async () => {
    const instance = spec('mysql', { plan: 'service', limits: { memoryMiB: 64 } });
    const { port } = await driver.provision(instance);
    const options = { host: '127.0.0.1', port, user: instance.adminUser, password: instance.adminPassword };
    const sessions: mysql.Connection[] = [];
    const first = await mysql.createConnection(options);
    sessions.push(first);
    opened.push({ destroy: () => first.destroy() });
    const [rows] = await first.query<mysql.RowDataPacket[]>(
      'SELECT @@max_connections AS max, @@connect_timeout AS connect',
    );
    expect(rows[0]).toEqual({ max: 75, connect: 10 });
    while (sessions.length < 75) {
      const session = await mysql.createConnection(options);
      opened.push({ destroy: () => session.destroy() });
      sessions.push(session);
    }
    await expect(mysql.createConnection(options)).rejects.toThrow(/Too many connections/);
    // Berth's maintenance account (CONNECTION ADMIN) takes the slot MariaDB keeps beyond
    // max_connections, once the server has finished refusing the owner's connection.
    let maint: mysql.Connection | undefined;
    const deadline = Date.now() + 5000;
    while (!maint) {
      try {
        maint = await mysql.createConnection({
          ...options,
          user: 'berth_maint',
          password: maintenancePassword(driver.instanceDir(instance.id)),
        });
      } catch (error) {
        if (Date.now() > deadline || !/Too many connections/.test(String(error))) throw error;
      }
    }
    const [who] = await maint.query<mysql.RowDataPacket[]>('SELECT CURRENT_USER() AS u');
    expect(who[0]?.u).toBe('berth_maint@127.0.0.1');
    await maint.end();
    // …as does the driver's maintenance path (root on the socket).
    await expect(driver.start(instance)).resolves.toMatchObject({ port });
    await Promise.all(sessions.map((s) => s.end()));
  }, 60_000);

  it('MariaDB: connections that never send their handshake are dropped after connect_timeout', async () => {
    const instance = spec('mysql', { plan: 'service', limits: { memoryMiB: 64 } });
    const { port } = await driver.provision(instance);
    const maint = {
      host: '127.0.0.1',
      port,
      user: 'berth_maint',
      password: maintenancePassword(driver.instanceDir(instance.id)),
    };
    // The server greets each client and waits for its answer: 75 + 1 wait, the rest are refused.
    const flood = await Promise.all(Array.from({ length: 80 }, () => rawConnection(port)));
    await waitFor(
      () => flood.every((c) => c.received.length > 0),
      10_000,
      'every flooding client to be answered',
    );
    const started = Date.now();
    const waiting = flood.filter((c) => !c.closed && !/Too many connections/.test(c.received.toString()));
    expect(waiting.length).toBe(76);
    // The slot kept for CONNECTION ADMIN is taken before the login that would use it: Berth waits too.
    await expect(mysql.createConnection(maint)).rejects.toThrow(/Too many connections/);
    await waitFor(
      () => waiting.every((c) => c.closed),
      MYSQL_CONNECT_TIMEOUT_S * 1000 + 3000,
      'the server to drop the silent clients',
    );
    expect(Date.now() - started).toBeLessThan(MYSQL_CONNECT_TIMEOUT_S * 1000 + 3000);
    const after = await mysql.createConnection(maint);
    await after.end();
  }, 60_000);

  it('Valkey: maxclients follows the memory, idle clients are closed, and an earlier server is brought in line at start', async () => {
    const instance = spec('valkey', { plan: 'service', limits: { memoryMiB: 32 } });
    const { port, pid } = await driver.provision(instance);
    const maintenance = maintenancePassword(driver.instanceDir(instance.id));
    const asBerth = (...commands: string[][]) =>
      respCommands(port, [['AUTH', 'berth_maint', maintenance], ...commands]);
    expect(await asBerth(['CONFIG', 'GET', 'maxclients'], ['CONFIG', 'GET', 'timeout'])).toEqual([
      'OK',
      ['maxclients', '256'],
      ['timeout', String(VALKEY_IDLE_TIMEOUT_S)],
    ]);
    // The closing itself, with a timeout short enough for a test (the server's check is the same).
    expect(await asBerth(['CONFIG', 'SET', 'timeout', '2'])).toEqual(['OK', 'OK']);

    // 266 clients that connect and say nothing: the ten beyond maxclients are refused at once (one
    // more while the server has not yet seen Berth's last connection go).
    const flood = await Promise.all(Array.from({ length: 266 }, () => rawConnection(port)));
    const refusal = /max number of clients reached/;
    await waitFor(
      () => flood.filter((c) => c.closed && refusal.test(c.received.toString())).length >= 10,
      5000,
      'the clients over maxclients to be refused',
    );
    const idle = flood.filter((c) => !refusal.test(c.received.toString()));
    expect(idle.length).toBeGreaterThanOrEqual(255);
    const owner = await rawConnection(port);
    await waitFor(() => owner.closed, 5000, "the owner's connection to be refused");
    expect(owner.received.toString()).toMatch(refusal);
    await waitFor(() => idle.every((c) => c.closed), 8000, 'the idle clients to be closed');
    expect(idle.every((c) => c.received.length === 0)).toBe(true);
    expect(
      await respCommands(port, [['AUTH', instance.adminUser, instance.adminPassword], ['PING']]),
    ).toEqual(['OK', 'PONG']);

    // A server started by an earlier Berth (no connection limits, no record of its settings) is
    // restarted with this Berth's settings at its next start.
    expect(
      await asBerth(['CONFIG', 'SET', 'timeout', '0'], ['CONFIG', 'SET', 'maxclients', '10000']),
    ).toEqual(['OK', 'OK', 'OK']);
    const stateFile = path.join(driver.instanceDir(instance.id), 'berth-instance.json');
    const { settings: _dropped, ...earlier } = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as Record<
      string,
      unknown
    >;
    fs.writeFileSync(stateFile, JSON.stringify(earlier));
    const restarted = await driver.start(instance);
    expect(restarted.pid).not.toBe(pid);
    expect(await asBerth(['CONFIG', 'GET', 'maxclients'], ['CONFIG', 'GET', 'timeout'])).toEqual([
      'OK',
      ['maxclients', '256'],
      ['timeout', String(VALKEY_IDLE_TIMEOUT_S)],
    ]);
  }, 60_000);
});

describe.each(DIALECTS)('a server left running by an earlier Berth, on %s', (dialect) => {
  it("is restarted with this Berth's settings by the supervisor's first pass", async () => {
    const env = await openManagedEnv(dialect);
    const earlier = await env.boot();
    let later: Awaited<ReturnType<ManagedEnv['boot']>> | undefined;
    try {
      const owner = await earlier.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
      const uuid = await applyManagedDatabase(earlier.ctx, owner.team_id, {
        name: 'cache',
        type: 'valkey',
        plan: '1x1xCPU-2GB',
      });
      await earlier.ctx.services.jobs.runner().runDue();
      const instanceRow = () =>
        earlier.ctx.db
          .selectFrom('managed_instances')
          .innerJoin('managed_databases', 'managed_databases.id', 'managed_instances.managed_database_id')
          .select(['managed_instances.pid', 'managed_instances.port', 'managed_instances.data_dir'])
          .where('managed_databases.uuid', '=', uuid)
          .executeTakeFirstOrThrow();
      const { pid, port, data_dir: root } = await instanceRow();
      expect(pid).not.toBeNull();
      // What an earlier Berth left: a server without idle timeout, no record of its settings.
      const asBerth = (...commands: string[][]) =>
        respCommands(Number(port), [['AUTH', 'berth_maint', maintenancePassword(String(root))], ...commands]);
      await asBerth(['CONFIG', 'SET', 'timeout', '0'], ['CONFIG', 'SET', 'maxclients', '20']);
      const stateFile = path.join(String(root), 'berth-instance.json');
      const { settings: _dropped, ...state } = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as Record<
        string,
        unknown
      >;
      fs.writeFileSync(stateFile, JSON.stringify(state));

      // The earlier Berth was killed (its instances keep running); this one starts on the same store.
      later = await env.boot();
      await later.ctx.services.managedDatabases.startSupervisor({ intervalMs: 60_000 }).tick();
      const after = await instanceRow();
      expect(after.pid).not.toBe(pid);
      expect(await asBerth(['CONFIG', 'GET', 'maxclients'], ['CONFIG', 'GET', 'timeout'])).toEqual([
        'OK',
        ['maxclients', '10000'],
        ['timeout', String(VALKEY_IDLE_TIMEOUT_S)],
      ]);
    } finally {
      await later?.close();
      await earlier.close();
      await env.destroy();
    }
  }, 60_000);
});
