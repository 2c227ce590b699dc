// A bucket of the apply document may give its canned ACL next to its name (issue 30 item 5):
// `buckets: [assets, {name: media, acl: public-read}]`. What the document wrote is kept per storage, so
// provisioning applies it and export writes each bucket back in the form it was written.
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('object_storages')
    // JSON: { [bucket]: 'private' | 'public-read' }, only the buckets written with an `acl`.
    .addColumn('bucket_acls', 'text', (c) => c.notNull().defaultTo(sql`'{}'`))
    .execute();
}
