// Migration 024 scopes bucket names to their storage. Existing buckets must stay where they are: same
// rows and ids (object files live under the bucket's id), their objects, uploads and CORS rules kept.
// On SQLite the table is rebuilt, which with foreign keys on would cascade to every object.
import { sql, type Kysely } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Dialect, type Store } from '../../src/db/connect.js';
import { migrateToLatest, migrator } from '../../src/db/migrations/index.js';
import { createTestPostgresDatabase, DIALECTS } from '../helpers/store.js';

const AT = '2026-01-01T00:00:00.000Z';

describe.each(DIALECTS)('bucket namespaces migration (%s)', (dialect: Dialect) => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function storeBefore024(): Promise<Store> {
    let store: Store;
    if (dialect === 'sqlite') store = await openStore({ sqlitePath: ':memory:', migrate: false });
    else {
      const database = await createTestPostgresDatabase();
      cleanups.push(() => database.drop());
      store = await openStore({ databaseUrl: database.url, poolSize: 2, migrate: false });
    }
    cleanups.push(() => store.close());
    const { error } = await migrator(store.db as unknown as Kysely<unknown>, dialect).migrateTo(
      '023_app_object_storage',
    );
    expect(error).toBeUndefined();
    return store;
  }

  it('keeps every bucket with its id, objects, uploads and CORS, and scopes names to the storage', async () => {
    const store = await storeBefore024();
    const db = store.db;
    const team = await db
      .insertInto('teams')
      .values({ name: 'acme', created_at: AT } as never)
      .returning('id')
      .executeTakeFirstOrThrow();
    const storage = (uuid: string, name: string) =>
      db
        .insertInto('object_storages')
        .values({
          uuid,
          team_id: team.id,
          name,
          zone: 'europe-1',
          plan: null,
          buckets: '[]',
          users: '[]',
          state: 'running',
          state_reason: null,
          pending_zone: null,
          created_at: AT,
          updated_at: AT,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
    const one = await storage('00000000-0000-4000-8000-000000000001', 'one');
    const two = await storage('00000000-0000-4000-8000-000000000002', 'two');
    const bucket = await db
      .insertInto('s3_buckets')
      .values({ object_storage_id: one.id, name: 'photos', created_at: AT, tags: '{"k":"v"}' })
      .returning('id')
      .executeTakeFirstOrThrow();
    await db
      .insertInto('s3_objects')
      .values({
        bucket_id: bucket.id,
        key: 'a.txt',
        size: 1,
        etag: '"x"',
        file: 'data/1/a',
        headers: '{}',
        last_modified: AT,
      })
      .execute();
    await db
      .insertInto('s3_uploads')
      .values({ upload_id: 'u1', bucket_id: bucket.id, key: 'big', headers: '{}', created_at: AT })
      .execute();
    await db.insertInto('s3_bucket_cors').values({ bucket_id: bucket.id, rules: '[]' }).execute();
    // Before 024 a name is the endpoint's: another storage cannot hold it.
    await expect(
      db
        .insertInto('s3_buckets')
        .values({ object_storage_id: two.id, name: 'photos', created_at: AT })
        .execute(),
    ).rejects.toThrow();

    await migrateToLatest(store.db as unknown as Kysely<unknown>, dialect);

    expect(
      await db.selectFrom('s3_buckets').select(['id', 'object_storage_id', 'name', 'tags']).execute(),
    ).toEqual([{ id: bucket.id, object_storage_id: one.id, name: 'photos', tags: '{"k":"v"}' }]);
    expect(await db.selectFrom('s3_objects').select(['bucket_id', 'key']).execute()).toEqual([
      { bucket_id: bucket.id, key: 'a.txt' },
    ]);
    expect(await db.selectFrom('s3_uploads').select('bucket_id').execute()).toEqual([
      { bucket_id: bucket.id },
    ]);
    expect(await db.selectFrom('s3_bucket_cors').select('bucket_id').execute()).toEqual([
      { bucket_id: bucket.id },
    ]);

    // The other storage may now hold the name; the same storage still may not hold it twice.
    const again = await db
      .insertInto('s3_buckets')
      .values({ object_storage_id: two.id, name: 'photos', created_at: AT })
      .returning('id')
      .executeTakeFirstOrThrow();
    expect(again.id).toBeGreaterThan(bucket.id);
    await expect(
      db
        .insertInto('s3_buckets')
        .values({ object_storage_id: one.id, name: 'photos', created_at: AT })
        .execute(),
    ).rejects.toThrow();

    // Foreign keys still hold: a storage's deletion takes its buckets and their objects with it.
    if (dialect === 'sqlite') {
      expect((await sql<{ foreign_keys: number }>`PRAGMA foreign_keys`.execute(db)).rows).toEqual([
        { foreign_keys: 1 },
      ]);
    }
    await db.deleteFrom('object_storages').where('id', '=', one.id).execute();
    expect(await db.selectFrom('s3_objects').select('key').execute()).toEqual([]);
    expect(await db.selectFrom('s3_buckets').select('id').execute()).toEqual([{ id: again.id }]);
  });
});
