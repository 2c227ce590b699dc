// The one place that reads process.env. Everything else receives a frozen Config.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import ipaddr from 'ipaddr.js';

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
  /** How log records are written; undefined: readable lines on a terminal, JSON lines otherwise. */
  readonly logFormat: 'pretty' | 'json' | undefined;
  /** Requests per minute per credential; 0 disables. */
  readonly rateLimitPerMinute: number;
  /** Days an audit log entry is kept before the periodic prune deletes it. */
  readonly auditRetentionDays: number;
  /** Largest request body accepted, in bytes. */
  readonly bodyLimitBytes: number;
  /** Hosts/CIDRs that the tools may fetch although they are private (tests, intranet operators). */
  readonly toolsAllowPrivate: readonly string[];
  /** Peers (IPs/CIDRs) whose X-Forwarded-For and X-Forwarded-Proto are believed: the reverse proxies. */
  readonly trustedProxies: readonly string[];
  readonly toolsMonthlyCredits: number;
  readonly s3Port: number;
  /** Where `GET /metrics` (Prometheus) listens, on a listener of its own; undefined: not served. */
  readonly metricsAddr: Readonly<{ host: string; port: number }> | undefined;
  /** Every bucket of the S3 endpoint as if its PublicAccessBlock had all four settings on. */
  readonly s3BlockPublicAccess: boolean;
  /** Most resources of each kind one team may hold (apply answers 422 past them). */
  readonly quotas: Readonly<TeamQuotas>;
  /** Which driver each family uses (src/composition.ts builds them). */
  readonly drivers: Readonly<DriverChoice>;
  /** Applications: where they are served, how they are fetched, deployed and checked. */
  readonly runtime: Readonly<RuntimeSettings>;
  /** The cluster of the `kubernetes` runtime driver, and how it lays applications out there. */
  readonly kubernetes: Readonly<KubernetesSettings>;
  /** UpCloud's API for the `upcloud` managed-database driver; undefined with any other driver. */
  readonly upcloud: Readonly<UpCloudSettings> | undefined;
  /** The bucket the `s3` object-storage driver keeps object bytes in; undefined with another driver. */
  readonly s3Upstream: Readonly<S3UpstreamSettings> | undefined;
  /** Scheduled backups (docs/operations.md, "Backup and restore"); undefined: none. */
  readonly backup: Readonly<BackupSettings> | undefined;
  /** The endpoint and credential of s3:// backup targets: BERTH_S3_UPSTREAM_*'s, when its URL is set. */
  readonly backupS3: Readonly<Omit<S3UpstreamSettings, 'bucket'>> | undefined;
  /** BERTH_BACKUP_PASSPHRASE, for `berth admin backup` and `restore` too; undefined: asked for. */
  readonly backupPassphrase: string | undefined;
}

export interface BackupSettings {
  /** `HH:MM` (every day at that UTC time) or an interval in minutes. */
  schedule: { dailyAt: { hour: number; minute: number } } | { everyMinutes: number };
  /** A directory or s3://bucket/prefix. */
  to: string;
  passphrase: string;
}

export interface UpCloudSettings {
  /** Base URL of the API (`/1.3/...` is appended), without a trailing slash. */
  apiUrl: string;
  username: string;
  password: string;
  /** The zone every new managed database is made in, e.g. `fi-hel2`. */
  zone: string;
}

export interface S3UpstreamSettings {
  /** The upstream S3 service's endpoint (path-style requests). */
  url: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

export interface KubernetesSettings {
  /** Kubeconfig file (BERTH_KUBECONFIG, else KUBECONFIG); undefined: the pod's service account. */
  kubeconfig: string | undefined;
  /** `spec.ingressClassName` of every Ingress; undefined: the cluster's default class. */
  ingressClass: string | undefined;
  /** `storageClassName` of every PersistentVolumeClaim; undefined: the cluster's default class. */
  storageClass: string | undefined;
  /** Each application's namespace is `<prefix>app-<id>`. */
  namespacePrefix: string;
  /** Namespace of the ingress controller: the one whose pods the NetworkPolicy admits. */
  ingressNamespace: string;
  /** Stock images the pods run; `{version}` is the application's runtime version. */
  images: Readonly<{ nodejs: string; php: string; fetch: string }>;
}

export interface RuntimeSettings {
  /** Port of the edge proxy that serves applications by Host (0: any free port). */
  edgePort: number;
  /** Port of the edge's TLS listener; undefined: no TLS. */
  edgeTlsPort: number | undefined;
  /** The edge's data plane: Node's http in Berth's process, or HAProxy started by Berth (decision 0005). */
  edgeProxy: 'node' | 'haproxy';
  /**
   * `namespace`: as root each application gets a network namespace of its own (docs/runtime.md,
   * "Networks"); `host`: every sandbox shares the host's network (without root it always does).
   */
  appNetwork: 'namespace' | 'host';
  /** Every application is also served at `<name>-<id>.<appsDomain>`. */
  appsDomain: string;
  /** A deployment that has not finished after this long is failed (the spec leaves it open). */
  deploymentTimeoutSeconds: number;
  /** `owner`/`name` repositories are fetched from `<gitBaseUrl>/<owner>/<name>.git`. */
  gitBaseUrl: string;
  /** Hosts/CIDRs a repository URL may name although they are private (tests, intranet git servers). */
  sourcesAllowPrivate: readonly string[];
  /** Whether `file://` repository URLs are fetched (off: a tenant could read the host's repositories). */
  sourcesAllowFileUrls: boolean;
  /** Live health checks: every interval, answered within the timeout; a replica failing `threshold` in a row is restarted. */
  healthIntervalSeconds: number;
  healthTimeoutSeconds: number;
  healthFailureThreshold: number;
  /** How long an old replica may finish its requests after SIGTERM before SIGKILL. */
  drainSeconds: number;
  /** Language runtimes (Node.js per major), downloaded once; several Berths may share it. */
  runtimesDir: string;
  /** Most processes and threads all of one application's sandboxes hold at once (pids cgroup). */
  appPidsMax: number;
  /** Most CPU one application uses, in cores (cfs quota); undefined: no cap. */
  appCpuCores: number | undefined;
  /** The npm registry builds use; undefined: the host's npm's (docs/runtime.md, Builds). */
  buildRegistry: string | undefined;
  /** Variables every build command gets on top of Berth's (proxies, mirrors), by name. */
  buildEnv: Readonly<Record<string, string>>;
}

/** The drivers Berth has, per family; the first is the default. */
export const DRIVERS = {
  managedDatabases: ['local', 'upcloud'],
  objectStorage: ['local', 's3'],
  runtime: ['local', 'kubernetes'],
  services: ['local'],
  tools: ['local'],
  artifacts: ['local', 's3'],
} as const;

export type DriverChoice = { [F in keyof typeof DRIVERS]: (typeof DRIVERS)[F][number] };

export interface TeamQuotas {
  applications: number;
  domains: number;
  managedDatabases: number;
  objectStorages: number;
  /** Memory, in MiB, of all the team's applications together (replicas, workers, services; src/domain/memory.ts). */
  memoryMiB: number;
  /** Memory, in MiB, one process may ask: `settings.memory`, a service's or container service's `memory`. */
  processMemoryMiB: number;
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
  logFormat?: string;
  rateLimitPerMinute?: string;
  auditRetentionDays?: string;
  bodyLimitBytes?: string;
  toolsAllowPrivate?: string;
  trustedProxies?: string;
  toolsMonthlyCredits?: string;
  s3Port?: string;
  metricsAddr?: string;
  s3BlockPublicAccess?: string;
  quotaApplications?: string;
  quotaDomains?: string;
  quotaManagedDatabases?: string;
  quotaObjectStorages?: string;
  quotaTeamMemory?: string;
  maxAppMemory?: string;
  managedDatabaseDriver?: string;
  objectStorageDriver?: string;
  runtimeDriver?: string;
  serviceDriver?: string;
  toolsDriver?: string;
  artifactStore?: string;
  edgePort?: string;
  edgeTlsPort?: string;
  edgeProxy?: string;
  appNetwork?: string;
  appsDomain?: string;
  deploymentTimeout?: string;
  gitBaseUrl?: string;
  sourcesAllowPrivate?: string;
  sourcesAllowFileUrls?: string;
  healthInterval?: string;
  healthTimeout?: string;
  healthFailureThreshold?: string;
  drainSeconds?: string;
  runtimesDir?: string;
  appPidsMax?: string;
  appCpuCores?: string;
  buildRegistry?: string;
  buildEnv?: string;
  kubeconfig?: string;
  k8sIngressClass?: string;
  k8sStorageClass?: string;
  k8sNamespacePrefix?: string;
  k8sIngressNamespace?: string;
  k8sImageNodejs?: string;
  k8sImagePhp?: string;
  k8sImageFetch?: string;
  upcloudApiUrl?: string;
  upcloudUsername?: string;
  upcloudPassword?: string;
  upcloudZone?: string;
  s3UpstreamUrl?: string;
  s3UpstreamRegion?: string;
  s3UpstreamBucket?: string;
  s3UpstreamAccessKeyId?: string;
  s3UpstreamSecretAccessKey?: string;
  backupSchedule?: string;
  backupTo?: string;
  backupPassphrase?: string;
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
  logFormat: {
    env: 'BERTH_LOG_FORMAT',
    flag: 'log-format',
    doc: 'pretty|json (default: pretty when stdout is a terminal, json otherwise)',
  },
  rateLimitPerMinute: {
    env: 'BERTH_RATE_LIMIT_PER_MINUTE',
    flag: 'rate-limit',
    doc: 'requests per minute per credential, 0 = off (default 60)',
  },
  auditRetentionDays: {
    env: 'BERTH_AUDIT_RETENTION_DAYS',
    flag: 'audit-retention-days',
    doc: 'days the audit log keeps an entry, 1 to 36500 (default 365)',
  },
  bodyLimitBytes: {
    env: 'BERTH_BODY_LIMIT_BYTES',
    flag: 'body-limit',
    doc: 'largest request body in bytes (default 30 MiB)',
  },
  toolsAllowPrivate: {
    env: 'BERTH_TOOLS_ALLOW_PRIVATE',
    flag: 'tools-allow-private',
    doc: 'comma-separated IPs/CIDRs the tools may fetch, and team webhooks be sent to, although private (default none)',
  },
  trustedProxies: {
    env: 'BERTH_TRUSTED_PROXIES',
    flag: 'trusted-proxies',
    doc: 'comma-separated IPs/CIDRs of reverse proxies whose X-Forwarded-For names the client (default none)',
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
  metricsAddr: {
    env: 'BERTH_METRICS_ADDR',
    flag: 'metrics-addr',
    doc: 'host:port of a listener of its own serving GET /metrics (Prometheus), without credentials: bind it where only the scraper reaches (default: off; port 0 picks a free port)',
  },
  s3BlockPublicAccess: {
    env: 'BERTH_S3_BLOCK_PUBLIC_ACCESS',
    flag: 's3-block-public-access',
    doc: "true: no bucket of the S3 endpoint may be public: every bucket behaves as if its PublicAccessBlock had all four settings on, and a bucket's own settings cannot loosen that (default false)",
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
  quotaTeamMemory: {
    env: 'BERTH_QUOTA_TEAM_MEMORY',
    flag: 'quota-team-memory',
    doc: "memory of all of one team's applications together: memory × (replicas + workers) plus each service's memory (default 64Gi)",
  },
  maxAppMemory: {
    env: 'BERTH_MAX_APP_MEMORY',
    flag: 'max-app-memory',
    doc: 'memory one replica, worker or service may ask (settings.memory, a service memory; default 4Gi)',
  },
  managedDatabaseDriver: {
    env: 'BERTH_MANAGED_DATABASE_DRIVER',
    flag: 'managed-database-driver',
    doc: "what runs managed databases: local (PostgreSQL, MariaDB and Valkey servers on this machine; default) or upcloud (UpCloud's Managed Database API, BERTH_UPCLOUD_*)",
  },
  upcloudApiUrl: {
    env: 'BERTH_UPCLOUD_API_URL',
    flag: 'upcloud-api-url',
    doc: "UpCloud's API for the upcloud managed-database driver (default https://api.upcloud.com)",
  },
  upcloudUsername: {
    env: 'BERTH_UPCLOUD_USERNAME',
    flag: 'upcloud-username',
    doc: 'API user of the upcloud managed-database driver (required with it)',
  },
  upcloudPassword: {
    env: 'BERTH_UPCLOUD_PASSWORD',
    flag: 'upcloud-password',
    doc: "that API user's password (required with the upcloud driver)",
  },
  upcloudZone: {
    env: 'BERTH_UPCLOUD_ZONE',
    flag: 'upcloud-zone',
    doc: 'zone new managed databases are made in on UpCloud, such as fi-hel2 (required with the upcloud driver)',
  },
  objectStorageDriver: {
    env: 'BERTH_OBJECT_STORAGE_DRIVER',
    flag: 'object-storage-driver',
    doc: "what holds object storage: local (Berth's S3 endpoint on the data dir; default) or s3 (Berth's S3 endpoint, the bytes in an upstream bucket: BERTH_S3_UPSTREAM_*)",
  },
  runtimeDriver: {
    env: 'BERTH_RUNTIME_DRIVER',
    flag: 'runtime-driver',
    doc: 'what runs applications: local (sandboxed processes on this machine behind the edge proxy; default) or kubernetes (a cluster, BERTH_KUBECONFIG)',
  },
  serviceDriver: {
    env: 'BERTH_SERVICE_DRIVER',
    flag: 'service-driver',
    doc: "what runs applications' services that are not databases (rabbitmq, sftp, chrome-headless, gotenberg, minio): local (on this machine; default)",
  },
  toolsDriver: {
    env: 'BERTH_TOOLS_DRIVER',
    flag: 'tools-driver',
    doc: "what runs the tools' engines: local (Chromium, LibreOffice and pdf-lib on this machine; default)",
  },
  artifactStore: {
    env: 'BERTH_ARTIFACT_STORE',
    flag: 'artifact-store',
    doc: "where uploaded sources are kept and fetched from by signed URL: local (files under the data dir's artifacts/; default) or s3 (the upstream bucket of BERTH_S3_UPSTREAM_*, keys under artifacts/, presigned URLs)",
  },
  edgePort: {
    env: 'BERTH_EDGE_PORT',
    flag: 'edge-port',
    doc: 'TCP port of the edge proxy that serves applications by Host (default 8000; 0 = any free port)',
  },
  edgeTlsPort: {
    env: 'BERTH_EDGE_TLS_PORT',
    flag: 'edge-tls-port',
    doc: 'TCP port of the edge proxy over TLS, certificates from <data dir>/certs (default: no TLS)',
  },
  edgeProxy: {
    env: 'BERTH_EDGE_PROXY',
    flag: 'edge-proxy',
    doc: "data plane of the edge proxy: node (in Berth's process; default) or haproxy (HAProxy 2.6 started and fed by Berth)",
  },
  appNetwork: {
    env: 'BERTH_APP_NETWORK',
    flag: 'app-network',
    doc: "applications' network: namespace (as root, one network namespace per application; default) or host (the host's network, as without root)",
  },
  appsDomain: {
    env: 'BERTH_APPS_DOMAIN',
    flag: 'apps-domain',
    doc: 'every application is also served at <name>-<id>.<this domain> (default localhost)',
  },
  deploymentTimeout: {
    env: 'BERTH_DEPLOYMENT_TIMEOUT',
    flag: 'deployment-timeout',
    doc: 'seconds after which an unfinished deployment is failed (default 600)',
  },
  gitBaseUrl: {
    env: 'BERTH_GIT_BASE_URL',
    flag: 'git-base-url',
    doc: 'where repository owner/name is fetched from (default https://github.com)',
  },
  sourcesAllowPrivate: {
    env: 'BERTH_SOURCES_ALLOW_PRIVATE',
    flag: 'sources-allow-private',
    doc: 'comma-separated IPs/CIDRs a repository URL may name although private (default none)',
  },
  sourcesAllowFileUrls: {
    env: 'BERTH_SOURCES_ALLOW_FILE_URLS',
    flag: 'sources-allow-file-urls',
    doc: 'true: file:// repository URLs are fetched (default false)',
  },
  healthInterval: {
    env: 'BERTH_HEALTH_INTERVAL',
    flag: 'health-interval',
    doc: "seconds between a live replica's health checks (default 10)",
  },
  healthTimeout: {
    env: 'BERTH_HEALTH_TIMEOUT',
    flag: 'health-timeout',
    doc: 'seconds a health check waits for its answer (default 5)',
  },
  healthFailureThreshold: {
    env: 'BERTH_HEALTH_FAILURE_THRESHOLD',
    flag: 'health-failure-threshold',
    doc: 'failed checks in a row after which a replica is restarted (default 3)',
  },
  drainSeconds: {
    env: 'BERTH_DRAIN_SECONDS',
    flag: 'drain-seconds',
    doc: 'seconds an old replica may finish its requests after SIGTERM before SIGKILL (default 30)',
  },
  runtimesDir: {
    env: 'BERTH_RUNTIMES_DIR',
    flag: 'runtimes-dir',
    doc: 'where Node.js runtimes are downloaded once, shareable between Berths (default <data dir>/runtimes)',
  },
  appPidsMax: {
    env: 'BERTH_APP_PIDS_MAX',
    flag: 'app-pids-max',
    doc: 'most processes and threads of one application at once, all its sandboxes together (default 512)',
  },
  appCpuCores: {
    env: 'BERTH_APP_CPU_CORES',
    flag: 'app-cpu-cores',
    doc: 'most CPU one application uses, in cores such as 1.5; 0: no cap (default: the cores less one, at least 1)',
  },
  buildRegistry: {
    env: 'BERTH_BUILD_REGISTRY',
    flag: 'build-registry',
    doc: "npm registry (or mirror) builds install from (default: the host's npm registry)",
  },
  buildEnv: {
    env: 'BERTH_BUILD_ENV',
    flag: 'build-env',
    doc: 'variables for every build command, NAME=value separated by spaces, such as HTTPS_PROXY=http://proxy:3128',
  },
  kubeconfig: {
    env: 'BERTH_KUBECONFIG',
    flag: 'kubeconfig',
    doc: "kubeconfig file of the kubernetes runtime driver's cluster (default: KUBECONFIG, else the pod's service account)",
  },
  k8sIngressClass: {
    env: 'BERTH_K8S_INGRESS_CLASS',
    flag: 'k8s-ingress-class',
    doc: "ingress class of the applications' Ingresses (default: the cluster's default class)",
  },
  k8sStorageClass: {
    env: 'BERTH_K8S_STORAGE_CLASS',
    flag: 'k8s-storage-class',
    doc: "storage class of the applications' volumes (default: the cluster's default class)",
  },
  k8sNamespacePrefix: {
    env: 'BERTH_K8S_NAMESPACE_PREFIX',
    flag: 'k8s-namespace-prefix',
    doc: "each application's namespace is <prefix>app-<id> (default berth-)",
  },
  k8sIngressNamespace: {
    env: 'BERTH_K8S_INGRESS_NAMESPACE',
    flag: 'k8s-ingress-namespace',
    doc: 'namespace of the ingress controller, the only other one admitted to the applications (default ingress-nginx)',
  },
  k8sImageNodejs: {
    env: 'BERTH_K8S_IMAGE_NODEJS',
    flag: 'k8s-image-nodejs',
    doc: 'image of Node.js pods, {version} the major (default node:{version}-bookworm-slim)',
  },
  k8sImagePhp: {
    env: 'BERTH_K8S_IMAGE_PHP',
    flag: 'k8s-image-php',
    doc: 'image of PHP pods, {version} the PHP version (default php:{version}-apache)',
  },
  k8sImageFetch: {
    env: 'BERTH_K8S_IMAGE_FETCH',
    flag: 'k8s-image-fetch',
    doc: 'image of the init container that fetches a release into the pod (default alpine:3.20)',
  },
  s3UpstreamUrl: {
    env: 'BERTH_S3_UPSTREAM_URL',
    flag: 's3-upstream-url',
    doc: 'endpoint of the S3 service the s3 object-storage driver keeps object bytes in (and the s3 artifact store its artifacts), such as https://s3.eu-central-1.amazonaws.com',
  },
  s3UpstreamRegion: {
    env: 'BERTH_S3_UPSTREAM_REGION',
    flag: 's3-upstream-region',
    doc: 'region requests to the upstream S3 service are signed for (default us-east-1)',
  },
  s3UpstreamBucket: {
    env: 'BERTH_S3_UPSTREAM_BUCKET',
    flag: 's3-upstream-bucket',
    doc: 'bucket of the upstream S3 service that holds the object bytes (keys under objects/) and the artifacts of the s3 artifact store (under artifacts/)',
  },
  s3UpstreamAccessKeyId: {
    env: 'BERTH_S3_UPSTREAM_ACCESS_KEY_ID',
    flag: 's3-upstream-access-key-id',
    doc: 'access key id for the upstream bucket',
  },
  s3UpstreamSecretAccessKey: {
    env: 'BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY',
    flag: 's3-upstream-secret-access-key',
    doc: 'secret access key for the upstream bucket',
  },
  backupSchedule: {
    env: 'BERTH_BACKUP_SCHEDULE',
    flag: 'backup-schedule',
    doc: 'take a backup every day at HH:MM (UTC) or every N hours/minutes (6h, 30m; at least 5m) to BERTH_BACKUP_TO (default: none)',
  },
  backupTo: {
    env: 'BERTH_BACKUP_TO',
    flag: 'backup-to',
    doc: 'where scheduled backups go: an absolute directory or s3://bucket/prefix (with BERTH_S3_UPSTREAM_URL and its keys)',
  },
  backupPassphrase: {
    env: 'BERTH_BACKUP_PASSPHRASE',
    flag: 'backup-passphrase',
    doc: 'passphrase the secret key is sealed with in backups (berth admin backup/restore read it from here, else from stdin)',
  },
};

/** Names BERTH_BUILD_ENV may set: upper case, and none Berth sets itself for the sandbox. */
const BUILD_ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;
const BUILD_ENV_RESERVED = ['PATH', 'HOME', 'BERTH_APP_NAME'];

/** A DNS label (RFC 1123): a namespace or ingress class name. */
const DNS_LABEL = /^(?=.{1,63}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
/** A DNS subdomain (RFC 1123): a storage class name. */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;
/**
 * An image reference as the distribution spec writes it: `[registry[:port]/]path[:tag][@sha256:…]`,
 * `{version}` standing for part of the tag. It reaches pod specs only, but nothing in it may read as
 * an option or hold a space.
 */
const IMAGE_REFERENCE = new RegExp(
  String.raw`^(?=.{1,255}$)` +
    String.raw`(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]{1,5})?/)?` +
    String.raw`[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*` +
    String.raw`(?::(?:[\w]|\{version\})(?:[\w.-]|\{version\}){0,127})?(?:@sha256:[a-f0-9]{64})?$`,
);
/** A namespace prefix: `<prefix>app-<id>` stays a DNS label whatever the id. */
const NAMESPACE_PREFIX = /^[a-z][a-z0-9-]{0,19}$/;

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

  const list = (key: keyof ConfigOverrides): string[] =>
    (raw(key) ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  /** A list of IPs and CIDRs (`10.0.0.0/8`, `::1`), each checked. */
  const addresses = (key: keyof ConfigOverrides): string[] => {
    const items = list(key);
    const bad = items.filter((item) => !isAddressOrCidr(item));
    if (bad.length > 0)
      problems.push(
        `${CONFIG_VARIABLES[key].env} must be comma-separated IP addresses or CIDRs (10.0.0.0/8), got '${bad.join("', '")}'`,
      );
    return items.filter(isAddressOrCidr);
  };
  const boolean = (key: keyof ConfigOverrides, fallback: boolean): boolean => {
    const value = raw(key);
    if (value === undefined) return fallback;
    if (['true', '1', 'yes'].includes(value)) return true;
    if (['false', '0', 'no'].includes(value)) return false;
    problems.push(`${CONFIG_VARIABLES[key].env} must be true or false, got '${value}'`);
    return fallback;
  };
  /** A memory size as documents write it (`4Gi`, `512Mi`), in MiB. */
  const memorySize = (key: keyof ConfigOverrides, fallbackMiB: number): number => {
    const value = raw(key);
    if (value === undefined) return fallbackMiB;
    const match = /^([1-9][0-9]{0,6})(Mi|Gi)$/.exec(value);
    if (!match) {
      problems.push(
        `${CONFIG_VARIABLES[key].env} must be a memory size with unit suffix Mi or Gi, such as 4Gi or 512Mi, got '${value}'`,
      );
      return fallbackMiB;
    }
    return Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1);
  };
  const hostName = (key: keyof ConfigOverrides, fallback: string): string => {
    const value = (raw(key) ?? fallback).toLowerCase();
    if (!/^(?=.{1,200}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(value)) {
      problems.push(
        `${CONFIG_VARIABLES[key].env} must be a host name such as apps.example.com, got '${value}'`,
      );
      return fallback;
    }
    return value;
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

  const logFormat = raw('logFormat');
  if (logFormat !== undefined && logFormat !== 'pretty' && logFormat !== 'json')
    problems.push(`BERTH_LOG_FORMAT must be one of pretty, json, got '${logFormat}'`);

  const driver = <F extends keyof typeof DRIVERS>(family: F, key: keyof ConfigOverrides): DriverChoice[F] => {
    const offered: readonly string[] = DRIVERS[family];
    const value = raw(key) ?? offered[0]!;
    if (!offered.includes(value))
      problems.push(`${CONFIG_VARIABLES[key].env} must be one of ${offered.join(', ')}, got '${value}'`);
    return (offered.includes(value) ? value : offered[0]) as DriverChoice[F];
  };

  /** Cores as `2` or `1.5` (hundredths at most); 0 means no cap. */
  const cores = (key: keyof ConfigOverrides, fallback: number): number | undefined => {
    const value = raw(key);
    if (value === undefined) return fallback;
    const n = Number(value);
    if (!/^\d{1,4}(\.\d{1,2})?$/.test(value) || n > 4096) {
      problems.push(
        `${CONFIG_VARIABLES[key].env} must be a number of cores from 0 to 4096 such as 1.5, got '${value}'`,
      );
      return fallback;
    }
    return n === 0 ? undefined : n;
  };

  /** `NAME=value NAME2=value2` (values hold no spaces: proxies, URLs, NO_PROXY lists). */
  const buildEnv = (): Record<string, string> => {
    const env: Record<string, string> = {};
    const bad: string[] = [];
    for (const entry of (raw('buildEnv') ?? '').split(/\s+/).filter(Boolean)) {
      const at = entry.indexOf('=');
      const name = at > 0 ? entry.slice(0, at) : entry;
      if (at <= 0 || !BUILD_ENV_NAME.test(name) || BUILD_ENV_RESERVED.includes(name)) bad.push(entry);
      else env[name] = entry.slice(at + 1);
    }
    if (bad.length > 0)
      problems.push(
        `BERTH_BUILD_ENV must be NAME=value entries separated by spaces, names matching [A-Z_][A-Z0-9_]* other than ${BUILD_ENV_RESERVED.join(', ')}, got '${bad.join("', '")}'`,
      );
    return env;
  };

  /** `host:port` (`[::1]:9100` for IPv6), the host an IP address or localhost. */
  const listenAddress = (key: keyof ConfigOverrides): { host: string; port: number } | undefined => {
    const value = raw(key);
    if (value === undefined) return undefined;
    const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]+)):([0-9]{1,5})$/.exec(value);
    const host = match?.[1] ?? match?.[2];
    const port = Number(match?.[3]);
    if (
      host === undefined ||
      (host !== 'localhost' && !ipaddr.isValid(host)) ||
      (match?.[1] !== undefined && !host.includes(':')) ||
      port > 65535
    ) {
      problems.push(
        `${CONFIG_VARIABLES[key].env} must be host:port with an IP address (or localhost) and a port from 0 to 65535, such as 127.0.0.1:9464 or [::1]:9464, got '${value}'`,
      );
      return undefined;
    }
    return { host, port };
  };

  const edgeProxyChoice = (): 'node' | 'haproxy' => {
    const value = raw('edgeProxy') ?? 'haproxy';
    if (value === 'node' || value === 'haproxy') return value;
    problems.push(`BERTH_EDGE_PROXY must be one of haproxy, node, got '${value}'`);
    return 'haproxy';
  };

  const appNetworkChoice = (): 'namespace' | 'host' => {
    const value = raw('appNetwork') ?? 'namespace';
    if (value === 'namespace' || value === 'host') return value;
    problems.push(`BERTH_APP_NETWORK must be one of namespace, host, got '${value}'`);
    return 'namespace';
  };

  /** A name the cluster checks as `pattern`, optional or with a default. */
  const clusterName = (
    key: keyof ConfigOverrides,
    pattern: RegExp,
    accepted: string,
    fallback?: string,
  ): string | undefined => {
    const value = raw(key) ?? fallback;
    if (value === undefined || pattern.test(value)) return value;
    problems.push(`${CONFIG_VARIABLES[key].env} must be ${accepted}, got '${value}'`);
    return fallback;
  };
  const image = (key: keyof ConfigOverrides, fallback: string): string =>
    clusterName(
      key,
      IMAGE_REFERENCE,
      'an image reference such as registry.example:5000/node:{version}-bookworm-slim (no spaces, no leading -)',
      fallback,
    )!;

  const kubernetes = (): KubernetesSettings => {
    // KUBECONFIG may list several files (kubectl merges them): Berth takes the first.
    const file = raw('kubeconfig') ?? env.KUBECONFIG?.split(path.delimiter).find(Boolean);
    return {
      kubeconfig: file === undefined ? undefined : path.resolve(file),
      ingressClass: clusterName(
        'k8sIngressClass',
        DNS_LABEL,
        "a DNS label (lower-case letters, digits and '-', at most 63)",
      ),
      storageClass: clusterName(
        'k8sStorageClass',
        DNS_SUBDOMAIN,
        "a DNS subdomain (lower-case letters, digits, '-' and '.', at most 253)",
      ),
      namespacePrefix: clusterName(
        'k8sNamespacePrefix',
        NAMESPACE_PREFIX,
        "a letter, then lower-case letters, digits and '-', at most 20 in all",
        'berth-',
      )!,
      ingressNamespace: clusterName(
        'k8sIngressNamespace',
        DNS_LABEL,
        "a namespace name (lower-case letters, digits and '-', at most 63)",
        'ingress-nginx',
      )!,
      images: Object.freeze({
        nodejs: image('k8sImageNodejs', 'node:{version}-bookworm-slim'),
        php: image('k8sImagePhp', 'php:{version}-apache'),
        fetch: image('k8sImageFetch', 'alpine:3.20'),
      }),
    };
  };

  // The upcloud driver's settings, checked only when it is chosen; the start then checks them
  // against the API itself (a refused credential or an unknown zone names its variable).
  const upcloud = (chosen: DriverChoice['managedDatabases']): UpCloudSettings | undefined => {
    if (chosen !== 'upcloud') return undefined;
    const apiUrl = (raw('upcloudApiUrl') ?? 'https://api.upcloud.com').replace(/\/+$/, '');
    if (!isHttpUrl(apiUrl)) problems.push(`BERTH_UPCLOUD_API_URL must be an http(s) URL, got '${apiUrl}'`);
    const required = (key: 'upcloudUsername' | 'upcloudPassword'): string => {
      const value = raw(key);
      if (value === undefined)
        problems.push(`${CONFIG_VARIABLES[key].env} is required with BERTH_MANAGED_DATABASE_DRIVER=upcloud`);
      return value ?? '';
    };
    const username = required('upcloudUsername');
    const password = required('upcloudPassword');
    const zone = raw('upcloudZone');
    if (zone === undefined)
      problems.push('BERTH_UPCLOUD_ZONE is required with BERTH_MANAGED_DATABASE_DRIVER=upcloud');
    else if (!/^[a-z]{2}-[a-z]{3,4}[0-9]{0,2}$/.test(zone))
      problems.push(`BERTH_UPCLOUD_ZONE must be a zone name such as fi-hel2, got '${zone}'`);
    return { apiUrl, username, password, zone: zone ?? '' };
  };
  const managedDatabasesDriver = driver('managedDatabases', 'managedDatabaseDriver');
  const upcloudSettings = upcloud(managedDatabasesDriver);
  /** The upstream of the s3 object-storage driver: every setting it needs, checked together. */
  const s3Upstream = (chosenBy: string): S3UpstreamSettings | undefined => {
    const value = (key: keyof ConfigOverrides): string => {
      const v = raw(key);
      if (v === undefined) problems.push(`${CONFIG_VARIABLES[key].env} is required with ${chosenBy}`);
      return v ?? '';
    };
    const settings = {
      url: value('s3UpstreamUrl').replace(/\/+$/, ''),
      region: raw('s3UpstreamRegion') ?? 'us-east-1',
      bucket: value('s3UpstreamBucket'),
      accessKeyId: value('s3UpstreamAccessKeyId'),
      secretAccessKey: value('s3UpstreamSecretAccessKey'),
    };
    if (raw('s3UpstreamUrl') !== undefined && !isHttpUrl(settings.url))
      problems.push(`BERTH_S3_UPSTREAM_URL must be an http(s) URL, got '${settings.url}'`);
    if (!/^[a-z0-9-]{1,64}$/.test(settings.region))
      problems.push(
        `BERTH_S3_UPSTREAM_REGION must be a region name (lower-case letters, digits and '-'), got '${settings.region}'`,
      );
    if (raw('s3UpstreamBucket') !== undefined && !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(settings.bucket))
      problems.push(
        `BERTH_S3_UPSTREAM_BUCKET must be an S3 bucket name (3-63 lower-case letters, digits, '.' and '-'), got '${settings.bucket}'`,
      );
    return settings;
  };

  // What needs the upstream S3 settings (named in the error when one is missing).
  const upstreamChosenBy = [
    ...(raw('objectStorageDriver') === 's3' ? ['BERTH_OBJECT_STORAGE_DRIVER=s3'] : []),
    ...(raw('artifactStore') === 's3' ? ['BERTH_ARTIFACT_STORE=s3'] : []),
  ];
  const backup = (): BackupSettings | undefined => {
    const text = raw('backupSchedule');
    if (text === undefined) return undefined;
    let schedule: BackupSettings['schedule'] | undefined;
    const daily = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(text);
    const every = /^(\d{1,4})(h|m)$/.exec(text);
    if (daily) schedule = { dailyAt: { hour: Number(daily[1]), minute: Number(daily[2]) } };
    else if (every) {
      const minutes = Number(every[1]) * (every[2] === 'h' ? 60 : 1);
      if (minutes >= 5 && minutes <= 7 * 24 * 60) schedule = { everyMinutes: minutes };
    }
    if (!schedule)
      problems.push(
        `BERTH_BACKUP_SCHEDULE must be a daily time HH:MM (UTC) or an interval such as 6h or 30m (5m to 168h), got '${text}'`,
      );
    const to = raw('backupTo');
    if (to === undefined) problems.push('BERTH_BACKUP_TO is required with BERTH_BACKUP_SCHEDULE');
    else if (
      !path.isAbsolute(to) &&
      !/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/[A-Za-z0-9._\-/]*)?$/.test(to)
    )
      problems.push(`BERTH_BACKUP_TO must be an absolute directory or s3://bucket/prefix, got '${to}'`);
    else if (to.startsWith('s3://') && raw('s3UpstreamUrl') === undefined)
      problems.push('BERTH_BACKUP_TO=s3://… needs BERTH_S3_UPSTREAM_URL and its keys');
    const passphrase = raw('backupPassphrase');
    if (!passphrase)
      problems.push('BERTH_BACKUP_PASSPHRASE is required (and not empty) with BERTH_BACKUP_SCHEDULE');
    return { schedule: schedule ?? { everyMinutes: 1440 }, to: to ?? '', passphrase: passphrase ?? '' };
  };
  const backupS3 = (): Omit<S3UpstreamSettings, 'bucket'> | undefined => {
    const url = raw('s3UpstreamUrl');
    if (url === undefined) return undefined;
    return {
      url: url.replace(/\/+$/, ''),
      region: raw('s3UpstreamRegion') ?? 'us-east-1',
      accessKeyId: raw('s3UpstreamAccessKeyId') ?? '',
      secretAccessKey: raw('s3UpstreamSecretAccessKey') ?? '',
    };
  };
  const backupSettings = backup();
  const config: Config = {
    port,
    host,
    dataDir,
    databaseUrl,
    secretKey,
    publicUrl: publicUrl.replace(/\/+$/, ''),
    smtpUrl,
    logLevel: logLevel ?? 'info',
    logFormat: logFormat === 'pretty' || logFormat === 'json' ? logFormat : undefined,
    rateLimitPerMinute: integer('rateLimitPerMinute', 60, 0, 1_000_000_000),
    auditRetentionDays: integer('auditRetentionDays', 365, 1, 36_500),
    bodyLimitBytes: integer('bodyLimitBytes', 30 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    toolsAllowPrivate: list('toolsAllowPrivate'),
    trustedProxies: addresses('trustedProxies'),
    toolsMonthlyCredits: integer('toolsMonthlyCredits', 1000, 0, 1_000_000_000),
    s3Port: integer('s3Port', 9000, 0, 65535),
    metricsAddr: (() => {
      const address = listenAddress('metricsAddr');
      return address && Object.freeze(address);
    })(),
    s3BlockPublicAccess: boolean('s3BlockPublicAccess', false),
    quotas: Object.freeze({
      applications: integer('quotaApplications', 50, 0, 1_000_000),
      domains: integer('quotaDomains', 500, 0, 1_000_000),
      managedDatabases: integer('quotaManagedDatabases', 20, 0, 1_000_000),
      objectStorages: integer('quotaObjectStorages', 20, 0, 1_000_000),
      memoryMiB: memorySize('quotaTeamMemory', 64 * 1024),
      processMemoryMiB: memorySize('maxAppMemory', 4 * 1024),
    }),
    drivers: Object.freeze({
      managedDatabases: managedDatabasesDriver,
      objectStorage: driver('objectStorage', 'objectStorageDriver'),
      runtime: driver('runtime', 'runtimeDriver'),
      services: driver('services', 'serviceDriver'),
      tools: driver('tools', 'toolsDriver'),
      artifacts: driver('artifacts', 'artifactStore'),
    }),
    runtime: Object.freeze({
      edgePort: integer('edgePort', 8000, 0, 65535),
      edgeTlsPort: raw('edgeTlsPort') === undefined ? undefined : integer('edgeTlsPort', 0, 0, 65535),
      edgeProxy: edgeProxyChoice(),
      appNetwork: appNetworkChoice(),
      appsDomain: hostName('appsDomain', 'localhost'),
      deploymentTimeoutSeconds: integer('deploymentTimeout', 600, 10, 24 * 3600),
      gitBaseUrl: (raw('gitBaseUrl') ?? 'https://github.com').replace(/\/+$/, ''),
      sourcesAllowPrivate: list('sourcesAllowPrivate'),
      sourcesAllowFileUrls: boolean('sourcesAllowFileUrls', false),
      healthIntervalSeconds: integer('healthInterval', 10, 1, 3600),
      healthTimeoutSeconds: integer('healthTimeout', 5, 1, 600),
      healthFailureThreshold: integer('healthFailureThreshold', 3, 1, 100),
      drainSeconds: integer('drainSeconds', 30, 0, 3600),
      runtimesDir: path.resolve(raw('runtimesDir') ?? path.join(dataDir, 'runtimes')),
      appPidsMax: integer('appPidsMax', 512, 16, 4_194_304),
      // One core is left to Berth, its databases and the other applications whatever one does.
      appCpuCores: cores('appCpuCores', Math.max(1, os.availableParallelism() - 1)),
      buildRegistry: raw('buildRegistry')?.replace(/\/*$/, '/'),
      buildEnv: Object.freeze(buildEnv()),
    }),
    kubernetes: Object.freeze(kubernetes()),
    upcloud: upcloudSettings && Object.freeze(upcloudSettings),
    // Needed by the s3 object-storage driver and the s3 artifact store only: the others ignore them.
    s3Upstream:
      upstreamChosenBy.length > 0 ? Object.freeze(s3Upstream(upstreamChosenBy.join(' or '))) : undefined,
    backup:
      backupSettings &&
      Object.freeze({ ...backupSettings, schedule: Object.freeze(backupSettings.schedule) }),
    backupS3: backupS3(),
    backupPassphrase: raw('backupPassphrase'),
  };
  if (!isHttpUrl(config.runtime.gitBaseUrl))
    problems.push(`BERTH_GIT_BASE_URL must be an http(s) URL, got '${config.runtime.gitBaseUrl}'`);
  const registry = config.runtime.buildRegistry;
  if (registry !== undefined && !isHttpUrl(registry))
    problems.push(`BERTH_BUILD_REGISTRY must be an http(s) URL, got '${registry}'`);
  // The kubernetes driver cannot start without a cluster to talk to: said at start, not at first deploy.
  if (config.drivers.runtime === 'kubernetes') {
    const file = config.kubernetes.kubeconfig;
    if (file !== undefined && !isFile(file))
      problems.push(`BERTH_KUBECONFIG must name a kubeconfig file, '${file}' is none`);
    else if (file === undefined && !env.KUBERNETES_SERVICE_HOST)
      problems.push(
        'BERTH_RUNTIME_DRIVER=kubernetes needs a cluster: set BERTH_KUBECONFIG (or KUBECONFIG) to a kubeconfig file, or run Berth in a pod with a service account (KUBERNETES_SERVICE_HOST)',
      );
  }
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

function isAddressOrCidr(text: string): boolean {
  if (ipaddr.isValid(text)) return true;
  try {
    ipaddr.parseCIDR(text);
    return true;
  } catch {
    return false;
  }
}

function isFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

function isHttpUrl(text: string): boolean {
  try {
    const url = new URL(text);
    return url.protocol === 'http:' || url.protocol === 'https:';
  } catch {
    return false;
  }
}
