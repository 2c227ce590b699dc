// Logical-replication migration between two real PostgreSQL 15 servers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkMigrationSource,
  replicationStatus,
  startReplication,
  stopReplication,
} from '../../src/drivers/databases/operations/index.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { waitFor } from '../helpers/processes.js';
import { pgQuery, withDb } from './fixtures.js';

const SOURCE_PASSWORD = "o'brien\\pw";

describe('PostgreSQL logical replication migration', () => {
  let source: PostgresServer;
  let target: PostgresServer;
  const count = async (url: string, table: string): Promise<number> =>
    (await pgQuery<{ n: number }>(url, `SELECT count(*)::int AS n FROM ${table}`))[0]?.n ?? -1;

  beforeAll(async () => {
    [source, target] = await Promise.all([
      startPostgres({ password: SOURCE_PASSWORD, conf: ['wal_level=logical', 'wal_sender_timeout=5s'] }),
      startPostgres(),
    ]);
    for (const db of ['app', 'other']) await pgQuery(source.url, `CREATE DATABASE ${db}`);
    await pgQuery(
      withDb(source.url, 'app'),
      `CREATE TABLE events (id bigserial PRIMARY KEY, body text);
       INSERT INTO events (body) SELECT 'before ' || g FROM generate_series(1, 1000) g;`,
    );
    // A migration user that is not a superuser: REPLICATION attribute, owns the tables it migrates.
    await pgQuery(source.url, `CREATE ROLE migrator LOGIN REPLICATION PASSWORD 'mig-pw'`);
    await pgQuery(source.url, `ALTER DATABASE other OWNER TO migrator`);
    await pgQuery(
      withDb(source.url, 'other').replace(/\/\/postgres:[^@]*@/, '//migrator:mig-pw@'),
      `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 10)`,
    );
  });
  afterAll(async () => {
    await Promise.all([source?.stop(), target?.stop()]);
  });

  it('copies existing rows, then keeps applying new ones; reports lag; stops cleanly', async () => {
    const started = await startReplication({
      sourceUri: source.url,
      targetUri: target.url,
      ignoreDbs: 'other,postgres',
    });
    expect(started).toMatchObject({
      status: 'running',
      method: 'replication',
      databases: [{ dbname: 'app' }],
    });
    const app = withDb(target.url, 'app');
    // Polled from the first moment, as a client would: starting up is `running`, never `failed`.
    const seen = new Set<string>();
    await waitFor(async () => {
      const status = await replicationStatus({ sourceUri: source.url, targetUri: target.url });
      seen.add(status.status);
      for (const database of status.databases) seen.add(`db:${database.status}`);
      return (await count(app, 'events')) === 1000 ? true : undefined;
    }, 20_000);
    expect([...seen].filter((s) => s.includes('failed'))).toEqual([]);
    // The ignored database was not touched on the target.
    expect(
      (await pgQuery<{ datname: string }>(target.url, 'SELECT datname FROM pg_database')).map(
        (r) => r.datname,
      ),
    ).not.toContain('other');

    await pgQuery(
      withDb(source.url, 'app'),
      `INSERT INTO events (body) SELECT 'after ' || g FROM generate_series(1, 250) g`,
    );
    await pgQuery(withDb(source.url, 'app'), `UPDATE events SET body = 'changed' WHERE id = 1`);
    await waitFor(async () => ((await count(app, 'events')) === 1250 ? true : undefined), 20_000);
    await waitFor(async () => {
      const rows = await pgQuery<{ body: string }>(app, 'SELECT body FROM events WHERE id = 1');
      return rows[0]?.body === 'changed' ? true : undefined;
    });

    const synced = await waitFor(async () => {
      const s = await replicationStatus({ sourceUri: source.url, targetUri: target.url });
      return s.lag_bytes === 0 && s.databases[0]?.status === 'syncing' ? s : undefined;
    }, 20_000);
    expect(synced).toMatchObject({
      status: 'done',
      method: 'replication',
      seconds_behind_master: 0,
      source_active: true,
      databases: [{ dbname: 'app', method: 'replication', status: 'syncing' }],
    });

    // With the subscription paused, source writes pile up as lag and the database shows as down.
    await pgQuery(app, 'ALTER SUBSCRIPTION berth_migration DISABLE');
    await pgQuery(
      withDb(source.url, 'app'),
      `INSERT INTO events (body) SELECT 'x' FROM generate_series(1, 100) g`,
    );
    const behind = await waitFor(async () => {
      const s = await replicationStatus({ sourceUri: source.url, targetUri: target.url });
      return s.lag_bytes > 0 && s.status === 'failed' ? s : undefined;
    });
    expect(behind.databases[0]?.status).toBe('failed');
    expect(behind.databases[0]?.error).toContain('replication is currently down');
    expect(JSON.stringify(behind)).not.toContain(SOURCE_PASSWORD);
    await pgQuery(app, 'ALTER SUBSCRIPTION berth_migration ENABLE');
    await waitFor(async () => ((await count(app, 'events')) === 1350 ? true : undefined), 20_000);

    const stopped = await stopReplication({ sourceUri: source.url, targetUri: target.url });
    expect(stopped).toEqual({ databases: ['app'], orphanedSlots: [] });
    expect(await pgQuery(source.url, 'SELECT slot_name FROM pg_replication_slots')).toEqual([]);
    expect(await pgQuery(withDb(source.url, 'app'), 'SELECT pubname FROM pg_publication')).toEqual([]);
    // After the stop, the target is a standalone database: new source rows no longer arrive.
    await pgQuery(withDb(source.url, 'app'), `INSERT INTO events (body) VALUES ('late')`);
    await new Promise((r) => setTimeout(r, 300));
    expect(await count(app, 'events')).toBe(1350);
    await expect(stopReplication({ sourceUri: source.url, targetUri: target.url })).rejects.toMatchObject({
      code: 'REPLICATION_NOT_RUNNING',
    });
    expect(await replicationStatus({ sourceUri: source.url, targetUri: target.url })).toMatchObject({
      status: 'done',
      method: '',
      databases: [],
    });
  });

  it('works for a source user with the REPLICATION attribute that owns the tables (no superuser)', async () => {
    const migrator = source.url.replace(/\/\/postgres:[^@]*@/, '//migrator:mig-pw@');
    const check = await checkMigrationSource({
      sourceUri: withDb(migrator, 'other'),
      method: 'replication',
      ignoreDbs: 'app,postgres',
    });
    expect(check.replication).toEqual({ possible: true, reasons: [] });
    // Including a database whose tables it does not own makes replication impossible for this user.
    const withApp = await checkMigrationSource({
      sourceUri: migrator,
      method: 'replication',
      ignoreDbs: 'postgres',
    });
    expect(withApp.replication.reasons.join()).toContain('table(s) in app are not owned by migrator');
    const started = await startReplication({
      sourceUri: migrator,
      targetUri: target.url,
      databases: ['other'],
    });
    expect(started.status).toBe('running');
    const other = withDb(target.url, 'other');
    await waitFor(async () => ((await count(other, 't')) === 10 ? true : undefined), 20_000);
    await pgQuery(withDb(migrator, 'other'), 'INSERT INTO t SELECT generate_series(11, 15)');
    await waitFor(async () => ((await count(other, 't')) === 15 ? true : undefined), 20_000);
    expect(await stopReplication({ sourceUri: migrator, targetUri: target.url })).toEqual({
      databases: ['other'],
      orphanedSlots: [],
    });
  });
});
