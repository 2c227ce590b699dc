// The narrow interface between Berth and whatever runs managed databases. The `local` driver runs one
// server process per instance on this host; a cloud driver (UpCloud's /1.3/database API) would map
// the same calls onto remote services. Berth keeps the desired state (plan, users, databases) in its
// store and hands it to the driver in full on every call, so a driver needs no memory of its own.
// The /1.3 operations (checks, migrations, clones, maintenance) are a second interface of the family,
// DatabaseOperationsDriver, below. Services see these interfaces only: no paths, URIs or processes.
import { redactText } from '../../domain/redact.js';

export type DatabaseEngine = 'pg' | 'mysql' | 'valkey';

export interface DatabaseUserSpec {
  username: string;
  /** The password Berth generated and sealed; a driver that generates its own returns it in `credentials`. */
  password: string;
  /** pg: `scram-sha-256` (default) or `md5`; mysql: `mysql_native_password` (default) or `caching_sha2_password`. */
  authentication?: string;
}

export interface LogicalDatabaseSpec {
  name: string;
  /** pg: an encoding such as `UTF8`; mysql: a character set such as `utf8mb4`. */
  characterSet?: string;
  /** pg: an LC_COLLATE/LC_CTYPE locale such as `C.UTF-8`; mysql: a collation such as `utf8mb4_unicode_ci`. */
  collation?: string;
  /**
   * pg only: extensions made in this database (CREATE EXTENSION, by the driver's own superuser, so
   * the owner needs none); each must be among `capabilities().pgExtensions`.
   */
  extensions?: string[];
}

/** Everything a driver needs to make an instance match the desired state. */
export interface InstanceSpec {
  /** The managed database's uuid; names the instance on the driver's side. */
  id: string;
  /** The team the instance is for (a cloud driver labels its service with it); unset for app services. */
  teamId?: number;
  engine: DatabaseEngine;
  plan: string;
  /**
   * Sizing instead of the plan's: an application's private service (docs/services.md), whose
   * `memory` is the instance's whole budget. The plan then only names the kind of instance.
   */
  limits?: {
    /** A hard cap too where the host allows one (a memory cgroup of the server's processes). */
    memoryMiB: number;
    /** The instance's files live on a volume of this size (`volume_size`); none: the host's disk. */
    diskMiB?: number;
  };
  /** The port the instance had before (kept across restarts when it is still free), or undefined. */
  port?: number;
  adminUser: string;
  adminPassword: string;
  users: DatabaseUserSpec[];
  /** Ignored by key-value engines. */
  databases: LogicalDatabaseSpec[];
}

export interface InstanceCredentials {
  admin: { username: string; password: string };
  users: Array<{ username: string; password: string; authentication: string | null }>;
}

/** The credentials a driver that sets the spec's passwords as given answers (a provider's, a stub's). */
export const credentialsOfSpec = (spec: InstanceSpec): InstanceCredentials => ({
  admin: { username: spec.adminUser, password: spec.adminPassword },
  users: spec.users.map((u) => ({
    username: u.username,
    password: u.password,
    authentication: u.authentication ?? null,
  })),
});

export interface InstanceRuntime {
  host: string;
  port: number;
  /** OS process id of the server (the postmaster, mariadbd, valkey-server), or null on a cloud driver. */
  pid: number | null;
  /** Full server version, e.g. `15.18`, `10.11.19-MariaDB`, `7.0.15`. */
  version: string;
  /** The plan whose limits are in effect. */
  plan: string;
  /** Where the instance's files are, for drivers that keep them on this host; else null. */
  location: string | null;
  credentials: InstanceCredentials;
}

export interface InstanceRef {
  id: string;
  engine: DatabaseEngine;
}

export interface InstanceStatus {
  running: boolean;
  pid: number | null;
  /** Bytes used by the instance's files (data, logs, WAL archive, backups). */
  storageBytes: number;
}

export interface BaseBackup {
  backup_name: string;
  backup_time: string;
  data_size: number;
  /** First WAL segment this backup needs; older archived segments are not needed by it. */
  start_wal: string;
}

/** A base backup a copy of an instance can be recovered from (point-in-time clones). */
export interface RestorableBackup {
  name: string;
  startedAt: string;
  /** When the backup finished: consistent from then on. */
  finishedAt: string;
}

/**
 * A recovered copy of an instance's data, stopped: what it is, not where. `handle` means something to
 * the driver that made it only (the local driver's is a directory beside the adopting instance's
 * files); the service hands it back to `adoptCopy` or `discardCopy`.
 */
export interface RecoveredCopy {
  readonly handle: string;
  /** The password of the copy's superuser (the source's maintenance account): it opens the copy once. */
  readonly adminPassword: string;
}

export interface RecoverCopyOptions {
  backup: RestorableBackup;
  /** ISO 8601; undefined: replay the whole archive. */
  recoveryTime: string | undefined;
  /** The instance that will adopt the copy: the driver makes it where that one can take it over. */
  for: InstanceRef;
  /** The instance's running major (its binaries replay the WAL). */
  major: number | undefined;
  /** Where the instance listens (its WAL is flushed to the archive first). */
  port: number;
}

/**
 * What Berth keeps of what the driver last reported about an instance (InstanceRuntime.pid and
 * .location, in the `pid` and `data_dir` columns): the driver's own state, which only it interprets
 * (`health`). Berth records `pid: null` when it stops an instance on purpose (`stop`, its own close).
 */
export interface InstanceRecord {
  pid: number | null;
  location: string | null;
}

/**
 * An instance's health as its driver sees it: `running` (with what to record and its storage use),
 * `stopped` on purpose (starting it again is no incident), `crashed` (its server died: `reason` says
 * how, for the restart count and the audit log), or `elsewhere` (another Berth's: not this one's to
 * supervise or stop).
 */
export type InstanceHealth =
  | { state: 'running'; pid: number | null; storageBytes: number }
  | { state: 'stopped' }
  | { state: 'crashed'; reason: string }
  | { state: 'elsewhere' };

/** Where clients reach an instance (on the port of its InstanceRuntime), and who may connect. */
export interface InstanceEndpoint {
  host: string;
  /** Addresses (CIDR) allowed to connect: UpCloud's `ip_filter`. */
  ipFilter: string[];
  /** Clients must use TLS (UpCloud's services accept nothing else); unset: plain connections. */
  tls?: boolean;
}

/** What a plan gives an instance on this driver. */
export interface PlanLimits {
  /** Nodes the plan names (a driver may run fewer: the local one runs one). */
  nodes: number;
  /** The instance's memory budget. */
  memoryMiB: number;
  /** Storage the plan allows (0 for key-value plans); usage above it is reported. */
  storageMiB: number;
  maxConnections: number;
  /** Base backups kept (PostgreSQL). */
  baseBackupRetention: number;
}

/** What a driver can make, for apply's validation of application services (docs/services.md). */
export interface DatabaseCapabilities {
  /** Per engine, the versions a new instance can be made on (`latest` is the newest of these). */
  versions: Record<DatabaseEngine, string[]>;
  /** Extensions a PostgreSQL database can be given, sorted. */
  pgExtensions: string[];
}

/** A character set or collation of a logical database that the engine would refuse. */
export interface CharsetProblem {
  field: 'character_set' | 'collation';
  message: string;
}

export interface ManagedDatabaseDriver {
  readonly name: string;
  /**
   * Instances run at a provider, not in this Berth (the upcloud driver): Berth's close leaves them
   * running, as the provider supervises them.
   */
  readonly remote?: boolean;
  /**
   * Checks the driver's configuration against what it talks to, at start (a refused credential, an
   * unknown zone); throws an error naming the setting's variable.
   */
  verify?(): Promise<void>;
  /** The limits `plan` gives an instance of `engine`; throws for a plan this driver cannot size. */
  planLimits(engine: DatabaseEngine, plan: string): PlanLimits;
  /** The host clients reach the instance on (at InstanceRuntime.port) and who may connect. */
  endpoint(ref: InstanceRef): InstanceEndpoint;
  /**
   * Whether the instance runs, was stopped on purpose, died, or is another Berth's, from what Berth
   * recorded of it (the supervisor restarts the dead and counts their restarts).
   */
  health(ref: InstanceRef, record: InstanceRecord): Promise<InstanceHealth>;
  /**
   * Per port of these instances' ports, the client connections open now, read cheaply (the local
   * driver: the kernel's socket table); drivers that cannot tell so omit it. For metrics.
   */
  connections?(ports: readonly number[]): Promise<Map<number, number>>;
  /** What new instances can be; drivers without it accept `latest` only and no extensions. */
  capabilities?(): DatabaseCapabilities;
  /**
   * What the engine would refuse in a logical database's character set and collation (apply refuses
   * it at the field); drivers without it leave the check to provisioning.
   */
  charsetProblems?(
    engine: 'pg' | 'mysql',
    database: { character_set?: string; collation?: string },
  ): CharsetProblem[];
  /** The newest `tail` lines of the instance's server log, oldest first (none when it has no log here). */
  logs?(ref: InstanceRef, tail: number): Promise<string[]>;
  /**
   * Creates the instance if it does not exist, starts it, applies the plan's limits and makes the
   * users and logical databases exist with the given passwords. Idempotent: a retry after any
   * failure converges on the same instance.
   */
  provision(spec: InstanceSpec): Promise<InstanceRuntime>;
  /** Powers an existing instance on (no-op when it is running); returns where it listens. */
  start(spec: InstanceSpec): Promise<InstanceRuntime>;
  /** Powers the instance off, keeping its data. No-op when it is not running. */
  stop(ref: InstanceRef): Promise<void>;
  /** Powers off and removes everything the instance had: processes, data, backups. */
  delete(ref: InstanceRef): Promise<void>;
  status(ref: InstanceRef): Promise<InstanceStatus>;
  /** Applies `spec.plan`'s limits (a restart on the local driver). */
  setPlan(spec: InstanceSpec): Promise<InstanceRuntime>;
  /**
   * Stops and starts a running instance (maintenance): settings that wait for a restart take effect
   * and the newest installed minor of its major runs.
   */
  restart(spec: InstanceSpec): Promise<InstanceRuntime>;
  /**
   * Major upgrade (PostgreSQL only): the instance comes back on `targetMajor` with its data, users
   * and passwords, and later starts use that major. On failure it runs on its old major again with
   * its data, and the error is thrown. Drivers without it refuse upgrades.
   */
  upgrade?(spec: InstanceSpec, targetMajor: number): Promise<InstanceRuntime>;
  /**
   * Replaces the instance's data with a stopped copy of another instance's data (PostgreSQL: a
   * recovered base backup, for a clone whose source's major has no pg_dump here), made by
   * `recoverCopy` for this instance. The instance keeps its own port, settings and credentials:
   * `copy.adminPassword` (the source's admin password) opens the copy once, and the admin and every
   * user then get the spec's passwords. WAL archive and base backups start empty. On failure the
   * instance runs on its old data again and the error is thrown.
   */
  adoptCopy?(spec: InstanceSpec, copy: RecoveredCopy): Promise<InstanceRuntime>;
  /**
   * Whether the running server was started with other engine settings than this Berth writes for
   * the spec (an earlier Berth's, left running when it was killed): `start` restarts it with these.
   */
  outdatedSettings?(spec: InstanceSpec): boolean;
  /** The base backups a copy can be recovered from, oldest first (PostgreSQL). */
  restorableBackups?(ref: InstanceRef): Promise<RestorableBackup[]>;
  /**
   * A stopped copy of the instance's data recovered from `backup` with its WAL replayed to
   * `recoveryTime` (or to its end), on the instance's own major, made for `options.for` to adopt.
   */
  recoverCopy?(ref: InstanceRef, options: RecoverCopyOptions): Promise<RecoveredCopy>;
  /** Removes what is left of a copy (after adoption, or instead of it); a no-op for one already gone. */
  discardCopy?(copy: RecoveredCopy): Promise<void>;
  /**
   * Takes a base backup and keeps the newest `retain` (PostgreSQL; continuous WAL archiving makes
   * them the starting points of point-in-time recovery). Returns the backups kept, oldest first.
   */
  baseBackup(spec: InstanceSpec, retain: number): Promise<BaseBackup[]>;
  /**
   * Writes a dump of the instance's data into the empty directory `dir` while it serves (a backup of
   * the platform: logical dumps, a Valkey RDB snapshot); a stopped instance is started for it and
   * stopped again. Returns the files written. Drivers without it (a provider's instances, backed up
   * by the provider) are left out of Berth's backups.
   */
  exportData?(spec: InstanceSpec, dir: string): Promise<string[]>;
  /**
   * Loads what `exportData` wrote into the instance, provisioned just before and still empty (a
   * restore); it runs afterwards (possibly restarted: its pid is asked again).
   */
  importData?(spec: InstanceSpec, dir: string): Promise<void>;
  /** Optional preparation at start (the local driver builds its engine templates). */
  warmUp?(): Promise<void>;
}

/** A failure that retrying cannot fix (an unknown collation, an unsupported authentication method). */
export class PermanentDriverError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentDriverError';
  }
}

// ---- The /1.3 operations ----
//
// A second interface rather than more methods of ManagedDatabaseDriver: these reach a tenant's own
// servers (under the address rule), not only Berth's instances; applications' services, which share
// the managed-database driver, need none of them; and a cloud provider answers them through other
// endpoints of its API (UpCloud's tasks, migration and clone calls). The composition root builds the
// one that goes with the configured managed-database driver.

/** The closed set of machine-readable codes an operation fails with (docs/api/dbapi.md's table). */
export type OperationErrorCode =
  | 'INVALID_SOURCE_URI'
  | 'SOURCE_UNREACHABLE'
  | 'SOURCE_AUTH_FAILED'
  | 'SOURCE_DATABASE_NOT_FOUND'
  | 'SOURCE_SSL_UNAVAILABLE'
  | 'SOURCE_VERSION_UNSUPPORTED'
  | 'ENGINE_MISMATCH'
  | 'DUMP_NOT_POSSIBLE'
  | 'REPLICATION_NOT_POSSIBLE'
  | 'MIGRATION_FAILED'
  | 'REPLICATION_NOT_RUNNING'
  | 'TARGET_UNREACHABLE'
  | 'UPGRADE_BINARIES_MISSING'
  | 'UPGRADE_VERSION_NOT_NEWER'
  | 'UPGRADE_EXTENSION_MISSING'
  | 'UPGRADE_FAILED'
  | 'PITR_NOT_SUPPORTED'
  | 'RECOVERY_TIME_INVALID'
  | 'RECOVERY_TIME_IN_FUTURE'
  | 'RECOVERY_TIME_BEFORE_BACKUPS'
  | 'NO_BASE_BACKUP'
  | 'CLONE_FAILED'
  | 'NO_MAINTENANCE_AVAILABLE'
  | 'COMMAND_FAILED';

/** HTTP status each code should be answered with when it surfaces synchronously in a /1.3 request. */
export const OPERATION_ERROR_STATUS: Record<OperationErrorCode, number> = {
  INVALID_SOURCE_URI: 400,
  SOURCE_UNREACHABLE: 422,
  SOURCE_AUTH_FAILED: 422,
  SOURCE_DATABASE_NOT_FOUND: 422,
  SOURCE_SSL_UNAVAILABLE: 422,
  SOURCE_VERSION_UNSUPPORTED: 422,
  ENGINE_MISMATCH: 400,
  DUMP_NOT_POSSIBLE: 422,
  REPLICATION_NOT_POSSIBLE: 422,
  MIGRATION_FAILED: 500,
  REPLICATION_NOT_RUNNING: 409,
  TARGET_UNREACHABLE: 409,
  UPGRADE_BINARIES_MISSING: 422,
  UPGRADE_VERSION_NOT_NEWER: 400,
  UPGRADE_EXTENSION_MISSING: 422,
  UPGRADE_FAILED: 500,
  PITR_NOT_SUPPORTED: 400,
  RECOVERY_TIME_INVALID: 400,
  RECOVERY_TIME_IN_FUTURE: 400,
  RECOVERY_TIME_BEFORE_BACKUPS: 400,
  NO_BASE_BACKUP: 409,
  CLONE_FAILED: 500,
  NO_MAINTENANCE_AVAILABLE: 409,
  COMMAND_FAILED: 500,
};

/** An operation's failure, told to the owner: its message never holds a secret. */
export class OperationError extends Error {
  constructor(
    readonly code: OperationErrorCode,
    message: string,
    /** Secrets (passwords) that must never appear in the message, e.g. from a source URI. */
    secrets: readonly string[] = [],
  ) {
    // Messages often quote engine stderr, which may echo a connection string: redact before storing.
    super(redactText(message, secrets));
    this.name = 'OperationError';
  }
}

export const isOperationError = (error: unknown): error is OperationError => error instanceof OperationError;

/**
 * A clone's `recovery_time`: an ISO 8601 timestamp, not in the future (RECOVERY_TIME_INVALID,
 * RECOVERY_TIME_IN_FUTURE). Part of the contract: the request refuses what a driver would.
 */
export function parseRecoveryTime(value: string | Date, now: Date = new Date()): Date {
  const time = value instanceof Date ? value : new Date(value);
  if (Number.isNaN(time.getTime()) || (typeof value === 'string' && !/^\d{4}-\d{2}-\d{2}T/.test(value))) {
    throw new OperationError(
      'RECOVERY_TIME_INVALID',
      `recovery_time ${String(value)} is not an ISO-8601 timestamp`,
    );
  }
  if (time.getTime() > now.getTime()) {
    throw new OperationError(
      'RECOVERY_TIME_IN_FUTURE',
      `recovery_time ${time.toISOString()} is in the future`,
    );
  }
  return time;
}

export type MigrationMethod = 'dump' | 'replication';

/** One entry of migration-status `databases`, in UpCloud's wire shape. */
export interface DatabaseMigrationStatus {
  dbname: string;
  /** `pg_dump`, `mysqldump` (UpCloud's name for the MySQL dump method) or `replication`. */
  method: 'pg_dump' | 'mysqldump' | 'replication';
  status: 'pending' | 'running' | 'done' | 'failed' | 'syncing';
  error?: string;
}

/** GET /1.3/database/{uuid}/migration-status, in UpCloud's wire shape. */
export interface MigrationStatus {
  status: 'running' | 'done' | 'failed';
  method: '' | 'pg_dump' | 'mysqldump' | 'replication';
  error?: string;
  seconds_behind_master: number;
  source_active: boolean;
  databases: DatabaseMigrationStatus[];
}

/** One item of a task's `result_codes`. */
export interface ResultCode {
  code: string;
  message: string;
  dbname?: string;
}

/** What waits for a maintenance (a restart). */
export interface PendingUpdate {
  kind: 'minor_version' | 'configuration';
  /** One sentence, as UpCloud's `maintenance.pending_updates[].description`. */
  description: string;
}

/** A managed instance an operation acts on: running, on the port its driver reported. */
export interface OperationInstance extends InstanceRef {
  port: number;
  /** Its server's version as the driver reported it (`15.18`), when known. */
  version: string | null;
}

/** A migration source's URI without its password, as the migration answer echoes it. */
export interface MigrationSource {
  host: string;
  port: number;
  user: string;
  database: string;
}

/** A check task's outcome, as UpCloud's task object carries it. */
export interface OperationCheck {
  success: boolean;
  /** One sentence, UpCloud's task `result`. */
  result: string;
  resultCodes: ResultCode[];
}

export interface MigrationCheckRequest {
  sourceUri: string;
  engine: 'pg' | 'mysql';
  /** TLS to the source, as the migration will use it; unset: checked both ways. */
  ssl?: boolean;
  method?: MigrationMethod;
  ignoreDbs?: string;
  /** The managed database's major (PostgreSQL): a dump cannot be restored into an older one. */
  targetMajor?: number;
}

export interface MigrationRequest {
  /** The tenant's source; reached under the address rule the driver was built with. */
  sourceUri: string;
  target: OperationInstance;
  ssl: boolean;
  ignoreDbs?: string;
  signal?: AbortSignal;
}

export interface DatabaseOperationsDriver {
  readonly name: string;
  /** Parses a migration source's URI (INVALID_SOURCE_URI; ENGINE_MISMATCH for another engine's). */
  parseSource(uri: string, engine: 'pg' | 'mysql', ssl?: boolean): MigrationSource;
  /** Whether a source can be migrated from, by which method (a task's answer; failures are results). */
  checkMigration(request: MigrationCheckRequest): Promise<OperationCheck>;
  /** Whether a PostgreSQL instance can be upgraded to `targetVersion`; `sourceMajor` is its own. */
  checkUpgrade(
    instance: OperationInstance,
    targetVersion: string,
  ): Promise<OperationCheck & { sourceMajor: number }>;
  /** Copies the source's databases into the instance by dump; `onProgress` after every step. */
  dumpMigrate(
    request: MigrationRequest & { onProgress?: (status: MigrationStatus) => void },
  ): Promise<MigrationStatus>;
  /** Starts logical replication from the source into the instance (PostgreSQL). */
  startReplication(request: MigrationRequest): Promise<MigrationStatus>;
  /** A replication's live status (lag, the source's reachability). */
  replicationStatus(request: MigrationRequest): Promise<MigrationStatus>;
  /** Ends a replication; slots left on an unreachable source are named (REPLICATION_NOT_RUNNING: none). */
  stopReplication(request: MigrationRequest): Promise<{ orphanedSlots: string[] }>;
  /** What a restart of the running instance would apply (a newer minor, settings waiting for it). */
  pendingMaintenance(instance: OperationInstance): Promise<PendingUpdate[]>;
  /**
   * Whether a clone of this PostgreSQL instance must be a physical copy (no pg_dump here reads its
   * major): then the clone adopts a copy recovered by the managed-database driver.
   */
  needsPhysicalCopy(source: OperationInstance): Promise<boolean>;
  /**
   * A clone's data by logical copy from `source` into `target`: its current state, or (PostgreSQL,
   * `pointInTime`) its state at a time, recovered from a base backup and its WAL archive first.
   */
  copyData(
    source: OperationInstance,
    target: OperationInstance,
    options: { pointInTime?: { backup: RestorableBackup; recoveryTime: string }; signal?: AbortSignal },
  ): Promise<MigrationStatus>;
}
