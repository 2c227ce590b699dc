// The one place that reads process.env. Everything else receives a frozen Config.
import path from 'node:path';

export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  /** Absent: SQLite file in the data dir. */
  readonly databaseUrl: string | undefined;
  /** Absent: generated once into `<dataDir>/secret.key`. 32 bytes, hex or base64. */
  readonly secretKey: string | undefined;
  readonly publicUrl: string;
  readonly smtpUrl: string | undefined;
  readonly logLevel: LogLevel;
  /** Requests per minute per credential; 0 disables. */
  readonly rateLimitPerMinute: number;
  /** Largest request body accepted, in bytes. */
  readonly bodyLimitBytes: number;
  /** Hosts/CIDRs that the tools may fetch although they are private (tests, intranet operators). */
  readonly toolsAllowPrivate: readonly string[];
  readonly toolsMonthlyCredits: number;
  readonly s3Port: number;
  /** Most resources of each kind one team may hold (apply answers 422 past them). */
  readonly quotas: Readonly<TeamQuotas>;
  /** Which driver each family uses (src/composition.ts builds them). */
  readonly drivers: Readonly<DriverChoice>;
}

/** The drivers Berth has, per family; the first is the default. */
export const DRIVERS = {
  managedDatabases: ['local'],
  objectStorage: ['local'],
} as const;

export type DriverChoice = { [F in keyof typeof DRIVERS]: (typeof DRIVERS)[F][number] };

export interface TeamQuotas {
  applications: number;
  domains: number;
  managedDatabases: number;
  objectStorages: number;
}

export interface ConfigOverrides {
  port?: string;
  host?: string;
  dataDir?: string;
  databaseUrl?: string;
  secretKey?: string;
  publicUrl?: string;
  smtpUrl?: string;
  logLevel?: string;
  rateLimitPerMinute?: string;
  bodyLimitBytes?: string;
  toolsAllowPrivate?: string;
  toolsMonthlyCredits?: string;
  s3Port?: string;
  quotaApplications?: string;
  quotaDomains?: string;
  quotaManagedDatabases?: string;
  quotaObjectStorages?: string;
  managedDatabaseDriver?: string;
  objectStorageDriver?: string;
}

/** Environment variable behind each setting; `berth serve --<flag>` overrides it. */
export const CONFIG_VARIABLES: Record<keyof ConfigOverrides, { env: string; flag: string; doc: string }> = {
  port: { env: 'BERTH_PORT', flag: 'port', doc: 'TCP port of the HTTP API (default 8080)' },
  host: { env: 'BERTH_HOST', flag: 'host', doc: 'address to listen on (default 127.0.0.1)' },
  dataDir: {
    env: 'BERTH_DATA_DIR',
    flag: 'data-dir',
    doc: 'directory for state, keys and instances (default ./data)',
  },
  databaseUrl: {
    env: 'BERTH_DATABASE_URL',
    flag: 'database-url',
    doc: 'postgres://… to share state between replicas (default: SQLite file in the data dir)',
  },
  secretKey: {
    env: 'BERTH_SECRET_KEY',
    flag: 'secret-key',
    doc: '32-byte key (hex or base64) encrypting secrets at rest (default: generated into <data dir>/secret.key)',
  },
  publicUrl: {
    env: 'BERTH_PUBLIC_URL',
    flag: 'public-url',
    doc: 'URL users reach Berth at (default http://HOST:PORT)',
  },
  smtpUrl: {
    env: 'BERTH_SMTP_URL',
    flag: 'smtp-url',
    doc: 'smtp://user:pass@host:port for e-mail (default: outbox only)',
  },
  logLevel: {
    env: 'BERTH_LOG_LEVEL',
    flag: 'log-level',
    doc: 'fatal|error|warn|info|debug|trace|silent (default info)',
  },
  rateLimitPerMinute: {
    env: 'BERTH_RATE_LIMIT_PER_MINUTE',
    flag: 'rate-limit',
    doc: 'requests per minute per credential, 0 = off (default 60)',
  },
  bodyLimitBytes: {
    env: 'BERTH_BODY_LIMIT_BYTES',
    flag: 'body-limit',
    doc: 'largest request body in bytes (default 30 MiB)',
  },
  toolsAllowPrivate: {
    env: 'BERTH_TOOLS_ALLOW_PRIVATE',
    flag: 'tools-allow-private',
    doc: 'comma-separated IPs/CIDRs the tools may fetch although private (default none)',
  },
  toolsMonthlyCredits: {
    env: 'BERTH_TOOLS_MONTHLY_CREDITS',
    flag: 'tools-monthly-credits',
    doc: 'tools credits per user per month (default 1000)',
  },
  s3Port: {
    env: 'BERTH_S3_PORT',
    flag: 's3-port',
    doc: 'TCP port of the S3-compatible endpoint (default 9000)',
  },
  quotaApplications: {
    env: 'BERTH_QUOTA_APPLICATIONS',
    flag: 'quota-applications',
    doc: 'applications one team may have (default 50)',
  },
  quotaDomains: {
    env: 'BERTH_QUOTA_DOMAINS',
    flag: 'quota-domains',
    doc: "domains over all of one team's applications (default 500)",
  },
  quotaManagedDatabases: {
    env: 'BERTH_QUOTA_MANAGED_DATABASES',
    flag: 'quota-managed-databases',
    doc: 'managed databases one team may have (default 20)',
  },
  quotaObjectStorages: {
    env: 'BERTH_QUOTA_OBJECT_STORAGES',
    flag: 'quota-object-storages',
    doc: 'object storages one team may have (default 20)',
  },
  managedDatabaseDriver: {
    env: 'BERTH_MANAGED_DATABASE_DRIVER',
    flag: 'managed-database-driver',
    doc: 'what runs managed databases: local (PostgreSQL, MariaDB and Valkey servers on this machine; default)',
  },
  objectStorageDriver: {
    env: 'BERTH_OBJECT_STORAGE_DRIVER',
    flag: 'object-storage-driver',
    doc: "what holds object storage: local (Berth's S3 endpoint on the data dir; default)",
  },
};

const LOG_LEVELS: readonly LogLevel[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

/** Parse env plus overrides (flags win). Every bad value is collected and reported in one error. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigOverrides = {}): Config {
  const problems: string[] = [];
  const raw = (key: keyof ConfigOverrides): string | undefined => {
    const value = overrides[key] ?? env[CONFIG_VARIABLES[key].env];
    return value === undefined || value === '' ? undefined : value;
  };
  const integer = (key: keyof ConfigOverrides, fallback: number, min: number, max: number): number => {
    const value = raw(key);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${CONFIG_VARIABLES[key].env} must be an integer from ${min} to ${max}, got '${value}'`);
      return fallback;
    }
    return n;
  };

  const port = integer('port', 8080, 0, 65535);
  const host = raw('host') ?? '127.0.0.1';
  const dataDir = path.resolve(raw('dataDir') ?? './data');

  const databaseUrl = raw('databaseUrl');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    problems.push(`BERTH_DATABASE_URL must start with postgres:// or postgresql://`);
  }

  const secretKey = raw('secretKey');
  if (secretKey !== undefined && decodeKey(secretKey) === undefined) {
    problems.push('BERTH_SECRET_KEY must be 32 bytes, written as 64 hex characters or base64');
  }

  const publicUrl = raw('publicUrl') ?? `http://${host}:${port}`;
  if (!isHttpUrl(publicUrl)) problems.push(`BERTH_PUBLIC_URL must be an http(s) URL, got '${publicUrl}'`);

  const smtpUrl = raw('smtpUrl');
  if (smtpUrl !== undefined && !/^smtps?:\/\//.test(smtpUrl)) {
    problems.push('BERTH_SMTP_URL must start with smtp:// or smtps://');
  }

  const logLevelRaw = raw('logLevel') ?? 'info';
  const logLevel = LOG_LEVELS.find((level) => level === logLevelRaw);
  if (logLevel === undefined) problems.push(`BERTH_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const driver = <F extends keyof typeof DRIVERS>(family: F, key: keyof ConfigOverrides): DriverChoice[F] => {
    const offered: readonly string[] = DRIVERS[family];
    const value = raw(key) ?? offered[0]!;
    if (!offered.includes(value))
      problems.push(`${CONFIG_VARIABLES[key].env} must be one of ${offered.join(', ')}, got '${value}'`);
    return (offered.includes(value) ? value : offered[0]) as DriverChoice[F];
  };

  const config: Config = {
    port,
    host,
    dataDir,
    databaseUrl,
    secretKey,
    publicUrl: publicUrl.replace(/\/+$/, ''),
    smtpUrl,
    logLevel: logLevel ?? 'info',
    rateLimitPerMinute: integer('rateLimitPerMinute', 60, 0, 1_000_000_000),
    bodyLimitBytes: integer('bodyLimitBytes', 30 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    toolsAllowPrivate: (raw('toolsAllowPrivate') ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    toolsMonthlyCredits: integer('toolsMonthlyCredits', 1000, 0, 1_000_000_000),
    s3Port: integer('s3Port', 9000, 0, 65535),
    quotas: Object.freeze({
      applications: integer('quotaApplications', 50, 0, 1_000_000),
      domains: integer('quotaDomains', 500, 0, 1_000_000),
      managedDatabases: integer('quotaManagedDatabases', 20, 0, 1_000_000),
      objectStorages: integer('quotaObjectStorages', 20, 0, 1_000_000),
    }),
    drivers: Object.freeze({
      managedDatabases: driver('managedDatabases', 'managedDatabaseDriver'),
      objectStorage: driver('objectStorage', 'objectStorageDriver'),
    }),
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}

export function decodeKey(text: string): Buffer | undefined {
  const trimmed = text.trim();
  const key = /^[0-9a-fA-F]{64}$/.test(trimmed)
    ? Buffer.from(trimmed, 'hex')
    : Buffer.from(trimmed, 'base64');
  return key.length === 32 ? key : undefined;
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
