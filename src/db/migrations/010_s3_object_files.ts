// Object files are looked up by path when the endpoint sweeps files that no row names (see
// files.sweepOrphans): without these indexes each look-up would scan every object.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('s3_objects_file').on('s3_objects').column('file').execute();
  await db.schema.createIndex('s3_upload_parts_file').on('s3_upload_parts').column('file').execute();
}
