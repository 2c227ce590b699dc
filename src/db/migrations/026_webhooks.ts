// Team webhooks and push to deploy (issue 31, items 4 and 5): a team's endpoints with their signing
// secret (sealed), one delivery per event and endpoint, and each attempt of it with its answer; and each
// application's push-to-deploy secret (sealed, made on first read).
import type { Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { TEXT, withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await withId(db.schema.createTable('webhooks'), dialect)
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('url', TEXT, (c) => c.notNull())
    .addColumn('events', TEXT, (c) => c.notNull())
    .addColumn('secret_encrypted', TEXT, (c) => c.notNull())
    .addColumn('created_by', 'integer')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_team').on('webhooks').column('team_id').execute();

  await withId(db.schema.createTable('webhook_deliveries'), dialect)
    .addColumn('webhook_id', 'integer', (c) => c.notNull().references('webhooks.id').onDelete('cascade'))
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('body', TEXT, (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_deliveries_webhook')
    .on('webhook_deliveries')
    .columns(['webhook_id', 'id'])
    .execute();

  await withId(db.schema.createTable('webhook_attempts'), dialect)
    .addColumn('delivery_id', 'integer', (c) =>
      c.notNull().references('webhook_deliveries.id').onDelete('cascade'),
    )
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('error', TEXT)
    .addColumn('response_excerpt', TEXT)
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('webhook_attempts_delivery')
    .on('webhook_attempts')
    .column('delivery_id')
    .execute();

  await db.schema.alterTable('applications').addColumn('git_webhook_secret', TEXT).execute();
}
