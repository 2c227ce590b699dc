// Application services benchmark (issue 15): the laravel-shaped reference application of the services
// tests (test/app-services/laravel-services-app.ts; type laravel, PHP extensions redis and amqp) with
// services mysql, redis, rabbitmq, minio and a worker, and the container services chrome-headless and
// gotenberg, applied to a Berth started as bench/runtime starts one (harness.ts: SQLite in a temporary
// directory, free ports, silent logs, background jobs at their default poll), its repository served
// over smart HTTP on loopback. Measured from the apply request:
//   - to each service reading `running` in GET /api/v1/applications/{id}/services (polled every 50 ms),
//   - to the deployment's success, and the total (the slowest of them).
// Every round applies a fresh application under another name (the previous one deleted and gone: 404),
// so every round provisions from nothing. Baselines in the same process and the same rounds, with the
// application deleted: the same engines started directly, each alone and then all at once — the
// managed-database driver's provision of a mysql and a valkey instance (what the mysql and redis services
// run on), and the rabbitmq and chrome-headless runners' provision (what Berth's services call). Ratios:
// each service against the fastest one, and Berth against the direct start.
// Run: npx tsx bench/runtime/services.ts [--rounds 3] [--no-baseline]
import { randomBytes, randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { stringify } from 'yaml';
import type { InstanceSpec } from '../../src/drivers/databases/types.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { createChromeRunner } from '../../src/drivers/services/chrome.js';
import { createRabbitmqRunner } from '../../src/drivers/services/rabbitmq/index.js';
import type { ServiceRunner, ServiceSpec } from '../../src/drivers/services/types.js';
import { laravelServicesAppFiles } from '../../test/app-services/laravel-services-app.js';
import { api, applyYaml, median, startBerth, type Berth, type DeploymentView } from './harness.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    'no-baseline': { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(values.rounds);
const BASELINE = !values['no-baseline'];
const POLL_MS = 50;
const TIMEOUT_MS = 300_000;

const SERVICES = [
  { name: 'db', type: 'mysql', memory: '256Mi' },
  { name: 'cache', type: 'redis', memory: '64Mi' },
  { name: 'queue', type: 'rabbitmq', memory: '256Mi' },
  { name: 'files', type: 'minio' },
  { name: 'jobs', type: 'worker', command: 'php worker.php' },
];
const CONTAINER_SERVICES = [
  { name: 'browser', type: 'chrome-headless', memory: '512Mi' },
  { name: 'pdf', type: 'gotenberg' },
];
const NAMES = [...SERVICES, ...CONTAINER_SERVICES].map((s) => s.name);
/** The baseline started directly for a service (none for minio, worker, gotenberg: nothing of their own). */
const DIRECT: Record<string, string> = {
  db: 'mysql',
  cache: 'valkey',
  queue: 'rabbitmq',
  browser: 'chrome',
};
type Direct = 'mysql' | 'valkey' | 'rabbitmq' | 'chrome';
const DIRECTS: readonly Direct[] = ['mysql', 'valkey', 'rabbitmq', 'chrome'];

/** Set by SIGINT or SIGTERM: every wait checks it. */
let interruption: string | undefined;
function checkInterrupted(): void {
  if (interruption) throw new Error(`interrupted by ${interruption}`);
}

const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const s = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '–');
const range = (xs: number[]) => (xs.length ? `${s(Math.min(...xs))}–${s(Math.max(...xs))}` : '–');

function document(team: string, name: string, repositoryUrl: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: {
        name,
        type: 'laravel',
        repository: { url: repositoryUrl, branch: 'main' },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
        php: { extensions: ['redis', 'amqp'] },
      },
      domains: [{ domain: `${name}.test` }],
      services: SERVICES,
      container_services: CONTAINER_SERVICES,
    },
  });
}

interface ServiceRow {
  name: string;
  status: string;
  status_reason: string | null;
}

interface Round {
  apply: number;
  /** ms from the apply request to `running`, per service name. */
  running: Record<string, number>;
  deployment: number;
  total: number;
  deleted: number;
  load: string;
  /** Berth's event loop (the process's) during the round: its longest stall and p99, ms. */
  loopMax: number;
  loopP99: number;
}

/** Applies a fresh application and times every service to `running` and the deployment to success. */
async function measureRound(
  berth: Berth,
  name: string,
  repositoryUrl: string,
): Promise<{ round: Omit<Round, 'deleted'>; appId: number }> {
  const load = loadAverage();
  const loop = monitorEventLoopDelay({ resolution: 10 });
  loop.enable();
  const t0 = performance.now();
  const applied = await applyYaml(berth, document(berth.team, name, repositoryUrl));
  const apply = performance.now() - t0;
  const appId = applied.application_id;
  if (applied.deployment_id === null) throw new Error('apply started no deployment');
  const running: Record<string, number> = {};
  let deployment = NaN;
  const end = Date.now() + TIMEOUT_MS;
  let last: ServiceRow[] = [];
  for (;;) {
    const [services, deployed] = await Promise.all([
      api<ServiceRow[]>(berth, 'GET', `/api/v1/applications/${appId}/services`),
      Number.isNaN(deployment)
        ? api<DeploymentView>(
            berth,
            'GET',
            `/api/v1/applications/${appId}/deployments/${applied.deployment_id}`,
          )
        : undefined,
    ]);
    const at = performance.now() - t0;
    last = services;
    for (const service of services) {
      if (service.status === 'running' && running[service.name] === undefined) running[service.name] = at;
      if (service.status === 'unavailable')
        throw new Error(`service ${service.name} is unavailable: ${service.status_reason}`);
    }
    if (deployed?.status === 'success') deployment = at;
    if (deployed && ['failed', 'cancelled'].includes(deployed.status))
      throw new Error(`deployment ${deployed.id} ${deployed.status}: ${deployed.error}`);
    if (!Number.isNaN(deployment) && NAMES.every((n) => running[n] !== undefined)) break;
    if (Date.now() > end)
      throw new Error(
        `not everything ran after ${TIMEOUT_MS} ms: ${JSON.stringify(last.map((x) => [x.name, x.status, x.status_reason]))}`,
      );
    checkInterrupted();
    await sleep(POLL_MS);
  }
  loop.disable();
  const total = Math.max(deployment, ...Object.values(running));
  const loopMax = loop.max / 1e6;
  const loopP99 = loop.percentile(99) / 1e6;
  return { round: { apply, running, deployment, total, load, loopMax, loopP99 }, appId };
}

/** DELETE the application, then wait until it answers 404; returns the ms it took. */
async function deleteApplication(berth: Berth, appId: number): Promise<number> {
  const t0 = performance.now();
  const response = await berth.app.inject({
    method: 'DELETE',
    url: `/api/v1/applications/${appId}`,
    headers: berth.headers,
  });
  if (response.statusCode !== 202)
    throw new Error(`DELETE answered ${response.statusCode}: ${response.body}`);
  const end = Date.now() + 120_000;
  for (;;) {
    const got = await berth.app.inject({
      method: 'GET',
      url: `/api/v1/applications/${appId}`,
      headers: berth.headers,
    });
    if (got.statusCode === 404) return performance.now() - t0;
    if (Date.now() > end) throw new Error(`application ${appId} still answers ${got.statusCode}`);
    checkInterrupted();
    await sleep(POLL_MS);
  }
}

/** Pids of processes whose command line names `dir` (what Berth started for this benchmark). */
function processesUnder(dir: string, except?: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      if (cmdline.includes(dir) && !(except && cmdline.includes(except))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** The engines started directly: the managed-database driver and the runners Berth's services use. */
function directStarters(berth: Berth) {
  const dataDir = berth.ctx.config.dataDir;
  const logger = berth.ctx.logger;
  const driver = berth.ctx.services.managedDatabases.driver;
  const rabbitmq = createRabbitmqRunner({ dataDir, logger });
  const chrome = createChromeRunner({ dataDir, logger });
  const password = () => randomBytes(24).toString('base64url');
  const instance = (engine: 'mysql' | 'valkey', memoryMiB: number): InstanceSpec => ({
    id: randomUUID(),
    engine,
    plan: 'service',
    limits: { memoryMiB },
    adminUser: 'app',
    adminPassword: password(),
    users: [],
    databases: engine === 'mysql' ? [{ name: 'app' }] : [],
  });
  const service = (type: string, memoryMiB: number): ServiceSpec => ({
    id: randomUUID(),
    type,
    applicationId: 0,
    teamId: 1,
    version: null,
    name: type,
    memoryMiB,
    username: 'app',
    password: password(),
    settings: {},
    secrets: {},
    volumes: [],
  });
  const viaRunner = (runner: ServiceRunner, spec: ServiceSpec) => ({
    uuid: spec.id,
    start: () => runner.provision(spec),
    remove: () => runner.delete({ id: spec.id, type: spec.type }),
  });
  const viaDriver = (spec: InstanceSpec) => ({
    uuid: spec.id,
    start: () => driver.provision(spec),
    remove: () => driver.delete({ id: spec.id, engine: spec.engine }),
  });
  /** A fresh instance of `which`: start it, remove it. Memory as the document gives the service. */
  return (which: Direct) => {
    switch (which) {
      case 'mysql':
        return viaDriver(instance('mysql', 256));
      case 'valkey':
        return viaDriver(instance('valkey', 64));
      case 'rabbitmq':
        return viaRunner(rabbitmq, service('rabbitmq', 256));
      case 'chrome':
        return viaRunner(chrome, service('chrome-headless', 512));
    }
  };
}

async function main(): Promise<void> {
  const loadAtStart = loadAverage();
  // Interrupted (Ctrl-C, kill): the next poll or step throws, and everything is cleaned up as after a
  // failure (a second signal ends the process at once).
  const interrupted = (signal: NodeJS.Signals) => {
    interruption = signal;
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  const berth = await startBerth();
  const dataDir = berth.ctx.config.dataDir;
  const uuids = new Set<string>();
  const rounds: Round[] = [];
  const alone: Record<Direct, number[]> = { mysql: [], valkey: [], rabbitmq: [], chrome: [] };
  const together: Record<Direct, number[]> = { mysql: [], valkey: [], rabbitmq: [], chrome: [] };
  const togetherTotal: number[] = [];
  let appId: number | undefined;
  try {
    checkInterrupted();
    // As a running Berth has long done by the time anyone applies: the engines' templates are made.
    const warm = performance.now();
    await berth.ctx.services.managedDatabases.driver.warmUp?.();
    console.log(`engine templates made in ${s(performance.now() - warm)}; load average ${loadAtStart}`);
    berth.repository('laravel').commit(laravelServicesAppFiles());
    const repositoryUrl = berth.git.url('laravel');
    const direct = directStarters(berth);

    for (let round = 1; round <= ROUNDS; round += 1) {
      const measured = await measureRound(berth, `laravel-${round}`, repositoryUrl);
      appId = measured.appId;
      const instances = await berth.ctx.db
        .selectFrom('app_service_instances')
        .select('uuid')
        .where('application_id', '=', appId)
        .execute();
      for (const row of instances) uuids.add(row.uuid);
      const deleted = await deleteApplication(berth, appId);
      appId = undefined;
      const r = { ...measured.round, deleted };
      rounds.push(r);
      console.log(
        `round ${round} (load ${r.load}): apply ${s(r.apply)}; ` +
          NAMES.map((n) => `${n} ${s(r.running[n]!)}`).join(', ') +
          `; deployment ${s(r.deployment)}; total ${s(r.total)}; deleted in ${s(deleted)}; ` +
          `event loop p99 ${r.loopP99.toFixed(0)} ms, max ${r.loopMax.toFixed(0)} ms`,
      );
      // Berth's own HAProxy edge stays; nothing of the application or its services should.
      const left = processesUnder(dataDir, '/edge-haproxy/');
      if (left.length > 0) console.log(`  after the deletion, still running: ${left.join(', ')}`);

      if (!BASELINE) continue;
      // Each engine alone, in a different order every round, then all four at once.
      const order = [...DIRECTS.slice(round % DIRECTS.length), ...DIRECTS.slice(0, round % DIRECTS.length)];
      for (const which of order) {
        checkInterrupted();
        const one = direct(which);
        uuids.add(one.uuid);
        const t0 = performance.now();
        try {
          await one.start();
          alone[which].push(performance.now() - t0);
        } finally {
          await one.remove();
        }
      }
      const all = DIRECTS.map((which) => ({ which, ...direct(which) }));
      for (const one of all) uuids.add(one.uuid);
      const t0 = performance.now();
      try {
        await Promise.all(
          all.map(async (one) => {
            await one.start();
            together[one.which].push(performance.now() - t0);
          }),
        );
        togetherTotal.push(performance.now() - t0);
      } finally {
        await Promise.all(all.map((one) => one.remove()));
      }
      console.log(
        `  direct, alone: ${DIRECTS.map((d) => `${d} ${s(alone[d].at(-1)!)}`).join(', ')}; together: ` +
          `${DIRECTS.map((d) => `${d} ${s(together[d].at(-1)!)}`).join(', ')}`,
      );
    }
  } finally {
    process.off('SIGINT', interrupted);
    process.off('SIGTERM', interrupted);
    if (appId !== undefined) await deleteApplication(berth, appId).catch(() => undefined);
    await berth.close();
    // What may outlive a failure: processes of this data dir, and the OS accounts made for it (the
    // applications' own, berth-<tag>-<id>, and each service instance's).
    for (const pid of processesUnder(dataDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    const accounts = new Set<string>();
    for (const uuid of uuids) {
      const hex = uuid.replace(/-/g, '').slice(0, 20);
      for (const kind of ['db', 'mq', 'ch']) accounts.add(`berth-${kind}-${hex}`);
    }
    const prefix = `berth-${runtimeTag(dataDir)}-`;
    const removed: Record<string, number> = {};
    for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const name = line.split(':')[0] ?? '';
      if (name.startsWith(prefix) || accounts.has(name)) {
        try {
          execFileSync('userdel', ['--', name], { stdio: 'ignore' });
          const kind = name.startsWith(prefix) ? 'application' : name.slice(0, 'berth-xx'.length);
          removed[kind] = (removed[kind] ?? 0) + 1;
        } catch {
          console.log(`could not remove the account ${name}`);
        }
      }
    }
    if (Object.keys(removed).length > 0)
      console.log(`OS accounts left behind, removed: ${JSON.stringify(removed)}`);
  }

  // ---- the report ----
  const per = (n: string) => rounds.map((r) => r.running[n]!);
  const medians = Object.fromEntries(NAMES.map((n) => [n, median(per(n))]));
  // Relative to the fastest service, per round, then the median of those ratios.
  const relative = (n: string) =>
    median(rounds.map((r) => r.running[n]! / Math.min(...NAMES.map((m) => r.running[m]!))));
  console.log('');
  console.log(
    `${rounds.length} rounds; load average at start ${loadAtStart}, per round ${rounds.map((r) => r.load.split(' ')[0]).join(', ')}, at end ${loadAverage()}`,
  );
  console.log('');
  console.log(
    '| service | type | apply → running (median) | range | ÷ fastest | started directly, alone | all four directly at once | Berth ÷ direct alone |',
  );
  console.log('|---|---|---|---|---|---|---|---|');
  for (const service of [...SERVICES, ...CONTAINER_SERVICES]) {
    const n = service.name;
    const d = DIRECT[n] as Direct | undefined;
    const directAlone = d ? median(alone[d]) : NaN;
    const directTogether = d ? median(together[d]) : NaN;
    console.log(
      `| ${n} | ${service.type} | ${s(medians[n]!)} | ${range(per(n))} | ${relative(n).toFixed(1)}× | ` +
        `${d ? `${d}: ${s(directAlone)}` : '–'} | ${d ? s(directTogether) : '–'} | ` +
        `${d && Number.isFinite(directAlone) ? `${(medians[n]! / directAlone).toFixed(2)}×` : '–'} |`,
    );
  }
  const deployments = rounds.map((r) => r.deployment);
  const totals = rounds.map((r) => r.total);
  console.log(
    `| deployment success | laravel | ${s(median(deployments))} | ${range(deployments)} | – | – | – | – |`,
  );
  console.log(
    `| **total** (slowest) | | **${s(median(totals))}** | ${range(totals)} | – | – | ${s(median(togetherTotal))} | ${
      togetherTotal.length ? `${(median(totals) / median(togetherTotal)).toFixed(2)}× (÷ all at once)` : '–'
    } |`,
  );
  console.log('');
  console.log(
    `Berth's event loop during the rounds: p99 ${rounds.map((r) => r.loopP99.toFixed(0)).join(', ')} ms, ` +
      `max ${rounds.map((r) => r.loopMax.toFixed(0)).join(', ')} ms`,
  );
  console.log(
    `apply request answered in ${s(median(rounds.map((r) => r.apply)))} (median); delete → 404 ${s(median(rounds.map((r) => r.deleted)))}`,
  );
}

await main();
