// PostgreSQL 15 → 16 major upgrade (dump and restore into a 16 cluster from the npm binaries).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  chooseUpgradeMethod,
  stopCluster,
  upgradeCheck,
  upgradePostgres,
} from '../../src/drivers/databases/operations/index.js';
import { PG15_BIN, startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { execFileAsync, freePort, isRoot } from '../helpers/processes.js';
import { PG16_BIN, pgQuery, withDb } from './fixtures.js';

describe('PostgreSQL major upgrade', () => {
  let source: PostgresServer;
  let work: string;
  let newDataDir: string | undefined;
  let upgradedDataDir: string | undefined;

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upgrade-test-'));
    fs.chmodSync(work, 0o755);
    source = await startPostgres({ password: 'old-admin-pw' });
    await pgQuery(
      source.url,
      `CREATE ROLE app_user LOGIN PASSWORD 'app-pass';
       CREATE ROLE readonly NOLOGIN;
       GRANT readonly TO app_user;`,
    );
    await pgQuery(source.url, 'CREATE DATABASE appdb OWNER app_user');
    const asApp = withDb(source.url, 'appdb').replace('postgres:old-admin-pw@', 'app_user:app-pass@');
    await pgQuery(withDb(source.url, 'appdb'), 'CREATE EXTENSION hstore');
    await pgQuery(
      asApp,
      `CREATE TABLE notes (id serial PRIMARY KEY, body text, tags hstore);
       INSERT INTO notes (body, tags) SELECT 'note ' || g, hstore('n', g::text) FROM generate_series(1, 300) g;
       CREATE VIEW recent AS SELECT * FROM notes WHERE id > 290;
       GRANT SELECT ON notes TO readonly;`,
    );
    await pgQuery(source.url, `CREATE TABLE admin_only (x int); INSERT INTO admin_only VALUES (42)`);
  });
  afterAll(async () => {
    if (newDataDir)
      await stopCluster({ binDir: PG16_BIN, dataDir: newDataDir }, 'immediate').catch(() => undefined);
    await source?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('checks binaries, version order and extensions', async () => {
    const ok = await upgradeCheck({ sourceUri: source.url, targetBinDir: PG16_BIN, targetVersion: '16' });
    expect(ok).toMatchObject({ success: true, sourceMajor: 15, targetMajor: 16, method: 'dump_restore' });
    expect(ok.extensions).toContainEqual({
      dbname: 'appdb',
      name: 'hstore',
      version: '1.8',
      available: true,
    });

    const notNewer = await upgradeCheck({ sourceUri: source.url, targetBinDir: PG15_BIN });
    expect(notNewer.resultCodes[0]?.code).toBe('UPGRADE_VERSION_NOT_NEWER');
    const notInstalled = await upgradeCheck({
      sourceUri: source.url,
      targetBinDir: PG16_BIN,
      targetVersion: '17',
    });
    expect(notInstalled).toMatchObject({
      success: false,
      resultCodes: [{ code: 'UPGRADE_BINARIES_MISSING' }],
    });
    const down = await upgradeCheck({
      sourceUri: `postgres://postgres:old-admin-pw@127.0.0.1:${await freePort()}/postgres`,
      targetBinDir: PG16_BIN,
    });
    expect(down).toMatchObject({ success: false, resultCodes: [{ code: 'TARGET_UNREACHABLE' }] });
    expect(JSON.stringify(down)).not.toContain('old-admin-pw');
    const occupied = path.join(work, 'occupied');
    fs.mkdirSync(occupied);
    fs.writeFileSync(path.join(occupied, 'keep.txt'), 'mine');
    await expect(
      upgradePostgres({
        sourceUri: source.url,
        targetBinDir: PG16_BIN,
        targetDataDir: occupied,
        targetPort: 1,
      }),
    ).rejects.toMatchObject({
      code: 'UPGRADE_FAILED',
      message: expect.stringContaining('not empty') as unknown,
    });
    const noDir = await upgradeCheck({ sourceUri: source.url, targetBinDir: path.join(work, 'nothing') });
    expect(noDir.resultCodes[0]?.code).toBe('UPGRADE_BINARIES_MISSING');

    // An installation of 16 without hstore: the same binaries, a share directory with plpgsql only.
    const bare = path.join(work, 'bare');
    fs.mkdirSync(path.join(bare, 'bin'), { recursive: true });
    fs.mkdirSync(path.join(bare, 'share', 'postgresql', 'extension'), { recursive: true });
    for (const b of ['initdb', 'pg_ctl', 'postgres'])
      fs.symlinkSync(path.join(PG16_BIN, b), path.join(bare, 'bin', b));
    fs.writeFileSync(path.join(bare, 'share', 'postgresql', 'extension', 'plpgsql.control'), '');
    const missing = await upgradeCheck({ sourceUri: source.url, targetBinDir: path.join(bare, 'bin') });
    expect(missing.success).toBe(false);
    expect(missing.resultCodes).toEqual([
      expect.objectContaining({ code: 'UPGRADE_EXTENSION_MISSING', dbname: 'appdb' }),
    ]);
  });

  it('moves data, roles and passwords into a PostgreSQL 16 cluster', async () => {
    newDataDir = path.join(work, 'pg16');
    const port = await freePort();
    const result = await upgradePostgres({
      sourceUri: source.url,
      targetBinDir: PG16_BIN,
      targetDataDir: newDataDir,
      targetPort: port,
      keepRunning: true,
    });
    expect(result).toMatchObject({ method: 'dump_restore', toVersion: '16', running: true, port });
    expect(result.fromVersion).toMatch(/^15\./);
    expect(result.databases).toEqual(['appdb', 'postgres']);

    const at = (user: string, password: string, db: string): string =>
      `postgres://${user}:${password}@127.0.0.1:${port}/${db}`;
    const [version] = await pgQuery<{ v: string }>(
      at('postgres', 'old-admin-pw', 'postgres'),
      `SELECT current_setting('server_version') AS v`,
    );
    expect(version?.v).toMatch(/^16\./);
    // The application's own login (its SCRAM hash was copied) still works, and it still owns its data.
    const app = at('app_user', 'app-pass', 'appdb');
    expect(
      await pgQuery(app, `SELECT count(*)::int AS n, sum((tags -> 'n')::int)::int AS s FROM notes`),
    ).toEqual([{ n: 300, s: 45150 }]);
    expect(await pgQuery(app, 'SELECT count(*)::int AS n FROM recent')).toEqual([{ n: 10 }]);
    expect(await pgQuery(app, `SELECT tableowner AS o FROM pg_tables WHERE tablename = 'notes'`)).toEqual([
      { o: 'app_user' },
    ]);
    expect(
      await pgQuery(
        app,
        `SELECT pg_has_role('app_user', 'readonly', 'MEMBER') AS m, has_table_privilege('readonly', 'notes', 'SELECT') AS g`,
      ),
    ).toEqual([{ m: true, g: true }]);
    expect(await pgQuery(at('postgres', 'old-admin-pw', 'postgres'), 'SELECT x FROM admin_only')).toEqual([
      { x: 42 },
    ]);
    await expect(pgQuery(at('app_user', 'wrong', 'appdb'), 'SELECT 1')).rejects.toThrow(
      /password authentication failed/,
    );
    if (isRoot()) {
      const { stdout } = await execFileAsync('stat', ['-c', '%U', newDataDir]);
      expect(stdout.trim()).toBe('postgres');
    }
  });

  // Debian ships pg_upgrade only for 15, so this runs 15 → 15: it exercises the pg_upgrade path (stop the
  // old cluster, initdb, pg_upgrade --copy, start) that a second installed major would take.
  it('takes the pg_upgrade path when both binaries and pg_upgrade are installed', async () => {
    expect(chooseUpgradeMethod(PG15_BIN, PG15_BIN)).toBe('pg_upgrade');
    expect(chooseUpgradeMethod(PG16_BIN, PG15_BIN)).toBe('dump_restore');
    upgradedDataDir = path.join(work, 'pg-upgraded');
    const port = await freePort();
    const result = await upgradePostgres({
      sourceUri: source.url,
      method: 'auto',
      sourceBinDir: PG15_BIN,
      sourceDataDir: source.dataDir,
      targetBinDir: PG15_BIN,
      targetDataDir: upgradedDataDir,
      targetPort: port,
      keepRunning: true,
    });
    expect(result).toMatchObject({ method: 'pg_upgrade', running: true, databases: ['appdb', 'postgres'] });
    const app = `postgres://app_user:app-pass@127.0.0.1:${port}/appdb`;
    expect(await pgQuery(app, 'SELECT count(*)::int AS n FROM notes')).toEqual([{ n: 300 }]);
  });
});
