// migration_check and dump migration against real external servers started here (not managed by Berth).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkMigrationSource,
  cloneMysql,
  dumpMigrate,
  pendingMaintenance,
  validateSourceUri,
  type MigrationStatus,
} from '../../src/drivers/databases/operations/index.js';
import { freePort } from '../helpers/processes.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { PG16_BIN, myQuery, pgQuery, withDb, withPassword } from './fixtures.js';
import { startMariaDb, type MariaDbServer } from './mariadb-server.js';

const SOURCE_PASSWORD = 's3cr3t-Pa55/word';

describe('PostgreSQL migration check and dump', () => {
  let source: PostgresServer;
  let target: PostgresServer;
  let newer: PostgresServer;

  beforeAll(async () => {
    [source, target, newer] = await Promise.all([
      startPostgres({ password: SOURCE_PASSWORD, conf: ['wal_level=logical'] }),
      startPostgres(),
      startPostgres({ binDir: PG16_BIN }),
    ]);
    for (const db of ['shop', 'crm', 'scratch']) await pgQuery(source.url, `CREATE DATABASE ${db}`);
    await pgQuery(
      withDb(source.url, 'shop'),
      `CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL, price numeric);
       INSERT INTO items (name, price) SELECT 'item ' || g, g * 1.5 FROM generate_series(1, 500) g;
       CREATE INDEX items_name ON items (name);
       CREATE VIEW cheap AS SELECT * FROM items WHERE price < 10;
       CREATE TABLE log (line text);`,
    );
    await pgQuery(
      withDb(source.url, 'crm'),
      `CREATE TABLE people (id int PRIMARY KEY, email text UNIQUE);
       INSERT INTO people SELECT g, 'p' || g || '@example.com' FROM generate_series(1, 120) g;`,
    );
    await pgQuery(withDb(source.url, 'scratch'), `CREATE TABLE junk AS SELECT 1 AS x`);
    await pgQuery(source.url, `CREATE ROLE reader LOGIN PASSWORD 'reader'`);
  });
  afterAll(async () => {
    await Promise.all([source?.stop(), target?.stop(), newer?.stop()]);
  });

  it('reports version, databases with sizes and the preferred method', async () => {
    const result = await checkMigrationSource({ sourceUri: source.url, ignoreDbs: 'scratch', engine: 'pg' });
    expect(result.success).toBe(true);
    expect(result.serverMajor).toBe(15);
    expect(result.serverVersion).toMatch(/^15\./);
    expect(result.preferredMethod).toBe('replication');
    expect(result.method).toBe('replication');
    const names = result.databases.map((d) => d.name);
    expect(names).toEqual(['crm', 'postgres', 'scratch', 'shop']);
    expect(result.databases.find((d) => d.name === 'scratch')?.ignored).toBe(true);
    expect(result.databases.find((d) => d.name === 'shop')?.sizeBytes).toBeGreaterThan(1_000_000);
    // shop.log has no primary key: reported, not fatal.
    expect(result.resultCodes).toContainEqual(
      expect.objectContaining({ code: 'TABLE_WITHOUT_PRIMARY_KEY', dbname: 'shop' }),
    );
  });

  it('refuses replication when wal_level is not logical, but allows a dump', async () => {
    const replication = await checkMigrationSource({ sourceUri: target.url, method: 'replication' });
    expect(replication.success).toBe(false);
    expect(replication.resultCodes[0]?.code).toBe('REPLICATION_NOT_POSSIBLE');
    expect(replication.result).toContain("wal_level is 'replica'");
    const dump = await checkMigrationSource({ sourceUri: target.url, method: 'dump' });
    expect(dump.success).toBe(true);
    expect((await checkMigrationSource({ sourceUri: target.url })).preferredMethod).toBe('dump');
  });

  it('refuses replication for a user without the REPLICATION attribute', async () => {
    const url = withPassword(source.url, 'reader').replace('postgres:reader@', 'reader:reader@');
    const result = await checkMigrationSource({ sourceUri: url, method: 'replication' });
    expect(result.success).toBe(false);
    expect(result.replication.reasons.join()).toContain('neither the REPLICATION attribute nor superuser');
    // And the tables it cannot read make a dump impossible too.
    expect(result.dump.possible).toBe(false);
    expect(result.resultCodes).toContainEqual(
      expect.objectContaining({ code: 'DUMP_NOT_POSSIBLE', dbname: 'shop' }),
    );
  });

  it('reports an unreachable source, refused credentials and a newer major as codes', async () => {
    const port = await freePort();
    const unreachable = await checkMigrationSource({
      sourceUri: `postgres://u:${SOURCE_PASSWORD}@127.0.0.1:${port}/x`,
    });
    expect(unreachable).toMatchObject({ success: false, resultCodes: [{ code: 'SOURCE_UNREACHABLE' }] });
    expect(JSON.stringify(unreachable)).not.toContain(SOURCE_PASSWORD);

    const badPassword = await checkMigrationSource({ sourceUri: withPassword(source.url, 'wrong-password') });
    expect(badPassword).toMatchObject({ success: false, resultCodes: [{ code: 'SOURCE_AUTH_FAILED' }] });
    expect(JSON.stringify(badPassword)).not.toContain('wrong-password');

    // ssl: true demands TLS; these test servers have none.
    const noTls = await checkMigrationSource({ sourceUri: source.url, ssl: true });
    expect(noTls.resultCodes[0]?.code).toBe('SOURCE_SSL_UNAVAILABLE');

    const missingDb = await checkMigrationSource({ sourceUri: withDb(source.url, 'nope') });
    expect(missingDb.resultCodes[0]?.code).toBe('SOURCE_DATABASE_NOT_FOUND');

    // The installed pg_dump is 15: it cannot read a PostgreSQL 16 source.
    const tooNew = await checkMigrationSource({ sourceUri: newer.url, method: 'dump' });
    expect(tooNew.success).toBe(false);
    expect(tooNew.serverMajor).toBe(16);
    expect(tooNew.resultCodes[0]?.code).toBe('SOURCE_VERSION_UNSUPPORTED');
    // And nothing moves into an older major.
    const older = await checkMigrationSource({ sourceUri: source.url, method: 'dump', targetMajor: 14 });
    expect(older.resultCodes[0]?.code).toBe('SOURCE_VERSION_UNSUPPORTED');
  });

  it('throws on malformed URIs and engine mismatches, without the password', () => {
    expect(() => validateSourceUri('not a uri')).toThrow(
      expect.objectContaining({ code: 'INVALID_SOURCE_URI' }),
    );
    expect(() => validateSourceUri(`ftp://u:${SOURCE_PASSWORD}@h/x`)).toThrow(
      expect.objectContaining({ code: 'INVALID_SOURCE_URI' }),
    );
    try {
      validateSourceUri(`mysql://u:${SOURCE_PASSWORD}@h/x`, 'pg');
      expect.unreachable();
    } catch (error) {
      expect(error).toMatchObject({ code: 'ENGINE_MISMATCH' });
      expect(String(error)).not.toContain(SOURCE_PASSWORD);
    }
  });

  it('copies every database except the ignored ones, with per-database status', async () => {
    const progress: MigrationStatus[] = [];
    const status = await dumpMigrate({
      sourceUri: source.url,
      targetUri: target.url,
      ignoreDbs: 'scratch',
      onProgress: (s) => progress.push(s),
    });
    expect(status).toMatchObject({ status: 'done', method: 'pg_dump', source_active: true });
    expect(status.databases).toEqual([
      { dbname: 'crm', method: 'pg_dump', status: 'done' },
      { dbname: 'postgres', method: 'pg_dump', status: 'done' },
      { dbname: 'shop', method: 'pg_dump', status: 'done' },
    ]);
    expect(progress.some((p) => p.databases.some((d) => d.status === 'running'))).toBe(true);
    const [items] = await pgQuery<{ n: number; sum: string }>(
      withDb(target.url, 'shop'),
      'SELECT count(*)::int AS n, sum(price)::text AS sum FROM items',
    );
    expect(items).toEqual({ n: 500, sum: '187875.0' });
    expect(await pgQuery(withDb(target.url, 'shop'), 'SELECT count(*)::int AS n FROM cheap')).toEqual([
      { n: 6 },
    ]);
    expect(await pgQuery(withDb(target.url, 'crm'), 'SELECT count(*)::int AS n FROM people')).toEqual([
      { n: 120 },
    ]);
    const dbs = await pgQuery<{ datname: string }>(target.url, 'SELECT datname FROM pg_database');
    expect(dbs.map((d) => d.datname)).not.toContain('scratch');
  });

  it('marks a database failed when the target refuses, and keeps passwords out of the error', async () => {
    const status = await dumpMigrate({
      sourceUri: source.url,
      targetUri: withPassword(target.url, 'target-wrong-pw'),
      databases: ['crm'],
    });
    expect(status.status).toBe('failed');
    expect(status.databases[0]).toMatchObject({ dbname: 'crm', status: 'failed' });
    expect(status.databases[0]?.error).toMatch(/password authentication failed/);
    expect(JSON.stringify(status)).not.toContain('target-wrong-pw');
    expect(JSON.stringify(status)).not.toContain(SOURCE_PASSWORD);
  });
});

describe('MariaDB migration check and dump', () => {
  let source: MariaDbServer;
  let target: MariaDbServer;
  let clone: MariaDbServer;
  beforeAll(async () => {
    [source, target, clone] = await Promise.all([
      startMariaDb({ password: SOURCE_PASSWORD }),
      startMariaDb(),
      startMariaDb({ password: 'clone-admin' }),
    ]);
    await source.sql(
      `CREATE DATABASE app; CREATE DATABASE audit; CREATE DATABASE skipme; USE app;
       CREATE TABLE app.orders (id INT PRIMARY KEY AUTO_INCREMENT, total DECIMAL(10,2), note BLOB) ENGINE=InnoDB;
       INSERT INTO app.orders (total, note) SELECT seq * 2.5, UNHEX('00FF') FROM seq_1_to_300;
       CREATE TABLE audit.events (id INT PRIMARY KEY, what VARCHAR(50));
       INSERT INTO audit.events VALUES (1, 'created'), (2, 'paid');
       CREATE TABLE skipme.t (x INT);
       CREATE USER 'reporter'@'%' IDENTIFIED BY 'rep-pw'; GRANT SELECT ON audit.* TO 'reporter'@'%';`,
    );
  });
  afterAll(async () => {
    await Promise.all([source?.stop(), target?.stop(), clone?.stop()]);
  });

  it('clones the current state with users; refuses a point in time with PITR_NOT_SUPPORTED', async () => {
    await expect(
      cloneMysql({ sourceUri: source.url, targetUri: clone.url, recoveryTime: new Date().toISOString() }),
    ).rejects.toMatchObject({ code: 'PITR_NOT_SUPPORTED' });
    const status = await cloneMysql({ sourceUri: source.url, targetUri: clone.url });
    expect(status.databases.map((d) => d.dbname)).toEqual(['app', 'audit', 'skipme']);
    expect(await myQuery(clone.url, 'SELECT COUNT(*) AS n FROM app.orders')).toEqual([{ n: 300 }]);
    // The source's application user logs in to the clone with its own password and keeps its grants;
    // the clone's admin keeps the password its driver set.
    const reporter = clone.url.replace('admin:clone-admin@', 'reporter:rep-pw@');
    expect(await myQuery(reporter, 'SELECT what FROM audit.events ORDER BY id LIMIT 1')).toEqual([
      { what: 'created' },
    ]);
    await expect(myQuery(reporter, 'SELECT * FROM app.orders')).rejects.toThrow(/denied/);
    expect(await myQuery(clone.url, 'SELECT 1 AS ok')).toEqual([{ ok: 1 }]);
  });

  it('has no pending maintenance when the running MariaDB is the installed one', async () => {
    expect(await pendingMaintenance({ uri: source.url })).toEqual([]);
  });

  it('checks the source: version, databases, dump yes, replication no', async () => {
    const result = await checkMigrationSource({
      sourceUri: source.url,
      engine: 'mysql',
      ignoreDbs: 'skipme',
    });
    expect(result).toMatchObject({ success: true, engine: 'mysql', method: 'dump', preferredMethod: 'dump' });
    expect(result.serverVersion).toMatch(/MariaDB/);
    expect(result.databases.map((d) => [d.name, d.ignored])).toEqual([
      ['app', false],
      ['audit', false],
      ['skipme', true],
    ]);
    expect(result.databases[0]?.sizeBytes).toBeGreaterThan(0);
    const replication = await checkMigrationSource({ sourceUri: source.url, method: 'replication' });
    expect(replication).toMatchObject({
      success: false,
      resultCodes: [{ code: 'REPLICATION_NOT_POSSIBLE' }],
    });
    const denied = await checkMigrationSource({ sourceUri: withPassword(source.url, 'nope') });
    expect(denied.resultCodes[0]?.code).toBe('SOURCE_AUTH_FAILED');
    expect(JSON.stringify(denied)).not.toContain(SOURCE_PASSWORD);
  });

  it('copies the databases with mariadb-dump | mariadb, rows equal', async () => {
    const status = await dumpMigrate({ sourceUri: source.url, targetUri: target.url, ignoreDbs: 'skipme' });
    expect(status, JSON.stringify(status)).toMatchObject({ status: 'done', method: 'mysqldump' });
    expect(status.databases.map((d) => [d.dbname, d.status])).toEqual([
      ['app', 'done'],
      ['audit', 'done'],
    ]);
    const rows = await myQuery<{ n: number; total: string; note: string }>(
      target.url,
      'SELECT COUNT(*) AS n, SUM(total) AS total, MIN(HEX(note)) AS note FROM app.orders',
    );
    expect(rows[0]).toMatchObject({ n: 300, total: '112875.00', note: '00FF' });
    expect(await myQuery(target.url, 'SELECT what FROM audit.events ORDER BY id')).toEqual([
      { what: 'created' },
      { what: 'paid' },
    ]);
    expect(await target.sql("SHOW DATABASES LIKE 'skipme'")).toBe('');
  });
});
