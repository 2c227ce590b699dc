// The narrow interface between an application's services (src/services/app-services) and what runs
// one type of service that is not a database engine: a RabbitMQ node, an SFTP server, a headless
// Chromium, the Gotenberg-compatible API, a bucket on Berth's S3 (docs/services.md). The database types
// (postgresql, mysql, redis, valkey) run on the managed-database driver through an adapter with the
// same shape. As with every driver, Berth keeps the desired state and hands it over in full on every
// call: a runner converges on it, and a retry is always safe.

/** Everything a runner needs to make one service instance match the document. */
export interface ServiceSpec {
  /** The instance's uuid (Berth's): names its directory, processes and OS account. */
  id: string;
  /** The document's type: `rabbitmq`, `sftp`, `minio`, `chrome-headless`, `gotenberg`, … */
  type: string;
  applicationId: number;
  /** The team that owns the application: labels on what a remote runner makes. */
  teamId: number;
  /** The service's name in the document (lower-case letters, digits, hyphens). */
  name: string;
  /** The document's `version` (a container service's image tag), or null when it names none. */
  version: string | null;
  /** The document's `memory` in MiB (256 when it names none): a cap where the runner can set one. */
  memoryMiB: number;
  /** The document's `volume_size` in GiB: the size of the instance's files where the runner keeps them. */
  volumeGiB?: number;
  /** The port it listened on before (kept across restarts when still free), or undefined. */
  port?: number;
  /** The credentials Berth generated (and sealed) for the application to use. */
  username: string;
  password: string;
  /** The document's non-secret `settings` (a container service's are its environment). */
  settings: Record<string, unknown>;
  /** The document's secret settings, opened (sftp: `password`). */
  secrets: Record<string, string>;
  /** The application's volumes on this host, in the document's order (sftp is confined to one). */
  volumes: Array<{ name: string; hostPath: string; mountPath: string }>;
  /** The OS account the application's processes run as, when Berth made one (files written for it). */
  appUser?: { uid: number; gid: number };
}

/** Where a running instance is and what runs it. */
export interface ServiceRuntime {
  host: string;
  port: number;
  /** The OS process that serves it, or null when Berth's own process serves it (an in-process listener). */
  pid: number | null;
  /** The version of what runs (`3.10.8` for RabbitMQ), shown in the API. */
  version: string;
  /** Where the instance's files are on this host, or null when it has none. */
  location: string | null;
  /**
   * What the application connects with beyond host, port and credentials: `vhost` (rabbitmq),
   * `bucket`, `endpoint` and `region` (minio), `path` (a token-bearing base path), `websocketPath`
   * (chrome). Berth stores it sealed: a token path is a credential.
   */
  extra?: Record<string, string>;
}

export interface ServiceRef {
  id: string;
  type: string;
}

export interface ServiceRunner {
  /** The document types this runner runs. */
  readonly types: readonly string[];
  /** Whether it works on the application's files: its specs then carry `volumes` and `appUser`. */
  readonly usesVolumes?: boolean;
  /**
   * Creates the instance if it does not exist, starts it, and makes its account (the spec's username
   * and password) and data exist. Idempotent: a retry after any failure converges on the same instance.
   */
  provision(spec: ServiceSpec): Promise<ServiceRuntime>;
  /** Starts an existing instance (no-op when it runs); after a restart of Berth or a crash. */
  start(spec: ServiceSpec): Promise<ServiceRuntime>;
  /** Stops and starts it; its data stays. A changed memory takes effect. */
  restart(spec: ServiceSpec): Promise<ServiceRuntime>;
  /** Stops every process of the instance, keeping its data. No-op when it does not run. */
  stop(ref: ServiceRef): Promise<void>;
  /** Stops it and removes everything it had: processes, data, accounts, logs. */
  delete(ref: ServiceRef): Promise<void>;
  status(ref: ServiceRef): Promise<{ running: boolean; pid: number | null }>;
  /** The newest `tail` lines of its log, oldest first, free of credentials. */
  logs(ref: ServiceRef, tail: number): Promise<string[]>;
  /**
   * Per port of these instances' ports, the client connections open now, read cheaply (no engine
   * asked). Absent, or a port missing from the answer: the runner cannot tell (a port it shares).
   */
  connections?(ports: readonly number[]): Promise<Map<number, number>>;
  /**
   * A backup's dump of the instance's data into the empty directory `dir` (a stopped one is started
   * for it and stopped again); returns the files written. Runners without it keep their files in
   * the data dir, copied as files, or none.
   */
  exportData?(spec: ServiceSpec, dir: string): Promise<string[]>;
  /** A restore's load of what `exportData` wrote, into the instance provisioned just before. */
  importData?(spec: ServiceSpec, dir: string): Promise<void>;
}
