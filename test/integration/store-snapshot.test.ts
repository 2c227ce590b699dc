// The store in a backup (issue 31 item 3): every table, read in one transaction, put back into an
// empty store of the same dialect row for row, with PostgreSQL's id sequences past the restored ids;
// a store that is not empty, and a backup of a newer schema, are refused.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openStore, type Dialect, type Store } from '../../src/db/connect.js';
import { readSnapshot, storeIsEmpty, writeSnapshot, type Row } from '../../src/db/snapshot.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createTestPostgresDatabase, DIALECTS, everyTable } from '../helpers/store.js';

async function emptyStore(dialect: Dialect): Promise<{ store: Store; drop(): Promise<void> }> {
  if (dialect === 'sqlite') {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-snapshot-'));
    const store = await openStore({ sqlitePath: path.join(dir, 'berth.sqlite'), migrate: false });
    return { store, drop: () => Promise.resolve(fs.rmSync(dir, { recursive: true, force: true })) };
  }
  const database = await createTestPostgresDatabase();
  const store = await openStore({ databaseUrl: database.url, migrate: false });
  return { store, drop: () => database.drop() };
}

describe.each(DIALECTS)('the store in a backup (%s)', (dialect) => {
  let t: TestApp | undefined;
  const drops: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await t?.close();
    for (const drop of drops.splice(0)) await drop();
  });

  it('comes back row for row in an empty store, and new rows get new ids', async () => {
    t = await createTestApp(dialect);
    for (const name of ['red', 'green', 'blue']) {
      const created = await t.request({
        method: 'POST',
        url: '/api/v1/teams',
        headers: { ...t.auth.platform, 'content-type': 'application/json' },
        payload: { name },
      });
      expect(created.statusCode).toBe(201);
    }
    const kept: Record<string, string> = {};
    const snapshot = await readSnapshot(t.ctx.db, t.ctx.store.dialect, (table, rows) => {
      kept[table] = JSON.stringify(rows);
      return Promise.resolve();
    });
    // Every table there is, found in the store (none named in the backup code).
    expect(snapshot.tables).toEqual(expect.arrayContaining(['users', 'teams', 'credentials', 'settings']));
    expect(snapshot.tables).not.toContain('kysely_migration');

    const target = await emptyStore(dialect);
    drops.push(() => target.store.close().then(() => target.drop()));
    expect(await storeIsEmpty(target.store.db, target.store.dialect)).toBe(true);
    await writeSnapshot(target.store.db, target.store.dialect, snapshot, (table) =>
      Promise.resolve(JSON.parse(kept[table]!) as Row[]),
    );
    expect(await everyTable(target.store)).toEqual(await everyTable(t.ctx.store));
    // A sequence past the restored ids: the next team is a new row, not a clash.
    const inserted = await sql<{
      id: number;
    }>`INSERT INTO teams (name, created_at) VALUES ('after', '2026-01-01T00:00:00Z') RETURNING id`.execute(
      target.store.db,
    );
    const ids = (await everyTable(target.store)).teams!.map((row) => row.id as number);
    expect(inserted.rows[0]!.id).toBe(Math.max(...ids));

    // Not into a store that has rows, and not a schema this Berth does not know.
    expect(await storeIsEmpty(target.store.db, target.store.dialect)).toBe(false);
    const fresh = await emptyStore(dialect);
    drops.push(() => fresh.store.close().then(() => fresh.drop()));
    await expect(
      writeSnapshot(fresh.store.db, fresh.store.dialect, { ...snapshot, migration: '999_future' }, () =>
        Promise.resolve([]),
      ),
    ).rejects.toThrow("the backup's store is at migration 999_future, which this Berth does not have");
  });
});
