import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { withId } from './helpers.js';

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('tools_credit_usage')
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('used', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('tools_credit_usage_pk', ['user_id', 'period'])
    // The store itself refuses a negative balance of used credits, whatever the code does.
    .addCheckConstraint('tools_credit_usage_used_nonnegative', sql`used >= 0`)
    .execute();

  await withId(db.schema.createTable('tools_ledger'), dialect)
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('period', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('operation', 'text', (c) => c.notNull())
    .addColumn('amount', 'integer', (c) => c.notNull())
    .addColumn('refund_of', 'integer', (c) => c.unique())
    .addColumn('reason', 'text')
    .addColumn('request_id', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute();
  // /tools/usage lists one user's entries, newest first.
  await db.schema.createIndex('tools_ledger_user').on('tools_ledger').columns(['user_id', 'id']).execute();
}
