// What a serving Berth process starts beside the HTTP API, and stops again, each through its service
// (ctx.services, built by src/composition.ts). Features add theirs here.
import fs from 'node:fs';
import path from 'node:path';
import { CONFIG_VARIABLES } from './config/index.js';
import { processStartTime } from './drivers/os/processes.js';
import type { AppContext, CloseOptions } from './context.js';
import { startMetricsServer } from './http/metrics-server.js';
import { startBackupSchedule } from './backup.js';

export interface Background {
  /** Where the servers started beside the API listen. */
  endpoints: { s3: string; apps: string; appsTls: string | undefined; metrics: string | undefined };
  /** `keepRunning`: what serves applications stays up (CloseOptions). */
  stop(options?: CloseOptions): Promise<void>;
}

/**
 * A taken port, said in terms of the setting that moves it: a second Berth on one machine (the
 * quick start's server beside the test suite) needs other ports, and 0 picks a free one.
 */
export function explainListenError(
  error: unknown,
  what: string,
  setting: 'port' | 's3Port' | 'edgePort' | 'edgeTlsPort' | 'metricsAddr',
  port: number,
): unknown {
  if ((error as NodeJS.ErrnoException | undefined)?.code !== 'EADDRINUSE') return error;
  const { flag, env } = CONFIG_VARIABLES[setting];
  return new Error(
    `port ${port} for ${what} is already in use (another Berth?); choose another with --${flag} or ${env} (0 picks a free port)`,
  );
}

/** Where a serving Berth says it serves on its data dir (`berth admin stop-all` refuses then). */
const servingFile = (dataDir: string) => path.join(dataDir, 'berth.pid');

/** Marks the data dir as served by this process (until clearServing). */
export function markServing(dataDir: string): void {
  fs.writeFileSync(servingFile(dataDir), `${process.pid} ${processStartTime(process.pid) ?? ''}\n`, {
    mode: 0o600,
  });
}

export function clearServing(dataDir: string): void {
  fs.rmSync(servingFile(dataDir), { force: true });
}

/** The pid of the Berth serving on `dataDir`, or undefined when none does (a stale mark is ignored). */
export function servingPid(dataDir: string): number | undefined {
  let text: string;
  try {
    text = fs.readFileSync(servingFile(dataDir), 'utf8');
  } catch {
    return undefined;
  }
  const [pid, startTime] = text.trim().split(' ').map(Number);
  if (!pid || processStartTime(pid) !== startTime) return undefined;
  return pid;
}

/**
 * `berth admin stop-all`: stops what serves the applications of this data dir while Berth is down
 * (replicas, the edge, applications' services, managed databases), for maintenance of the machine.
 * They start again with the next `berth serve`. Refused while a Berth serves on the data dir.
 */
export async function stopDataPlane(ctx: AppContext): Promise<{ stopped: true }> {
  const serving = servingPid(ctx.config.dataDir);
  if (serving !== undefined)
    throw new Error(
      `a Berth (pid ${serving}) serves on ${ctx.config.dataDir}: stop it first (SIGTERM; the applications keep running), then run this again`,
    );
  // Nothing is started (the edge's port may be another Berth's now): what was recorded is stopped.
  await ctx.services.runtime.stopLeftovers?.();
  // Made, so that closing the context stops every instance of this data dir.
  void ctx.services.appServices;
  void ctx.services.managedDatabases;
  await ctx.close();
  return { stopped: true };
}

export async function startBackground(
  ctx: AppContext,
  options: { pollMs?: number } = {},
): Promise<Background> {
  const { services } = ctx;
  // A managed-database provider that refuses the configured credential or zone fails the start,
  // before anything is started (the error names the variable).
  await services.managedDatabases.driver.verify?.();
  // So does an artifact store in an upstream bucket it cannot use (the local store is made on first use).
  if (ctx.config.drivers.artifacts !== 'local') await services.artifacts.check?.();
  const work = services.jobs.runner(options);
  const stops: Array<(options: CloseOptions) => Promise<void>> = [];
  // Feature starters go here (servers, reconcilers), each pushing its stop onto `stops`.
  // The metrics listener first: a taken port is said before anything else starts.
  const metricsAddr = ctx.config.metricsAddr;
  const metrics =
    metricsAddr && services.metrics
      ? await startMetricsServer(services.metrics, metricsAddr, ctx.logger).catch((error: unknown) => {
          throw explainListenError(error, 'the metrics listener', 'metricsAddr', metricsAddr.port);
        })
      : undefined;
  if (metrics) {
    stops.push(() => metrics.close());
    // Also when a later step of this start fails (the caller closes the context then).
    ctx.onClose(() => metrics.close());
  }
  const s3 = await services.objectStorage.serve().catch((error: unknown) => {
    throw explainListenError(error, 'the S3 endpoint', 's3Port', ctx.config.s3Port);
  });
  if (s3) stops.push(() => s3.close());
  await services.scheduledDeletion.start();
  await services.audit.start();
  // The supervisor's first pass starts every instance that should run; warmUp builds engine templates.
  const databases = services.managedDatabases.startSupervisor({ warmUp: true });
  stops.push(() => databases.stop());
  // Applications: the edge first (a port taken is said before anything runs), then every application
  // that should run is started again and unfinished deployments are settled.
  const runtime = services.runtime;
  await runtime.start().catch((error: unknown) => {
    // The edges say which of their ports was taken (`listener`); HAProxy's own bind failure does not.
    const { edgePort, edgeTlsPort } = ctx.config.runtime;
    if ((error as { listener?: string } | undefined)?.listener === 'tls' && edgeTlsPort !== undefined)
      throw explainListenError(error, 'the edge proxy over TLS (applications)', 'edgeTlsPort', edgeTlsPort);
    throw explainListenError(error, 'the edge proxy (applications)', 'edgePort', edgePort);
  });
  stops.push((options) => runtime.close(options));
  services.jobs.wake = () => work.wake();
  // Applications' services: the first pass starts those Berth stopped; reconcile makes sure of them
  // again, application by application, before starting each application.
  const appServices = services.appServices.startSupervisor();
  stops.push(() => appServices.stop());
  const reconciled = services.deployments
    .reconcile()
    .catch((error: unknown) => ctx.logger.error({ err: error }, 'applications were not all started again'));
  stops.push(() => reconciled);
  work.start();
  const backups = startBackupSchedule(ctx);
  if (backups) stops.push(() => backups.stop());
  const host = ctx.config.host.includes(':') ? `[${ctx.config.host}]` : ctx.config.host;
  return {
    endpoints: {
      s3: s3?.url ?? services.objectStorage.endpoint(),
      apps: `http://${host}:${runtime.endpoints.http}`,
      appsTls:
        runtime.endpoints.https === undefined ? undefined : `https://${host}:${runtime.endpoints.https}`,
      metrics: metrics ? `${metrics.url}/metrics` : undefined,
    },
    async stop(options = {}) {
      await work.stop(); // waits for jobs in flight
      for (const stop of stops.reverse()) await stop(options);
    },
  };
}
