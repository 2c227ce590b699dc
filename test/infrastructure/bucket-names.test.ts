// Bucket names belong to their object storage (migration 024, docs/decisions/0008): a name another
// storage (of this team or another) holds is accepted at apply, dry run included, and provisioned.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { yaml } from './helpers.js';

describe.each(DIALECTS)('bucket names at apply (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  const storageDoc = (team: string | number, name: string, buckets: string[]) => ({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: { object_storage: [{ name, zone: 'europe-1', buckets }] },
  });
  const apply = (headers: Record<string, string>, doc: unknown, query = '') =>
    t.request({
      method: 'POST',
      url: `/api/v1/infrastructure/apply${query}`,
      headers: { ...headers, 'content-type': 'application/yaml' },
      payload: yaml(doc),
    });

  it('accepts a bucket name another storage holds, and provisions it in this storage', async () => {
    const first = await apply(
      t.auth.platform,
      storageDoc(t.user.team_id, 'files', ['shared-assets', 'mine']),
    );
    expect(first.statusCode).toBe(200);
    await t.ctx.services.jobs.runner().runDue(); // provisioning creates the buckets
    // Re-applying one's own document is no conflict.
    expect(
      (await apply(t.auth.platform, storageDoc(t.user.team_id, 'files', ['shared-assets']))).statusCode,
    ).toBe(200);

    const other = await t.ctx.identity.createUser({ email: 'b@example.com', team: 'beta', role: 'owner' });
    for (const query of ['?dry_run=true', '']) {
      const res = await apply(
        authHeaders(other).platform,
        storageDoc(other.team_id, 'media', ['fresh', 'shared-assets']),
        query,
      );
      expect(res.statusCode, res.body).toBe(200);
    }
    // The same team's second storage may hold the name too.
    expect(
      (await apply(t.auth.platform, storageDoc(t.user.team_id, 'more', ['shared-assets']))).statusCode,
    ).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    const holders = await t.ctx.db
      .selectFrom('s3_buckets')
      .innerJoin('object_storages', 'object_storages.id', 's3_buckets.object_storage_id')
      .select(['object_storages.name as storage', 'object_storages.state'])
      .where('s3_buckets.name', '=', 'shared-assets')
      // The two storages' jobs run side by side: which bucket row comes first is theirs to decide.
      .orderBy('object_storages.name')
      .execute();
    expect(holders).toEqual([
      { storage: 'files', state: 'running' },
      { storage: 'media', state: 'running' },
      { storage: 'more', state: 'running' },
    ]);
  });

  it('drops a bucket that was never created once the document stops naming it, and the storage recovers', async () => {
    const other = await t.ctx.identity.createUser({ email: 'c@example.com', team: 'gamma', role: 'owner' });
    const gamma = authHeaders(other).platform;
    expect(
      (await apply(gamma, storageDoc(other.team_id, 'late', ['race-bucket', 'late-own']))).statusCode,
    ).toBe(200);
    const storage = () =>
      t.ctx.db
        .selectFrom('object_storages')
        .select(['state', 'buckets'])
        .where('team_id', '=', other.team_id)
        .where('name', '=', 'late')
        .executeTakeFirstOrThrow();
    // A provisioning that failed for good (a driver's provider refused it): nothing was created.
    await t.ctx.db
      .updateTable('object_storages')
      .set({ state: 'error', state_reason: 'refused by the provider' })
      .where('team_id', '=', other.team_id)
      .execute();
    await t.ctx.db.deleteFrom('jobs').where('type', '=', 'object_storage.provision').execute();
    expect((await storage()).state).toBe('error');

    // The fixed document names another bucket: the one never created goes, the storage runs again.
    const fixed = await apply(gamma, storageDoc(other.team_id, 'late', ['late-own', 'race-fixed']));
    expect(fixed.statusCode).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    expect(await storage()).toEqual({
      state: 'running',
      buckets: JSON.stringify(['late-own', 'race-fixed']),
    });

    // A bucket that exists is never dropped by apply, named or not.
    expect((await apply(gamma, storageDoc(other.team_id, 'late', ['race-fixed']))).statusCode).toBe(200);
    expect(JSON.parse((await storage()).buckets)).toEqual(['late-own', 'race-fixed']);
  });
});
