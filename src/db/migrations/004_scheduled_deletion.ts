import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  // SQLite adds one column per statement.
  await db.schema.alterTable('applications').addColumn('deletion_warning_7d_for', 'text').execute();
  await db.schema.alterTable('applications').addColumn('deletion_warning_1d_for', 'text').execute();
  // Partial indexes hold only the applications whose warning is still pending, so the sweep's range
  // scan touches due work, not every application scheduled in the window. The predicates must stay
  // textually identical to the ones in the sweep's queries for both planners to use them.
  await sql`CREATE INDEX applications_deletion_warning_7d_pending ON applications (scheduled_deletion_at)
    WHERE scheduled_deletion_at IS NOT NULL
      AND (deletion_warning_7d_for IS NULL OR deletion_warning_7d_for <> scheduled_deletion_at)`.execute(db);
  await sql`CREATE INDEX applications_deletion_warning_1d_pending ON applications (scheduled_deletion_at)
    WHERE scheduled_deletion_at IS NOT NULL
      AND (deletion_warning_1d_for IS NULL OR deletion_warning_1d_for <> scheduled_deletion_at)`.execute(db);

  await withId(db.schema.createTable('notifications'), dialect)
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('application_id', 'integer')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('dedupe_key', 'text', (c) => c.notNull().unique())
    .addColumn('recipient', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_error', 'text')
    .addColumn('scheduled_for', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addColumn('sent_at', 'text')
    .execute();
  await db.schema.createIndex('notifications_team').on('notifications').columns(['team_id', 'id']).execute();
  await db.schema.createIndex('notifications_state').on('notifications').columns(['state', 'id']).execute();
  await db.schema
    .createIndex('notifications_application')
    .on('notifications')
    .column('application_id')
    .execute();

  await db.schema
    .createTable('application_tombstones')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('team_id', 'integer', (c) => c.notNull())
    .addColumn('team_name', 'text', (c) => c.notNull())
    .addColumn('scheduled_deletion_at', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'text', (c) => c.notNull())
    .addColumn('details', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('application_tombstones_team')
    .on('application_tombstones')
    .column('team_id')
    .execute();
}
