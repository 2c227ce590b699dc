// S3 bucket tags, checksums and part layout: an object keeps the checksum its writer sent (answered back with
// x-amz-checksum-mode), and an object made from parts keeps each part's size and checksum, so that
// GET ?partNumber= can serve one part (see src/drivers/objectstorage/local/checksums.ts).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // Bucket tags, JSON object; null: the bucket has no tag set (GetBucketTagging answers 404).
  await db.schema.alterTable('s3_buckets').addColumn('tags', 'text').execute();
  // JSON {algorithm, type, value}; null when the writer sent none.
  await db.schema.alterTable('s3_objects').addColumn('checksum', 'text').execute();
  // JSON [[size, checksum value | null], …] in part order; null for an object written whole.
  await db.schema.alterTable('s3_objects').addColumn('parts', 'text').execute();
  // JSON {algorithm, type} that CreateMultipartUpload asked for; null for none.
  await db.schema.alterTable('s3_uploads').addColumn('checksum', 'text').execute();
  // JSON {algorithm, value} of the part as received; null when the client sent none.
  await db.schema.alterTable('s3_upload_parts').addColumn('checksum', 'text').execute();
}
