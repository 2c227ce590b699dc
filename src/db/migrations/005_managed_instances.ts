import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await withId(db.schema.createTable('managed_instances'), dialect)
    .addColumn('managed_database_id', 'integer', (c) =>
      c.notNull().unique().references('managed_databases.id').onDelete('cascade'),
    )
    .addColumn('driver', 'text', (c) => c.notNull())
    .addColumn('port', 'integer')
    .addColumn('pid', 'integer')
    .addColumn('data_dir', 'text')
    .addColumn('version', 'text')
    .addColumn('applied_plan', 'text')
    .addColumn('admin_username', 'text', (c) => c.notNull())
    .addColumn('admin_password_encrypted', 'text', (c) => c.notNull())
    .addColumn('user_passwords_encrypted', 'text', (c) => c.notNull())
    .addColumn('powered', 'integer', (c) => c.notNull())
    .addColumn('storage_bytes', 'bigint')
    .addColumn('restarts', 'integer', (c) => c.notNull())
    .addColumn('last_restart_at', 'text')
    .addColumn('last_restart_reason', 'text')
    .addColumn('backups', 'text', (c) => c.notNull())
    .addColumn('last_backup_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
}
