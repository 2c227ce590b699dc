// An application's `minio` service is a private object storage on Berth's S3 endpoint (issue 15):
// a row of `object_storages` with `application_id` set. Such a row is the service's, never the team's:
// team lists, exports, apply's planning and quotas leave it out (`application_id is null`). It goes
// with its application (the service runner removes its buckets and key first).
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('object_storages')
    .addColumn('application_id', 'integer', (c) => c.references('applications.id').onDelete('cascade'))
    .execute();
  await db.schema
    .createIndex('object_storages_application')
    .on('object_storages')
    .column('application_id')
    .execute();
}
