// What the local driver needs from each engine. The driver owns the common flow (directories, ports,
// start/stop, plan changes); an engine knows its own binaries, files and SQL.
import type { EngineLimits } from '../plan-limits.js';
import type { BaseBackup, InstanceCredentials, InstanceSpec } from '../types.js';

export interface InstancePaths {
  /** `<dataDir>/databases/<uuid>` */
  root: string;
}

export interface LocalEngine {
  /** OS user the server runs as when Berth is root. */
  readonly osUser: string | undefined;
  /** Rejects (PermanentDriverError) a spec the engine cannot honour, before anything is created. */
  validate(spec: InstanceSpec): void;
  /** Whether the instance's files were fully created (a failed init is wiped and redone). */
  isInitialised(root: string): boolean;
  /** Creates a fresh instance (or template) whose admin user has the given password. */
  init(root: string, adminUser: string, adminPassword: string): Promise<void>;
  /**
   * Whether new instances may be copied from a template made once by `init` (initdb and
   * mariadb-install-db take most of a provisioning; a copy takes milliseconds).
   */
  readonly templated: boolean;
  /** Writes the configuration that the next start reads: port, limits, and (valkey) users. */
  configure(root: string, spec: InstanceSpec, port: number, limits: EngineLimits): Promise<void>;
  start(root: string, spec: InstanceSpec, port: number): Promise<void>;
  /** The server's pid from its own pid file, when that process is alive and is this instance's. */
  pidOf(root: string): number | null;
  /** The server's own log file (what the services API shows as the service's logs). */
  logFile(root: string): string;
  /** Versions a new instance can be made on, newest first (the installed server's). */
  versions(): string[];
  /** Signal for a clean, fast shutdown. */
  readonly stopSignal: NodeJS.Signals;
  /**
   * Makes users and logical databases match the spec; returns the server version. An instance
   * copied from a template still has the template's admin password (`bootstrapPassword`) until this
   * first call replaces it with the spec's.
   */
  ensureAccess(
    root: string,
    spec: InstanceSpec,
    port: number,
    bootstrapPassword: string | undefined,
  ): Promise<{ version: string; credentials: InstanceCredentials }>;
  baseBackup?(root: string, spec: InstanceSpec, port: number, retain: number): Promise<BaseBackup[]>;
  /** Repairs what a crash in the middle of `upgrade` left behind, before anything reads the files. */
  recover?(root: string): void;
  /**
   * Major upgrade (PostgreSQL): a new cluster is filled while the old one serves on a private port,
   * then swapped in and started on `port`. On failure the old one serves on `port` again, unchanged.
   */
  upgrade?(
    root: string,
    spec: InstanceSpec,
    port: number,
    limits: EngineLimits,
    targetMajor: number,
  ): Promise<void>;
  /**
   * Swaps a stopped copy of another instance's data in (the instance is stopped). The old files wait
   * until `settleAdoption` keeps the copy or throws it out and puts them back.
   */
  adoptCopy?(root: string, copyDataDir: string): Promise<void>;
  settleAdoption?(root: string, keep: boolean): void;
}
