// Replays UpCloud's recorded /1.3/database requests (test/fixtures/upcloud/fixtures.json: the go-vcr
// `interactions`, and the `doc_examples` of UpCloud's migration scripts for tasks and migration-status)
// against Berth with real managed instances of the local driver. Recorded uuids, task ids, source hosts and
// times are mapped to ones that exist here; each answer must have the recorded status and the recorded
// top-level fields with the same JSON types. Values that belong to an environment (uuids, times, hosts)
// are not compared. Every recorded /1.3/database request is either replayed or listed below with a reason.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedUser } from '../../src/services/identity.js';
import { authHeaders } from '../helpers/app.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { waitFor } from '../helpers/processes.js';
import { DIALECTS } from '../helpers/store.js';
import { myQuery, pgQuery, withDb } from '../db-operations/fixtures.js';
import { startMariaDb, type MariaDbServer } from '../db-operations/mariadb-server.js';
import { MAINTENANCE_USER, maintenancePassword } from '../../src/drivers/databases/local/accounts.js';
import {
  applyManagedDatabase,
  openManagedEnv,
  sharedTemplateDir,
  type ManagedEnv,
} from '../managed-databases/helpers.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURES = path.resolve(REPO, 'test/fixtures/upcloud/fixtures.json');

interface Recorded {
  source: string;
  index?: number;
  method: string;
  path: string;
  query?: string | null;
  request_body?: unknown;
  status: number | null;
  status_note?: string;
  response_body?: unknown;
  response_bodies_sequence?: unknown[];
}
const fixtures = JSON.parse(fs.readFileSync(FIXTURES, 'utf8')) as {
  interactions: Recorded[];
  doc_examples: Recorded[];
};

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const endpointOf = (r: Recorded): string => `${r.method} ${r.path.replace(UUID, '{uuid}')}`;
const labelOf = (r: Recorded): string => `${r.source.split('/').at(-1) ?? r.source}#${r.index ?? ''}`;
const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Recorded endpoints that Berth's /1.3 serves: every interaction of these is replayed. */
const REPLAYED = new Set([
  'GET /1.3/database',
  'GET /1.3/database/{uuid}',
  'POST /1.3/database/{uuid}/clone',
  'POST /1.3/database/{uuid}/upgrade',
]);

/** The other recorded /1.3/database endpoints, each with why it is not replayed. */
const EXCLUDED: Record<string, string> = {
  'POST /1.3/database': 'Berth creates managed databases by apply, not through /1.3',
  'PATCH /1.3/database/{uuid}':
    'Berth’s PATCH takes {powered} only (test/managed-databases/deletion.test.ts); properties and termination protection are changed by apply',
  'DELETE /1.3/database/{uuid}':
    'replaying it would delete the databases this replay runs on; the same 204 → delete-service → 404 is in test/managed-databases/deletion.test.ts',
  'GET /1.3/database/service-types': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/service-types/mysql': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/service-types/opensearch': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/service-types/pg': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/service-types/redis': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/service-types/valkey': 'service types are not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/access-control': 'access control is not part of Berth’s /1.3 API',
  'PATCH /1.3/database/{uuid}/access-control': 'access control is not part of Berth’s /1.3 API',
  'PATCH /1.3/database/{uuid}/users/demouser/access-control':
    'access control is not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/users': 'users are declared by apply, not managed through /1.3',
  'GET /1.3/database/{uuid}/users/testuser': 'users are declared by apply, not managed through /1.3',
  'POST /1.3/database/{uuid}/users': 'users are declared by apply, not managed through /1.3',
  'PATCH /1.3/database/{uuid}/users/testuser': 'users are declared by apply, not managed through /1.3',
  'DELETE /1.3/database/{uuid}/users/testuser': 'users are declared by apply, not managed through /1.3',
  'DELETE /1.3/database/{uuid}/users/upadmin': 'users are declared by apply (this is the recorded 403)',
  'GET /1.3/database/{uuid}/databases': 'logical databases are declared by apply, not through /1.3',
  'POST /1.3/database/{uuid}/databases': 'logical databases are declared by apply, not through /1.3',
  'DELETE /1.3/database/{uuid}/databases/test': 'logical databases are declared by apply, not through /1.3',
  'GET /1.3/database/{uuid}/sessions': 'sessions are not part of Berth’s /1.3 API',
  'DELETE /1.3/database/{uuid}/sessions/0': 'sessions are not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/logs': 'logs are not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/metrics': 'metrics are not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/query-statistics': 'query statistics are not part of Berth’s /1.3 API',
  'GET /1.3/database/{uuid}/indices': 'OpenSearch indices: Berth runs no OpenSearch',
  'GET /1.3/database/{uuid}/versions': 'the versions list is not part of Berth’s /1.3 API',
};

/** Replayed endpoints whose recorded service is of an engine Berth does not run. */
const ENGINES_NOT_RUN: Record<string, string> = {
  redis: 'Berth runs no Redis (its key-value engine is Valkey)',
  opensearch: 'Berth runs no OpenSearch',
};

/** Documented examples that do not apply, by endpoint. */
const DOC_EXCLUDED: Record<string, string> = {
  'POST /1.3/database': 'creating a database with a migration: Berth creates databases by apply',
};

const databaseInteractions = fixtures.interactions.filter((r) => r.path.startsWith('/1.3/database'));
/** The type of each recorded service uuid, from any recorded service object. */
const recordedTypes = new Map<string, string>();
for (const r of databaseInteractions) {
  for (const body of Array.isArray(r.response_body) ? r.response_body : [r.response_body]) {
    if (isObject(body) && typeof body.uuid === 'string' && typeof body.type === 'string') {
      recordedTypes.set(body.uuid, body.type);
    }
  }
}
const engineExclusionOf = (r: Recorded): string | undefined => {
  const type = isObject(r.response_body) ? r.response_body.type : undefined;
  return typeof type === 'string' ? ENGINES_NOT_RUN[type] : undefined;
};
const replayed = databaseInteractions.filter((r) => REPLAYED.has(endpointOf(r)) && !engineExclusionOf(r));
const clones = replayed.filter((r) => r.path.endsWith('/clone'));
const upgrades = replayed.filter((r) => r.path.endsWith('/upgrade'));
const reads = replayed.filter((r) => r.method === 'GET');
const docEngineOf = (r: Recorded): 'pg' | 'mysql' => (r.source.includes(':mysql/') ? 'mysql' : 'pg');

function jsonType(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
}

/** The recorded top-level fields, with their JSON types, must be in the answer. */
function expectRecordedFields(actual: unknown, recorded: unknown, skip: readonly string[] = []): void {
  expect(jsonType(actual)).toBe(jsonType(recorded));
  if (!isObject(recorded) || !isObject(actual)) return;
  const want = Object.fromEntries(
    Object.entries(recorded)
      .filter(([k]) => !skip.includes(k))
      .map(([k, v]) => [k, jsonType(v)]),
  );
  const got = Object.fromEntries(
    Object.keys(want).map((k) => [k, k in actual ? jsonType(actual[k]) : 'absent']),
  );
  expect(got).toEqual(want);
}

const SOURCE_PASSWORD = 'Src-pa55/w0rd';
const templates = sharedTemplateDir();
afterAll(() => templates.remove());

describe('the recorded UpCloud interactions', () => {
  it('are each replayed or listed as excluded with a reason', () => {
    const unaccounted = databaseInteractions
      .filter((r) => !REPLAYED.has(endpointOf(r)) && !(endpointOf(r) in EXCLUDED))
      .map((r) => `${labelOf(r)} ${endpointOf(r)}`);
    expect(unaccounted).toEqual([]);
    // No stale exclusions: each names an endpoint that was recorded.
    const recorded = new Set(databaseInteractions.map(endpointOf));
    expect(Object.keys(EXCLUDED).filter((e) => !recorded.has(e))).toEqual([]);
    // What is replayed: 12 service reads (less Redis and OpenSearch), 3 lists, 1 clone.
    expect(reads.filter((r) => r.path !== '/1.3/database')).toHaveLength(10);
    expect(reads.filter((r) => r.path === '/1.3/database')).toHaveLength(3);
    expect(clones).toHaveLength(1);
    expect(upgrades).toHaveLength(1);
    for (const doc of fixtures.doc_examples) {
      const known =
        endpointOf(doc) in DOC_EXCLUDED ||
        /\/tasks(\/|$)|\/migration-status$/.test(doc.path) ||
        (doc.method === 'PATCH' && isObject(doc.request_body) && isObject(doc.request_body.properties));
      expect(known, `${doc.source} ${endpointOf(doc)}`).toBe(true);
    }
  });
});

describe.each(DIALECTS)('replaying UpCloud against Berth on %s', (dialect) => {
  let env: ManagedEnv;
  let berth: Awaited<ReturnType<ManagedEnv['boot']>>;
  let owner: CreatedUser;
  let pgSource: PostgresServer;
  let mySource: MariaDbServer;
  const uuid: Record<'pg' | 'mysql' | 'valkey', string> = { pg: '', mysql: '', valkey: '' };
  /** A PostgreSQL of its own for the upgrade, which leaves it `rebalancing` (the job is not run here). */
  let upgradeUuid = '';

  const runJobs = () => berth.ctx.services.jobs.runner().runDue();
  const call = (method: string, url: string, payload?: unknown) =>
    berth.request({
      method: method,
      url,
      headers: authHeaders(owner).dbApi,
      ...(payload === undefined || payload === null ? {} : { payload: payload }),
    });

  /** Berth's maintenance account on a database of a managed instance (to simulate failures). */
  const maintenanceUrl = async (id: string, db: string): Promise<string> => {
    const object = (await call('GET', `/1.3/database/${id}`)).json<{ service_uri: string }>();
    const u = new URL(withDb(object.service_uri.replace(/\?.*$/, ''), db));
    const row = await berth.ctx.db
      .selectFrom('managed_databases')
      .innerJoin('managed_instances', 'managed_instances.managed_database_id', 'managed_databases.id')
      .select('managed_instances.data_dir')
      .where('managed_databases.uuid', '=', id)
      .executeTakeFirstOrThrow();
    u.username = MAINTENANCE_USER;
    u.password = encodeURIComponent(maintenancePassword(row.data_dir as string));
    return u.toString();
  };

  /** A recorded path with its service uuids replaced by the Berth database of the same engine. */
  const mapPath = (recordedPath: string, engine?: 'pg' | 'mysql'): string =>
    recordedPath.replace(/^\/1\.3\/database\/([^/]+)/, (_all, id: string) => {
      const type = id === '{uuid}' ? engine : recordedTypes.get(id);
      if (type !== 'pg' && type !== 'mysql' && type !== 'valkey')
        throw new Error(`no Berth ${type} for ${id}`);
      return `/1.3/database/${uuid[type]}`;
    });

  /** A recorded source URI pointed at the external source of this test (same scheme, database, path). */
  const mapSourceUri = (recorded: string, engine: 'pg' | 'mysql'): string => {
    const from = new URL(recorded);
    const to = new URL(engine === 'pg' ? pgSource.url : mySource.url);
    to.pathname = from.pathname;
    return to.toString();
  };

  beforeAll(async () => {
    [env, pgSource, mySource] = await Promise.all([
      openManagedEnv(dialect, templates.dir),
      startPostgres({ password: SOURCE_PASSWORD, conf: ['wal_level=logical', 'wal_sender_timeout=5s'] }),
      startMariaDb({ password: SOURCE_PASSWORD }),
    ]);
    berth = await env.boot();
    owner = await berth.ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    // The recorded services' plans; zones are Berth's.
    uuid.pg = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'replay-pg',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    uuid.mysql = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'replay-mysql',
      type: 'mysql',
      plan: '1x1xCPU-2GB-25GB',
    });
    upgradeUuid = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'replay-pg-upgrade',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    uuid.valkey = await applyManagedDatabase(berth.ctx, owner.team_id, {
      name: 'replay-valkey',
      type: 'valkey',
      plan: '1x1xCPU-2GB',
    });
    // Sources like the ones of UpCloud's migration README: a defaultdb, and test databases.
    await myQuery(
      mySource.url,
      `CREATE DATABASE defaultdb; CREATE DATABASE test21; CREATE DATABASE test22;
       CREATE TABLE test22.t (id int PRIMARY KEY); INSERT INTO test22.t VALUES (1), (2), (3);`,
    );
    await pgQuery(pgSource.url, 'CREATE DATABASE test3');
    await pgQuery(
      withDb(pgSource.url, 'test3'),
      `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 50);`,
    );
    await runJobs();
  }, 120_000);

  afterAll(async () => {
    await berth?.close();
    await env?.destroy();
    await Promise.all([pgSource?.stop(), mySource?.stop()]);
  });

  it('runs every engine the replay maps to', async () => {
    for (const id of Object.values(uuid)) {
      // state_error, when there is one, says why in the failure.
      const { state, state_error } = (await call('GET', `/1.3/database/${id}`)).json<{
        state: string;
        state_error?: unknown;
      }>();
      expect({ state, state_error }).toEqual({ state: 'running', state_error: undefined });
    }
  });

  it.each(
    reads.map((r) => [`${labelOf(r)} ${r.method} ${r.path}${r.query ? `?${r.query}` : ''}`, r] as const),
  )('%s', async (_label, recorded) => {
    const response = await call(
      'GET',
      `${mapPath(recorded.path)}${recorded.query ? `?${recorded.query}` : ''}`,
    );
    expect(response.statusCode).toBe(recorded.status);
    const body = response.json<unknown>();
    if (!Array.isArray(recorded.response_body)) {
      expectRecordedFields(body, recorded.response_body);
      return;
    }
    expect(Array.isArray(body)).toBe(true);
    const list = body as Array<Record<string, unknown>>;
    expect(list.length).toBeGreaterThan(0);
    const limit = /limit=(\d+)/.exec(recorded.query ?? '')?.[1];
    if (limit) expect(list.length).toBeLessThanOrEqual(Number(limit));
    // The recorded lists hold PostgreSQL services; a Valkey service has no `databases` (as recorded).
    for (const item of list) {
      expectRecordedFields(item, recorded.response_body[0], item.type === 'valkey' ? ['databases'] : []);
    }
  });

  for (const engine of ['mysql', 'pg'] as const) {
    it(`replays the documented ${engine} migration: check task, start, status sequence, stop`, async () => {
      const docs = fixtures.doc_examples.filter(
        (d) => docEngineOf(d) === engine && !(endpointOf(d) in DOC_EXCLUDED),
      );
      const statuses = docs.find((d) => d.path.endsWith('/migration-status'))?.response_bodies_sequence ?? [];
      expect(statuses).toHaveLength(3);
      const status = async () => {
        const response = await call('GET', mapPath('/1.3/database/{uuid}/migration-status', engine));
        expect(response.statusCode).toBe(200);
        return response.json<Record<string, unknown>>();
      };

      // Idle, before any migration.
      expectRecordedFields(await status(), statuses[0]);

      // The check task: created (201, per the OpenAPI note: the README shows no status), then read.
      const create = docs.find((d) => d.method === 'POST' && d.path.endsWith('/tasks'));
      const read = docs.find((d) => d.method === 'GET' && /\/tasks\//.test(d.path));
      if (
        !create ||
        !read ||
        !isObject(create.request_body) ||
        !isObject(create.request_body.migration_check)
      ) {
        throw new Error(`the ${engine} task examples are missing`);
      }
      expect(create.status ?? 201).toBe(201);
      const check = create.request_body.migration_check as Record<string, string>;
      const created = await call('POST', mapPath(create.path, engine), {
        ...create.request_body,
        migration_check: {
          ...check,
          source_service_uri: mapSourceUri(check.source_service_uri ?? '', engine),
        },
      });
      expect(created.statusCode).toBe(201);
      expectRecordedFields(created.json(), create.response_body ?? { id: '' });
      const taskId = created.json<{ id: string }>().id;
      await runJobs();
      const task = await call('GET', mapPath(read.path.replace(/[^/]+$/, taskId), engine));
      expect(task.statusCode).toBe(read.status);
      expectRecordedFields(task.json(), read.response_body);
      expect(task.json()).toMatchObject({
        id: taskId,
        operation: `${engine}_migration_check`,
        success: true,
      });

      const targetUrl = async (db: string): Promise<string> => {
        const object = (await call('GET', `/1.3/database/${uuid[engine]}`)).json<{ service_uri: string }>();
        return withDb(object.service_uri.replace(/\?.*$/, ''), db);
      };
      if (engine === 'mysql') {
        // UpCloud starts a migration by PATCHing properties.migration; Berth's form is POST …/migration.
        const start = docs.find((d) => d.method === 'PATCH' && isMigrationPatch(d, 'start'));
        const stop = docs.find((d) => d.method === 'PATCH' && isMigrationPatch(d, 'stop'));
        if (!start || !stop) throw new Error('the mysql PATCH examples are missing');
        const migration = (start.request_body as { properties: { migration: Record<string, unknown> } })
          .properties.migration;
        const uri = new URL(mySource.url);
        uri.pathname = `/${String(migration.dbname)}`;
        const started = await call('POST', mapPath('/1.3/database/{uuid}/migration', engine), {
          source_service_uri: uri.toString(),
          method: migration.method,
          ignore_dbs: migration.ignore_dbs,
          ssl: migration.ssl,
        });
        expect(started.statusCode).toBe(start.status);
        // "full service object; properties.migration echoed": the fields of a recorded MySQL service.
        const recordedService = fixtures.interactions.find(
          (r) => r.method === 'GET' && isObject(r.response_body) && r.response_body.type === 'mysql',
        );
        expectRecordedFields(started.json(), recordedService?.response_body);
        expect(started.json()).toMatchObject({ properties: { migration: { method: 'dump', ssl: false } } });
        expectRecordedFields(await status(), statuses[1]); // running
        await runJobs();
        const done = await status();
        expectRecordedFields(done, statuses[2]);
        expect(done).toMatchObject({ status: 'done', method: 'mysqldump' });
        const rows = await myQuery<{ n: number }>(await targetUrl('test22'), 'SELECT count(*) AS n FROM t');
        expect(Number(rows[0]?.n)).toBe(3);
        const stopped = await call('POST', mapPath('/1.3/database/{uuid}/migration', engine), {
          source_service_uri: null,
        });
        expect(stopped.statusCode).toBe(stop.status);
        expect(await status()).toMatchObject({ status: 'done', source_active: false });
        return;
      }

      // PostgreSQL: the README's sequence is a replication: one database down, then all syncing.
      const started = await call('POST', mapPath('/1.3/database/{uuid}/migration', engine), {
        source_service_uri: pgSource.url,
        method: 'replication',
        ignore_dbs: 'postgres',
        ssl: false,
      });
      expect(started.statusCode).toBe(200);
      await runJobs();
      const test3 = await targetUrl('test3');
      await waitFor(async () => {
        const rows = await pgQuery<{ n: number }>(test3, 'SELECT count(*)::int AS n FROM t').catch(() => []);
        return rows[0]?.n === 50 ? true : undefined;
      }, 20_000);
      // The subscription is Berth's (its maintenance account made it): a team's admin cannot touch it.
      const maintenance = await maintenanceUrl(uuid.pg, 'test3');
      await expect(pgQuery(test3, 'ALTER SUBSCRIPTION berth_migration DISABLE')).rejects.toThrow(/owner/);
      await pgQuery(maintenance, 'ALTER SUBSCRIPTION berth_migration DISABLE');
      const down = await waitFor(async () => {
        const s = await status();
        return s.status === 'failed' ? s : undefined;
      }, 20_000);
      expectRecordedFields(down, statuses[1]);
      await pgQuery(maintenance, 'ALTER SUBSCRIPTION berth_migration ENABLE');
      const syncing = await waitFor(async () => {
        const s = await status();
        return s.status === 'done' ? s : undefined;
      }, 20_000);
      expectRecordedFields(syncing, statuses[2]);
      expect(syncing).toMatchObject({ databases: [{ dbname: 'test3', status: 'syncing' }] });
      expect((await call('DELETE', mapPath('/1.3/database/{uuid}/migration', engine))).statusCode).toBe(200);
    });
  }

  it('fails a check task with a wrong source password as SOURCE_AUTH_FAILED, without echoing it', async () => {
    for (const engine of ['pg', 'mysql'] as const) {
      const uri = new URL(engine === 'pg' ? pgSource.url : mySource.url);
      uri.password = 'Wr0ng-secret';
      const created = await call('POST', `/1.3/database/${uuid[engine]}/tasks`, {
        operation: 'migration_check',
        migration_check: { source_service_uri: uri.toString() },
      });
      expect(created.statusCode).toBe(201);
      await runJobs();
      const task = await call(
        'GET',
        `/1.3/database/${uuid[engine]}/tasks/${created.json<{ id: string }>().id}`,
      );
      expect(task.json()).toMatchObject({ success: false, result_codes: [{ code: 'SOURCE_AUTH_FAILED' }] });
      expect(task.body).not.toContain('Wr0ng-secret');
    }
  });

  // The recording upgrades 14 → 15; Berth runs 15, so the target is the next major, after its check task.
  it.each(upgrades.map((r) => [`${labelOf(r)} ${r.method} ${r.path}`, r] as const))(
    '%s',
    async (_label, recorded) => {
      const target = String(Number((recorded.request_body as { target_version: string }).target_version) + 1);
      const check = await call('POST', `/1.3/database/${upgradeUuid}/tasks`, {
        operation: 'upgrade_check',
        target_version: target,
      });
      expect(check.statusCode).toBe(201);
      await runJobs();
      const path = recorded.path.replace(/^\/1\.3\/database\/[^/]+/, `/1.3/database/${upgradeUuid}`);
      const response = await call(recorded.method, path, { target_version: target });
      expect(response.statusCode).toBe(recorded.status);
      expectRecordedFields(response.json(), recorded.response_body);
      expect(response.json()).toMatchObject({ uuid: upgradeUuid, state: 'rebalancing' });
    },
  );

  // Last: the clone's provisioning and the upgrade are left pending (no jobs run after them).
  it.each(clones.map((r) => [`${labelOf(r)} ${r.method} ${r.path}`, r] as const))(
    '%s',
    async (_label, recorded) => {
      // The recorded clone_time is a second after the service's backup; here, now (after Berth's backups).
      // One instant for both: a clone_time a millisecond after Berth's clock would be in its future.
      const now = new Date();
      env.clock.set(now);
      const body = {
        ...(recorded.request_body as Record<string, unknown>),
        clone_time: now.toISOString(),
      };
      const response = await call(recorded.method, mapPath(recorded.path), body);
      expect(response.statusCode).toBe(recorded.status);
      expectRecordedFields(response.json(), recorded.response_body);
      expect(response.json()).toMatchObject({
        name: (recorded.request_body as { hostname_prefix: string }).hostname_prefix,
        type: 'pg',
        state: 'pending',
      });
    },
  );
});

function isMigrationPatch(doc: Recorded, kind: 'start' | 'stop'): boolean {
  const properties = isObject(doc.request_body) ? doc.request_body.properties : undefined;
  if (!isObject(properties) || !('migration' in properties)) return false;
  return kind === 'stop' ? properties.migration === null : isObject(properties.migration);
}
