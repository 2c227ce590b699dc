// A Berth app on a test store, with a fixed clock when asked, and a first user with credentials.
import type { ServiceOverrides } from '../../src/composition.js';
import type { PasswordCost } from '../../src/crypto/passwords.js';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createContext, type AppContext } from '../../src/context.js';
import type { Clock } from '../../src/domain/clock.js';
import type { Dialect, Store } from '../../src/db/connect.js';
import type { CreatedUser } from '../../src/services/identity.js';
import { listenOnSocket, type RequestOverSocket } from './http.js';
import { openTestStore } from './store.js';
import { provisionStorage } from '../object-storage/helpers.js';

export interface TestApp {
  ctx: AppContext;
  app: FastifyInstance;
  /** A request to `app` over a real socket (it listens on a free loopback port). */
  request: RequestOverSocket;
  /** The port `app` listens on. */
  port: number;
  user: CreatedUser;
  /** Headers for each API as the first user. */
  auth: { platform: Record<string, string>; tools: Record<string, string>; dbApi: Record<string, string> };
  close(): Promise<void>;
}

export function testConfig(env: Record<string, string> = {}): Config {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-test-'));
  return loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_LOG_LEVEL: 'silent',
    BERTH_RATE_LIMIT_PER_MINUTE: '0',
    // The S3 endpoint (started by startBackground) on any free port, never the fixed default.
    BERTH_S3_PORT: '0',
    BERTH_EDGE_PORT: '0',
    ...env,
  });
}

export function authHeaders(user: CreatedUser): TestApp['auth'] {
  return {
    platform: { authorization: `Bearer ${user.api_token}` },
    tools: { authorization: user.tools_api_key },
    dbApi: {
      authorization: `Basic ${Buffer.from(`${user.db_api_username}:${user.db_api_password}`).toString('base64')}`,
    },
  };
}

/**
 * scrypt cost of passwords set in tests (1 MiB, a few milliseconds): the production cost (32 MiB, about
 * 0.3 s per hash on two busy cores) made test/http/accounts.test.ts take 95 s. One test there keeps the
 * production cost (`productionPasswordCost`) to prove it is what Berth uses when nothing overrides it.
 */
export const TEST_PASSWORD_COST: PasswordCost = { logN: 10, r: 8, p: 1 };

export async function createTestApp(
  dialect: Dialect,
  options: {
    clock?: Clock;
    env?: Record<string, string>;
    team?: string;
    services?: ServiceOverrides;
    /** Compose Berth without a password cost override, as `berth serve` does. */
    productionPasswordCost?: boolean;
    /**
     * The store instead of a fresh one (a second replica on the same database: open it with
     * `migrate: false`); closed with the app.
     */
    store?: Store;
    /** Berth's secret key instead of a random one (replicas share theirs). */
    masterKey?: Buffer;
    /** The first user's e-mail (a second replica on the same store makes a user of its own). */
    email?: string;
  } = {},
): Promise<TestApp> {
  // BERTH_TEST_OBJECT_STORAGE=s3: every test Berth keeps object bytes in a bucket of an upstream Berth
  // of its own (the s3 driver, docs/drivers.md), so the object-storage tests run through that driver.
  const upstream =
    process.env.BERTH_TEST_OBJECT_STORAGE === 's3' && options.env?.BERTH_OBJECT_STORAGE_DRIVER === undefined
      ? await upstreamBerth(dialect)
      : undefined;
  const config = testConfig({ ...upstream?.env, ...options.env });
  const store = options.store ?? (await openTestStore(dialect));
  const ctx = await createContext(config, {
    store,
    logger: pino({ level: 'silent' }),
    masterKey: options.masterKey ?? randomBytes(32),
    ...(options.clock ? { clock: options.clock } : {}),
    services: {
      ...(options.productionPasswordCost ? {} : { passwordCost: TEST_PASSWORD_COST }),
      ...options.services,
    },
  });
  // Every JSON answer is checked against its route's documented response schema (a mismatch is a 500).
  const app = await buildApp(ctx, { checkResponses: true });
  const { port, request } = await listenOnSocket(app);
  const user = await ctx.identity.createUser({
    email: options.email ?? 'owner@example.com',
    team: options.team ?? 'acme',
  });
  return {
    ctx,
    app,
    request,
    port,
    user,
    auth: authHeaders(user),
    async close() {
      await app.close();
      await ctx.close();
      fs.rmSync(config.dataDir, { recursive: true, force: true });
      await upstream?.close();
    },
  };
}

/** A local-driver Berth serving its S3 endpoint, with a bucket for another Berth's s3 driver. */
async function upstreamBerth(dialect: Dialect) {
  const upstream = await createTestApp(dialect, { env: { BERTH_OBJECT_STORAGE_DRIVER: 'local' } });
  const endpoint = await upstream.ctx.services.objectStorage.serveEndpoint();
  const keys = await provisionStorage(upstream.ctx, upstream.user.team_id, 'berth-blobs', [
    { username: 'berth', policies: ['admin'] },
  ]);
  return {
    env: {
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: endpoint.url,
      BERTH_S3_UPSTREAM_BUCKET: 'berth-blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: keys.berth!.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: keys.berth!.secret,
    },
    async close() {
      await endpoint.close();
      await upstream.close();
    },
  };
}
