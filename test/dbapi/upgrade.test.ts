// A managed PostgreSQL through the /1.3 upgrade and maintenance routes on the local driver, for real:
// maintenance applies a setting that waits for a restart; a failed 15 → 16 upgrade leaves 15 running
// with its data; a successful one keeps data, users and passwords, archives WAL and takes base backups
// on 16, and a rebooted Berth starts the instance on the 16 binaries.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clonePostgres, stopCluster } from '../../src/drivers/databases/operations/index.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { freePort } from '../helpers/processes.js';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import {
  MAINTENANCE_USER,
  instanceAccount,
  maintenancePassword,
} from '../../src/drivers/databases/local/accounts.js';
import { DIALECTS } from '../helpers/store.js';
import { PG16_BIN, pgQuery, withDb } from '../db-operations/fixtures.js';
import {
  applyManagedDatabase,
  openManagedEnv,
  sharedTemplateDir,
  type ManagedEnv,
} from '../managed-databases/helpers.js';

const templates = sharedTemplateDir();
afterAll(() => templates.remove());

interface Service {
  state: string;
  service_uri: string;
  properties: { version: string };
  metadata: { pg_version: string };
  backups: Array<{ backup_name: string }>;
  users: Array<{ username: string; password?: string }>;
}

describe.each(DIALECTS)('/1.3 upgrade and maintenance on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let owner: CreatedUser;
  let uuid = '';
  let appPassword = '';

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const call = (method: 'GET' | 'POST', url: string, payload?: unknown) =>
    berth.request({
      method,
      url,
      headers: authHeaders(owner).dbApi,
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
  const service = async (): Promise<Service> => (await call('GET', `/1.3/database/${uuid}`)).json<Service>();
  /** Berth's own superuser (the maintenance account) on a database: what the admin may not do. */
  const maintenanceUrl = async (db: string): Promise<string> => {
    const u = new URL(await url(db));
    u.username = MAINTENANCE_USER;
    u.password = encodeURIComponent(maintenancePassword((await instanceRow()).data_dir as string));
    return u.toString();
  };
  /** The admin's URI on a database; `as` logs in as a declared user with its password instead. */
  const url = async (db: string, as?: { user: string; password: string }): Promise<string> => {
    const u = new URL((await service()).service_uri.replace(/\?.*$/, ''));
    u.pathname = `/${db}`;
    if (as) {
      u.username = as.user;
      u.password = encodeURIComponent(as.password);
    }
    return u.toString();
  };
  const app = () => url('shop', { user: 'app', password: appPassword });
  const dbRow = () =>
    berth.ctx.db
      .selectFrom('managed_databases')
      .selectAll()
      .where('uuid', '=', uuid)
      .executeTakeFirstOrThrow();
  const instanceRow = async () =>
    berth.ctx.db
      .selectFrom('managed_instances')
      .selectAll()
      .where('managed_database_id', '=', (await dbRow()).id)
      .executeTakeFirstOrThrow();

  beforeAll(async () => {
    env = await openManagedEnv(dialect, templates.dir);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'upgraded-pg',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
      users: [{ username: 'app' }],
      logical_databases: [{ name: 'shop' }],
    });
    await runJobs();
    appPassword = (await service()).users.find((u) => u.username === 'app')?.password ?? '';
    expect(appPassword).not.toBe('');
    await pgQuery(
      await app(),
      `CREATE TABLE items (id int PRIMARY KEY, name text);
       INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 500) g;`,
    );
    const check = await call('POST', `/1.3/database/${uuid}/tasks`, {
      operation: 'upgrade_check',
      upgrade_check: { target_version: '16' },
    });
    expect(check.statusCode).toBe(201);
    await runJobs();
  }, 120_000);

  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
  });

  it('maintenance restarts the instance so that a setting waiting for a restart takes effect', async () => {
    const admin = await maintenanceUrl('postgres');
    await pgQuery(admin, 'ALTER SYSTEM SET max_wal_senders = 7');
    await pgQuery(admin, 'SELECT pg_reload_conf()');
    const pidBefore = (await instanceRow()).pid;
    // The service object names the setting that waits for a restart until maintenance applies it.
    const shown = await call('GET', `/1.3/database/${uuid}`);
    const pending = shown.json<{ maintenance: { pending_updates: Array<{ description: string }> } }>()
      .maintenance.pending_updates;
    expect(pending.map((u) => u.description).join(' ')).toContain('max_wal_senders');

    const response = await call('POST', `/1.3/database/${uuid}/maintenance`);
    expect(response.statusCode).toBe(200);
    expect(response.json<{ message: string }>().message).toContain('max_wal_senders');
    expect(await pgQuery(admin, 'SHOW max_wal_senders')).toEqual([{ max_wal_senders: '7' }]);
    const after = await instanceRow();
    expect(after.pid).not.toBe(pidBefore);
    expect(isAlive(pidBefore)).toBe(false);
    expect((await dbRow()).state).toBe('running');

    const after2 = await call('GET', `/1.3/database/${uuid}`);
    expect(
      after2
        .json<{ maintenance: { pending_updates: Array<{ description: string }> } }>()
        .maintenance.pending_updates.map((u) => u.description)
        .join(' '),
    ).not.toContain('max_wal_senders');
    const again = await call('POST', `/1.3/database/${uuid}/maintenance`);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ error_code: 'NO_MAINTENANCE_AVAILABLE' });
  });

  it('a failed upgrade leaves PostgreSQL 15 running with its data and says why', async () => {
    // A setting 15 knows and 16 does not (renamed to debug_parallel_query): the restore into 16 fails.
    await pgQuery(await url('postgres'), 'ALTER DATABASE shop SET force_parallel_mode = off');
    const response = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '16' });
    expect(response.statusCode).toBe(201);
    await runJobs();

    const row = await dbRow();
    expect(row.state).toBe('running');
    expect(row.state_reason).toMatch(/^upgrade to PostgreSQL 16 failed: .*force_parallel_mode/);
    const object = await service();
    expect(object.properties.version).toBe('15');
    expect(
      await pgQuery(
        await app(),
        "SELECT count(*)::int AS n, current_setting('server_version') AS v FROM items",
      ),
    ).toEqual([{ n: 500, v: expect.stringMatching(/^15\./) as unknown }]);
    const failures = await berth.ctx.db
      .selectFrom('audit_log')
      .select('action')
      .where('target', '=', uuid)
      .where('action', '=', 'managed_database.upgrade_failed')
      .execute();
    expect(failures).toHaveLength(1);
    const dir = (await instanceRow()).data_dir as string;
    expect(fs.readdirSync(dir).filter((n) => n.includes('.next') || n.includes('.pre-upgrade'))).toEqual([]);
    await pgQuery(await url('postgres'), 'ALTER DATABASE shop RESET force_parallel_mode');
  });

  it('a switch-over cut short by a crash is undone at the next start: 15 runs with its data', async () => {
    // What a crash between the renames of the switch-over leaves: the old files moved aside, no data/.
    await berth.ctx.services.managedDatabases.powerOff(uuid);
    const dir = (await instanceRow()).data_dir as string;
    for (const name of ['wal-archive', 'base-backups', 'data']) {
      fs.renameSync(path.join(dir, name), path.join(dir, `${name}.pre-upgrade`));
    }
    fs.mkdirSync(path.join(dir, 'wal-archive'));
    await berth.ctx.services.managedDatabases.powerOn(uuid);
    expect(
      await pgQuery(
        await app(),
        `SELECT count(*)::int AS n, current_setting('server_version') AS v FROM items`,
      ),
    ).toEqual([{ n: 500, v: expect.stringMatching(/^15\./) as unknown }]);
    expect(fs.readdirSync(dir).filter((n) => n.includes('.pre-upgrade'))).toEqual([]);
    expect(fs.readdirSync(path.join(dir, 'wal-archive')).length).toBeGreaterThan(0);
  });

  it('upgrades 15 → 16: data, users and passwords kept, WAL archived and base backups taken on 16', async () => {
    const response = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '16' });
    expect(response.statusCode).toBe(201);
    const accepted = response.json<Service>();
    expect(accepted).toMatchObject({ state: 'rebalancing', properties: { version: '16' } });
    expect(accepted.metadata.pg_version).toMatch(/^15\./);
    const twice = await call('POST', `/1.3/database/${uuid}/upgrade`, { target_version: '16' });
    expect(twice.statusCode).toBe(409);
    expect(twice.json()).toMatchObject({ error_code: 'SERVICE_NOT_RUNNING' });

    await runJobs(); // the upgrade, then the new major's first base backup
    const row = await dbRow();
    expect(row.state_reason).toBeNull();
    const object = await service();
    expect(object).toMatchObject({ state: 'running', properties: { version: '16' } });
    expect(object.metadata.pg_version).toMatch(/^16\./);
    // The declared user logs in with the password it had on 15, and finds its rows.
    expect(
      await pgQuery(
        await app(),
        `SELECT count(*)::int AS n, current_setting('server_version') AS v FROM items`,
      ),
    ).toEqual([{ n: 500, v: expect.stringMatching(/^16\./) as unknown }]);
    await expect(pgQuery(await url('shop', { user: 'app', password: 'wrong' }), 'SELECT 1')).rejects.toThrow(
      /password authentication failed/,
    );
    expect(await pgQuery(await app(), `INSERT INTO items VALUES (501, 'on 16') RETURNING id`)).toEqual([
      { id: 501 },
    ]);

    // Only the new major's backup is listed; the old major's files are gone.
    expect(object.backups).toHaveLength(1);
    const instance = await instanceRow();
    const dir = instance.data_dir as string;
    expect(fs.readFileSync(path.join(dir, 'data', 'PG_VERSION'), 'utf8').trim()).toBe('16');
    expect(fs.readdirSync(dir).filter((n) => n.includes('.next') || n.includes('.pre-upgrade'))).toEqual([]);
    const admin = await maintenanceUrl('postgres');
    // The segment holding the backup's end and a newer one reach the archive, with no failure.
    const [switched] = await pgQuery<{ wal: string }>(
      admin,
      'SELECT pg_walfile_name(pg_switch_wal()) AS wal',
    );
    let archiver: { last: string | null; failed: number } | undefined;
    for (let i = 0; i < 100; i++) {
      [archiver] = await pgQuery<{ last: string | null; failed: number }>(
        admin,
        'SELECT last_archived_wal AS last, failed_count::int AS failed FROM pg_stat_archiver',
      );
      if ((archiver?.last ?? '') >= (switched?.wal ?? '~')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(archiver).toEqual({ last: switched?.wal, failed: 0 });

    // The 16 base backup (taken without pg_basebackup 16) restores on 16, and replaying the WAL
    // archive brings back the row inserted after it.
    const backupDir = path.join(dir, 'base-backups', object.backups[0]?.backup_name ?? '');
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upgrade-restore-'));
    fs.chmodSync(work, 0o711);
    const dataDir = path.join(work, 'data');
    try {
      fs.mkdirSync(path.join(work, 'backup'));
      execFileSync('lz4', [
        '-d',
        '-q',
        path.join(backupDir, 'base.tar.lz4'),
        path.join(work, 'backup', 'base.tar'),
      ]);
      const port = await freePort();
      const info = JSON.parse(fs.readFileSync(path.join(backupDir, 'berth-backup.json'), 'utf8')) as {
        backup_time: string;
      };
      await clonePostgres({
        baseBackup: {
          dir: path.join(work, 'backup'),
          compressed: false,
          walIncluded: false,
          startedAt: info.backup_time,
          finishedAt: new Date().toISOString(),
          sizeBytes: 0,
        },
        walArchiveDir: path.join(dir, 'wal-archive'),
        targetDataDir: dataDir,
        port,
        binDir: PG16_BIN,
        // The instance's own OS account: its WAL archive is closed to every other.
        runAs: instanceAccount(dir, undefined),
        keepRunning: true,
        now: new Date(),
      });
      const restored = new URL(admin);
      restored.port = String(port);
      restored.pathname = '/shop';
      expect(await pgQuery(restored.toString(), 'SELECT count(*)::int AS n FROM items')).toEqual([
        { n: 501 },
      ]);
    } finally {
      await stopCluster(
        { binDir: PG16_BIN, dataDir, runAs: instanceAccount(dir, undefined) },
        'immediate',
      ).catch(() => undefined);
      fs.rmSync(work, { recursive: true, force: true });
    }
  }, 120_000);

  it('after a restart of Berth the instance runs on 16 again', async () => {
    const before = (await instanceRow()).pid as number;
    await berth.close();
    expect(isAlive(before)).toBe(false);
    berth = await env.boot();
    const supervisor = berth.ctx.services.managedDatabases.startSupervisor({ intervalMs: 60_000 });
    await supervisor.tick();
    await supervisor.stop();
    expect((await dbRow()).state).toBe('running');
    expect(
      await pgQuery(
        await app(),
        `SELECT count(*)::int AS n, current_setting('server_version') AS v FROM items`,
      ),
    ).toEqual([{ n: 501, v: expect.stringMatching(/^16\./) as unknown }]);
    // Base backups keep working on the new major after the restart.
    const backups = await berth.ctx.services.managedDatabases.handlers()['managed_database.base_backup']?.(
      {
        id: 0,
        type: 'managed_database.base_backup',
        key: '',
        payload: { uuid },
        attempts: 1,
        maxAttempts: 1,
      },
      { signal: new AbortController().signal },
    );
    expect(backups).toMatchObject({ runAgainAt: expect.any(Date) as unknown });
    expect((await service()).backups).toHaveLength(2);
  });

  it('clones the 16 instance without a pg_dump 16: now and to a point in time, on 16, with its own passwords', async () => {
    await pgQuery(await app(), `INSERT INTO items VALUES (502, 'before the point')`);
    await new Promise((r) => setTimeout(r, 1100));
    const between = new Date();
    await new Promise((r) => setTimeout(r, 1100));
    await pgQuery(await app(), `INSERT INTO items VALUES (503, 'after the point')`);
    env.clock.set(new Date());
    const sourceAdmin = new URL(await url('postgres'));

    const cloneOf = async (name: string, body: Record<string, unknown> = {}): Promise<string> => {
      const response = await call('POST', `/1.3/database/${uuid}/clone`, { name, ...body });
      expect(response.statusCode).toBe(201);
      return response.json<{ uuid: string }>().uuid;
    };
    const current = await cloneOf('copy-now');
    const past = await cloneOf('copy-past', { recovery_time: between.toISOString() });
    await runJobs(); // provisioning, the copies, then the clones' first base backups

    for (const [clone, last] of [
      [current, 503],
      [past, 502],
    ] as const) {
      const row = await berth.ctx.db
        .selectFrom('managed_databases')
        .selectAll()
        .where('uuid', '=', clone)
        .executeTakeFirstOrThrow();
      expect(row.state_reason).toBeNull();
      expect(row.state).toBe('running');
      const object = (await call('GET', `/1.3/database/${clone}`)).json<Service>();
      expect(object.metadata.pg_version).toMatch(/^16\./);
      expect(object.backups).toHaveLength(1);
      const password = object.users.find((u) => u.username === 'app')?.password ?? '';
      expect(password).not.toBe(appPassword);
      const appUrl = new URL(object.service_uri.replace(/\?.*$/, ''));
      appUrl.pathname = '/shop';
      appUrl.username = 'app';
      appUrl.password = encodeURIComponent(password);
      expect(
        await pgQuery(
          appUrl.toString(),
          `SELECT max(id)::int AS last, current_setting('server_version') AS v FROM items`,
        ),
      ).toEqual([{ last, v: expect.stringMatching(/^16\./) as unknown }]);
      // The clone's own passwords only: the source's open neither the user nor the admin.
      appUrl.password = encodeURIComponent(appPassword);
      await expect(pgQuery(appUrl.toString(), 'SELECT 1')).rejects.toThrow(/password authentication failed/);
      const stolenAdmin = new URL(object.service_uri.replace(/\?.*$/, ''));
      stolenAdmin.password = sourceAdmin.password;
      await expect(pgQuery(stolenAdmin.toString(), 'SELECT 1')).rejects.toThrow(
        /password authentication failed/,
      );
      const instance = await berth.ctx.db
        .selectFrom('managed_instances')
        .select('data_dir')
        .where('managed_database_id', '=', row.id)
        .executeTakeFirstOrThrow();
      expect(
        fs.readdirSync(instance.data_dir as string).filter((n) => n === 'clone-work' || n.includes('.pre-')),
      ).toEqual([]);
      // The recovery's settings are gone: the clone archives its own WAL.
      expect(
        await pgQuery(object.service_uri.replace(/\?.*$/, ''), `SELECT current_setting('archive_mode') AS m`),
      ).toEqual([{ m: 'on' }]);
    }

    // A copy that does not start is thrown out: the instance runs on its own data again. It stands
    // where the driver recovers a copy for this instance (its handle), as recoverCopy would leave it.
    const currentRow = await berth.ctx.db
      .selectFrom('managed_databases')
      .innerJoin('managed_instances', 'managed_instances.managed_database_id', 'managed_databases.id')
      .select('managed_instances.data_dir')
      .where('managed_databases.uuid', '=', current)
      .executeTakeFirstOrThrow();
    const broken = path.join(currentRow.data_dir as string, 'clone-work');
    fs.mkdirSync(path.join(broken, 'data'), { recursive: true });
    fs.writeFileSync(path.join(broken, 'data', 'PG_VERSION'), '16\n');
    await expect(
      berth.ctx.services.managedDatabases.adoptCopy(current, { handle: broken, adminPassword: 'x' }),
    ).rejects.toThrow();
    fs.rmSync(broken, { recursive: true, force: true });
    const object = (await call('GET', `/1.3/database/${current}`)).json<Service>();
    expect(
      await pgQuery(
        withDb(object.service_uri.replace(/\?.*$/, ''), 'shop'),
        'SELECT max(id)::int AS last FROM items',
      ),
    ).toEqual([{ last: 503 }]);
  }, 180_000);
});
