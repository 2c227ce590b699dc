// The narrow interface between Berth and whatever runs applications. The `local` driver runs builds
// and replicas as sandboxed processes on this machine behind Berth's edge proxy; a Kubernetes driver
// maps the same calls onto a Deployment, Service, Ingress, PVCs, a Secret and a CronJob
// (docs/runtime.md). As with the managed-database driver, Berth keeps the desired state in its store
// and hands it over in full on every call: a driver converges on it, and a retry is always safe.
import type { Readable } from 'node:stream';
import type { ApplicationType } from '../../domain/applications.js';

export interface HealthCheckSpec {
  /** false: a replica is only restarted when it exits, and its health is reported as not monitored. */
  enabled: boolean;
  path: string;
  intervalMs: number;
  timeoutMs: number;
  /** Failed checks in a row after which a live replica is restarted. */
  failureThreshold: number;
}

/** Everything a driver needs to run one application as its document says. */
export interface AppSpec {
  id: number;
  /** the owning team's id: labels on what a remote driver makes */
  teamId: number;
  name: string;
  type: ApplicationType;
  /** As the document wrote them; the driver resolves them (`capabilities()` says what it offers). */
  runtime: { nodejsVersion?: string; phpVersion?: string };
  commands: { build: string[]; init: string[]; start?: string };
  php: { extensions: string[]; settings: string[] };
  replicas: number;
  memoryBytes: number;
  health: HealthCheckSpec;
  schedulerEnabled: boolean;
  /**
   * The application's `worker` services: each a supervised process running `command` in the live
   * release's sandbox, with the secrets and services, restarted with backoff, rolled with deployments.
   */
  workers: Array<{ name: string; command: string }>;
  /** `volumeSize`: the document's `volume_size` in GiB, the most the volume holds. */
  volumes: Array<{ name: string; mountPath: string; volumeSize: number }>;
  /**
   * The application's secrets: the environment of init commands, replicas, the scheduler and one-off
   * commands, never of the build (as Ploi: builds get neither secrets nor services).
   */
  env: Record<string, string>;
  /** Host names the edge routes to the replicas: the application's domains and its default host. */
  hostnames: string[];
}

/** Where a build's source comes from. */
export type SourceSpec =
  | { kind: 'git'; url: string; branch?: string; commit?: string }
  /** An uploaded tar.gz or zip: its key in the artifact store (the driver fetches it from there). */
  | { kind: 'archive'; key: string }
  /** No source: a wordpress application gets WordPress from the host's package. */
  | { kind: 'bundled' };

/** What a step may report and how it is stopped. */
export interface StepContext {
  /** One line of the deployment's log (already free of credentials). */
  log: (line: string) => void;
  /** Aborted when the deployment is cancelled or its deadline passes. */
  signal: AbortSignal;
  /** Called by `build` when the source is fetched and the build commands start. */
  building?: () => void;
}

export interface BuildResult {
  /** The commit built, when the source is a repository. */
  commit: string | null;
  branch: string | null;
}

/** `idle`: the scheduler between its runs. */
export type InstanceState =
  'starting' | 'running' | 'unhealthy' | 'restarting' | 'stopping' | 'crashed' | 'idle';

export interface InstanceStatus {
  /** `web-<deployment>-<n>`, `scheduler`, or `worker-<service>`. */
  name: string;
  release: string;
  state: InstanceState;
  pid: number | null;
  /** Where the edge reaches it. */
  port: number | null;
  startedAt: string | null;
  restarts: number;
  /** Why it was last restarted (`health check failed 3 times`, `killed: out of memory`, `exited with 1`). */
  lastRestartReason: string | null;
  /** null when health checks are disabled: the instance cannot be monitored. */
  healthy: boolean | null;
  memoryLimitBytes: number;
}

export interface RuntimeStatus {
  /** The release the edge routes to, or null when nothing runs. */
  release: string | null;
  instances: InstanceStatus[];
}

export interface LogLine {
  at: string;
  /** `web-12-0`, `scheduler`, `exec`, … */
  source: string;
  stream: 'stdout' | 'stderr' | 'system';
  line: string;
}

/** Something Berth records about a running application (a restart and its reason). */
export interface RuntimeEvent {
  appId: number;
  kind: 'restarted' | 'crashed' | 'unhealthy' | 'oom_killed';
  instance: string;
  message: string;
}

/** What a driver can provide, for apply's validation (nothing that cannot be provisioned is accepted). */
export interface RuntimeCapabilities {
  /** Node.js majors, as accepted in `runtime.nodejs_version`. */
  nodejsVersions: string[];
  phpVersions: string[];
  phpExtensions: string[];
  /** Why `php.settings` cannot be applied (unknown directive, a value it refuses), or undefined. */
  checkPhpSettings(settings: string[]): string | undefined;
}

/** What one application uses now, for metrics (AppRuntimeDriver.usage). */
export interface AppUsage {
  /** Memory of all its processes together (its cgroups). */
  memoryBytes: number;
  /** CPU time its processes have used, in seconds (a counter; it may restart from lower). */
  cpuSeconds: number;
  /** Requests the edge answered for its host names, and the 5xx among them; undefined: not known here. */
  edge?: { requests: number; errors: number };
}

export interface ExecResult {
  exitCode: number | null;
  output: string;
  /** true when the output was cut at the limit. */
  truncated: boolean;
}

export interface AppRuntimeDriver {
  readonly name: string;
  capabilities(): RuntimeCapabilities;
  /**
   * Fetches `source` and runs the build commands into release `release` (a name Berth chose:
   * `[a-z0-9-]+`). No secrets, no services. Throws PermanentDriverError for what a retry cannot fix.
   */
  build(app: AppSpec, release: string, source: SourceSpec, step: StepContext): Promise<BuildResult>;
  /** Whether `release` still exists (a skip_build or rollback reuses it). */
  hasRelease(appId: number, release: string): Promise<boolean>;
  /** Runs the init commands once, in `release`, with the secrets, before any replica of it serves. */
  release(app: AppSpec, release: string, step: StepContext): Promise<void>;
  /**
   * Starts `app.replicas` replicas of `release`, waits until each passes its health check, switches
   * the routes of `app.hostnames` to them at once, then stops the old replicas (SIGTERM, drain,
   * SIGKILL). On any failure the new replicas are stopped and the old ones keep serving untouched.
   */
  rollout(app: AppSpec, release: string, step: StepContext): Promise<void>;
  /**
   * After a restart of Berth or a resume: runs `release` if it does not run (idempotent). What an
   * earlier Berth left serving of that release is adopted as it runs, not restarted.
   */
  ensureRunning(app: AppSpec, release: string): Promise<void>;
  /**
   * After the start's ensureRunning calls: stops what an earlier Berth left running that no application
   * claimed (an application deleted or stopped meanwhile, an older release), and its leftovers.
   */
  releaseUnclaimed?(): Promise<void>;
  /**
   * `berth admin stop-all`, Berth being down: stops what an earlier Berth left serving (replicas,
   * workers, the edge) without starting anything.
   */
  stopLeftovers?(): Promise<void>;
  /** Stops every process of the application and unroutes it (suspend); releases and volumes stay. */
  stop(appId: number): Promise<void>;
  /** Everything the application had on the driver: processes, routes, releases, volumes, logs, limits. */
  remove(appId: number): Promise<void>;
  /** Keeps the named releases and removes the others. */
  pruneReleases(appId: number, keep: string[]): Promise<void>;
  /** What runs of the application now (asked of the driver: a remote one answers over its API). */
  status(appId: number): Promise<RuntimeStatus>;
  /** The newest lines of the application's processes, oldest first. */
  logs(appId: number, options: { tail: number; since?: Date }): Promise<LogLine[]>;
  /** Calls `listener` for every new line until the returned function is called. */
  followLogs(appId: number, listener: (line: LogLine) => void): () => void;
  /** A one-off command in a fresh sandbox of `release`, with the secrets; output capped. */
  exec(app: AppSpec, release: string, command: string, step: StepContext): Promise<ExecResult>;
  /**
   * Why the uploaded source archive under artifact `key` could not be built from (not a .tar.gz or
   * .zip, truncated, an entry it refuses, over its limits, no files), read through as a build would
   * unpack it; undefined when it can be. Nothing is written.
   */
  checkSourceArchive(key: string): Promise<string | undefined>;
  /** The source a release was built from, as a tar.gz stream, or undefined when it is gone. */
  sourceArchive(appId: number, release: string): Promise<Readable | undefined>;
  /**
   * Where the application's volumes are on this host (made when missing, owned by its account) and
   * that account, for services that work on its files (sftp); drivers that keep no files here omit it.
   */
  hostFiles?(
    appId: number,
    volumes: Array<{ name: string; mountPath: string; volumeSize: number }>,
  ): Promise<{
    volumes: Array<{ name: string; hostPath: string; mountPath: string }>;
    appUser?: { uid: number; gid: number };
  }>;
  /**
   * Lets the application's processes reach these host ports (its services' loopback ports) and no
   * others, and says at which address; undefined when they share the host's network (127.0.0.1).
   */
  serviceAddress?(appId: number, ports: number[]): Promise<string | undefined>;
  /**
   * What each of these applications uses now (memory, CPU, the edge's counts), read cheaply from what
   * the driver keeps (cgroups, the edge's counters); an application with nothing running is left out.
   * Drivers that cannot tell omit it.
   */
  usage?(appIds: readonly number[]): Promise<Map<number, AppUsage>>;
  /** Where the edge listens, for the ready line and tests. */
  readonly endpoints: { http: number | undefined; https: number | undefined };
  /** Starts what the driver serves from (the edge). */
  start(): Promise<void>;
  /**
   * Stops every process the driver started (they come back through ensureRunning); with `keepRunning`
   * (a restart of Berth) what serves, and the edge, stays up for the next Berth to adopt.
   */
  close(options?: { keepRunning?: boolean }): Promise<void>;
}

export { PermanentDriverError } from '../databases/types.js';
