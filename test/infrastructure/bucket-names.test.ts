// Bucket names are global on the S3 endpoint: a name another storage holds is refused at apply
// (dry run included), at the bucket's path, instead of leaving the storage in `error` for good.
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

  it('refuses a bucket another storage holds, names it, and keeps the storage’s own buckets', async () => {
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
      expect(res.statusCode).toBe(422);
      expect(res.json<{ errors: Record<string, string[]> }>().errors).toEqual({
        'spec.object_storage.media.buckets.1': [
          "Object storage 'media': bucket name 'shared-assets' is taken (bucket names are shared by every storage on this endpoint); choose another.",
        ],
      });
    }
    const none = await t.ctx.db
      .selectFrom('object_storages')
      .select('name')
      .where('team_id', '=', other.team_id)
      .execute();
    expect(none).toEqual([]);
  });

  it('drops a bucket that was never created once the document stops naming it, and the storage recovers', async () => {
    const other = await t.ctx.identity.createUser({ email: 'c@example.com', team: 'gamma', role: 'owner' });
    const gamma = authHeaders(other).platform;
    // Both documents name `race-bucket` before either storage exists; the first provisioning takes it.
    expect(
      (await apply(t.auth.platform, storageDoc(t.user.team_id, 'racer', ['race-bucket']))).statusCode,
    ).toBe(200);
    expect(
      (await apply(gamma, storageDoc(other.team_id, 'late', ['race-bucket', 'late-own']))).statusCode,
    ).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    const storage = () =>
      t.ctx.db
        .selectFrom('object_storages')
        .select(['state', 'buckets'])
        .where('team_id', '=', other.team_id)
        .where('name', '=', 'late')
        .executeTakeFirstOrThrow();
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
