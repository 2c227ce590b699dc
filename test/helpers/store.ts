// Test stores on both dialects. The suite runs every store-backed test on SQLite and PostgreSQL.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { openStore, type Dialect, type Store } from '../../src/db/connect.js';
import { readSnapshot, type Row } from '../../src/db/snapshot.js';

export const DIALECTS: Dialect[] = (process.env.BERTH_TEST_DIALECTS ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d): d is Dialect => d === 'sqlite' || d === 'postgres');

/** A fresh, migrated database of the given dialect; close() drops it. */
export async function openTestStore(dialect: Dialect, options: { poolSize?: number } = {}): Promise<Store> {
  if (dialect === 'sqlite') return openStore({ sqlitePath: ':memory:' });
  const adminUrl = inject('postgresUrl');
  const name = `berth_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const store = await openStore({ databaseUrl: url.toString(), poolSize: options.poolSize ?? 5 });
  return {
    ...store,
    async close() {
      await store.close();
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/** The URL of a fresh PostgreSQL database (for tests that open several stores on one database). */
export async function createTestPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const adminUrl = inject('postgresUrl');
  const name = `berth_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await again.end();
    },
  };
}

/** Every table's rows, each table's sorted, as a backup's snapshot reads them (src/db/snapshot.ts). */
export async function everyTable(store: Store): Promise<Record<string, Row[]>> {
  const tables: Record<string, Row[]> = {};
  await readSnapshot(store.db, store.dialect, (table, rows) => {
    tables[table] = rows
      .map((r) => JSON.stringify(r))
      .sort()
      .map((r) => JSON.parse(r) as Row);
    return Promise.resolve();
  });
  return tables;
}
