// The whole store as rows, for backups (issue 31): every table there is, found by asking the store
// (never a list kept here, so a feature's new table is in the next backup without a change), read in
// one transaction that sees one moment of it while Berth goes on writing; and put back into an empty
// store, parents before children, with PostgreSQL's id sequences moved past the restored ids.
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Dialect } from './dialect.js';
import type { Database } from './schema/index.js';
import { migrator, migrateToLatest } from './migrations/index.js';

export type Row = Record<string, unknown>;

/** Kysely's own bookkeeping: made by the migrations, never copied. */
const MIGRATION_TABLES = new Set(['kysely_migration', 'kysely_migration_lock']);

const quote = (name: string): string => `"${name.replace(/"/g, '""')}"`;

type Db = Kysely<Database> | Transaction<Database>;

async function tableNames(db: Db, dialect: Dialect): Promise<string[]> {
  const rows =
    dialect === 'sqlite'
      ? await sql<{ name: string }>`SELECT name FROM sqlite_master
          WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`.execute(db)
      : await sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`.execute(
          db,
        );
  return rows.rows.map((r) => r.name).filter((name) => !MIGRATION_TABLES.has(name));
}

/** The newest migration the store has run (the schema the rows fit). */
async function latestMigration(db: Db): Promise<string> {
  const rows = await sql<{
    name: string;
  }>`SELECT name FROM kysely_migration ORDER BY name DESC LIMIT 1`.execute(db);
  const name = rows.rows[0]?.name;
  if (name === undefined) throw new Error('the store has no migrations');
  return name;
}

export interface StoreSnapshot {
  dialect: Dialect;
  migration: string;
  tables: string[];
}

/**
 * Reads every table in one transaction (SQLite: one read snapshot of its WAL; PostgreSQL: REPEATABLE
 * READ), handing each table's rows to `onTable` as it is read. `onTable` may do I/O; the snapshot is
 * held until it returns for the last table.
 */
export async function readSnapshot(
  db: Kysely<Database>,
  dialect: Dialect,
  onTable: (table: string, rows: Row[]) => Promise<void>,
): Promise<StoreSnapshot> {
  const read = async (trx: Transaction<Database>): Promise<StoreSnapshot> => {
    const migration = await latestMigration(trx);
    const tables = await tableNames(trx, dialect);
    for (const table of tables) {
      const rows = await sql<Row>`SELECT * FROM ${sql.raw(quote(table))}`.execute(trx);
      await onTable(table, rows.rows);
    }
    return { dialect, migration, tables };
  };
  return dialect === 'postgres'
    ? db.transaction().setIsolationLevel('repeatable read').execute(read)
    : db.transaction().execute(read);
}

/** Tables ordered so that every table comes after those its foreign keys name. */
async function parentsFirst(db: Db, dialect: Dialect, tables: string[]): Promise<string[]> {
  const edges =
    dialect === 'sqlite'
      ? await sql<{ child: string; parent: string }>`SELECT m.name AS child, p."table" AS parent
          FROM sqlite_master m JOIN pragma_foreign_key_list(m.name) p WHERE m.type = 'table'`.execute(db)
      : await sql<{ child: string; parent: string }>`SELECT tc.table_name AS child, ccu.table_name AS parent
          FROM information_schema.table_constraints tc
          JOIN information_schema.constraint_column_usage ccu
            ON tc.constraint_name = ccu.constraint_name AND tc.table_schema = ccu.table_schema
          WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = current_schema()`.execute(db);
  const parents = new Map<string, Set<string>>(tables.map((t) => [t, new Set()]));
  for (const { child, parent } of edges.rows) if (child !== parent) parents.get(child)?.add(parent);
  const ordered: string[] = [];
  const seen = new Set<string>();
  const visit = (table: string, path: Set<string>) => {
    if (seen.has(table) || path.has(table)) return;
    path.add(table);
    for (const parent of parents.get(table) ?? []) visit(parent, path);
    seen.add(table);
    ordered.push(table);
  };
  for (const table of tables) visit(table, new Set());
  return ordered;
}

/** Whether the store has no rows in any of its tables (or no tables at all). */
export async function storeIsEmpty(db: Kysely<Database>, dialect: Dialect): Promise<boolean> {
  for (const table of await tableNames(db, dialect)) {
    const rows = await sql<{ one: number }>`SELECT 1 AS one FROM ${sql.raw(quote(table))} LIMIT 1`.execute(
      db,
    );
    if (rows.rows.length > 0) return false;
  }
  return true;
}

/**
 * Puts a snapshot into an empty store: migrates it to the snapshot's migration, inserts every table's
 * rows (`rowsOf` reads them) in one transaction, then migrates to this Berth's newest. A snapshot of a
 * newer Berth (a migration this one does not have) is refused before anything is written.
 */
export async function writeSnapshot(
  db: Kysely<Database>,
  dialect: Dialect,
  snapshot: StoreSnapshot,
  rowsOf: (table: string) => Promise<Row[]>,
): Promise<void> {
  const unknown = db as unknown as Kysely<unknown>;
  const known = (await migrator(unknown, dialect).getMigrations()).map((m) => m.name);
  if (!known.includes(snapshot.migration))
    throw new Error(
      `the backup's store is at migration ${snapshot.migration}, which this Berth does not have: restore with the Berth version that made it or a newer one`,
    );
  const { error } = await migrator(unknown, dialect).migrateTo(snapshot.migration);
  if (error !== undefined) throw new Error(`migrating the empty store failed`, { cause: error });
  const present = new Set(await tableNames(db, dialect));
  const missing = snapshot.tables.filter((t) => !present.has(t));
  if (missing.length > 0) throw new Error(`the store has no table ${missing.join(', ')} of the backup`);
  await db.transaction().execute(async (trx) => {
    // The rows are put back as they were: triggers (a team's revision row made with the team) would
    // add rows of their own. Off for the restore, in the same transaction.
    const triggers =
      dialect === 'sqlite'
        ? (
            await sql<{
              name: string;
              sql: string;
            }>`SELECT name, sql FROM sqlite_master WHERE type = 'trigger'`.execute(trx)
          ).rows
        : [];
    for (const trigger of triggers) await sql`DROP TRIGGER ${sql.raw(quote(trigger.name))}`.execute(trx);
    if (dialect === 'postgres')
      for (const table of snapshot.tables)
        await sql`ALTER TABLE ${sql.raw(quote(table))} DISABLE TRIGGER USER`.execute(trx);
    for (const table of await parentsFirst(trx, dialect, snapshot.tables)) {
      const rows = await rowsOf(table);
      for (let i = 0; i < rows.length; i += 100) {
        const batch = rows.slice(i, i + 100);
        const columns = Object.keys(batch[0]!);
        const values = batch.map((row) => sql`(${sql.join(columns.map((c) => sql`${row[c] ?? null}`))})`);
        await sql`INSERT INTO ${sql.raw(quote(table))} (${sql.raw(columns.map(quote).join(', '))})
          VALUES ${sql.join(values)}`.execute(trx);
      }
      if (dialect === 'postgres' && rows.length > 0 && 'id' in rows[0]!) {
        await sql`SELECT setval(pg_get_serial_sequence(${quote(table)}, 'id'), MAX(id))
          FROM ${sql.raw(quote(table))} HAVING pg_get_serial_sequence(${quote(table)}, 'id') IS NOT NULL`.execute(
          trx,
        );
      }
    }
    for (const trigger of triggers) await sql.raw(trigger.sql).execute(trx);
    if (dialect === 'postgres')
      for (const table of snapshot.tables)
        await sql`ALTER TABLE ${sql.raw(quote(table))} ENABLE TRIGGER USER`.execute(trx);
  });
  await migrateToLatest(unknown, dialect);
}
