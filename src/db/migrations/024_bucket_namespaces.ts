// Bucket names are scoped to their object storage (issue 26, docs/decisions/0008-bucket-namespaces.md):
// unique per (object_storage_id, name) instead of on the whole endpoint, so two storages (two teams, an
// export applied elsewhere) can each hold a bucket of the same name. Rows and ids do not change, so every
// existing bucket keeps its objects, files and keys.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') {
    // Migrations run in one transaction on PostgreSQL: all of this or nothing.
    await db.schema.alterTable('s3_buckets').dropConstraint('s3_buckets_name_key').execute();
    await db.schema
      .alterTable('s3_buckets')
      .addUniqueConstraint('s3_buckets_storage_name', ['object_storage_id', 'name'])
      .execute();
  } else {
    // SQLite cannot drop a column's UNIQUE: the table is rebuilt (sqlite.org/lang_altertable.html, "other
    // kinds of table schema changes"). Foreign keys are off meanwhile, or dropping the old table would
    // cascade to every object, upload and CORS row; the pragma only takes effect outside a transaction,
    // and SQLite migrations run outside one.
    await sql`PRAGMA foreign_keys = OFF`.execute(db);
    try {
      await db.transaction().execute(async (trx) => {
        await sql`CREATE TABLE s3_buckets_new (
          id integer PRIMARY KEY AUTOINCREMENT,
          object_storage_id integer NOT NULL REFERENCES object_storages (id) ON DELETE CASCADE,
          name text NOT NULL,
          created_at text NOT NULL,
          tags text,
          CONSTRAINT s3_buckets_storage_name UNIQUE (object_storage_id, name)
        )`.execute(trx);
        await sql`INSERT INTO s3_buckets_new (id, object_storage_id, name, created_at, tags)
          SELECT id, object_storage_id, name, created_at, tags FROM s3_buckets`.execute(trx);
        await sql`DROP TABLE s3_buckets`.execute(trx);
        await sql`ALTER TABLE s3_buckets_new RENAME TO s3_buckets`.execute(trx);
        await trx.schema
          .createIndex('s3_buckets_storage')
          .on('s3_buckets')
          .column('object_storage_id')
          .execute();
        const broken = await sql`PRAGMA foreign_key_check`.execute(trx);
        if (broken.rows.length > 0) throw new Error('s3_buckets rebuild left foreign keys unresolved');
      });
    } finally {
      await sql`PRAGMA foreign_keys = ON`.execute(db);
    }
  }
  // The shared endpoint's look-ups by name alone (a browser preflight, which carries no key).
  await db.schema.createIndex('s3_buckets_name').on('s3_buckets').column('name').execute();
}
