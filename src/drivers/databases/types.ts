// The narrow interface between Berth and whatever runs managed databases. The `local` driver runs one
// server process per instance on this host; a cloud driver (UpCloud's /1.3/database API) would map
// the same calls onto remote services. Berth keeps the desired state (plan, users, databases) in its
// store and hands it to the driver in full on every call, so a driver needs no memory of its own.

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

/** A recovered copy of an instance's data, in a directory the caller chose; running or stopped. */
export interface RecoveredCopy {
  dataDir: string;
  port: number;
  binDir: string;
  /** The OS account the copy's server runs as. */
  runAs?: string;
  /** The password of the copy's superuser (the source's maintenance account): it opens the copy once. */
  adminPassword: string;
}

export interface RecoverCopyOptions {
  backup: RestorableBackup;
  /** ISO 8601; undefined: replay the whole archive. */
  recoveryTime: string | undefined;
  /** An empty directory for the copy, on the file system the copy will be used on. */
  work: string;
  keepRunning: boolean;
  /** The instance's running major (its binaries replay the WAL). */
  major: number | undefined;
  /** Where the instance listens (its WAL is flushed to the archive first). */
  port: number;
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
   * recovered base backup, for a clone whose source's major has no pg_dump here). The copy is moved,
   * not copied, so it must be on the instance's file system. The instance keeps its own port, settings
   * and credentials: `copy.adminPassword` (the source's admin password) opens the copy once, and the
   * admin and every user then get the spec's passwords. WAL archive and base backups start empty. On
   * failure the instance runs on its old data again and the error is thrown.
   */
  adoptCopy?(spec: InstanceSpec, copy: { dataDir: string; adminPassword: string }): Promise<InstanceRuntime>;
  /**
   * Berth's own superuser connection URI of a running instance (PostgreSQL, MariaDB): a maintenance
   * account, never the admin a team receives. Drivers without one refuse the operations that need it.
   */
  maintenanceUri?(ref: InstanceRef, port: number): string;
  /**
   * Whether the running server was started with other engine settings than this Berth writes for
   * the spec (an earlier Berth's, left running when it was killed): `start` restarts it with these.
   */
  outdatedSettings?(spec: InstanceSpec): boolean;
  /** The base backups a copy can be recovered from, oldest first (PostgreSQL). */
  restorableBackups?(ref: InstanceRef): RestorableBackup[];
  /**
   * A copy of the instance's data recovered from `backup` with its WAL replayed to `recoveryTime` (or
   * to its end), in `work`, on the instance's own major; running on a free port, or stopped.
   */
  recoverCopy?(ref: InstanceRef, options: RecoverCopyOptions): Promise<RecoveredCopy>;
  /**
   * Takes a base backup and keeps the newest `retain` (PostgreSQL; continuous WAL archiving makes
   * them the starting points of point-in-time recovery). Returns the backups kept, oldest first.
   */
  baseBackup(spec: InstanceSpec, retain: number): Promise<BaseBackup[]>;
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
