// The only SQL of the S3 endpoint: buckets, access keys, objects and multipart uploads in the store.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../../../db/dialect.js';
import type { Database } from '../../../db/schema/index.js';

export interface BucketRow {
  id: number;
  object_storage_id: number;
  name: string;
  created_at: string;
  /** Canned ACL (access.ts). */
  acl: string;
  /** The bucket policy as put (JSON), null for none. */
  policy: string | null;
  /** JSON PublicAccessBlock, null for none. */
  public_access_block: string | null;
}

export interface ObjectRow {
  key: string;
  size: number;
  etag: string;
  file: string;
  headers: string;
  last_modified: string;
  /** JSON object of the object's tags (see tagging.ts). */
  tags?: string;
  /** JSON StoredChecksum (see checksums.ts), null when the writer sent none. */
  checksum?: string | null;
  /** JSON [[size, checksum | null], …] of an object made from parts. */
  parts?: string | null;
  /** Canned ACL (access.ts). */
  acl?: string;
}

export interface NewObject {
  size: number;
  etag: string;
  file: string;
  headers: string;
  last_modified: string;
  /** JSON object of tags; an overwrite without them leaves the object untagged. */
  tags?: string;
  /** As ObjectRow; an overwrite without them clears them. */
  checksum: string | null;
  parts: string | null;
  /** Canned ACL; an overwrite without one makes the object private, as on S3. */
  acl?: string;
}

export interface ListResult {
  contents: Array<Pick<ObjectRow, 'key' | 'size' | 'etag' | 'last_modified'>>;
  prefixes: string[];
  truncated: boolean;
  /** Where the next page starts (exclusive), when truncated. */
  next: string | undefined;
}

/** Sorts after every key that starts with the given text (all keys are valid Unicode). */
const AFTER_ALL = '\u{10FFFF}';

export function createObjectMetadata(db: Kysely<Database>, dialect: Dialect) {
  /** Row-locks a selected object on PostgreSQL; SQLite's single writer already serialises. */
  const locking = dialect === 'postgres';

  return {
    findAccessKey: (accessKeyId: string) =>
      db
        .selectFrom('s3_access_keys')
        .innerJoin('object_storages', 'object_storages.id', 's3_access_keys.object_storage_id')
        .select([
          's3_access_keys.object_storage_id',
          's3_access_keys.secret_encrypted',
          's3_access_keys.policies',
          's3_access_keys.username',
          'object_storages.state',
        ])
        .where('s3_access_keys.access_key_id', '=', accessKeyId)
        .executeTakeFirst(),

    /** The storage's bucket of that name (names are unique within a storage only, migration 024). */
    findBucket: (storageId: number, name: string): Promise<BucketRow | undefined> =>
      db
        .selectFrom('s3_buckets')
        .selectAll()
        .where('object_storage_id', '=', storageId)
        .where('name', '=', name)
        .executeTakeFirst(),

    /**
     * The first bucket ever made with that name, whichever storage holds it: what the shared endpoint
     * means by a name when nothing names the storage (a browser preflight). Before names were scoped to
     * storages every name had one holder, so an existing bucket keeps answering there.
     */
    firstBucketNamed: (name: string): Promise<BucketRow | undefined> =>
      db
        .selectFrom('s3_buckets')
        .selectAll()
        .where('name', '=', name)
        .orderBy('id')
        .limit(1)
        .executeTakeFirst(),

    /** The id of the storage an endpoint of its own names (`<uuid>.<host>`, `/<uuid>/…`). */
    findStorage: async (uuid: string): Promise<number | undefined> =>
      (await db.selectFrom('object_storages').select('id').where('uuid', '=', uuid).executeTakeFirst())?.id,

    listBuckets: (storageId: number): Promise<BucketRow[]> =>
      db
        .selectFrom('s3_buckets')
        .selectAll()
        .where('object_storage_id', '=', storageId)
        .orderBy('name')
        .execute(),

    /** Inserts the bucket; undefined when the storage already has one of that name. */
    async createBucket(
      storageId: number,
      name: string,
      now: string,
      acl = 'private',
    ): Promise<number | undefined> {
      const row = await db
        .insertInto('s3_buckets')
        .values({ object_storage_id: storageId, name, created_at: now, acl })
        .onConflict((oc) => oc.columns(['object_storage_id', 'name']).doNothing())
        .returning('id')
        .executeTakeFirst();
      return row?.id;
    },

    /** Deletes an empty bucket and its unfinished uploads; false if it holds objects. Returns upload ids. */
    async deleteBucket(bucketId: number): Promise<{ deleted: boolean; uploads: number[] }> {
      return db.transaction().execute(async (trx) => {
        const one = await trx
          .selectFrom('s3_objects')
          .select('id')
          .where('bucket_id', '=', bucketId)
          .limit(1)
          .executeTakeFirst();
        if (one) return { deleted: false, uploads: [] };
        const uploads = await trx
          .selectFrom('s3_uploads')
          .select('id')
          .where('bucket_id', '=', bucketId)
          .execute();
        await trx.deleteFrom('s3_buckets').where('id', '=', bucketId).execute();
        return { deleted: true, uploads: uploads.map((u) => u.id) };
      });
    },

    findObject: (bucketId: number, key: string): Promise<ObjectRow | undefined> =>
      db
        .selectFrom('s3_objects')
        .select([
          'key',
          'size',
          'etag',
          'file',
          'headers',
          'last_modified',
          'tags',
          'checksum',
          'parts',
          'acl',
        ])
        .where('bucket_id', '=', bucketId)
        .where('key', '=', key)
        .executeTakeFirst(),

    /**
     * Creates or replaces the object; returns the replaced object's file, to be removed after commit.
     * `guard` sees the locked current row (see conditional.ts) and throws to refuse the write.
     */
    async putObject(
      bucketId: number,
      key: string,
      values: NewObject,
      guard?: (current: { etag: string } | undefined) => void,
    ): Promise<string | undefined> {
      for (let attempt = 0; ; attempt += 1) {
        const result = await db.transaction().execute(async (trx) => {
          let select = trx
            .selectFrom('s3_objects')
            .select(['id', 'file', 'etag'])
            .where('bucket_id', '=', bucketId)
            .where('key', '=', key);
          if (locking) select = select.forUpdate();
          const old = await select.executeTakeFirst();
          guard?.(old);
          if (old) {
            await trx
              .updateTable('s3_objects')
              .set({ tags: '{}', acl: 'private', ...values })
              .where('id', '=', old.id)
              .execute();
            return { done: true, old: old.file };
          }
          const inserted = await trx
            .insertInto('s3_objects')
            .values({ bucket_id: bucketId, key, ...values })
            .onConflict((oc) => oc.columns(['bucket_id', 'key']).doNothing())
            .returning('id')
            .executeTakeFirst();
          return { done: inserted !== undefined, old: undefined };
        });
        // A concurrent first PUT of the same key won the insert: go again and replace it.
        if (result.done || attempt >= 3) return result.old;
      }
    },

    async deleteObject(bucketId: number, key: string): Promise<string | undefined> {
      const row = await db
        .deleteFrom('s3_objects')
        .where('bucket_id', '=', bucketId)
        .where('key', '=', key)
        .returning('file')
        .executeTakeFirst();
      return row?.file;
    },

    /** One page of keys after `after`, under `prefix`, rolling keys up to `delimiter` when given. */
    async listObjects(
      bucketId: number,
      options: { prefix: string; delimiter: string; after: string; maxKeys: number },
    ): Promise<ListResult> {
      const { prefix, delimiter, maxKeys } = options;
      const result: ListResult = { contents: [], prefixes: [], truncated: false, next: undefined };
      let after = options.after;
      const batch = Math.min(Math.max(maxKeys + 1, 100), 1001);
      let count = 0;
      for (;;) {
        let query = db
          .selectFrom('s3_objects')
          .select(['key', 'size', 'etag', 'last_modified'])
          .where('bucket_id', '=', bucketId)
          .where('key', '>', after)
          .orderBy('key')
          .limit(batch);
        if (prefix !== '') {
          query = query
            .where('key', '>=', prefix)
            .where(sql<string>`substr(key, 1, ${[...prefix].length})`, '=', prefix);
        }
        const rows = await query.execute();
        let restart: string | undefined;
        for (const row of rows) {
          const rest = row.key.slice(prefix.length);
          const cut = delimiter === '' ? -1 : rest.indexOf(delimiter);
          if (count === maxKeys) {
            result.truncated = true;
            return result;
          }
          count += 1;
          if (cut >= 0) {
            const common = prefix + rest.slice(0, cut + delimiter.length);
            result.prefixes.push(common);
            // Skip every key under this common prefix in one jump.
            result.next = restart = common + AFTER_ALL;
            break;
          }
          result.contents.push(row);
          result.next = row.key;
        }
        if (restart !== undefined) {
          after = restart;
          continue;
        }
        if (rows.length < batch) {
          result.next = undefined;
          return result;
        }
        after = rows[rows.length - 1]!.key;
      }
    },

    createUpload: (values: {
      upload_id: string;
      bucket_id: number;
      key: string;
      headers: string;
      created_at: string;
      tags?: string;
      checksum: string | null;
      acl?: string;
    }) => db.insertInto('s3_uploads').values(values).execute(),

    /** Uploads in progress under a prefix, by key and then by when they started (at most 10,000). */
    listUploads: (bucketId: number, prefix: string) =>
      db
        .selectFrom('s3_uploads')
        .select(['upload_id', 'key', 'created_at'])
        .where('bucket_id', '=', bucketId)
        .where('key', '>=', prefix)
        .where('key', '<', prefix + AFTER_ALL)
        .orderBy('key')
        .orderBy('id')
        .limit(10_000)
        .execute(),

    findUpload: (uploadId: string) =>
      db.selectFrom('s3_uploads').selectAll().where('upload_id', '=', uploadId).executeTakeFirst(),

    /** Records a part; returns the file of the part it replaced. */
    async putPart(
      uploadRowId: number,
      partNumber: number,
      values: { size: number; etag: string; file: string; last_modified: string; checksum: string | null },
    ): Promise<string | undefined> {
      return db.transaction().execute(async (trx) => {
        let select = trx
          .selectFrom('s3_upload_parts')
          .select(['id', 'file'])
          .where('upload_id', '=', uploadRowId)
          .where('part_number', '=', partNumber);
        if (locking) select = select.forUpdate();
        const old = await select.executeTakeFirst();
        if (old) {
          await trx.updateTable('s3_upload_parts').set(values).where('id', '=', old.id).execute();
          return old.file;
        }
        await trx
          .insertInto('s3_upload_parts')
          .values({ upload_id: uploadRowId, part_number: partNumber, ...values })
          .execute();
        return undefined;
      });
    },

    listParts: (uploadRowId: number, after = 0, limit = 10_000) =>
      db
        .selectFrom('s3_upload_parts')
        .select(['part_number', 'size', 'etag', 'file', 'last_modified', 'checksum'])
        .where('upload_id', '=', uploadRowId)
        .where('part_number', '>', after)
        .orderBy('part_number')
        .limit(limit)
        .execute(),

    /** Completes an upload: the object row replaces any old one and the upload goes, in one transaction. */
    async completeUpload(
      uploadRowId: number,
      bucketId: number,
      key: string,
      values: NewObject,
      guard?: (current: { etag: string } | undefined) => void,
    ) {
      return db.transaction().execute(async (trx) => {
        const gone = await trx.deleteFrom('s3_uploads').where('id', '=', uploadRowId).executeTakeFirst();
        if (Number(gone.numDeletedRows) === 0) return { completed: false, old: undefined };
        let select = trx
          .selectFrom('s3_objects')
          .select(['id', 'file', 'etag'])
          .where('bucket_id', '=', bucketId)
          .where('key', '=', key);
        if (locking) select = select.forUpdate();
        const old = await select.executeTakeFirst();
        // A refusal rolls back the upload's deletion too: the client may retry without a condition.
        guard?.(old);
        if (old)
          await trx
            .updateTable('s3_objects')
            .set({ tags: '{}', acl: 'private', ...values })
            .where('id', '=', old.id)
            .execute();
        else
          await trx
            .insertInto('s3_objects')
            .values({ bucket_id: bucketId, key, ...values })
            .execute();
        return { completed: true, old: old?.file };
      });
    },

    async abortUpload(uploadRowId: number): Promise<boolean> {
      const gone = await db.deleteFrom('s3_uploads').where('id', '=', uploadRowId).executeTakeFirst();
      return Number(gone.numDeletedRows) > 0;
    },

    /** Replaces an object's tags; false when there is no such object. */
    async setTags(bucketId: number, key: string, tags: string): Promise<boolean> {
      const result = await db
        .updateTable('s3_objects')
        .set({ tags })
        .where('bucket_id', '=', bucketId)
        .where('key', '=', key)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },

    /** The bucket's tags (JSON object), null when it has no tag set. */
    bucketTags: async (bucketId: number): Promise<string | null> =>
      (await db.selectFrom('s3_buckets').select('tags').where('id', '=', bucketId).executeTakeFirst())
        ?.tags ?? null,

    setBucketTags: (bucketId: number, tags: string | null) =>
      db.updateTable('s3_buckets').set({ tags }).where('id', '=', bucketId).execute(),

    /** Sets a bucket's ACL, policy or PublicAccessBlock (access.ts). */
    setBucketAccess: (
      bucketId: number,
      values: { acl?: string; policy?: string | null; public_access_block?: string | null },
    ) => db.updateTable('s3_buckets').set(values).where('id', '=', bucketId).execute(),

    /** Sets an object's ACL; false when there is no such object. */
    async setObjectAcl(bucketId: number, key: string, acl: string): Promise<boolean> {
      const result = await db
        .updateTable('s3_objects')
        .set({ acl })
        .where('bucket_id', '=', bucketId)
        .where('key', '=', key)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },

    /** The bucket's CORS rules (JSON, see cors.ts), or undefined when it has no configuration. */
    getCors: async (bucketId: number): Promise<string | undefined> =>
      (
        await db
          .selectFrom('s3_bucket_cors')
          .select('rules')
          .where('bucket_id', '=', bucketId)
          .executeTakeFirst()
      )?.rules,

    putCors: (bucketId: number, rules: string) =>
      db
        .insertInto('s3_bucket_cors')
        .values({ bucket_id: bucketId, rules })
        .onConflict((oc) => oc.column('bucket_id').doUpdateSet({ rules }))
        .execute(),

    deleteCors: (bucketId: number) =>
      db.deleteFrom('s3_bucket_cors').where('bucket_id', '=', bucketId).execute(),

    /** Which of these files (relative paths) an object or an upload part names. */
    async namedFiles(files: string[]): Promise<Set<string>> {
      if (files.length === 0) return new Set();
      const [objects, parts] = await Promise.all([
        db.selectFrom('s3_objects').select('file').where('file', 'in', files).execute(),
        db.selectFrom('s3_upload_parts').select('file').where('file', 'in', files).execute(),
      ]);
      return new Set([...objects, ...parts].map((r) => r.file));
    },
  };
}

export type ObjectMetadata = ReturnType<typeof createObjectMetadata>;
