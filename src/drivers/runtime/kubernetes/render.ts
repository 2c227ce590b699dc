// What an application becomes on Kubernetes (issue 28, docs/runtime.md "Kubernetes"): pure functions
// from the desired state (`AppSpec`) to the objects the driver applies with server-side apply. No
// client, no I/O: the driver (index.ts) applies them in the order given and waits on their status.
//
// Releases reach pods as slugs (decision 0013): an init container fetches the release's tar.gz from a
// short-lived URL held in the Secret `release-<release>` and unpacks it into an emptyDir at /app; the
// application's container is a stock image (Node.js, PHP) that runs it from there.
import type { AppSpec } from '../driver.js';
import {
  ANNOTATION_RELEASE,
  APP_PORT,
  baseLabels,
  checkName,
  componentLabels,
  ingressName,
  LABEL_APPLICATION,
  LABEL_NAME,
  LABEL_RELEASE,
  memoryQuantity,
  namespaceObject,
  namespaceOf,
  secretData,
  storageQuantity,
  type KubeObject,
} from '../../kubernetes/objects.js';

export interface KubernetesRenderOptions {
  namespacePrefix: string;
  /** `spec.ingressClassName` of the Ingresses when set (else the cluster's default class). */
  ingressClass?: string;
  /** The PVCs' `storageClassName` when set (else the cluster's default class). */
  storageClass?: string;
  /**
   * Runtime images: `nodejs` and `php` contain `{version}` (`node:{version}-bookworm-slim`,
   * `php:{version}-apache`); `fetch` is the init container's (wget, sha256sum, tar: `alpine:3.20`).
   */
  images: { nodejs: string; php: string; fetch: string };
  /** The Node.js major when the document names none (`22`). */
  defaultNodeMajor: string;
  /** The deployment timeout: `progressDeadlineSeconds`, the init Job's deadline, the startup probe's. */
  deploymentTimeoutSeconds: number;
  /** The ingress controller's namespace, admitted by the NetworkPolicy (`ingress-nginx`). */
  ingressNamespace: string;
  /** The ResourceQuota's hard limits (the operator's ceilings); `cpuCores` also caps each container. */
  quota: { memoryBytes: number; cpuCores?: number };
  /** What API discovery found: `batch/v1` CronJob from 1.21, `batch/v1beta1` before. */
  apis: { cronJob: 'batch/v1' | 'batch/v1beta1' };
  /**
   * The volumes' access mode (default `ReadWriteOnce`, which every storage class offers: the pods
   * sharing a volume then have to run on one node; `ReadWriteMany` where the class offers it).
   */
  volumeAccessMode?: 'ReadWriteOnce' | 'ReadWriteMany';
}

/**
 * The Deployment controller's progress deadline: half the deployment timeout, at least 10 s. The
 * deployment's own deadline also covers the fetch, the build and the init commands, so a controller
 * deadline as long would never be the one that answers: the user would read "timed out" instead of the
 * controller's reason (docs/decisions/0013).
 */
export const progressDeadlineSeconds = (deploymentTimeoutSeconds: number): number =>
  Math.max(10, Math.floor(deploymentTimeoutSeconds / 2));

/** Where the release Secret is mounted in the fetch container. */
const RELEASE_MOUNT = '/berth/release';
/** Where the release is unpacked and run from. */
const APP_ROOT = '/app';
/**
 * The fetch container's script. The URL and hash are only read from the mounted Secret's files: no
 * value is ever part of the script or of a pod's spec (a refreshed URL reaches new pods unchanged).
 */
export const FETCH_SCRIPT =
  `wget -q -O /tmp/release.tgz "$(cat ${RELEASE_MOUNT}/url)"` +
  ` && echo "$(cat ${RELEASE_MOUNT}/sha256)  /tmp/release.tgz" | sha256sum -c -` +
  ` && tar -xzf /tmp/release.tgz -C ${APP_ROOT}`;
/** Laravel's scheduler, as the local driver runs it (src/drivers/runtime/local/scheduler.ts). */
const SCHEDULE_COMMAND = 'php artisan schedule:run --no-interaction';
/** The accounts of the stock images: `node` in node:*, `www-data` in php:*. */
const NODE_UID = 1000;
const PHP_UID = 33;
/** Concurrent requests of PHP's built-in server (PHP_CLI_SERVER_WORKERS). */
const PHP_SERVER_WORKERS = 4;
/** Old ReplicaSets kept: a rollback re-applies the previous release's objects, it needs none. */
const REVISION_HISTORY = 3;

/** The main container's name (`exec`: a one-off command's Job, which the driver names). */
export type PodComponent = 'web' | 'worker' | 'init' | 'scheduler' | 'exec';

const metadata = (
  app: AppSpec,
  o: KubernetesRenderOptions,
  name: string,
  component?: string,
  release?: string,
) => ({
  name: checkName(name, 'object name'),
  namespace: namespaceOf(o.namespacePrefix, app.id),
  labels: {
    ...(component ? componentLabels(app.teamId, app.id, component) : baseLabels(app.teamId, app.id)),
    ...(release ? { [LABEL_RELEASE]: release } : {}),
  },
});

const releaseSecretName = (release: string) => checkName(`release-${release}`, `release '${release}'`);
const volumeClaimName = (volume: string) => checkName(`vol-${volume}`, `volume '${volume}'`);
const workerName = (worker: string) => checkName(`worker-${worker}`, `worker '${worker}'`);

/** Whole seconds, at least 1, of a duration in milliseconds. */
const seconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

/** The runtime image of the application's type, `{version}` filled in. */
function imageOf(app: AppSpec, o: KubernetesRenderOptions): string {
  if (app.type === 'nodejs') {
    const major = /^\s*(\d+)/.exec(app.runtime.nodejsVersion ?? '')?.[1] ?? o.defaultNodeMajor;
    return o.images.nodejs.replaceAll('{version}', major);
  }
  const version = /^\s*(\d+\.\d+)/.exec(app.runtime.phpVersion ?? '')?.[1] ?? '8.2';
  return o.images.php.replaceAll('{version}', version);
}

/**
 * What the web container runs: the document's start command for Node.js; for PHP types, PHP's
 * built-in server on the image (every php:* image has it, it runs as a non-root user without
 * capabilities) with the document root at /app/public (laravel) or /app (wordpress), whose index.php
 * answers any path that is not a file.
 */
function webCommand(app: AppSpec): string {
  if (app.type === 'nodejs') return app.commands.start ?? 'npm start';
  const root = app.type === 'laravel' ? `${APP_ROOT}/public` : APP_ROOT;
  return `exec php -S 0.0.0.0:${APP_PORT} -t ${root}`;
}

function resources(app: AppSpec, o: KubernetesRenderOptions) {
  const memory = memoryQuantity(app.memoryBytes);
  return {
    requests: { memory },
    limits: { memory, ...(o.quota.cpuCores ? { cpu: String(o.quota.cpuCores) } : {}) },
  };
}

/** The probes of the web container on the health path; none when health checks are disabled. */
function probes(app: AppSpec, o: KubernetesRenderOptions): Record<string, unknown> {
  if (!app.health.enabled) return {};
  const httpGet = { path: app.health.path, port: APP_PORT, scheme: 'HTTP' };
  const periodSeconds = seconds(app.health.intervalMs);
  const timeoutSeconds = seconds(app.health.timeoutMs);
  return {
    // A slow start is given the whole deployment timeout before liveness may restart the container.
    startupProbe: {
      httpGet,
      periodSeconds,
      timeoutSeconds,
      failureThreshold: Math.max(1, Math.ceil(o.deploymentTimeoutSeconds / periodSeconds)),
    },
    readinessProbe: { httpGet, periodSeconds, timeoutSeconds },
    livenessProbe: {
      httpGet,
      periodSeconds,
      timeoutSeconds,
      failureThreshold: Math.max(1, app.health.failureThreshold),
    },
  };
}

/**
 * Where a volume is mounted: `mountPath` as the document gave it (already absolute, without `.` or
 * `..`), unless it would hide or shadow what the pod runs from (`/`, the release at /app, the release
 * Secret's directory) or has a `:`, which the API server refuses in a mount path.
 */
function volumeMountPath(volume: { name: string; mountPath: string }): string {
  const path = volume.mountPath.replace(/\/+$/, '') || '/';
  const hides =
    path === '/' ||
    path.startsWith(`${RELEASE_MOUNT}/`) ||
    [APP_ROOT, RELEASE_MOUNT].some((p) => path === p || p.startsWith(`${path}/`));
  if (hides)
    throw new Error(
      `volume '${volume.name}': mount path '${volume.mountPath}' would hide what the pod runs from (${APP_ROOT}, ${RELEASE_MOUNT})`,
    );
  if (path.includes(':'))
    throw new Error(
      `volume '${volume.name}': mount path '${volume.mountPath}' has a ':', which Kubernetes refuses`,
    );
  return path;
}

/**
 * The pod template of every process of the application (web, a worker, init, the scheduler, a
 * one-off command's Job): the fetch init container, then the main container (named `container`)
 * running `command` with the environment Secret, the volumes and the limits. `labelName` is its
 * `app.kubernetes.io/name` (`web`, `worker-<name>`, …).
 */
export function renderPodTemplate(
  app: AppSpec,
  release: string,
  o: KubernetesRenderOptions,
  container: PodComponent,
  labelName: string,
  command: string,
  restartPolicy: 'Always' | 'Never',
): Record<string, unknown> {
  const uid = app.type === 'nodejs' ? NODE_UID : PHP_UID;
  const securityContext = {
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'] },
  };
  const limits = resources(app, o);
  const volumes = app.volumes.map((v) => ({
    name: volumeClaimName(v.name),
    claim: volumeClaimName(v.name),
    mountPath: volumeMountPath(v),
  }));
  const seen = new Map<string, string>();
  for (const [index, volume] of volumes.entries()) {
    const other = seen.get(volume.mountPath);
    const name = app.volumes[index]?.name ?? '';
    if (other !== undefined)
      throw new Error(`volumes '${other}' and '${name}' are both mounted at ${volume.mountPath}`);
    seen.set(volume.mountPath, name);
  }
  return {
    metadata: {
      labels: componentLabels(app.teamId, app.id, labelName),
      annotations: { [ANNOTATION_RELEASE]: release },
    },
    spec: {
      restartPolicy,
      // The application has no business with the cluster's API, nor with the namespace's Service list.
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      // Every container runs as the image's own account; the emptyDir and the volumes are writable by
      // it (a volume's files are chowned only when its root is not the group's yet: a large volume
      // does not delay every start).
      securityContext: {
        runAsNonRoot: true,
        runAsUser: uid,
        runAsGroup: uid,
        fsGroup: uid,
        fsGroupChangePolicy: 'OnRootMismatch',
      },
      initContainers: [
        {
          name: 'fetch-release',
          image: o.images.fetch,
          command: ['/bin/sh', '-c', FETCH_SCRIPT],
          // As much memory as the main container: the pod's effective request is unchanged.
          resources: limits,
          securityContext,
          volumeMounts: [
            { name: 'release', mountPath: RELEASE_MOUNT, readOnly: true },
            { name: 'app', mountPath: APP_ROOT },
          ],
        },
      ],
      containers: [
        {
          name: container,
          image: imageOf(app, o),
          workingDir: APP_ROOT,
          command: ['/bin/sh', '-c', command],
          envFrom: [{ secretRef: { name: 'env' } }],
          ...(app.type === 'laravel' || app.type === 'wordpress'
            ? { env: [{ name: 'PHP_CLI_SERVER_WORKERS', value: String(PHP_SERVER_WORKERS) }] }
            : {}),
          ...(container === 'web'
            ? { ports: [{ name: 'http', containerPort: APP_PORT, protocol: 'TCP' }], ...probes(app, o) }
            : {}),
          resources: limits,
          securityContext,
          volumeMounts: [
            { name: 'app', mountPath: APP_ROOT },
            ...volumes.map((v) => ({ name: v.name, mountPath: v.mountPath })),
          ],
        },
      ],
      volumes: [
        { name: 'app', emptyDir: {} },
        { name: 'release', secret: { secretName: releaseSecretName(release), defaultMode: 0o440 } },
        ...volumes.map((v) => ({ name: v.name, persistentVolumeClaim: { claimName: v.claim } })),
      ],
    },
  };
}

export function renderNamespace(app: AppSpec, o: KubernetesRenderOptions): KubeObject {
  return namespaceObject(namespaceOf(o.namespacePrefix, app.id), app.teamId, app.id);
}

/**
 * The Secret `env`: the application's environment (its secrets and its services' names, as the
 * spec builder resolved them), then what the runtime contract sets (PORT, HOST).
 */
export function renderEnvSecret(app: AppSpec, o: KubernetesRenderOptions): KubeObject {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: metadata(app, o, 'env'),
    type: 'Opaque',
    data: secretData({
      BERTH_APP_NAME: app.name,
      ...(app.type === 'nodejs' ? { NODE_ENV: 'production' } : {}),
      ...app.env,
      PORT: String(APP_PORT),
      HOST: '0.0.0.0',
    }),
  };
}

/** The Secret `release-<release>`: the slug's short-lived URL and its SHA-256, read by the fetch container. */
export function renderReleaseSecret(
  app: AppSpec,
  release: string,
  artifact: { url: string; sha256: string },
  o: KubernetesRenderOptions,
): KubeObject {
  if (!/^[0-9a-f]{64}$/.test(artifact.sha256))
    throw new Error(`release ${release}: sha256 must be 64 lower-case hex digits`);
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: metadata(app, o, releaseSecretName(release), undefined, release),
    type: 'Opaque',
    data: secretData({ url: artifact.url, sha256: artifact.sha256 }),
  };
}

/** The Job `init-<release>` running the init commands in order; undefined when there are none. */
export function renderInitJob(
  app: AppSpec,
  release: string,
  o: KubernetesRenderOptions,
): KubeObject | undefined {
  if (app.commands.init.length === 0) return undefined;
  // One shell, stopping at the first command that fails, as the local driver does.
  const script = ['set -e', ...app.commands.init].join('\n');
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: metadata(app, o, checkName(`init-${release}`, `release '${release}'`), 'init', release),
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: o.deploymentTimeoutSeconds,
      // No ttlSecondsAfterFinished: alpha (off) on 1.20; the driver deletes finished Jobs itself.
      template: renderPodTemplate(app, release, o, 'init', 'init', script, 'Never'),
    },
  };
}

function deployment(
  app: AppSpec,
  release: string,
  o: KubernetesRenderOptions,
  name: string,
  container: 'web' | 'worker',
  command: string,
  replicas: number,
): KubeObject {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: metadata(app, o, name, name),
    spec: {
      replicas,
      // Selectors are immutable: only what never changes between releases.
      selector: { matchLabels: { [LABEL_APPLICATION]: String(app.id), [LABEL_NAME]: name } },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
      progressDeadlineSeconds: progressDeadlineSeconds(o.deploymentTimeoutSeconds),
      revisionHistoryLimit: REVISION_HISTORY,
      template: renderPodTemplate(app, release, o, container, name, command, 'Always'),
    },
  };
}

/**
 * Everything else the application is, in apply order: NetworkPolicy, ResourceQuota, PVCs, Service
 * `web`, Deployment `web`, the workers' Deployments, the scheduler's CronJob (laravel with the
 * scheduler on, as locally), one Ingress per host name. `app.replicas` 0 (suspended) scales every
 * Deployment to 0 and suspends the CronJob.
 */
export function renderApplication(app: AppSpec, release: string, o: KubernetesRenderOptions): KubeObject[] {
  const namespace = namespaceOf(o.namespacePrefix, app.id);
  const objects: KubeObject[] = [];
  objects.push({
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: metadata(app, o, 'berth'),
    spec: {
      podSelector: {},
      policyTypes: ['Ingress'],
      ingress: [
        // The namespace's own pods (the application and its services).
        { from: [{ podSelector: {} }] },
        // The ingress controller, on the application's port only (a service's port is not reachable).
        {
          from: [
            { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': o.ingressNamespace } } },
          ],
          ports: [{ protocol: 'TCP', port: APP_PORT }],
        },
      ],
    },
  });
  objects.push({
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: metadata(app, o, 'berth'),
    spec: {
      hard: {
        'requests.memory': memoryQuantity(o.quota.memoryBytes),
        'limits.memory': memoryQuantity(o.quota.memoryBytes),
      },
    },
  });
  for (const volume of app.volumes) {
    objects.push({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: metadata(app, o, volumeClaimName(volume.name)),
      spec: {
        accessModes: [o.volumeAccessMode ?? 'ReadWriteOnce'],
        resources: { requests: { storage: storageQuantity(volume.volumeSize) } },
        ...(o.storageClass ? { storageClassName: o.storageClass } : {}),
      },
    });
  }
  objects.push({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: metadata(app, o, 'web', 'web'),
    spec: {
      type: 'ClusterIP',
      selector: { [LABEL_APPLICATION]: String(app.id), [LABEL_NAME]: 'web' },
      // protocol always: 1.20's server-side apply answers 500 without it (a list keyed on port+protocol).
      ports: [{ name: 'http', port: 80, targetPort: APP_PORT, protocol: 'TCP' }],
    },
  });
  objects.push(deployment(app, release, o, 'web', 'web', webCommand(app), app.replicas));
  const running = app.replicas > 0 ? 1 : 0;
  for (const worker of app.workers) {
    objects.push(deployment(app, release, o, workerName(worker.name), 'worker', worker.command, running));
  }
  if (app.schedulerEnabled && app.type === 'laravel') {
    objects.push({
      apiVersion: o.apis.cronJob,
      kind: 'CronJob',
      metadata: metadata(app, o, 'scheduler', 'scheduler'),
      spec: {
        schedule: '* * * * *',
        concurrencyPolicy: 'Forbid',
        suspend: app.replicas === 0,
        // A minute missed (the controller was down) is skipped, as the local scheduler skips it.
        startingDeadlineSeconds: 50,
        successfulJobsHistoryLimit: 1,
        failedJobsHistoryLimit: 1,
        jobTemplate: {
          metadata: { labels: componentLabels(app.teamId, app.id, 'scheduler') },
          spec: {
            backoffLimit: 0,
            template: renderPodTemplate(app, release, o, 'scheduler', 'scheduler', SCHEDULE_COMMAND, 'Never'),
          },
        },
      },
    });
  }
  for (const host of app.hostnames) {
    objects.push({
      apiVersion: 'networking.k8s.io/v1',
      kind: 'Ingress',
      metadata: {
        name: ingressName(host),
        namespace,
        labels: componentLabels(app.teamId, app.id, 'web'),
        annotations: { 'berth.dev/host': host },
      },
      spec: {
        ...(o.ingressClass ? { ingressClassName: o.ingressClass } : {}),
        rules: [
          {
            host: host.toLowerCase(),
            http: {
              paths: [
                {
                  path: '/',
                  pathType: 'Prefix',
                  backend: { service: { name: 'web', port: { number: 80 } } },
                },
              ],
            },
          },
        ],
      },
    });
  }
  return objects;
}
