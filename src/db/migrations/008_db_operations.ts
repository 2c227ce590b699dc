import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

// The dialect is part of the migration signature; these tables use text keys only.
export async function up(db: Kysely<unknown>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('managed_database_tasks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('database_uuid', 'text', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('success', 'integer')
    .addColumn('result', 'text', (c) => c.notNull())
    .addColumn('result_codes', 'text', (c) => c.notNull())
    .addColumn('target_version', 'text')
    .addColumn('details', 'text')
    .addColumn('create_time', 'text', (c) => c.notNull())
    .addColumn('update_time', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('managed_database_tasks_database')
    .on('managed_database_tasks')
    .column('database_uuid')
    .execute();

  await db.schema
    .createTable('managed_database_migrations')
    .addColumn('database_uuid', 'text', (c) => c.primaryKey())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('ignore_dbs', 'text')
    .addColumn('ssl', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('status_json', 'text', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}
