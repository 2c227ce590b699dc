/* eslint-disable @typescript-eslint/no-unsafe-member-access --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Apply reuses a plan while the team's revision is unchanged: it is never stale. Every kind of write
// that does not go through apply (in this process or through another connection, as another replica
// would) is seen by the next dry run of the same text, on both stores.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import { openStore, type Store } from '../../src/db/connect.js';
import { createContext } from '../../src/context.js';
import { listenOnSocket } from '../helpers/http.js';
import { createTestApp, authHeaders, testConfig, type TestApp } from '../helpers/app.js';
import { DIALECTS, createTestPostgresDatabase } from '../helpers/store.js';
import { apply, fullDocument, yaml } from './helpers.js';

type Changes = Record<string, Array<{ action: string }> | { action: string } | null>;

/** The actions of a dry run of `text` that are not `unchanged`, as 'block:action'. */
async function changed(t: TestApp, text: string): Promise<string[]> {
  const res = await apply(t, text, '?dry_run=true');
  expect(res.statusCode, res.body).toBe(200);
  const structured = res.json().structured_changes as Changes;
  return Object.entries(structured).flatMap(([block, value]) =>
    (value === null ? [] : Array.isArray(value) ? value : [value])
      .filter((c) => c.action !== 'unchanged')
      .map((c) => `${block}:${c.action}`),
  );
}

describe.each(DIALECTS)('plan cache (%s)', (dialect) => {
  let t: TestApp;
  let n = 0;
  let name: string;
  let text: string;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());
  beforeEach(async () => {
    n += 1;
    name = `cache${n}`;
    text = yaml(fullDocument(t.user.team_id, name));
    expect((await apply(t, text)).statusCode).toBe(200);
    // Twice: the second dry run is answered from the cache.
    expect(await changed(t, text)).toEqual([]);
    expect(await changed(t, text)).toEqual([]);
  });
  const appId = async () =>
    (
      await t.ctx.db
        .selectFrom('applications')
        .select('id')
        .where('name', '=', name)
        .executeTakeFirstOrThrow()
    ).id;

  it('sees an application changed outside apply', async () => {
    await t.ctx.db
      .updateTable('applications')
      .set({ replicas: 7 })
      .where('id', '=', await appId())
      .execute();
    expect(await changed(t, text)).toEqual(['application:updated']);
  });

  it('sees attached rows changed or deleted outside apply', async () => {
    const id = await appId();
    await t.ctx.db
      .updateTable('secrets')
      .set({ value_hash: 'other' })
      .where('application_id', '=', id)
      .execute();
    expect(await changed(t, text)).toEqual(['secrets:updated']);
    await t.ctx.db.deleteFrom('volumes').where('application_id', '=', id).execute();
    expect(await changed(t, text)).toEqual(['secrets:updated', 'volumes:created']);
    await t.ctx.db.deleteFrom('container_services').where('application_id', '=', id).execute();
    await t.ctx.db.updateTable('services').set({ memory: '64Mi' }).where('application_id', '=', id).execute();
    expect(await changed(t, text)).toEqual([
      'secrets:updated',
      'volumes:created',
      'services:updated',
      'services:updated',
      'container_services:created',
    ]);
  });

  it('sees managed databases and object storage changed outside apply (provisioning, clones)', async () => {
    const team = t.user.team_id;
    await t.ctx.db.deleteFrom('managed_databases').where('team_id', '=', team).execute();
    expect(await changed(t, text)).toEqual(['managed_databases:created']);
    await t.ctx.db.deleteFrom('object_storages').where('team_id', '=', team).execute();
    expect(await changed(t, text)).toEqual(['managed_databases:created', 'object_storage:created']);
  });

  it('sees the application deleted (scheduled deletion) and a domain taken by another team', async () => {
    const domain = `${name}.example.com`;
    await t.ctx.db
      .deleteFrom('applications')
      .where('id', '=', await appId())
      .execute();
    expect(await changed(t, text)).toContain('application:created');
    const other = await t.ctx.identity.createUser({ email: `o${n}@example.com`, team: `other${n}` });
    const otherText = yaml({
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'taker', team: other.team_id },
      spec: { application: { type: 'nodejs' }, domains: [{ domain }] },
    });
    const taken = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: { ...authHeaders(other).platform, 'content-type': 'application/yaml' },
      payload: otherText,
    });
    expect(taken.statusCode, taken.body).toBe(200);
    expect((await apply(t, text, '?dry_run=true')).statusCode).toBe(422);
  });
});

describe.each(DIALECTS)('plan cache with another replica on the same store (%s)', (dialect) => {
  let t: TestApp;
  let other: Store;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    // Two connections to one store: this app's and a second one that writes as another replica would.
    let location: { databaseUrl: string } | { sqlitePath: string };
    let drop = () => Promise.resolve();
    if (dialect === 'postgres') {
      const database = await createTestPostgresDatabase();
      location = { databaseUrl: database.url };
      drop = () => database.drop();
    } else {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-plan-cache-'));
      location = { sqlitePath: path.join(dir, 'berth.db') };
      drop = () => Promise.resolve(fs.rmSync(dir, { recursive: true, force: true }));
    }
    const store = await openStore(location);
    other = await openStore({ ...location, migrate: false });
    const config = testConfig();
    const ctx = await createContext(config, {
      store,
      logger: pino({ level: 'silent' }),
      masterKey: randomBytes(32),
    });
    const app = await buildApp(ctx, { checkResponses: true });
    const { port, request } = await listenOnSocket(app);
    const user = await ctx.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    t = { ctx, app, request, port, user, auth: authHeaders(user), close: () => Promise.resolve() };
    cleanup = async () => {
      await app.close();
      await ctx.close();
      await other.close();
      await drop();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    };
  });
  afterAll(() => cleanup());

  it('sees a write committed through another connection', async () => {
    const text = yaml(fullDocument(t.user.team_id, 'shared'));
    expect((await apply(t, text)).statusCode).toBe(200);
    expect(await changed(t, text)).toEqual([]);
    expect(await changed(t, text)).toEqual([]);
    await other.db.updateTable('applications').set({ memory: '64Mi' }).where('name', '=', 'shared').execute();
    expect(await changed(t, text)).toEqual(['application:updated']);
    await other.db
      .updateTable('managed_databases')
      .set({ plan: '2x2xCPU-4GB-50GB' })
      .where('team_id', '=', t.user.team_id)
      .execute();
    expect(await changed(t, text)).toEqual(['application:updated', 'managed_databases:needs_action']);
  });
});
