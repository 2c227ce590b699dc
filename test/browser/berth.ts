// One real Berth for the browser tests (run as `node --import tsx test/browser/berth.ts <dialect>` by
// global-setup.ts): SQLite in a temporary data directory, or a throwaway PostgreSQL; its API on a free
// port with the background work (jobs, the runtime and its edge, managed databases); an SMTP sink
// for sign-in links; a git repository on loopback holding a small Node.js application; and the people,
// teams and resources the specs start from. It prints one JSON line (BrowserBerth) when ready and
// removes everything on SIGTERM. A control server on loopback hands the specs the mails sent.
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { requestPort } from '../helpers/http.js';
import { loadConfig } from '../../src/config/index.js';
import { MAINTENANCE_USER, maintenancePassword } from '../../src/drivers/databases/local/accounts.js';
import { MANAGED_DATABASE_PLANS } from '../../src/domain/plans.js';
import { DEFAULT_NODE_MAJOR, ensureNodeRuntime } from '../../src/drivers/runtime/local/node-runtime.js';
import { startServer } from '../../src/main.js';
import { removeAccountsCreatedHere } from '../helpers/accounts.js';
import { createRepository, serveRepositories } from '../helpers/git-server.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { nodeAppFiles, nodeDocument } from '../runtime/node-app.js';
import { startSmtpSink } from '../scheduled-deletion/helpers.js';
import type { BrowserBerth } from './fixtures.js';

const dialect = process.argv[2] === 'postgres' ? 'postgres' : 'sqlite';
export const PASSWORD = 'correct horse battery staple';
/** Starts the line that tells global-setup.ts the Berth is ready (Berth's own log goes to stdout too). */
const READY = 'BERTH_BROWSER_READY ';
const PLANS = MANAGED_DATABASE_PLANS.pg;

const root = fs.mkdtempSync(path.join(os.tmpdir(), `berth-browser-${dialect}-`));
// The database servers and applications run as their own system users, which must reach the data dir.
fs.chmodSync(root, 0o755);
const cleanups: Array<() => unknown> = [];
async function cleanUp(): Promise<void> {
  for (const step of cleanups.reverse()) {
    try {
      await step();
    } catch (error) {
      process.stderr.write(`browser berth: clean-up step failed: ${String(error)}\n`);
    }
  }
  fs.rmSync(root, { recursive: true, force: true });
}

async function main(): Promise<BrowserBerth> {
  let databaseUrl: string | undefined;
  if (dialect === 'postgres') {
    const server: PostgresServer = await startPostgres();
    cleanups.push(() => server.stop());
    const admin = new pg.Client({ connectionString: server.url });
    await admin.connect();
    await admin.query('CREATE DATABASE berth');
    await admin.end();
    const url = new URL(server.url);
    url.pathname = '/berth';
    databaseUrl = url.toString();
  }
  const smtp = await startSmtpSink();
  cleanups.push(() => smtp.close());
  const gitRoot = path.join(root, 'git');
  fs.mkdirSync(gitRoot);
  const git = await serveRepositories(gitRoot);
  cleanups.push(() => git.close());
  // The run's Node.js runtimes (global-setup.ts: one download for both Berths, waiting on its lock).
  const runtimesDir = process.env.BERTH_BROWSER_RUNTIMES ?? path.join(root, 'runtimes');
  fs.mkdirSync(runtimesDir, { recursive: true });
  // Downloaded before the clock of any deployment starts.
  await ensureNodeRuntime(DEFAULT_NODE_MAJOR, runtimesDir);
  const dataDir = path.join(root, 'data');

  const config = loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_HOST: '127.0.0.1',
    BERTH_PORT: '0',
    BERTH_S3_PORT: '0',
    BERTH_EDGE_PORT: '0',
    BERTH_LOG_LEVEL: 'warn',
    BERTH_RATE_LIMIT_PER_MINUTE: '0',
    BERTH_SMTP_URL: smtp.url,
    BERTH_RUNTIMES_DIR: runtimesDir,
    BERTH_SOURCES_ALLOW_PRIVATE: '127.0.0.1',
    // A migration's source may be another managed database on loopback (databases.spec.ts).
    BERTH_TOOLS_ALLOW_PRIVATE: '127.0.0.1',
    BERTH_HEALTH_INTERVAL: '1',
    BERTH_HEALTH_TIMEOUT: '1',
    BERTH_DRAIN_SECONDS: '1',
    ...(databaseUrl ? { BERTH_DATABASE_URL: databaseUrl } : {}),
  });
  const server = await startServer(config);
  // The OS accounts it made (applications, databases, services), once what ran as them has stopped.
  cleanups.push(removeAccountsCreatedHere);
  cleanups.push(() => server.stop());
  const { ctx } = server;

  const owner = await ctx.identity.createUser({ email: 'owner@example.com', team: 'acme', role: 'owner' });
  await ctx.services.accounts.forcePassword(owner.user_id, PASSWORD);
  const stranger = await ctx.identity.createUser({
    email: 'stranger@example.com',
    team: 'rival',
    role: 'owner',
  });
  // Signs in too: a member of a team of acme's owner (to leave it), the only owner of their own.
  const colleague = await ctx.identity.createUser({
    email: 'colleague@example.com',
    team: 'solo',
    role: 'owner',
  });
  await ctx.services.accounts.forcePassword(colleague.user_id, PASSWORD);

  const apply = async (token: string, document: string | object, query = '') => {
    const response = await requestPort(Number(new URL(server.url).port), {
      method: 'POST',
      url: `/api/v1/infrastructure/apply${query}`,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/yaml' },
      payload: typeof document === 'string' ? document : stringify(document),
    });
    if (response.statusCode !== 200)
      throw new Error(`apply answered ${response.statusCode}: ${response.body}`);
    return response.json<{ application_id: number }>();
  };
  // As the runtime tests deploy it, without a domain or a volume (the pages show those empty).
  const appDocument = (team: string, name: string, settings: Record<string, unknown> = {}, spec = {}) =>
    nodeDocument(team, name, git.url('hello'), { settings, spec: { domains: [], volumes: [], ...spec } });

  const repository = createRepository(gitRoot, 'hello');
  repository.commit(nodeAppFiles('v1'), 'first version');

  // Another team's application: the owner of acme must be refused its pages.
  const rival = await apply(stranger.api_token, appDocument('rival', 'rival-app'), '?auto_deploy=false');
  // An application with a deletion schedule, and the document the editor spec applies (deployed there).
  const inAMonth = new Date(Date.now() + 30 * 24 * 3600 * 1000).toISOString();
  const doomed = await apply(
    owner.api_token,
    appDocument('acme', 'doomed', { scheduled_deletion_at: inAMonth }),
    '?auto_deploy=false',
  );

  // A managed PostgreSQL, running, with a plan change apply left for the panel; an object storage
  // with a zone change left the same way.
  const database = (plan: string, zone = 'europe-1') => ({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'data', team: 'acme' },
    spec: {
      application: {
        name: 'data',
        type: 'nodejs',
        repository: { url: git.url('hello'), branch: 'main' },
      },
      managed_databases: [{ name: 'main-db', type: 'pg', plan, zone: 'de-fra1' }],
      object_storage: [
        { name: 'files', zone, buckets: ['uploads'], users: [{ username: 'uploader', policies: [] }] },
      ],
    },
  });
  await apply(owner.api_token, database(PLANS[0]!), '?auto_deploy=false');
  const deadline = Date.now() + 120_000;
  let state = '';
  while (Date.now() < deadline) {
    const row = await ctx.db
      .selectFrom('managed_databases')
      .select(['state', 'state_reason'])
      .where('name', '=', 'main-db')
      .executeTakeFirst();
    state = row?.state ?? '';
    if (state === 'running' || state === 'error') break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  if (state !== 'running') throw new Error(`the managed database did not start: ${state}`);
  await apply(owner.api_token, database(PLANS[1]!, 'europe-2'), '?auto_deploy=false');

  // Berth's own superuser on a managed database (what a team's admin is not): for a setting that
  // waits for a restart, which maintenance then applies.
  const maintenanceUrl = async (name: string): Promise<string> => {
    const instance = await ctx.db
      .selectFrom('managed_instances')
      .innerJoin('managed_databases', 'managed_databases.id', 'managed_instances.managed_database_id')
      .select(['managed_instances.port', 'managed_instances.data_dir'])
      .where('managed_databases.name', '=', name)
      .executeTakeFirstOrThrow();
    const password = encodeURIComponent(maintenancePassword(instance.data_dir ?? ''));
    return `postgres://${MAINTENANCE_USER}:${password}@127.0.0.1:${instance.port}/postgres`;
  };
  // The harness's controls for the specs: the mails Berth sent (sign-in links, invitations); a new
  // version of the hello repository; a setting on a managed database that waits for a restart.
  const control = http.createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const answer = async (): Promise<unknown> => {
      if (url.pathname === '/commit') {
        return { sha: repository.commit(nodeAppFiles(url.searchParams.get('version') ?? 'v2')) };
      }
      if (url.pathname === '/pending-restart') {
        const client = new pg.Client({
          connectionString: await maintenanceUrl(url.searchParams.get('database') ?? ''),
        });
        await client.connect();
        try {
          await client.query('ALTER SYSTEM SET max_wal_senders = 7');
          await client.query('SELECT pg_reload_conf()');
        } finally {
          await client.end();
        }
        return { ok: true };
      }
      const to = url.searchParams.get('to') ?? '';
      return smtp.to(to).map((m) => ({ subject: m.subject, text: m.text }));
    };
    response.setHeader('content-type', 'application/json');
    answer().then(
      (body) => response.end(JSON.stringify(body)),
      (error: unknown) => {
        response.statusCode = 500;
        response.end(JSON.stringify({ error: String(error) }));
      },
    );
  });
  await new Promise<void>((resolve) => control.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => control.close(resolve)));

  return {
    dialect,
    url: server.url,
    control: `http://127.0.0.1:${(control.address() as AddressInfo).port}`,
    password: PASSWORD,
    owner: { email: 'owner@example.com', teamId: owner.team_id, token: owner.api_token },
    colleague: { email: 'colleague@example.com', teamId: colleague.team_id, token: colleague.api_token },
    edge: `http://127.0.0.1:${ctx.services.runtime.endpoints.http ?? 0}`,
    rivalAppId: rival.application_id,
    doomedAppId: doomed.application_id,
    // With a Redis service, so that the page shows a service's state and connection settings.
    // And a domain, which the panel removes.
    helloDocument: appDocument(
      'acme',
      'hello',
      {},
      { services: [{ name: 'cache', type: 'redis' }], domains: [{ domain: 'hello.test' }] },
    ),
    plans: [PLANS[0]!, PLANS[1]!],
  };
}

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  void cleanUp().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The parent (Playwright's runner) ended without a word: end too.
process.stdin.on('end', stop);
process.stdin.resume();

main().then(
  (info) => process.stdout.write(`${READY}${JSON.stringify(info)}\n`),
  async (error: unknown) => {
    process.stderr.write(
      `browser berth (${dialect}) failed to start: ${String((error as Error).stack ?? error)}\n`,
    );
    await cleanUp();
    process.exit(1);
  },
);
