// Public buckets and bucket policies (issue 30): a bucket's and an object's canned ACL, a bucket's
// policy document and its PublicAccessBlock. An upload keeps the ACL its object gets on completion.
// Every existing bucket and object stays private.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('s3_buckets')
    .addColumn('acl', 'text', (c) => c.notNull().defaultTo('private'))
    .execute();
  await db.schema.alterTable('s3_buckets').addColumn('policy', 'text').execute();
  await db.schema.alterTable('s3_buckets').addColumn('public_access_block', 'text').execute();
  await db.schema
    .alterTable('s3_objects')
    .addColumn('acl', 'text', (c) => c.notNull().defaultTo('private'))
    .execute();
  await db.schema
    .alterTable('s3_uploads')
    .addColumn('acl', 'text', (c) => c.notNull().defaultTo('private'))
    .execute();
}
