// Application services that run (issue 15): one private instance per postgresql, mysql, redis or
// valkey service of an application, on the managed-database engines. The services rows stay apply's;
// this table is what runs for them: where it listens, its sealed credentials, its state.
import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { TEXT, withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await withId(db.schema.createTable('app_service_instances'), dialect)
    .addColumn('service_id', 'integer', (c) => c.notNull().unique())
    .addColumn('application_id', 'integer', (c) => c.notNull())
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('engine', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('state_reason', TEXT)
    .addColumn('port', 'integer')
    .addColumn('pid', 'integer')
    .addColumn('version', 'text')
    .addColumn('data_dir', 'text')
    .addColumn('applied_sizing', 'text')
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('password_encrypted', TEXT, (c) => c.notNull())
    .addColumn('restarts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_restart_at', 'text')
    .addColumn('last_restart_reason', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('app_service_instances_app')
    .on('app_service_instances')
    .column('application_id')
    .execute();
}
