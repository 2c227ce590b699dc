// The one file that chooses the SQL dialect.
import fs from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, type SqliteDatabase } from 'kysely';
import pg from 'pg';
import type { Database } from './schema/index.js';
import { migrateToLatest } from './migrations/index.js';

import type { Dialect } from './dialect.js';

export type { Dialect };

export interface Store {
  readonly db: Kysely<Database>;
  readonly dialect: Dialect;
  close(): Promise<void>;
}

// int8 (count(*), sums) as numbers: our counts stay far below 2^53.
pg.types.setTypeParser(20, (value: string) => Number(value));

export interface StoreOptions {
  /** postgres://… or undefined for SQLite. */
  databaseUrl?: string | undefined;
  /** SQLite file path, or ':memory:'. */
  sqlitePath?: string;
  poolSize?: number;
  migrate?: boolean;
}

// Kysely's SQLite driver calls prepare() on every query, and compiling the SQL was the largest single
// cost of a read-heavy request (17% of a dry-run apply). The SQL text of a Kysely query depends only on
// its shape, never on its values (those are bound parameters), so a small set of texts repeats forever:
// keep their compiled statements. Bounded (least recently used goes) so that a caller building SQL
// with inlined values cannot grow it without limit. A statement that is still being iterated (a stream)
// cannot run again until it finishes, so then a fresh one is prepared.
const STATEMENT_CACHE_SIZE = 500;

function withStatementCache(sqlite: BetterSqlite3.Database): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    close: () => {
      cache.clear();
      sqlite.close();
    },
    prepare(sql: string): BetterSqlite3.Statement {
      const cached = cache.get(sql);
      if (cached !== undefined) {
        if (cached.busy) return sqlite.prepare(sql);
        // Move to the most recent end.
        cache.delete(sql);
        cache.set(sql, cached);
        return cached;
      }
      const statement = sqlite.prepare(sql);
      cache.set(sql, statement);
      if (cache.size > STATEMENT_CACHE_SIZE) {
        const oldest = cache.keys().next();
        if (oldest.done !== true) cache.delete(oldest.value);
      }
      return statement;
    },
  };
}

export async function openStore(options: StoreOptions): Promise<Store> {
  let store: Store;
  if (options.databaseUrl) {
    const pool = new pg.Pool({ connectionString: options.databaseUrl, max: options.poolSize ?? 10 });
    // An idle client whose connection the server closed (restart, failover) must not crash the process;
    // the pool replaces it on the next checkout.
    pool.on('error', () => undefined);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    store = { db, dialect: 'postgres', close: () => db.destroy() };
  } else {
    const file = options.sqlitePath ?? ':memory:';
    if (file !== ':memory:') fs.mkdirSync(path.dirname(file), { recursive: true });
    const sqlite = new BetterSqlite3(file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('busy_timeout = 5000');
    sqlite.pragma('foreign_keys = ON');
    // FULL: a commit is on the disk before it returns, so what Berth acknowledged (an apply, a stored
    // object's metadata, a finished job) survives a power loss. NORMAL could roll the last commits
    // back; FULL costs about 0.2 ms per commit here (docs/decisions/0003-durable-acknowledgements.md).
    sqlite.pragma('synchronous = FULL');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
    store = { db, dialect: 'sqlite', close: () => db.destroy() };
  }
  if (options.migrate !== false) await migrateToLatest(store.db as unknown as Kysely<unknown>, store.dialect);
  return store;
}

export async function pingStore(store: Store): Promise<boolean> {
  try {
    await store.db.selectFrom('settings').select('key').limit(1).execute();
    return true;
  } catch {
    return false;
  }
}
