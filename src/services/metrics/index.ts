// The operator's metrics (issue 31): Prometheus series of one Berth, in a registry of its own (two
// Berths in one process, as in the tests, do not share series). Counters and histograms are counted
// where the event happens, through the small hooks each site is handed (src/composition.ts wires
// them; src/http/plugins/metrics.ts for the API); gauges are read when Prometheus scrapes, from the
// store and the drivers, each part within a time bound so that a slow driver never holds the scrape
// (the part is left out of that scrape and counted in berth_metrics_collect_failures_total).
// docs/operations.md lists every series.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { createMetricsRepository, type MetricsRepository } from '../../db/repositories/metrics.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock } from '../../domain/clock.js';
import { creditPeriodOf } from '../../domain/credits.js';
import type { AppRuntimeDriver, AppUsage, RuntimeStatus } from '../../drivers/runtime/driver.js';

export interface MetricsDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** What runs applications: replicas and restarts (status), memory, CPU and edge counts (usage). */
  runtime: () => Pick<AppRuntimeDriver, 'status' | 'usage'>;
  /** Open connections per port of managed databases' instances; undefined when the driver cannot tell. */
  databaseConnections: (ports: readonly number[]) => Promise<Map<number, number>> | undefined;
  /**
   * Per instance uuid of applications' services: the connections open now where its runner can tell,
   * and the bytes of its files on this host as last measured (answered at once, never walked here).
   */
  serviceUsage: () => Promise<Map<string, { connections?: number; filesBytes?: number }>>;
  /** How long each part of a scrape may take (default 2 s). */
  collectTimeoutMs?: number;
}

export interface Metrics {
  readonly registry: Registry;
  /** An API request answered: its route pattern (never the URL), method, status and duration. */
  httpRequest(method: string, route: string, status: number, seconds: number): void;
  /** One run of a job ended (src/jobs/runner.ts JobOutcome). */
  jobFinished(type: string, outcome: string, seconds: number): void;
  /** A deployment that ran ended. */
  deploymentFinished(outcome: string, seconds: number): void;
  /** A charged tools call ended: a success keeps its credit, a failure is refunded. */
  toolsCharged(operation: string, outcome: 'success' | 'failed'): void;
  /** A request the S3 endpoint answered. */
  s3Request(request: { operation: string; status: number; bytesIn: number; bytesOut: number }): void;
  /** The exposition text of every series, gauges read now. */
  render(): Promise<{ contentType: string; body: string }>;
}

/** Seconds: API requests are milliseconds to a few seconds (uploads longer). */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Seconds: a deployment builds and rolls out for seconds to minutes (BERTH_DEPLOYMENT_TIMEOUT). */
const DEPLOYMENT_BUCKETS = [5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800];
const JOB_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
const DEFAULT_COLLECT_TIMEOUT_MS = 2000;

/** What one scrape read; a part that failed or took too long is undefined. */
interface Snapshot {
  applications?: Array<{
    labels: { app: string; name: string; team: string };
    desired: number;
    status: RuntimeStatus | undefined;
    usage: AppUsage | undefined;
  }>;
  databases?: Array<{
    labels: { database: string; name: string; team: string; type: string };
    state: string;
    connections: number | undefined;
    storageBytes: number | null;
  }>;
  services?: Array<{
    labels: { app: string; service: string; type: string };
    state: string;
    connections: number | undefined;
    volumeBytes: number | undefined;
    restarts: number;
  }>;
  jobs?: Array<{ type: string; due: number; oldestAgeSeconds: number }>;
  creditsThisMonth?: number;
}

export function createMetrics(deps: MetricsDeps): Metrics {
  const registry = new Registry();
  const registers = [registry];
  const repo: MetricsRepository = createMetricsRepository(deps.db);
  const timeoutMs = deps.collectTimeoutMs ?? DEFAULT_COLLECT_TIMEOUT_MS;
  // Berth's own process: CPU, memory, event-loop lag, open files (prom-client's standard set).
  collectDefaultMetrics({ register: registry, prefix: 'berth_' });

  const collectFailures = new Counter({
    name: 'berth_metrics_collect_failures_total',
    help: 'Parts of a scrape left out because they failed or took longer than their time bound',
    labelNames: ['part'],
    registers,
    // Read after this scrape's parts, so that a part left out now is counted in this very scrape.
    async collect() {
      await snapshot();
    },
  });

  /** Runs `part` within the time bound; undefined (and counted) when it fails or is late. */
  async function bounded<T>(name: string, part: () => Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), timeoutMs);
      timer.unref();
    });
    try {
      const result = await Promise.race([part(), late]);
      if (result === 'late') throw new Error(`took longer than ${timeoutMs} ms`);
      return result;
    } catch (error) {
      collectFailures.inc({ part: name });
      deps.logger.warn({ err: error, part: name }, 'metrics: part of the scrape left out');
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }

  async function readApplications(): Promise<Snapshot['applications']> {
    const rows = await repo.applications();
    const runtime = deps.runtime();
    const usages = (await runtime.usage?.(rows.map((row) => row.id))) ?? new Map<number, AppUsage>();
    return Promise.all(
      rows.map(async (row) => ({
        labels: { app: String(row.id), name: row.name, team: row.team },
        desired: row.suspended === 1 ? 0 : (row.replicas ?? 1),
        status: await runtime.status(row.id).catch(() => undefined),
        usage: usages.get(row.id),
      })),
    );
  }

  async function readDatabases(): Promise<Snapshot['databases']> {
    const rows = await repo.managedDatabases();
    const ports = rows.map((row) => row.port).filter((port): port is number => port !== null);
    const connections = await deps.databaseConnections(ports);
    return rows.map((row) => ({
      labels: { database: row.uuid, name: row.name, team: row.team, type: row.type },
      state: row.state,
      connections: connections && row.port !== null ? connections.get(row.port) : undefined,
      storageBytes: row.storageBytes,
    }));
  }

  async function readServices(): Promise<Snapshot['services']> {
    const [rows, usage] = await Promise.all([repo.services(), deps.serviceUsage()]);
    return rows.map((row) => ({
      labels: { app: String(row.applicationId), service: row.name ?? row.uuid, type: row.engine },
      state: row.state,
      connections: usage.get(row.uuid)?.connections,
      volumeBytes: usage.get(row.uuid)?.filesBytes,
      restarts: row.restarts,
    }));
  }

  async function readJobs(): Promise<Snapshot['jobs']> {
    const now = deps.clock.now();
    const rows = await repo.jobQueue(iso(now));
    return rows.map((row) => ({
      type: row.type,
      due: row.due,
      oldestAgeSeconds: row.oldestDueAt
        ? Math.max(0, (now.getTime() - new Date(row.oldestDueAt).getTime()) / 1000)
        : 0,
    }));
  }

  let scrape: Promise<Snapshot> | undefined;
  /**
   * What this scrape reads, read once: prom-client asks every series' collect() at once, and they
   * all share this one pass (a scrape that starts meanwhile shares it too).
   */
  function snapshot(): Promise<Snapshot> {
    scrape ??= (async () => {
      const [applications, databases, services, jobs, creditsThisMonth] = await Promise.all([
        bounded('applications', readApplications),
        bounded('databases', readDatabases),
        bounded('services', readServices),
        bounded('jobs', readJobs),
        bounded('credits', () => repo.creditsUsed(creditPeriodOf(deps.clock.now()))),
      ]);
      return { applications, databases, services, jobs, creditsThisMonth };
    })().finally(() => {
      scrape = undefined;
    });
    return scrape;
  }

  /** A gauge whose values are set from each scrape's snapshot (none when its part is missing). */
  function gauge<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (snap: Snapshot, set: (labels: Record<L, string>, value: number) => void) => void,
  ): void {
    new Gauge({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        fill(snap, (labels, value) => this.set(labels, value));
      },
    });
  }
  /** A counter the driver keeps (its total now, not counted here): set from each scrape's snapshot. */
  function totalOf<L extends string>(
    name: string,
    help: string,
    labelNames: readonly L[],
    fill: (snap: Snapshot, set: (labels: Record<L, string>, value: number) => void) => void,
  ): void {
    new Counter({
      name,
      help,
      labelNames,
      registers,
      async collect() {
        const snap = await snapshot();
        this.reset();
        fill(snap, (labels, value) => this.inc(labels, Number.isFinite(value) ? Math.max(0, value) : 0));
      },
    });
  }

  // ---- counted at the event ----

  const httpRequests = new Counter({
    name: 'berth_http_requests_total',
    help: 'API requests answered, by route pattern, method and status',
    labelNames: ['method', 'route', 'status'],
    registers,
  });
  const httpDuration = new Histogram({
    name: 'berth_http_request_duration_seconds',
    help: 'Time to answer an API request, by route pattern and method',
    labelNames: ['method', 'route'],
    buckets: HTTP_BUCKETS,
    registers,
  });
  const jobs = new Counter({
    name: 'berth_jobs_total',
    help: 'Runs of background jobs, by type and outcome (succeeded, rescheduled, retried, dead)',
    labelNames: ['type', 'outcome'],
    registers,
  });
  const jobDuration = new Histogram({
    name: 'berth_job_duration_seconds',
    help: 'Time one run of a background job took, by type',
    labelNames: ['type'],
    buckets: JOB_BUCKETS,
    registers,
  });
  const deployments = new Counter({
    name: 'berth_deployments_total',
    help: 'Deployments that ran, by outcome (success, failed, cancelled)',
    labelNames: ['outcome'],
    registers,
  });
  const deploymentDuration = new Histogram({
    name: 'berth_deployment_duration_seconds',
    help: 'Time from a deployment’s start to its end, by outcome',
    labelNames: ['outcome'],
    buckets: DEPLOYMENT_BUCKETS,
    registers,
  });
  const conversions = new Counter({
    name: 'berth_tools_conversions_total',
    help: 'Charged tools calls, by operation and outcome (success keeps its credit, failed is refunded)',
    labelNames: ['operation', 'outcome'],
    registers,
  });
  const creditsUsed = new Counter({
    name: 'berth_tools_credits_used_total',
    help: 'Tools credits kept by successful calls since Berth started, by operation',
    labelNames: ['operation'],
    registers,
  });
  const s3Requests = new Counter({
    name: 'berth_s3_requests_total',
    help: 'Requests the S3 endpoint answered, by operation and status',
    labelNames: ['operation', 'status'],
    registers,
  });
  const s3Received = new Counter({
    name: 'berth_s3_received_bytes_total',
    help: 'Request body bytes the S3 endpoint read (an object’s bytes for an aws-chunked upload), by operation',
    labelNames: ['operation'],
    registers,
  });
  const s3Sent = new Counter({
    name: 'berth_s3_sent_bytes_total',
    help: 'Bytes the S3 endpoint wrote while serving requests (answers with their headers), by operation',
    labelNames: ['operation'],
    registers,
  });

  // ---- read on scrape ----

  gauge('berth_job_queue_depth', 'Queued jobs due now, by type', ['type'], (snap, set) => {
    for (const job of snap.jobs ?? []) set({ type: job.type }, job.due);
  });
  gauge(
    'berth_job_queue_oldest_age_seconds',
    'How long the oldest queued job due now has waited, by type',
    ['type'],
    (snap, set) => {
      for (const job of snap.jobs ?? []) set({ type: job.type }, job.oldestAgeSeconds);
    },
  );
  const appLabels = ['app', 'name', 'team'] as const;
  gauge(
    'berth_app_replicas_desired',
    'Replicas the application’s document asks for (0 while suspended)',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? []) set(app.labels, app.desired);
    },
  );
  gauge(
    'berth_app_replicas_running',
    'Replicas of the application running and healthy now',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? []) {
        const web = (app.status?.instances ?? []).filter((i) => i.name.startsWith('web-'));
        set(app.labels, web.filter((i) => i.state === 'running').length);
      }
    },
  );
  gauge(
    'berth_app_restarts',
    'Restarts of the application’s instances running now (replicas, workers, scheduler) since they started',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? [])
        set(
          app.labels,
          (app.status?.instances ?? []).reduce((sum, i) => sum + i.restarts, 0),
        );
    },
  );
  gauge(
    'berth_app_memory_bytes',
    'Memory the application’s processes use now (its cgroups)',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? []) if (app.usage) set(app.labels, app.usage.memoryBytes);
    },
  );
  totalOf(
    'berth_app_cpu_seconds_total',
    'CPU time the application’s processes have used (its cgroups)',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? []) if (app.usage) set(app.labels, app.usage.cpuSeconds);
    },
  );
  totalOf(
    'berth_app_edge_requests_total',
    'Requests the edge answered for the application’s host names',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? [])
        if (app.usage?.edge) set(app.labels, app.usage.edge.requests);
    },
  );
  totalOf(
    'berth_app_edge_errors_total',
    'Requests the edge answered for the application with a 5xx (its replicas’, “no replica ready”, and the edge’s own 502 for a replica it cannot reach)',
    appLabels,
    (snap, set) => {
      for (const app of snap.applications ?? []) if (app.usage?.edge) set(app.labels, app.usage.edge.errors);
    },
  );
  const databaseLabels = ['database', 'name', 'team', 'type'] as const;
  gauge(
    'berth_managed_database_state',
    'The managed database’s state: 1 on the series of the state it is in',
    [...databaseLabels, 'state'],
    (snap, set) => {
      for (const db of snap.databases ?? []) set({ ...db.labels, state: db.state }, 1);
    },
  );
  gauge(
    'berth_managed_database_connections',
    'Client connections open to the managed database now',
    databaseLabels,
    (snap, set) => {
      for (const db of snap.databases ?? []) if (db.connections !== undefined) set(db.labels, db.connections);
    },
  );
  gauge(
    'berth_managed_database_storage_bytes',
    'Storage the managed database’s files use, as its supervisor last measured',
    databaseLabels,
    (snap, set) => {
      for (const db of snap.databases ?? []) if (db.storageBytes !== null) set(db.labels, db.storageBytes);
    },
  );
  const serviceLabels = ['app', 'service', 'type'] as const;
  gauge(
    'berth_service_state',
    'The application service’s state: 1 on the series of the state it is in',
    [...serviceLabels, 'state'],
    (snap, set) => {
      for (const service of snap.services ?? []) set({ ...service.labels, state: service.state }, 1);
    },
  );
  gauge(
    'berth_service_connections',
    'Client connections open to the application service now',
    serviceLabels,
    (snap, set) => {
      for (const service of snap.services ?? [])
        if (service.connections !== undefined) set(service.labels, service.connections);
    },
  );
  gauge(
    'berth_service_volume_bytes',
    'Bytes of the application service’s files on this host (its data dir), measured at most once a minute',
    serviceLabels,
    (snap, set) => {
      for (const service of snap.services ?? [])
        if (service.volumeBytes !== undefined) set(service.labels, service.volumeBytes);
    },
  );
  gauge(
    'berth_service_restarts',
    'Times the supervisor restarted the application service',
    serviceLabels,
    (snap, set) => {
      for (const service of snap.services ?? []) set(service.labels, service.restarts);
    },
  );
  gauge(
    'berth_tools_credits_used_month',
    'Tools credits used this calendar month (UTC) by every user together',
    [],
    (snap, set) => {
      if (snap.creditsThisMonth !== undefined) set({}, snap.creditsThisMonth);
    },
  );

  return {
    registry,
    httpRequest(method, route, status, seconds) {
      httpRequests.inc({ method, route, status: String(status) });
      httpDuration.observe({ method, route }, seconds);
    },
    jobFinished(type, outcome, seconds) {
      jobs.inc({ type, outcome });
      jobDuration.observe({ type }, seconds);
    },
    deploymentFinished(outcome, seconds) {
      deployments.inc({ outcome });
      deploymentDuration.observe({ outcome }, seconds);
    },
    toolsCharged(operation, outcome) {
      conversions.inc({ operation, outcome });
      if (outcome === 'success') creditsUsed.inc({ operation });
    },
    s3Request({ operation, status, bytesIn, bytesOut }) {
      s3Requests.inc({ operation, status: String(status) });
      s3Received.inc({ operation }, bytesIn);
      s3Sent.inc({ operation }, bytesOut);
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
}
