// Managed-database tests need Berth to restart on the same store and data dir, so they build their
// contexts here instead of through createTestApp (whose close also closes the store).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/config/index.js';
import { createContext, type AppContext } from '../../src/context.js';
import { createManualClock } from '../../src/domain/clock.js';
import type { Dialect, Store } from '../../src/db/connect.js';
import { iso } from '../../src/domain/clock.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import { createLocalDatabaseDriver } from '../../src/drivers/databases/local/index.js';
import { testConfig } from '../helpers/app.js';
import { listenOnSocket, type RequestOverSocket } from '../helpers/http.js';
import { openTestStore } from '../helpers/store.js';

export interface ManagedEnv {
  config: Config;
  clock: ReturnType<typeof createManualClock>;
  /** A new Berth process on the same store, data dir and master key. */
  boot(): Promise<{
    ctx: AppContext;
    app: FastifyInstance;
    request: RequestOverSocket;
    close(): Promise<void>;
  }>;
  destroy(): Promise<void>;
}

/**
 * `templateDir` lets the suites of both dialects copy instances from one set of engine templates
 * instead of running initdb and mariadb-install-db once per suite.
 */
export async function openManagedEnv(dialect: Dialect, templateDir?: string): Promise<ManagedEnv> {
  // Migration sources in these suites are servers on loopback, which /1.3 refuses unless allowed.
  const config = testConfig({ BERTH_TOOLS_ALLOW_PRIVATE: '127.0.0.1' });
  const store = await openTestStore(dialect);
  const shared: Store = { db: store.db, dialect: store.dialect, close: () => Promise.resolve() };
  const masterKey = randomBytes(32);
  const clock = createManualClock(new Date());
  return {
    config,
    clock,
    async boot() {
      const ctx = await createContext(config, {
        store: shared,
        logger: pino({ level: 'silent' }),
        masterKey,
        clock,
        ...(templateDir
          ? {
              services: {
                managedDatabaseDriver: createLocalDatabaseDriver({ dataDir: config.dataDir, templateDir }),
              },
            }
          : {}),
      });
      const app = await buildApp(ctx, { checkResponses: true });
      const { request } = await listenOnSocket(app);
      return {
        ctx,
        app,
        request,
        async close() {
          await app.close();
          await ctx.close();
        },
      };
    },
    async destroy() {
      await store.close();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
    },
  };
}

export interface DatabaseEntry {
  name: string;
  type: 'pg' | 'mysql' | 'valkey';
  plan: string;
  zone?: string;
  users?: Array<{ username?: string; authentication?: string }>;
  logical_databases?: Array<{ name?: string; character_set?: string; collation?: string }>;
}

/** What apply does for a new managed database entry: a `pending` row and the provisioning job. */
export async function applyManagedDatabase(
  ctx: AppContext,
  teamId: number,
  entry: DatabaseEntry,
): Promise<string> {
  const uuid = ctx.ids.uuid();
  const now = ctx.clock.now();
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('managed_databases')
      .values({
        uuid,
        team_id: teamId,
        name: entry.name,
        title: entry.name,
        type: entry.type,
        plan: entry.plan,
        zone: entry.zone ?? 'fi-hel1',
        users: JSON.stringify(entry.users ?? []),
        logical_databases: JSON.stringify(entry.logical_databases ?? []),
        state: 'pending',
        state_reason: null,
        pending_plan: null,
        pending_zone: null,
        created_at: iso(now),
        updated_at: iso(now),
      })
      .execute();
    await enqueueJob(
      trx,
      {
        type: 'managed_database.provision',
        key: `managed_database.provision:${uuid}`,
        payload: { uuid },
        runAt: now,
      },
      now,
    );
  });
  return uuid;
}

/** A directory the database service users can search (0711), for templates shared by suites. */
export function sharedTemplateDir(): { dir: string; remove(): void } {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-templates-'));
  fs.chmodSync(parent, 0o711);
  return {
    dir: path.join(parent, 'templates'),
    remove: () => fs.rmSync(parent, { recursive: true, force: true }),
  };
}
