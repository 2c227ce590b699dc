/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// All or nothing: a fault injected at each write of an apply leaves the store exactly as it was;
// two identical applies at the same moment create nothing twice.
import type {
  KyselyPlugin,
  PluginTransformQueryArgs,
  PluginTransformResultArgs,
  QueryResult,
  RootOperationNode,
  UnknownRow,
} from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApplyService } from '../../src/services/infrastructure/apply.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore, fullDocument, yaml } from './helpers.js';

type Obj = Record<string, unknown>;

/** Throws on the n-th INSERT/UPDATE/DELETE it sees (1-based); counts them either way. */
class FailOnNthWrite implements KyselyPlugin {
  writes = 0;
  constructor(private readonly failAt: number) {}
  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    if (
      node.kind === 'InsertQueryNode' ||
      node.kind === 'UpdateQueryNode' ||
      node.kind === 'DeleteQueryNode'
    ) {
      this.writes += 1;
      if (this.writes === this.failAt) throw new Error(`injected fault at write ${this.failAt}`);
    }
    return node;
  }
  transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return Promise.resolve(result);
  }
}

describe.each(DIALECTS)('apply is all or nothing (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  function serviceFailingAt(n: number) {
    const plugin = new FailOnNthWrite(n);
    const service = createApplyService({
      db: t.ctx.db.withPlugin(plugin),
      dialect: t.ctx.store.dialect,
      clock: t.ctx.clock,
      ids: t.ctx.ids,
      secretBox: t.ctx.secretBox,
      identity: t.ctx.identity,
      quotas: t.ctx.config.quotas,
      deployments: t.ctx.services.deployments,
      // As composition.ts builds it: the document's services are checked against what the driver makes.
      serviceCapabilities: () => t.ctx.services.managedDatabases.driver.capabilities?.(),
      validationHooks: { objectStorageEntry: (entry) => t.ctx.services.objectStorage.driver.problems(entry) },
    });
    return { plugin, service };
  }

  /** Fails the 1st, 2nd, … write until the apply gets through; each failure must leave no trace. */
  async function everyWriteFails(doc: Obj): Promise<number> {
    for (let n = 1; n < 500; n += 1) {
      const before = await dumpStore(t.ctx.db);
      const { plugin, service } = serviceFailingAt(n);
      try {
        await service.apply(t.user.user_id, yaml(doc), { dryRun: false, autoDeploy: true });
        expect(plugin.writes).toBe(n - 1);
        return n - 1;
      } catch (error) {
        expect((error as Error).message).toBe(`injected fault at write ${n}`);
        expect(await dumpStore(t.ctx.db), `store after a fault at write ${n}`).toEqual(before);
      }
    }
    throw new Error('apply never succeeded');
  }

  it('a fault at any write of a creating apply stores nothing', async () => {
    const writes = await everyWriteFails(fullDocument(t.user.team_id, 'faulty'));
    // application, domain, secret, volume, 2 services + the provisioning job of the one that is not a
    // worker, container service + its provisioning job, database + job, storage + job, deployment
    // (older ones cancelled, the new one, its job), and the apply's audit entry.
    expect(writes).toBe(17);
  });

  it('a fault at any write of an updating apply changes nothing', async () => {
    const doc = fullDocument(t.user.team_id, 'faulty2');
    (doc.spec as Obj).managed_databases = [];
    (doc.spec as Obj).object_storage = [];
    expect((await apply(t, doc)).statusCode).toBe(200);
    const spec = doc.spec as Obj;
    ((spec.application as Obj).settings as Obj).replicas = 5;
    spec.domains = [{ domain: 'faulty2.example.com' }, { domain: 'www.faulty2.example.com' }];
    spec.secrets = [{ key: 'APP_KEY', value: 'rotated' }];
    spec.volumes = [{ name: 'storage', mount_path: '/var/www/html/storage', volume_size: 20 }];
    spec.managed_databases = [{ name: 'other-db', type: 'mysql', plan: '1x1xCPU-2GB-25GB', zone: 'de-fra1' }];
    const writes = await everyWriteFails(doc);
    // application, domain, secret, volume, database + job, deployment (older ones cancelled, the new
    // one, its job), and the apply's audit entry.
    expect(writes).toBe(10);
  });

  it('two identical applies at the same moment create everything once', async () => {
    const doc = fullDocument(t.user.team_id, 'racer');
    (doc.spec as Obj).managed_databases = [
      { name: 'race-db', type: 'pg', plan: '1x1xCPU-2GB-25GB', zone: 'de-fra1' },
    ];
    (doc.spec as Obj).object_storage = [{ name: 'race-files', zone: 'europe-1' }];
    const [a, b] = await Promise.all([apply(t, doc), apply(t, doc)]);
    expect([a.statusCode, b.statusCode]).toEqual([200, 200]);
    const actions = [
      a.json().structured_changes.application.action,
      b.json().structured_changes.application.action,
    ].sort();
    expect(actions).toEqual(['created', 'unchanged']);
    const count = async (table: 'applications' | 'managed_databases' | 'object_storages' | 'domains') =>
      (
        await t.ctx.db
          .selectFrom(table)
          .select('id')
          .where(table === 'domains' ? 'domain' : 'name', 'in', [
            'racer',
            'race-db',
            'race-files',
            'racer.example.com',
          ])
          .execute()
      ).length;
    expect(await count('applications')).toBe(1);
    expect(await count('managed_databases')).toBe(1);
    expect(await count('object_storages')).toBe(1);
    expect(await count('domains')).toBe(1);
    const deployments = await t.ctx.db
      .selectFrom('deployments')
      .innerJoin('applications', 'applications.id', 'deployments.application_id')
      .select('deployments.id')
      .where('applications.name', '=', 'racer')
      .execute();
    expect(deployments).toHaveLength(1);
  });
});
