// Applications that run (issue 14): deployments get steps, sources, commits and their log; an
// application gets its run state; one-off commands and runtime events (restarts and their reasons)
// are recorded. Health-check defaults change to Ploi's (laravel `/`, wordpress `/wp-admin/install.php`):
// existing applications keep the path they had by storing the old default.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { TEXT, withId } from './helpers.js';

const OLD_DEFAULTS = { laravel: '/up', wordpress: '/wp-login.php' } as const;

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  for (const [column, type] of [
    ['step', 'text'],
    ['source', 'text'],
    ['branch', 'text'],
    ['commit_sha', 'text'],
    ['skip_build', 'integer'],
    ['rollback_of', 'integer'],
    ['release', 'text'],
    ['error', 'text'],
    ['started_at', 'text'],
    ['finished_at', 'text'],
    ['deadline_at', 'text'],
    ['requested_by', 'integer'],
  ] as const) {
    await db.schema.alterTable('deployments').addColumn(column, type).execute();
  }
  await sql`UPDATE deployments SET status = 'success' WHERE status = 'succeeded'`.execute(db);
  await sql`UPDATE deployments SET skip_build = 0`.execute(db);

  // status: starting, active, deploying, stopping, stopped, destroying, failed (Ploi's).
  await db.schema
    .alterTable('applications')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('stopped'))
    .execute();
  await db.schema.alterTable('applications').addColumn('status_reason', 'text').execute();
  await db.schema
    .alterTable('applications')
    .addColumn('suspended', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  // The deployment whose release serves (null: nothing deployed yet).
  await db.schema.alterTable('applications').addColumn('live_deployment_id', 'integer').execute();
  // The last uploaded source archive (a file name under the application's directory) and when.
  await db.schema.alterTable('applications').addColumn('uploaded_source', 'text').execute();
  await db.schema.alterTable('applications').addColumn('uploaded_source_at', 'text').execute();

  for (const [type, path] of Object.entries(OLD_DEFAULTS)) {
    await sql`UPDATE applications SET health_check_path = ${path}
      WHERE type = ${type} AND health_check_path IS NULL AND health_check_enabled = 1`.execute(db);
  }

  await withId(db.schema.createTable('deployment_logs'), dialect)
    .addColumn('deployment_id', 'integer', (c) =>
      c.notNull().references('deployments.id').onDelete('cascade'),
    )
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('line', TEXT, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('deployment_logs_deployment')
    .on('deployment_logs')
    .columns(['deployment_id', 'id'])
    .execute();

  await withId(db.schema.createTable('command_history'), dialect)
    .addColumn('application_id', 'integer', (c) =>
      c.notNull().references('applications.id').onDelete('cascade'),
    )
    .addColumn('user_id', 'integer')
    .addColumn('command', TEXT, (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('exit_code', 'integer')
    .addColumn('output', TEXT, (c) => c.notNull())
    .addColumn('started_at', 'text', (c) => c.notNull())
    .addColumn('finished_at', 'text')
    .execute();
  await db.schema
    .createIndex('command_history_app')
    .on('command_history')
    .columns(['application_id', 'id'])
    .execute();

  await withId(db.schema.createTable('runtime_events'), dialect)
    .addColumn('application_id', 'integer', (c) =>
      c.notNull().references('applications.id').onDelete('cascade'),
    )
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('instance', 'text', (c) => c.notNull())
    .addColumn('message', TEXT, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('runtime_events_app')
    .on('runtime_events')
    .columns(['application_id', 'id'])
    .execute();
}
