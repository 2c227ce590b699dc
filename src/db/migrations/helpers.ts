import { sql, type CreateTableBuilder } from 'kysely';
import type { Dialect } from '../dialect.js';

/** An auto-increment integer primary key `id` on either dialect. */
export function withId<T extends string>(
  table: CreateTableBuilder<T>,
  dialect: Dialect,
): CreateTableBuilder<T, 'id'> {
  return dialect === 'postgres'
    ? table.addColumn('id', 'serial', (c) => c.primaryKey())
    : table.addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement());
}

/** Large text (JSON, messages): `text` on both dialects. */
export const TEXT = sql`text`;
