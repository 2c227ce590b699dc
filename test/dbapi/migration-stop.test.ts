// Stopping a replication migration through /1.3: a managed PostgreSQL on the local driver subscribes to
// an external PostgreSQL (wal_level=logical) started here; the stop must leave a standalone database.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { waitFor } from '../helpers/processes.js';
import { DIALECTS } from '../helpers/store.js';
import { pgQuery, withDb } from '../db-operations/fixtures.js';
import {
  applyManagedDatabase,
  openManagedEnv,
  sharedTemplateDir,
  type ManagedEnv,
} from '../managed-databases/helpers.js';

const templates = sharedTemplateDir();
afterAll(() => templates.remove());

describe.each(DIALECTS)('stopping a replication migration on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let owner: CreatedUser;
  let source: PostgresServer;
  let uuid = '';

  const call = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: Record<string, unknown>) =>
    berth.request({
      method,
      url,
      headers: authHeaders(owner).dbApi,
      ...(payload === undefined ? {} : { payload }),
    });
  const targetUrl = async (db: string): Promise<string> => {
    const object = (await call('GET', `/1.3/database/${uuid}`)).json<{ service_uri: string }>();
    return withDb(object.service_uri.replace(/\?.*$/, ''), db);
  };
  const count = async (url: string): Promise<number> =>
    (await pgQuery<{ n: number }>(url, 'SELECT count(*)::int AS n FROM items'))[0]?.n ?? -1;
  const sourceShop = () => withDb(source.url, 'shop');

  beforeAll(async () => {
    [env, source] = await Promise.all([
      openManagedEnv(dialect, templates.dir),
      startPostgres({ password: 'src-Pw', conf: ['wal_level=logical', 'wal_sender_timeout=5s'] }),
    ]);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    uuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'target-pg',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    await pgQuery(source.url, 'CREATE DATABASE shop');
    await pgQuery(
      sourceShop(),
      `CREATE TABLE items (id int PRIMARY KEY, name text);
       INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g;`,
    );
    await berth.ctx.services.jobs.runner().runDue();
  }, 60_000);

  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
    await source?.stop();
  });

  it('keeps syncing until stopped; after the stop new source rows stay behind and no slot is left', async () => {
    const started = await call('POST', `/1.3/database/${uuid}/migration`, {
      source_service_uri: source.url,
      method: 'replication',
      ignore_dbs: 'postgres',
      ssl: false,
    });
    expect(started.statusCode).toBe(200);
    await berth.ctx.services.jobs.runner().runDue();
    const shop = await targetUrl('shop');
    await waitFor(async () => ((await count(shop)) === 100 ? true : undefined), 20_000);
    // Rows written while the migration runs arrive too: it is continuous.
    await pgQuery(sourceShop(), `INSERT INTO items SELECT g, 'late ' || g FROM generate_series(101, 120) g`);
    await waitFor(async () => ((await count(shop)) === 120 ? true : undefined), 20_000);
    const syncing = await waitFor(async () => {
      const s = (await call('GET', `/1.3/database/${uuid}/migration-status`)).json<{
        databases: Array<{ status: string }>;
      }>();
      return s.databases[0]?.status === 'syncing' ? s : undefined;
    }, 20_000);
    expect(syncing).toMatchObject({ status: 'done', method: 'replication', source_active: true });
    expect(await pgQuery(source.url, 'SELECT slot_name FROM pg_replication_slots')).toHaveLength(1);

    const stopped = await call('DELETE', `/1.3/database/${uuid}/migration`);
    expect(stopped.statusCode).toBe(200);
    expect(stopped.json()).toMatchObject({ uuid, type: 'pg', state: 'running' });
    expect(stopped.json<{ properties: Record<string, unknown> }>().properties.migration).toBeUndefined();

    const status = await call('GET', `/1.3/database/${uuid}/migration-status`);
    expect(status.statusCode).toBe(200);
    expect(status.json()).toEqual({
      status: 'done',
      method: 'replication',
      seconds_behind_master: 0,
      source_active: false,
      databases: [{ dbname: 'shop', method: 'replication', status: 'done' }],
    });
    // Nothing of the migration is left on either side.
    expect(await pgQuery(source.url, 'SELECT slot_name FROM pg_replication_slots')).toEqual([]);
    expect(await pgQuery(sourceShop(), 'SELECT pubname FROM pg_publication')).toEqual([]);
    expect(await pgQuery(shop, 'SELECT subname FROM pg_subscription')).toEqual([]);

    await pgQuery(sourceShop(), `INSERT INTO items VALUES (121, 'after the stop')`);
    await new Promise((r) => setTimeout(r, 1000));
    expect(await count(shop)).toBe(120);
    // The copied rows are the target's own now: it takes writes.
    await pgQuery(shop, `INSERT INTO items VALUES (500, 'written on the target')`);
    expect(await count(shop)).toBe(121);

    // Stopping twice, in either spelling: nothing is left to stop.
    for (const again of [
      await call('DELETE', `/1.3/database/${uuid}/migration`),
      await call('POST', `/1.3/database/${uuid}/migration`, { source_service_uri: null }),
    ]) {
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ error_code: 'NO_MIGRATION' });
    }
  });
});
