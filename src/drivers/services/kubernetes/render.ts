// What an application's service becomes on Kubernetes (issue 28 item 5, docs/runtime.md "Container
// services on Kubernetes"): a Secret with its credentials, a headless Service and a one-replica
// StatefulSet of the engine's official image, all named `svc-<name>` in the application's namespace.
// Pure: the Kubernetes service runner (index.ts) applies the objects and reports `host`/`port`/`extra`,
// which give the application the same names as the local runners give (src/domain/app-services.ts).
import { createHash } from 'node:crypto';
import { DEFAULT_SERVICE_DATABASE, derivedBucket } from '../../../domain/app-services.js';
import {
  CONTAINER_SERVICE_TYPES,
  type ContainerServiceType,
} from '../../../domain/infrastructure/document.js';
import {
  checkName,
  componentLabels,
  LABEL_APPLICATION,
  LABEL_NAME,
  LABEL_SERVICE_INSTANCE,
  memoryQuantity,
  secretData,
  storageQuantity,
  type KubeObject,
} from '../../kubernetes/objects.js';
import { gotenbergToken } from '../gotenberg/index.js';
import { vhostOf } from '../rabbitmq/broker.js';
import type { ServiceSpec } from '../types.js';

/** The service types the Kubernetes runner runs. */
export const KUBERNETES_SERVICE_TYPES = [
  'postgresql',
  'mysql',
  'redis',
  'valkey',
  'rabbitmq',
  'minio',
  'meilisearch',
  'clickhouse',
  'gotenberg',
  'chrome-headless',
] as const;
export type KubernetesServiceType = (typeof KUBERNETES_SERVICE_TYPES)[number];

/** The service types the Kubernetes runner does not run, and why (`worker` is the runtime's). */
export function kubernetesUnsupportedServices(): Array<{ type: string; reason: string }> {
  return [
    {
      type: 'sftp',
      reason:
        "sftp works on the application's volume as files on one host; on Kubernetes the volume is a PersistentVolumeClaim mounted in the application's pods, and an sftp pod mounting it is not built yet",
    },
  ];
}

export interface ServiceRenderOptions {
  /** The application's namespace (`namespaceOf`). */
  namespace: string;
  /** The labels' team; the spec's own (`spec.teamId`) when omitted. */
  teamId?: number;
  /** The PVCs' `storageClassName` when set. */
  storageClass?: string;
  /**
   * Images instead of the defaults, by type (a registry mirror, a pinned tag). A container service's
   * document `version` is the tag of whichever image it runs.
   */
  images?: Partial<Record<KubernetesServiceType, string>>;
}

export interface RenderedService {
  /** In apply order: Secret, Service, StatefulSet. */
  objects: KubeObject[];
  /** `svc-<name>`: the headless Service's name, resolved in the application's namespace. */
  host: string;
  port: number;
  /** The image's tag. */
  version: string;
  /** As the local runners give it (ServiceRuntime.extra). */
  extra: Record<string, string>;
}

/** The region S3 clients are told (as the local minio service's, src/services/app-services/minio.ts). */
const MINIO_REGION = 'us-east-1';
/** What a container service's setting must be named to be an environment variable. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** An S3 bucket name MinIO accepts. */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
/** The user names that reach a command line (redis ACL) and environments. */
const USER_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$/;

type EnvVar =
  | { name: string; value: string }
  | { name: string; valueFrom: { secretKeyRef: { name: string; key: string } } };
type Probe = { tcpSocket: { port: number } } | { httpGet: { path: string; port: number; scheme: 'HTTP' } };

interface Engine {
  image: string;
  port: number;
  /** More ports of the Service (clickhouse's native protocol). */
  morePorts?: Array<{ name: string; port: number }>;
  /** Where its data volume is mounted; none: no volume. */
  dataPath?: string;
  /** The Secret's keys beyond `password`. */
  secrets?: Record<string, string>;
  env: EnvVar[];
  command?: string[];
  args?: string[];
  probe: Probe;
  extra: Record<string, string>;
  /** Whether the image starts as root and steps down itself (it then keeps its default capabilities). */
  stepsDown: boolean;
}

const tcp = (port: number): Probe => ({ tcpSocket: { port } });
const http = (path: string, port: number): Probe => ({ httpGet: { path, port, scheme: 'HTTP' } });

/** A derived secret (a second password the engine needs): stable, so a re-apply changes nothing. */
const derived = (purpose: string, password: string): string =>
  createHash('sha256').update(`${purpose}\0${password}`).digest('base64url');

function databaseOf(spec: ServiceSpec): string {
  return typeof spec.settings.database === 'string' ? spec.settings.database : DEFAULT_SERVICE_DATABASE;
}

/** The container's environment from a container service's `settings` (docs/services.md). */
function settingsEnv(spec: ServiceSpec, reserved: readonly string[]): EnvVar[] {
  return Object.entries(spec.settings).map(([name, value]) => {
    if (!ENV_NAME.test(name))
      throw new Error(
        `${spec.name}: setting '${name}' is not an environment variable name (letters, digits and _, not starting with a digit)`,
      );
    if (reserved.includes(name)) throw new Error(`${spec.name}: setting '${name}' is set by Berth`);
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
      throw new Error(`${spec.name}: setting '${name}' must be a string, a number or a boolean`);
    return { name, value: String(value) };
  });
}

function engineOf(spec: ServiceSpec, secretName: string, host: string): Engine {
  const fromSecret = (name: string, key = 'password'): EnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: secretName, key } },
  });
  const user = spec.username;
  switch (spec.type as KubernetesServiceType) {
    case 'postgresql':
      return {
        image: 'postgres:16',
        port: 5432,
        dataPath: '/var/lib/postgresql/data',
        env: [
          { name: 'POSTGRES_USER', value: user },
          fromSecret('POSTGRES_PASSWORD'),
          { name: 'POSTGRES_DB', value: databaseOf(spec) },
          // A directory below the mount: a new volume's root is not empty (lost+found).
          { name: 'PGDATA', value: '/var/lib/postgresql/data/pgdata' },
        ],
        probe: tcp(5432),
        extra: {},
        stepsDown: true,
      };
    case 'mysql':
      return {
        image: 'mysql:8.4',
        port: 3306,
        dataPath: '/var/lib/mysql',
        secrets: { 'root-password': derived('mysql-root', spec.password) },
        env: [
          { name: 'MYSQL_USER', value: user },
          fromSecret('MYSQL_PASSWORD'),
          { name: 'MYSQL_DATABASE', value: databaseOf(spec) },
          fromSecret('MYSQL_ROOT_PASSWORD', 'root-password'),
        ],
        probe: tcp(3306),
        extra: {},
        stepsDown: true,
      };
    case 'redis':
    case 'valkey': {
      // The password comes from the Secret through Kubernetes' $(VAR) expansion, never in the spec.
      // `requirepass` is the default user's; the application connects as its own user (REDIS_URL
      // carries it, as locally), which the ACL rule makes with the same password and every right.
      const server = spec.type === 'redis' ? 'redis-server' : 'valkey-server';
      return {
        image: spec.type === 'redis' ? 'redis:7' : 'valkey/valkey:8',
        port: 6379,
        dataPath: '/data',
        env: [fromSecret('REDIS_PASSWORD')],
        // Arguments only: the image's entrypoint steps down to its own account for `<engine>-server`.
        args: [
          server,
          '--requirepass',
          '$(REDIS_PASSWORD)',
          '--user',
          user,
          'on',
          '>$(REDIS_PASSWORD)',
          '~*',
          '&*',
          '+@all',
          '--appendonly',
          'yes',
          '--dir',
          '/data',
        ],
        probe: tcp(6379),
        extra: {},
        stepsDown: true,
      };
    }
    case 'rabbitmq': {
      const vhost = vhostOf(spec);
      return {
        image: 'rabbitmq:3.13',
        port: 5672,
        dataPath: '/var/lib/rabbitmq',
        env: [
          { name: 'RABBITMQ_DEFAULT_USER', value: user },
          fromSecret('RABBITMQ_DEFAULT_PASS'),
          { name: 'RABBITMQ_DEFAULT_VHOST', value: vhost },
        ],
        probe: tcp(5672),
        extra: { vhost },
        stepsDown: true,
      };
    }
    case 'minio': {
      const asked = spec.settings.bucket;
      const bucket = typeof asked === 'string' && BUCKET_NAME.test(asked) ? asked : derivedBucket(spec);
      return {
        image: 'minio/minio',
        port: 9000,
        dataPath: '/data',
        env: [
          { name: 'MINIO_ROOT_USER', value: user },
          fromSecret('MINIO_ROOT_PASSWORD'),
          { name: 'BUCKET', value: bucket },
        ],
        // A top-level directory of the data path is a bucket to MinIO: the bucket exists from the
        // start. The name reaches the script through the environment only.
        command: ['/bin/sh', '-c', 'mkdir -p "/data/$BUCKET" && exec minio server /data --address :9000'],
        probe: http('/minio/health/ready', 9000),
        extra: { bucket, endpoint: `http://${host}:9000`, region: MINIO_REGION },
        stepsDown: false,
      };
    }
    case 'meilisearch':
      return {
        image: 'getmeili/meilisearch:v1.11',
        port: 7700,
        dataPath: '/meili_data',
        env: [
          ...settingsEnv(spec, ['MEILI_MASTER_KEY', 'MEILI_ENV', 'MEILI_DB_PATH']),
          fromSecret('MEILI_MASTER_KEY'),
          { name: 'MEILI_ENV', value: 'production' },
          { name: 'MEILI_DB_PATH', value: '/meili_data/data.ms' },
        ],
        probe: http('/health', 7700),
        extra: {},
        stepsDown: false,
      };
    case 'clickhouse':
      return {
        image: 'clickhouse/clickhouse-server:24.8',
        port: 8123,
        morePorts: [{ name: 'native', port: 9000 }],
        dataPath: '/var/lib/clickhouse',
        env: [
          ...settingsEnv(spec, ['CLICKHOUSE_USER', 'CLICKHOUSE_PASSWORD', 'CLICKHOUSE_DB']),
          { name: 'CLICKHOUSE_USER', value: user },
          fromSecret('CLICKHOUSE_PASSWORD'),
          { name: 'CLICKHOUSE_DB', value: DEFAULT_SERVICE_DATABASE },
        ],
        probe: http('/ping', 8123),
        extra: { database: DEFAULT_SERVICE_DATABASE },
        stepsDown: true,
      };
    case 'gotenberg': {
      // As the local runner: the API under a path derived from the password (`/<token>/forms/…`),
      // Gotenberg's own --api-root-path; the token reaches the argument through $(VAR) expansion.
      const token = gotenbergToken(spec.password);
      return {
        image: 'gotenberg/gotenberg:8',
        port: 3000,
        secrets: { 'root-path': `/${token}/` },
        env: [...settingsEnv(spec, ['GOTENBERG_ROOT_PATH']), fromSecret('GOTENBERG_ROOT_PATH', 'root-path')],
        args: ['gotenberg', '--api-root-path=$(GOTENBERG_ROOT_PATH)'],
        // /health is under the token path: a TCP probe keeps the token out of the pod's spec.
        probe: tcp(3000),
        extra: { path: `/${token}` },
        stepsDown: false,
      };
    }
    case 'chrome-headless':
      // DevTools has no authentication, and the local runner's token-checking proxy runs in Berth's
      // process: here the NetworkPolicy (the namespace's own pods only) is what keeps others out.
      return {
        image: 'chromedp/headless-shell',
        port: 9222,
        env: settingsEnv(spec, []),
        probe: tcp(9222),
        extra: {},
        stepsDown: false,
      };
    default:
      throw new Error(
        `service type '${spec.type}' does not run on Kubernetes; it runs: ${KUBERNETES_SERVICE_TYPES.join(', ')}`,
      );
  }
}

/** What a document's `version` must be to be an image tag (Docker's grammar). */
const IMAGE_TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * `image` at tag `version` (a container service's document version; Meilisearch's tags are
 * `v<version>`); unchanged when pinned by digest. An invalid tag is an error naming the service.
 */
function withVersion(spec: ServiceSpec, image: string): string {
  if (spec.version === null || image.includes('@')) return image;
  const tag = spec.type === 'meilisearch' && /^\d/.test(spec.version) ? `v${spec.version}` : spec.version;
  if (!IMAGE_TAG.test(tag))
    throw new Error(
      `${spec.name}: version '${spec.version}' is not an image tag (letters, digits, '_', '.', '-')`,
    );
  const slash = image.lastIndexOf('/');
  const colon = image.indexOf(':', slash + 1);
  return `${colon >= 0 ? image.slice(0, colon) : image}:${tag}`;
}

/** The tag of an image reference (`latest` when it names none). */
function tagOf(image: string): string {
  const last = image.slice(image.lastIndexOf('/') + 1);
  const at = last.indexOf('@');
  if (at >= 0) return last.slice(at + 1);
  const colon = last.indexOf(':');
  return colon >= 0 ? last.slice(colon + 1) : 'latest';
}

/** The objects of one service of an application and where the application reaches it. */
export function renderService(spec: ServiceSpec, o: ServiceRenderOptions): RenderedService {
  const name = checkName(`svc-${spec.name}`, `service '${spec.name}'`);
  if (!USER_NAME.test(spec.username)) throw new Error(`${spec.name}: invalid user name`);
  const engine = engineOf(spec, name, name);
  const configured = o.images?.[spec.type as KubernetesServiceType] ?? engine.image;
  const image = isContainerService(spec.type) ? withVersion(spec, configured) : configured;
  const labels = {
    ...componentLabels(o.teamId ?? spec.teamId, spec.applicationId, name),
    [LABEL_SERVICE_INSTANCE]: spec.id,
  };
  const metadata = { name, namespace: o.namespace, labels };
  const selector = { [LABEL_APPLICATION]: String(spec.applicationId), [LABEL_NAME]: name };
  const ports = [{ name: 'main', port: engine.port }, ...(engine.morePorts ?? [])];
  const memory = memoryQuantity(spec.memoryMiB * 1024 * 1024);

  const secret: KubeObject = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata,
    type: 'Opaque',
    data: secretData({ password: spec.password, ...engine.secrets }),
  };
  const service: KubeObject = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata,
    spec: {
      clusterIP: 'None',
      selector,
      ports: ports.map((p) => ({ name: p.name, port: p.port, targetPort: p.port, protocol: 'TCP' })),
    },
  };
  const statefulSet: KubeObject = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata,
    spec: {
      replicas: 1,
      serviceName: name,
      selector: { matchLabels: selector },
      updateStrategy: { type: 'RollingUpdate' },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          containers: [
            {
              name: 'service',
              image,
              ...(engine.command ? { command: engine.command } : {}),
              ...(engine.args ? { args: engine.args } : {}),
              env: engine.env,
              ports: ports.map((p) => ({ name: p.name, containerPort: p.port, protocol: 'TCP' })),
              resources: { requests: { memory }, limits: { memory } },
              readinessProbe: { ...engine.probe, periodSeconds: 5, timeoutSeconds: 3 },
              securityContext: engine.stepsDown
                ? { allowPrivilegeEscalation: false }
                : { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
              ...(engine.dataPath
                ? // A directory of the volume: its root is not empty (lost+found), which some engines refuse.
                  { volumeMounts: [{ name: 'data', mountPath: engine.dataPath, subPath: 'data' }] }
                : {}),
            },
          ],
        },
      },
      ...(engine.dataPath
        ? {
            volumeClaimTemplates: [
              {
                metadata: { name: 'data', labels },
                spec: {
                  accessModes: ['ReadWriteOnce'],
                  resources: { requests: { storage: storageQuantity(spec.volumeGiB ?? 1) } },
                  ...(o.storageClass ? { storageClassName: o.storageClass } : {}),
                },
              },
            ],
          }
        : {}),
    },
  };
  return {
    objects: [secret, service, statefulSet],
    host: name,
    port: engine.port,
    version: tagOf(image),
    extra: engine.extra,
  };
}

/** Whether `type` is a container service (its settings are its environment). */
export const isContainerService = (type: string): type is ContainerServiceType =>
  (CONTAINER_SERVICE_TYPES as readonly string[]).includes(type);

/** Whether `type` runs on Kubernetes. */
export const runsOnKubernetes = (type: string): type is KubernetesServiceType =>
  (KUBERNETES_SERVICE_TYPES as readonly string[]).includes(type);
