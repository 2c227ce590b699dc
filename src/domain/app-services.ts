// An application's services (spec.services) and container services (spec.container_services), and
// the connection environment they give the application: which names each ecosystem gets, how two
// services of one kind are told apart, and the connection strings the API shows. docs/services.md
// says the same in prose; this file is what Berth does. Pure: no I/O.
import type { ApplicationType } from './applications.js';
import type { ServiceType } from './infrastructure/document.js';

/** The managed-database engine a service type runs on (`valkey` and `redis` both on the key-value one). */
export type ServiceEngine = 'pg' | 'mysql' | 'valkey';

const ENGINES: Partial<Record<ServiceType, ServiceEngine>> = {
  postgresql: 'pg',
  mysql: 'mysql',
  redis: 'valkey',
  valkey: 'valkey',
};

/** The engine of a database-like service type, or undefined for the types that run otherwise. */
export const engineOfService = (type: string): ServiceEngine | undefined => ENGINES[type as ServiceType];

/** The runtime's instance of a `worker` service: its process, status and log source. */
export const workerInstanceName = (service: string): string => `worker-${service}`;

/** Memory of a service whose document names none. */
export const DEFAULT_SERVICE_MEMORY_MI = 256;

/** What a service instance runs with: its memory, and its volume when the document sizes one. */
export interface ServiceSizing {
  memoryMiB: number;
  volumeGiB?: number;
}

/** A service's `volume_size` (`20Gi`, checked by the document's rule) in GiB; undefined when none. */
export function volumeGiB(value: string | null): number | undefined {
  const match = value === null ? null : /^(\d+)Gi$/.exec(value);
  return match ? Number(match[1]) : undefined;
}

/** The sizing as the store records it (`256MiB`, `256MiB+20Gi`): a changed one restarts the instance. */
export const sizingName = (sizing: ServiceSizing): string =>
  `${Math.floor(sizing.memoryMiB)}MiB${sizing.volumeGiB ? `+${sizing.volumeGiB}Gi` : ''}`;

/** The sizing a stored name records, or undefined for a name this version does not read. */
export function parseSizing(name: string): ServiceSizing | undefined {
  const match = /^(\d+)MiB(?:\+(\d+)Gi)?$/.exec(name);
  if (!match) return undefined;
  return { memoryMiB: Number(match[1]), ...(match[2] ? { volumeGiB: Number(match[2]) } : {}) };
}
/** The user the application connects as (its own instance: the name need not be unique). */
export const SERVICE_USER = 'app';
/** `settings.database` when the document names none. */
export const DEFAULT_SERVICE_DATABASE = 'app';

/** What a database name must be for the engines (the driver's rule), and the names they keep. */
export const SERVICE_DATABASE_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;
export const RESERVED_SERVICE_DATABASES: Readonly<Record<'pg' | 'mysql', readonly string[]>> = {
  pg: ['template0', 'template1'],
  mysql: ['mysql', 'information_schema', 'performance_schema', 'sys'],
};

/** Ploi's service states, plus `unavailable` for a type this Berth does not run (never "running"). */
export type ServiceState = 'provisioning' | 'running' | 'restarting' | 'failed' | 'unavailable';

/**
 * Types that a Berth on this machine kind cannot run (no current package), with why: accepted by apply
 * as the spec lists them, and reported `unavailable` with this reason, never `running`. The Kubernetes
 * driver runs them from their images (docs/runtime.md).
 */
export const UNAVAILABLE_SERVICE_TYPES: Readonly<Record<string, string>> = {
  meilisearch:
    'meilisearch is not installable on this machine kind (no Debian package); it runs on the Kubernetes driver from its image',
  clickhouse:
    'clickhouse is not installable on this machine kind (no current Debian package); it runs on the Kubernetes driver from its image',
};

/** Everything the application needs to reach one running service. */
export interface ServiceConnection {
  name: string;
  /** The document's type (a service's or a container service's). */
  type: string;
  host: string;
  port: number;
  username: string;
  password: string;
  /** The database of postgresql and mysql services; null for the others. */
  database: string | null;
  /**
   * What the runner says beyond host and port: `vhost`, `bucket`, `endpoint`, `region`, `path` (a
   * token-bearing base path: a credential), `websocketPath`.
   */
  extra: Readonly<Record<string, string>>;
}

/**
 * The connection as the application reaches it at `host` instead of the host's loopback (its own
 * network's address for its services, src/drivers/os/netns.ts): the host, and an endpoint URL on
 * loopback (minio's).
 */
export function reachedAt(connection: ServiceConnection, host: string): ServiceConnection {
  if (connection.host !== '127.0.0.1' || host === connection.host) return connection;
  const endpoint = connection.extra.endpoint;
  return {
    ...connection,
    host,
    extra:
      endpoint === undefined
        ? connection.extra
        : {
            ...connection.extra,
            endpoint: endpoint.replace(/^(https?:\/\/)(127\.0\.0\.1|localhost)(?=[:/]|$)/, `$1${host}`),
          },
  };
}

/**
 * Services of one kind share names, so two of a kind are told apart by a suffix: databases
 * (postgresql, mysql), key-value (redis, valkey), and each other type on its own.
 */
const kindOf = (type: string): string =>
  type === 'postgresql' || type === 'mysql'
    ? 'database'
    : type === 'redis' || type === 'valkey'
      ? 'redis'
      : type;

/** `main-db` → `_MAIN_DB`: service names are lower-case letters, digits and hyphens, so it is one-to-one. */
export const serviceSuffix = (name: string): string => `_${name.toUpperCase().replace(/-/g, '_')}`;

const encode = encodeURIComponent;

/** A token-bearing base path a runner serves under (`/<token>`), or ''. */
const basePath = (c: ServiceConnection): string => c.extra.path ?? '';

/** The URL form of a connection (`postgresql://`, `mysql://`, `redis://`, `amqp://`, `sftp://`, `http://`…). */
export function connectionUrl(c: ServiceConnection): string {
  const auth = `${encode(c.username)}:${encode(c.password)}`;
  switch (c.type) {
    case 'postgresql':
    case 'mysql':
      return `${c.type}://${auth}@${c.host}:${c.port}/${encode(c.database ?? '')}`;
    case 'rabbitmq':
      return `amqp://${auth}@${c.host}:${c.port}/${encode(c.extra.vhost ?? '/')}`;
    case 'sftp':
      return `sftp://${auth}@${c.host}:${c.port}`;
    case 'minio':
      return c.extra.endpoint ?? `http://${c.host}:${c.port}`;
    case 'chrome-headless':
    case 'gotenberg':
      return `http://${c.host}:${c.port}${basePath(c)}`;
    case 'meilisearch':
      return `http://${c.host}:${c.port}`;
    case 'clickhouse':
      return `http://${auth}@${c.host}:${c.port}`;
    default:
      return `redis://${auth}@${c.host}:${c.port}`;
  }
}

/** One service's names without their suffix, for an application of `appType`. */
function namesOf(appType: ApplicationType, c: ServiceConnection): Record<string, string> {
  const env: Record<string, string> = {};
  const port = String(c.port);
  const url = connectionUrl(c);
  const laravel = appType === 'laravel';
  switch (kindOf(c.type)) {
    case 'database':
      env.DATABASE_URL = url;
      if (laravel) {
        env.DB_CONNECTION = c.type === 'postgresql' ? 'pgsql' : 'mysql';
        env.DB_HOST = c.host;
        env.DB_PORT = port;
        env.DB_DATABASE = c.database ?? '';
        env.DB_USERNAME = c.username;
        env.DB_PASSWORD = c.password;
      }
      // WordPress speaks MySQL only; the names of the official image, read by Berth's wp-config.php.
      if (appType === 'wordpress' && c.type === 'mysql') {
        env.WORDPRESS_DB_HOST = `${c.host}:${port}`;
        env.WORDPRESS_DB_NAME = c.database ?? '';
        env.WORDPRESS_DB_USER = c.username;
        env.WORDPRESS_DB_PASSWORD = c.password;
      }
      break;
    case 'redis':
      env.REDIS_URL = url;
      if (laravel) {
        env.REDIS_HOST = c.host;
        env.REDIS_PORT = port;
        env.REDIS_USERNAME = c.username;
        env.REDIS_PASSWORD = c.password;
      }
      break;
    case 'rabbitmq':
      env.AMQP_URL = url;
      // The names of vladimir-yuldashev/laravel-queue-rabbitmq, the queue driver Laravel apps use.
      if (laravel) {
        env.QUEUE_CONNECTION = 'rabbitmq';
        env.RABBITMQ_HOST = c.host;
        env.RABBITMQ_PORT = port;
        env.RABBITMQ_USER = c.username;
        env.RABBITMQ_PASSWORD = c.password;
        env.RABBITMQ_VHOST = c.extra.vhost ?? '/';
      }
      break;
    case 'minio':
      env.S3_ENDPOINT = url;
      env.S3_BUCKET = c.extra.bucket ?? '';
      env.S3_REGION = c.extra.region ?? '';
      env.S3_ACCESS_KEY_ID = c.username;
      env.S3_SECRET_ACCESS_KEY = c.password;
      // Laravel's stock `s3` disk (config/filesystems.php) reads these.
      if (laravel) {
        env.FILESYSTEM_DISK = 's3';
        env.AWS_ACCESS_KEY_ID = c.username;
        env.AWS_SECRET_ACCESS_KEY = c.password;
        env.AWS_DEFAULT_REGION = c.extra.region ?? '';
        env.AWS_BUCKET = c.extra.bucket ?? '';
        env.AWS_ENDPOINT = url;
        env.AWS_USE_PATH_STYLE_ENDPOINT = 'true';
      }
      break;
    case 'sftp':
      env.SFTP_URL = url;
      env.SFTP_HOST = c.host;
      env.SFTP_PORT = port;
      env.SFTP_USERNAME = c.username;
      env.SFTP_PASSWORD = c.password;
      break;
    case 'chrome-headless':
      env.CHROME_URL = url;
      env.BROWSER_WS_ENDPOINT = `ws://${c.host}:${c.port}${basePath(c)}${c.extra.websocketPath ?? '/devtools/browser'}`;
      break;
    case 'gotenberg':
      env.GOTENBERG_URL = url;
      break;
    // Laravel Scout's names; the key is the instance's master key.
    case 'meilisearch':
      env.MEILISEARCH_HOST = url;
      env.MEILISEARCH_KEY = c.password;
      break;
    case 'clickhouse':
      env.CLICKHOUSE_URL = url;
      env.CLICKHOUSE_HOST = c.host;
      env.CLICKHOUSE_PORT = port;
      env.CLICKHOUSE_USER = c.username;
      env.CLICKHOUSE_PASSWORD = c.password;
      env.CLICKHOUSE_DATABASE = c.database ?? DEFAULT_SERVICE_DATABASE;
      break;
  }
  return env;
}

/**
 * The names one service contributes: unsuffixed when it is the only one of its kind (databases:
 * postgresql and mysql; key-value: redis and valkey), else every name ends in `_<SERVICE_NAME>`.
 */
export function serviceEnvironment(
  appType: ApplicationType,
  connection: ServiceConnection,
  all: readonly ServiceConnection[],
): Record<string, string> {
  const kind = kindOf(connection.type);
  const shared = all.filter((other) => kindOf(other.type) === kind).length > 1;
  const suffix = shared ? serviceSuffix(connection.name) : '';
  return Object.fromEntries(
    Object.entries(namesOf(appType, connection)).map(([key, value]) => [`${key}${suffix}`, value]),
  );
}

/** Every service's names together: what is injected (the application's own secrets win over it). */
export function connectionEnvironment(
  appType: ApplicationType,
  connections: readonly ServiceConnection[],
): Record<string, string> {
  return Object.assign(
    {},
    ...connections.map((connection) => serviceEnvironment(appType, connection, connections)),
  ) as Record<string, string>;
}

/** The connection strings the API offers for a service: URL, JDBC and the command-line client. */
export function connectionFormats(c: ServiceConnection): Array<{ name: string; value: string }> {
  const url = connectionUrl(c);
  const db = encode(c.database ?? '');
  const credentials = `user=${encode(c.username)}&password=${encode(c.password)}`;
  switch (c.type) {
    case 'postgresql':
      return [
        { name: 'url', value: url },
        { name: 'jdbc', value: `jdbc:postgresql://${c.host}:${c.port}/${db}?${credentials}` },
        { name: 'cli', value: `psql '${url}'` },
      ];
    case 'mysql':
      return [
        { name: 'url', value: url },
        { name: 'jdbc', value: `jdbc:mysql://${c.host}:${c.port}/${db}?${credentials}` },
        {
          name: 'cli',
          value: `MYSQL_PWD='${c.password}' mysql -h ${c.host} -P ${c.port} -u ${c.username} ${c.database ?? ''}`,
        },
      ];
    case 'redis':
    case 'valkey':
      return [
        { name: 'url', value: url },
        { name: 'cli', value: `redis-cli -u '${url}'` },
      ];
    case 'sftp':
      return [
        { name: 'url', value: url },
        { name: 'cli', value: `sftp -P ${c.port} ${c.username}@${c.host}` },
      ];
    case 'minio':
      return [
        { name: 'url', value: `${url}/${c.extra.bucket ?? ''}` },
        {
          name: 'cli',
          value: `AWS_ACCESS_KEY_ID='${c.username}' AWS_SECRET_ACCESS_KEY='${c.password}' aws --endpoint-url ${url} s3 ls s3://${c.extra.bucket ?? ''}`,
        },
      ];
    default:
      return [{ name: 'url', value: url }];
  }
}

/** How the injected names are shown (GET …/secrets/injected): the key, never the value. */
export const MASKED_VALUE = '********';

/**
 * A minio service's bucket when its settings name none: `app-<application>-<service>-<8 hex of the
 * instance's uuid>`, a valid S3 name of at most 63 (the local runner's and the Kubernetes one's).
 */
export function derivedBucket(spec: { applicationId: number; name: string; id: string }): string {
  const tail = spec.id
    .replace(/[^0-9a-f]/gi, '')
    .toLowerCase()
    .slice(0, 8)
    .padEnd(8, '0');
  const head = `app-${spec.applicationId}-${spec.name}`
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 63 - tail.length - 1)
    .replace(/-+$/, '');
  return `${head}-${tail}`;
}
