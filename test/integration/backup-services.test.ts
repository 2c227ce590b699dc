// What `berth admin backup` used to leave out (issue 31 item 3), through src/backup.ts's own functions
// on a real context: a Valkey managed database's keys (an RDB snapshot), a powered-off PostgreSQL
// managed database's rows (started for its dump, restored powered off) and an application's
// postgresql service's rows (dumped through its runner). Restored into a second, fresh data dir on
// this machine, each value is back. The CLI and the rest of the platform: backup.test.ts.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { createClient } from 'redis';
import { afterAll, describe, expect, it } from 'vitest';
import { restoreDatabases, restoreFoundation, runBackup } from '../../src/backup.js';
import { createContext, type AppContext } from '../../src/context.js';
import { loadOrCreateMasterKey } from '../../src/crypto/secret-box.js';
import { createDirectoryTarget } from '../../src/drivers/backup/dir.js';
import { createLocalDatabaseDriver } from '../../src/drivers/databases/local/index.js';
import { createTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { applyManagedDatabase, sharedTemplateDir } from '../managed-databases/helpers.js';
import { appDocument } from '../app-services/helpers.js';

const PASSPHRASE = 'correct horse battery staple';

const templates = sharedTemplateDir();

/** The instance row of a managed database, and its admin's password. */
async function managedAdmin(ctx: AppContext, uuid: string) {
  const row = await ctx.db
    .selectFrom('managed_databases')
    .selectAll()
    .where('uuid', '=', uuid)
    .executeTakeFirstOrThrow();
  const instance = await ctx.services.managedDatabases.findInstance(row.id);
  if (!instance) throw new Error(`no instance for ${uuid}`);
  const { admin } = ctx.services.managedDatabases.credentialsOf(instance);
  return { row, instance, user: instance.admin_username, password: admin };
}

async function pgQuery(
  at: { host: string; port: number; user: string; password: string; database: string },
  text: string,
): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client(at);
  await client.connect();
  try {
    return (await client.query<Record<string, unknown>>(text)).rows;
  } finally {
    await client.end();
  }
}

async function withRedis<T>(
  at: { port: number; user: string; password: string },
  work: (client: {
    get(key: string): Promise<string | null>;
    set(key: string, value: string): Promise<unknown>;
    sendCommand(args: string[]): Promise<unknown>;
  }) => Promise<T>,
): Promise<T> {
  const client = createClient({
    socket: { host: '127.0.0.1', port: at.port, reconnectStrategy: false },
    username: at.user,
    password: at.password,
  });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await work(client);
  } finally {
    client.destroy();
  }
}

describe('backup of caches, powered-off databases and applications’ database services', () => {
  let source: TestApp | undefined;
  let restored: AppContext | undefined;
  const target = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-services-target-'));
  const restoredConfig = testConfig();
  afterAll(async () => {
    await restored?.close();
    await source?.close();
    for (const dir of [target, restoredConfig.dataDir]) fs.rmSync(dir, { recursive: true, force: true });
    templates.remove();
  }, 120_000);

  it('brings back a Valkey key, a powered-off PostgreSQL row (powered off) and a postgresql service row', async () => {
    // The driver is given the data dir, so that it copies instances from the shared templates.
    const sourceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-backup-services-source-'));
    source = await createTestApp('sqlite', {
      env: { BERTH_DATA_DIR: sourceDir },
      // The key of the data dir, as `berth serve` uses it: the one a backup seals.
      masterKey: loadOrCreateMasterKey(sourceDir, undefined),
      services: {
        managedDatabaseDriver: createLocalDatabaseDriver({ dataDir: sourceDir, templateDir: templates.dir }),
      },
    });
    const t = source;
    const cache = await applyManagedDatabase(t.ctx, t.user.team_id, {
      name: 'cache',
      type: 'valkey',
      plan: '1x1xCPU-2GB',
    });
    const ledger = await applyManagedDatabase(t.ctx, t.user.team_id, {
      name: 'ledger',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
      logical_databases: [{ name: 'books' }],
    });
    const applied = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?auto_deploy=false',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: appDocument('shop', [{ name: 'db', type: 'postgresql', memory: '128Mi' }]),
    });
    expect(applied.statusCode, applied.body).toBe(200);
    const appId = applied.json<{ application_id: number }>().application_id;
    await t.ctx.services.jobs.runner().runDue();
    await t.ctx.services.appServices.ensureApplication(appId);

    // A key in the cache, a row in the database that is then powered off, a row in the service.
    const valkey = await managedAdmin(t.ctx, cache);
    expect(valkey.row.state).toBe('running');
    await withRedis({ port: valkey.instance.port!, ...valkey }, async (client) => {
      await client.set('greeting', 'kept by the backup');
      // Snapshots are Berth's to take (its maintenance account): the team's admin may not.
      await expect(client.sendCommand(['BGSAVE'])).rejects.toThrow(/NOPERM/);
    });
    const postgres = await managedAdmin(t.ctx, ledger);
    expect(postgres.row.state).toBe('running');
    await pgQuery(
      { host: '127.0.0.1', port: postgres.instance.port!, ...postgres, database: 'books' },
      "CREATE TABLE entries (note text); INSERT INTO entries VALUES ('written before power-off')",
    );
    await t.ctx.services.managedDatabases.powerOff(ledger);
    const [service] = await t.ctx.services.appServices.connections(appId);
    expect(service).toMatchObject({ name: 'db', type: 'postgresql' });
    const serviceAt = {
      host: service!.host,
      port: service!.port,
      user: service!.username,
      password: service!.password,
      database: service!.database!,
    };
    await pgQuery(serviceAt, "CREATE TABLE orders (item text); INSERT INTO orders VALUES ('one teapot')");

    const lines: string[] = [];
    const manifest = await runBackup(t.ctx, createDirectoryTarget(target), PASSPHRASE, (l) => lines.push(l));
    expect([...manifest.databases.exported].sort()).toEqual([cache, ledger].sort());
    expect(manifest.services?.exported).toHaveLength(1);
    expect(manifest.files.map((f) => f.path)).toContain(`databases/${cache}/valkey.rdb`);
    // The snapshot the server wrote is not left beside its append-only file.
    expect(fs.existsSync(path.join(valkey.instance.data_dir!, 'data', 'dump.rdb'))).toBe(false);
    // The powered-off database was started for its dump only: it is stopped again.
    expect((await t.ctx.services.managedDatabases.driver.status({ id: ledger, engine: 'pg' })).running).toBe(
      false,
    );

    // The source stops (its servers with it): what answers next is the restored data dir's.
    await source.close();
    source = undefined;

    // Restore into a fresh data dir, as `berth admin restore` does.
    const foundation = await restoreFoundation(restoredConfig, createDirectoryTarget(target), PASSPHRASE);
    restored = await createContext(restoredConfig, {
      logger: pino({ level: 'silent' }),
      services: {
        managedDatabaseDriver: createLocalDatabaseDriver({
          dataDir: restoredConfig.dataDir,
          templateDir: templates.dir,
        }),
      },
    });
    await restoreDatabases(restored, foundation);
    const ctx = restored;

    const valkeyBack = await managedAdmin(ctx, cache);
    expect(valkeyBack.instance.data_dir).toContain(restoredConfig.dataDir);
    expect(
      await withRedis({ port: valkeyBack.instance.port!, ...valkeyBack }, (client) => client.get('greeting')),
    ).toBe('kept by the backup');

    const postgresBack = await managedAdmin(ctx, ledger);
    expect(postgresBack.row.state).toBe('stopped');
    expect(postgresBack.instance.powered).toBe(0);
    expect((await ctx.services.managedDatabases.driver.status({ id: ledger, engine: 'pg' })).running).toBe(
      false,
    );
    await ctx.services.managedDatabases.powerOn(ledger);
    const poweredOn = await managedAdmin(ctx, ledger);
    expect(
      await pgQuery(
        { host: '127.0.0.1', port: poweredOn.instance.port!, ...poweredOn, database: 'books' },
        'SELECT note FROM entries',
      ),
    ).toEqual([{ note: 'written before power-off' }]);

    const [instanceBack] = await ctx.db
      .selectFrom('app_service_instances')
      .selectAll()
      .where('application_id', '=', appId)
      .execute();
    expect(instanceBack?.data_dir).toContain(restoredConfig.dataDir);
    const [serviceBack] = await ctx.services.appServices.connections(appId);
    expect(serviceBack).toMatchObject({ name: 'db', password: service!.password });
    expect(
      await pgQuery(
        {
          host: serviceBack!.host,
          port: serviceBack!.port,
          user: serviceBack!.username,
          password: serviceBack!.password,
          database: serviceBack!.database!,
        },
        'SELECT item FROM orders',
      ),
    ).toEqual([{ item: 'one teapot' }]);
  }, 600_000);
});
