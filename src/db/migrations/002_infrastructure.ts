import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const child = (name: string) =>
    withId(db.schema.createTable(name), dialect).addColumn('application_id', 'integer', (c) =>
      c.notNull().references('applications.id').onDelete('cascade'),
    );

  await withId(db.schema.createTable('applications'), dialect)
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('version', 'text')
    .addColumn('label', 'text')
    .addColumn('tags', 'text', (c) => c.notNull())
    .addColumn('repository', 'text', (c) => c.notNull())
    .addColumn('runtime', 'text', (c) => c.notNull())
    .addColumn('commands', 'text', (c) => c.notNull())
    .addColumn('health_check_enabled', 'integer', (c) => c.notNull())
    .addColumn('health_check_path', 'text')
    .addColumn('scheduler_enabled', 'integer')
    .addColumn('replicas', 'integer')
    .addColumn('memory', 'text')
    .addColumn('php', 'text', (c) => c.notNull())
    .addColumn('scheduled_deletion_at', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('applications_team_name', ['team_id', 'name'])
    .execute();
  // The deletion sweep reads this index, never every application.
  await db.schema
    .createIndex('applications_scheduled_deletion')
    .on('applications')
    .column('scheduled_deletion_at')
    .execute();

  await child('domains')
    .addColumn('domain', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();

  await child('secrets')
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('value_encrypted', 'text', (c) => c.notNull())
    .addColumn('value_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('secrets_app_key', ['application_id', 'key'])
    .execute();

  await child('volumes')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('mount_path', 'text', (c) => c.notNull())
    .addColumn('volume_size', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('volumes_app_name', ['application_id', 'name'])
    .execute();

  await child('services')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('version', 'text')
    .addColumn('memory', 'text')
    .addColumn('volume_size', 'text')
    .addColumn('settings', 'text', (c) => c.notNull())
    .addColumn('secret_settings', 'text')
    .addColumn('secret_settings_hash', 'text')
    .addColumn('command', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('services_app_name', ['application_id', 'name'])
    .execute();

  await child('container_services')
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('version', 'text')
    .addColumn('memory', 'text')
    .addColumn('volume_size', 'text')
    .addColumn('settings', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('container_services_app_name', ['application_id', 'name'])
    .execute();

  await child('deployments')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('reason', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('deployments_app').on('deployments').column('application_id').execute();

  await withId(db.schema.createTable('managed_databases'), dialect)
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('title', 'text')
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('plan', 'text', (c) => c.notNull())
    .addColumn('zone', 'text', (c) => c.notNull())
    .addColumn('users', 'text', (c) => c.notNull())
    .addColumn('logical_databases', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('state_reason', 'text')
    .addColumn('pending_plan', 'text')
    .addColumn('pending_zone', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('managed_databases_team_name', ['team_id', 'name'])
    .execute();

  await withId(db.schema.createTable('object_storages'), dialect)
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('zone', 'text', (c) => c.notNull())
    .addColumn('plan', 'text')
    .addColumn('buckets', 'text', (c) => c.notNull())
    .addColumn('users', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('state_reason', 'text')
    .addColumn('pending_zone', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('object_storages_team_name', ['team_id', 'name'])
    .execute();
}
