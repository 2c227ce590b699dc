// A managed PostgreSQL through the client: apply --wait returns once it is provisioned, and
// `berth db clone --wait` over /1.3 makes a running copy holding the source's data; on the same two
// databases, `db maintenance` applies a setting waiting for a restart, `db migrate --wait` copies an
// external PostgreSQL in (migration-status shows it), and `db upgrade --wait` moves 15 to 16 (and exits 1
// when the upgrade fails and 15 keeps running). The background work (jobs, supervisors) runs for real.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { MAINTENANCE_USER, maintenancePassword } from '../../src/drivers/databases/local/accounts.js';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import type { TestApp } from '../helpers/app.js';
import { startPostgres } from '../helpers/postgres-server.js';
import { pgQuery, withDb } from '../db-operations/fixtures.js';
import { ensureBuilt, Shell, startBerth } from './helpers.js';

let t: TestApp;
let background: Background;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  let url: string;
  // The migration source below is a PostgreSQL on loopback, which /1.3 refuses unless allowed.
  ({ t, url } = await startBerth({ env: { BERTH_TOOLS_ALLOW_PRIVATE: '127.0.0.1' } }));
  background = await startBackground(t.ctx, { pollMs: 100 });
  shell = new Shell({ BERTH_DB_USER: t.user.db_api_username, BERTH_DB_PASSWORD: t.user.db_api_password });
  const login = await shell.run(['login', '--url', url, '--token', t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await background?.stop();
  await t?.close();
});

interface Shown {
  state: string;
  service_uri: string;
  properties: { version: string };
}

const show = async (name: string): Promise<Shown> => {
  const run = await shell.run(['db', 'show', name, '--show-password', '--output', 'json']);
  expect(run.code, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as Shown;
};

/** The admin's URI of a managed database, on one of its logical databases. */
const adminUri = async (name: string, database: string) =>
  withDb((await show(name)).service_uri.replace(/\?.*$/, ''), database);

const instanceOf = async (name: string) => {
  const row = await t.ctx.db
    .selectFrom('managed_databases')
    .innerJoin('managed_instances', 'managed_instances.managed_database_id', 'managed_databases.id')
    .select(['managed_instances.pid', 'managed_instances.data_dir'])
    .where('managed_databases.name', '=', name)
    .executeTakeFirstOrThrow();
  return { pid: row.pid, dataDir: row.data_dir as string };
};

/** Berth's own superuser on an instance: what a setting waiting for a restart needs. */
const maintenanceUri = async (name: string) => {
  const u = new URL(await adminUri(name, 'postgres'));
  u.username = MAINTENANCE_USER;
  u.password = encodeURIComponent(maintenancePassword((await instanceOf(name)).dataDir));
  return u.toString();
};

describe('managed databases', () => {
  it('apply --wait returns once the database runs; db clone --wait copies it', async () => {
    const file = shell.file(
      'team.yaml',
      `apiVersion: v1
kind: Infrastructure
metadata:
  name: acme
  team: acme
spec:
  managed_databases:
    - name: main-db
      type: pg
      plan: 1x1xCPU-2GB-25GB
      zone: de-fra1
      logical_databases:
        - name: shop
`,
    );
    const applied = await shell.run(['apply', '-f', file, '--wait'], { timeoutMs: 240_000 });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).toContain('✓ managed database main-db running');

    const shown = await shell.run(['db', 'show', 'main-db', '--show-password', '--output', 'json']);
    expect(shown.code, shown.stderr).toBe(0);
    const source = JSON.parse(shown.stdout) as { service_uri: string; state: string };
    expect(source.state).toBe('running');
    const masked = await shell.run(['db', 'show', 'main-db']);
    expect(masked.stdout).toMatch(/uri +\S+:\/\/[^:]+:\*\*\*\*@/);
    const sourceUri = withDb(source.service_uri.replace(/\?.*$/, ''), 'shop');
    await pgQuery(sourceUri, 'CREATE TABLE orders (id int); INSERT INTO orders VALUES (42)');

    const clone = await shell.run(['db', 'clone', 'main-db', '--name', 'main-copy', '--wait'], {
      timeoutMs: 240_000,
    });
    expect(clone.code, clone.stderr).toBe(0);
    expect(clone.stdout).toMatch(/Clone main-copy \([0-9a-f-]{36}\) of main-db created: pending\./);
    expect(clone.stderr).toContain('✓ Clone main-copy: running');
    const copy = JSON.parse(
      (await shell.run(['db', 'show', 'main-copy', '--show-password', '--output', 'json'])).stdout,
    ) as { service_uri: string };
    const rows = await pgQuery(
      withDb(copy.service_uri.replace(/\?.*$/, ''), 'shop'),
      'SELECT id FROM orders',
    );
    expect(JSON.stringify(rows)).toContain('42');

    // db connect runs psql with the connection in its environment; the arguments after -- are the user's.
    const connect = await shell.run([
      'db',
      'connect',
      'main-copy',
      '--',
      '-At',
      '-d',
      'shop',
      '-c',
      'SELECT id FROM orders',
    ]);
    expect(connect.code, connect.stderr).toBe(0);
    expect(connect.stdout.trim()).toBe('42');

    const list = await shell.run(['db', 'list']);
    expect(list.stdout).toMatch(/main-copy\s+pg/);
  }, 600_000);

  it('db maintenance restarts the database to apply a setting waiting for a restart; nothing pending exits 1', async () => {
    const none = await shell.run(['db', 'maintenance', 'main-copy']);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/^berth: .+ \(NO_MAINTENANCE_AVAILABLE\)\n$/);

    const admin = await maintenanceUri('main-copy');
    await pgQuery(admin, 'ALTER SYSTEM SET max_wal_senders = 7');
    await pgQuery(admin, 'SELECT pg_reload_conf()');
    const before = await instanceOf('main-copy');
    const run = await shell.run(['db', 'maintenance', 'main-copy'], { timeoutMs: 120_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('max_wal_senders');
    // Restarted: a new server process, running with the setting.
    expect(await pgQuery(admin, 'SHOW max_wal_senders')).toEqual([{ max_wal_senders: '7' }]);
    expect((await instanceOf('main-copy')).pid).not.toBe(before.pid);
    expect(isAlive(before.pid)).toBe(false);
    expect((await show('main-copy')).state).toBe('running');
    const json = await shell.run(['db', 'maintenance', 'main-copy', '--output', 'json']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      error: { code: 'NO_MAINTENANCE_AVAILABLE', status: 409 },
    });
  }, 180_000);

  it('db migrate checks the source and copies it in with --wait; migration-status shows it', async () => {
    const password = 'Src-pa55/w0rd';
    const source = await startPostgres({ password });
    try {
      await pgQuery(source.url, 'CREATE DATABASE crm');
      await pgQuery(
        withDb(source.url, 'crm'),
        'CREATE TABLE people (id int PRIMARY KEY); INSERT INTO people SELECT generate_series(1, 40)',
      );
      const idle = await shell.run(['db', 'migration-status', 'main-copy', '--output', 'json']);
      expect(JSON.parse(idle.stdout)).toMatchObject({ status: 'done', method: '', databases: [] });

      // The source has no TLS, which a migration requires unless told otherwise: nothing starts.
      const refused = await shell.run(['db', 'migrate', 'main-copy', '--from', '-'], {
        input: `${source.url}\n`,
        timeoutMs: 120_000,
      });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('✓ Migration check');
      expect(refused.stderr).toContain('SSL_NOT_SUPPORTED');
      expect(refused.stderr).toContain('Run again with --no-ssl');
      expect(
        JSON.parse((await shell.run(['db', 'migration-status', 'main-copy', '--json'])).stdout),
      ).toMatchObject({
        method: '',
      });

      // The source's own `postgres` database stays behind (--ignore-dbs); crm is copied.
      const run = await shell.run(
        ['db', 'migrate', 'main-copy', '--from', '-', '--no-ssl', '--ignore-dbs', 'postgres', '--wait'],
        {
          input: `${source.url}\n`,
          timeoutMs: 180_000,
        },
      );
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toMatch(
        /^Migration into main-copy started\.\nmain-copy: migration done \(pg_dump\)\nDATABASE\s+METHOD\s+STATUS\s+ERROR\ncrm\s+pg_dump\s+done\s*\n$/,
      );
      expect(run.stderr).toContain('✓ Migration into main-copy: done');
      expect(run.stdout + run.stderr).not.toContain('Src-pa55');
      const rows = await pgQuery(await adminUri('main-copy', 'crm'), 'SELECT count(*)::int AS n FROM people');
      expect(rows).toEqual([{ n: 40 }]);
      // The database the clone brought is still there beside it.
      expect(await pgQuery(await adminUri('main-copy', 'shop'), 'SELECT id FROM orders')).toEqual([
        { id: 42 },
      ]);

      const status = await shell.run(['db', 'migration-status', 'main-copy']);
      expect(status.code, status.stderr).toBe(0);
      expect(status.stdout).toMatch(/^main-copy: migration done \(pg_dump\)\n/);
      expect(status.stdout).toMatch(/crm\s+pg_dump\s+done/);
      const json = await shell.run(['db', 'migration-status', 'main-copy', '--output', 'json']);
      expect(JSON.parse(json.stdout)).toMatchObject({
        status: 'done',
        method: 'pg_dump',
        databases: [{ dbname: 'crm', status: 'done' }],
      });
    } finally {
      await source.stop();
    }
  }, 300_000);

  it('db upgrade runs the check, then PostgreSQL 16; a failed check or upgrade exits 1 on 15', async () => {
    const missing = await shell.run(['db', 'upgrade', 'main-db', '--version', '17'], { timeoutMs: 120_000 });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('✗ Upgrade check to 17');
    expect(missing.stderr).toContain('UPGRADE_BINARIES_MISSING');
    const checked = await shell.run(['db', 'upgrade', 'main-db', '--version', '16', '--check-only'], {
      timeoutMs: 120_000,
    });
    expect(checked.code, checked.stderr).toBe(0);
    expect(checked.stderr).toContain('✓ Upgrade check to 16');
    expect((await show('main-db')).properties.version).toBe('15');

    // A setting 15 knows and 16 does not: the restore into 16 fails and 15 keeps running.
    const shop = await adminUri('main-db', 'postgres');
    await pgQuery(shop, 'ALTER DATABASE shop SET force_parallel_mode = off');
    const failed = await shell.run(['db', 'upgrade', 'main-db', '--version', '16', '--wait'], {
      timeoutMs: 240_000,
    });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toContain('✗ Upgrade of main-db to 16: failed; still running PostgreSQL 15');
    expect(failed.stdout).toBe('main-db: running, PostgreSQL 15\n');
    await pgQuery(shop, 'ALTER DATABASE shop RESET force_parallel_mode');

    const upgraded = await shell.run(['db', 'upgrade', 'main-db', '--version', '16', '--wait'], {
      timeoutMs: 240_000,
    });
    expect(upgraded.code, upgraded.stderr).toBe(0);
    expect(upgraded.stderr).toContain('✓ Upgrade of main-db to 16: running PostgreSQL 16');
    expect(upgraded.stdout).toBe('main-db: running, PostgreSQL 16\n');
    // The data came along onto a 16 server.
    expect(
      await pgQuery(
        await adminUri('main-db', 'shop'),
        "SELECT id, current_setting('server_version') AS v FROM orders",
      ),
    ).toEqual([{ id: 42, v: expect.stringMatching(/^16\./) as unknown }]);
    const list = await shell.run(['db', 'list']);
    expect(list.stdout).toMatch(/main-db\s+pg\s+16\s+1x1xCPU-2GB-25GB\s+de-fra1\s+running/);
    expect(list.stdout).toMatch(/main-copy\s+pg\s+15\s+/);
  }, 600_000);
});
