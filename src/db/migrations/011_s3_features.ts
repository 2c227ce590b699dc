// S3 features web applications use: per-bucket CORS rules and object tags (see docs/api/s3-features.md).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One row per bucket that has a CORS configuration; no row means the endpoint's default.
  await db.schema
    .createTable('s3_bucket_cors')
    .addColumn('bucket_id', 'integer', (c) => c.primaryKey().references('s3_buckets.id').onDelete('cascade'))
    .addColumn('rules', 'text', (c) => c.notNull())
    .execute();
  // Tags travel with the object row (an overwrite replaces them, as on S3); an upload holds the
  // tags given when it was created until it completes. JSON object, '{}' when untagged.
  await db.schema
    .alterTable('s3_objects')
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
  await db.schema
    .alterTable('s3_uploads')
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
}
