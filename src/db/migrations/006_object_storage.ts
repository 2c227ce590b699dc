import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  // Object keys compare byte-wise so ListObjectsV2 order and continuation match S3's UTF-8 order.
  const keyType = dialect === 'postgres' ? sql`text COLLATE "C"` : sql`text`;

  await withId(db.schema.createTable('s3_buckets'), dialect)
    .addColumn('object_storage_id', 'integer', (c) =>
      c.notNull().references('object_storages.id').onDelete('cascade'),
    )
    .addColumn('name', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('s3_buckets_storage').on('s3_buckets').column('object_storage_id').execute();

  await withId(db.schema.createTable('s3_access_keys'), dialect)
    .addColumn('object_storage_id', 'integer', (c) =>
      c.notNull().references('object_storages.id').onDelete('cascade'),
    )
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('access_key_id', 'text', (c) => c.notNull().unique())
    .addColumn('secret_encrypted', 'text', (c) => c.notNull())
    .addColumn('policies', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('s3_access_keys_storage_user', ['object_storage_id', 'username'])
    .execute();

  await withId(db.schema.createTable('s3_objects'), dialect)
    .addColumn('bucket_id', 'integer', (c) => c.notNull().references('s3_buckets.id').onDelete('cascade'))
    .addColumn('key', keyType, (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('etag', 'text', (c) => c.notNull())
    .addColumn('file', 'text', (c) => c.notNull())
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('last_modified', 'text', (c) => c.notNull())
    .addUniqueConstraint('s3_objects_bucket_key', ['bucket_id', 'key'])
    .execute();

  await withId(db.schema.createTable('s3_uploads'), dialect)
    .addColumn('upload_id', 'text', (c) => c.notNull().unique())
    .addColumn('bucket_id', 'integer', (c) => c.notNull().references('s3_buckets.id').onDelete('cascade'))
    .addColumn('key', keyType, (c) => c.notNull())
    .addColumn('headers', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await withId(db.schema.createTable('s3_upload_parts'), dialect)
    .addColumn('upload_id', 'integer', (c) => c.notNull().references('s3_uploads.id').onDelete('cascade'))
    .addColumn('part_number', 'integer', (c) => c.notNull())
    .addColumn('size', 'bigint', (c) => c.notNull())
    .addColumn('etag', 'text', (c) => c.notNull())
    .addColumn('file', 'text', (c) => c.notNull())
    .addColumn('last_modified', 'text', (c) => c.notNull())
    .addUniqueConstraint('s3_upload_parts_upload_part', ['upload_id', 'part_number'])
    .execute();
}
