// The Kubernetes objects Berth renders (issue 28): every object checked against the current schemas
// (kubernetes-models) and the rules the driver relies on. Pure functions: no cluster here; the driver's
// tests assert on what the API server holds.
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { CronJob, Job } from 'kubernetes-models/batch/v1';
import { CronJob as CronJobV1beta1 } from 'kubernetes-models/batch/v1beta1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { Namespace, PersistentVolumeClaim, ResourceQuota, Secret, Service } from 'kubernetes-models/v1';
import { describe, expect, it } from 'vitest';
import {
  baseLabels,
  checkName,
  ingressName,
  memoryQuantity,
  namespaceOf,
  storageQuantity,
  type KubeObject,
} from '../../src/drivers/kubernetes/objects.js';
import type { AppSpec } from '../../src/drivers/runtime/driver.js';
import {
  FETCH_SCRIPT,
  renderApplication,
  renderEnvSecret,
  renderInitJob,
  renderNamespace,
  renderPodTemplate,
  renderReleaseSecret,
  type KubernetesRenderOptions,
} from '../../src/drivers/runtime/kubernetes/render.js';
import {
  KUBERNETES_SERVICE_TYPES,
  kubernetesUnsupportedServices,
  renderService,
} from '../../src/drivers/services/kubernetes/render.js';
import type { ServiceSpec } from '../../src/drivers/services/types.js';

type Validatable = { validate(): void };
const MODELS: Record<string, new (data: never) => Validatable> = {
  'apps/v1 Deployment': Deployment,
  'apps/v1 StatefulSet': StatefulSet,
  'batch/v1 Job': Job,
  'batch/v1 CronJob': CronJob,
  'batch/v1beta1 CronJob': CronJobV1beta1,
  'networking.k8s.io/v1 Ingress': Ingress,
  'networking.k8s.io/v1 NetworkPolicy': NetworkPolicy,
  'v1 Namespace': Namespace,
  'v1 PersistentVolumeClaim': PersistentVolumeClaim,
  'v1 ResourceQuota': ResourceQuota,
  'v1 Secret': Secret,
  'v1 Service': Service,
};

/** Validates `object` against the schema of its apiVersion and kind (throws on a schema error). */
function validate(object: KubeObject): void {
  const Model = MODELS[`${object.apiVersion} ${object.kind}`];
  if (!Model) throw new Error(`no model for ${object.apiVersion} ${object.kind}`);
  new Model(object as never).validate();
}

const MI = 1024 * 1024;
const RELEASE = '20261127-201500-ab12';
const URL = 'https://artifacts.example.test/apps/7/releases/r.tar.gz?X-Amz-Signature=deadbeef';
const SHA = 'a'.repeat(64);

const options: KubernetesRenderOptions = {
  namespacePrefix: 'berth-',
  ingressClass: 'nginx',
  storageClass: 'fast',
  images: { nodejs: 'node:{version}-bookworm-slim', php: 'php:{version}-apache', fetch: 'alpine:3.20' },
  defaultNodeMajor: '22',
  deploymentTimeoutSeconds: 600,
  ingressNamespace: 'ingress-nginx',
  quota: { memoryBytes: 4096 * MI, cpuCores: 2 },
  apis: { cronJob: 'batch/v1' },
};

/** Two replicas, a domain, a volume, a secret, two workers, the scheduler on, init commands. */
const app: AppSpec = {
  id: 7,
  teamId: 3,
  name: 'shop',
  type: 'laravel',
  runtime: { phpVersion: '8.3' },
  commands: { build: ['composer install'], init: ['php artisan migrate --force', 'php artisan cache:clear'] },
  php: { extensions: [], settings: [] },
  replicas: 2,
  memoryBytes: 512 * MI,
  health: { enabled: true, path: '/up', intervalMs: 10_000, timeoutMs: 2_500, failureThreshold: 3 },
  schedulerEnabled: true,
  workers: [
    { name: 'queue', command: 'php artisan queue:work' },
    { name: 'horizon', command: 'php artisan horizon' },
  ],
  volumes: [{ name: 'storage', mountPath: '/app/storage', volumeSize: 20 }],
  env: { APP_KEY: 'base64:secret', DATABASE_URL: 'postgresql://app:pw@svc-db:5432/app' },
  hostnames: ['shop.example.com', 'shop-7.apps.example.test'],
};

const namespace = 'berth-app-7';

function everything(spec: AppSpec = app, o: KubernetesRenderOptions = options): KubeObject[] {
  const init = renderInitJob(spec, RELEASE, o);
  return [
    renderNamespace(spec, o),
    renderEnvSecret(spec, o),
    renderReleaseSecret(spec, RELEASE, { url: URL, sha256: SHA }, o),
    ...(init ? [init] : []),
    ...renderApplication(spec, RELEASE, o),
  ];
}

const find = (objects: KubeObject[], kind: string, name: string): KubeObject => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};

// The nested fields the assertions read (a KubeObject's spec is open).
interface Probe {
  httpGet?: unknown;
  tcpSocket?: unknown;
  periodSeconds: number;
  failureThreshold: number;
}
interface Container {
  name: string;
  image: string;
  workingDir?: string;
  command?: string[];
  args: string[];
  env?: Array<{ name: string }>;
  envFrom?: unknown;
  ports?: unknown;
  resources: unknown;
  securityContext: unknown;
  volumeMounts: Array<{ mountPath: string }>;
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
}
interface Pod {
  restartPolicy: string;
  automountServiceAccountToken: boolean;
  securityContext: unknown;
  initContainers: Container[];
  containers: Container[];
  volumes: unknown[];
}
interface Template {
  metadata: { labels: Record<string, string>; annotations: Record<string, string> };
  spec: Pod;
}
interface Spec {
  replicas: number;
  strategy: unknown;
  progressDeadlineSeconds: number;
  selector: { matchLabels: Record<string, string> };
  template: Template;
  jobTemplate: { spec: { template: Template } };
  ports: Array<{ port: number; protocol: string }>;
  podSelector: unknown;
  policyTypes: unknown;
  ingress: Array<{ from: unknown[] }>;
  hard: unknown;
  backoffLimit: number;
  activeDeadlineSeconds: number;
  ttlSecondsAfterFinished?: number;
  suspend: boolean;
  clusterIP: string;
  volumeClaimTemplates: Array<{ spec: { resources: unknown } }>;
}
const spec = (object: KubeObject): Spec => object.spec as Spec;
const podTemplate = (object: KubeObject): Template =>
  object.kind === 'CronJob' ? spec(object).jobTemplate.spec.template : spec(object).template;
const podSpec = (object: KubeObject): Pod => podTemplate(object).spec;
function first<T>(items: readonly T[] | undefined): T {
  const [item] = items ?? [];
  if (item === undefined) throw new Error('empty list');
  return item;
}
/** The pod's one container. */
const main = (pod: Pod): Container => first(pod.containers);

const RFC1123 = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * A Secret's values, decoded. Secrets are rendered in `data`, never `stringData`: under server-side
 * apply the manager owns only `stringData`'s keys, so a key dropped later would stay in `data`
 * (kubernetes/kubernetes#108008), and a deleted application secret would stay in the pods' environment.
 */
function secretValues(secret: KubeObject): Record<string, string> {
  expect(secret.kind).toBe('Secret');
  expect(secret.stringData).toBeUndefined();
  return Object.fromEntries(
    Object.entries(secret.data as Record<string, string>).map(([key, value]) => [
      key,
      Buffer.from(value, 'base64').toString('utf8'),
    ]),
  );
}

describe('an application on Kubernetes', () => {
  const objects = everything();
  const workloads = objects.filter((o) => ['Deployment', 'Job', 'CronJob'].includes(o.kind));

  it('validates every object against the current schemas, CronJob of either API', () => {
    for (const object of objects) validate(object);
    const older = renderApplication(app, RELEASE, { ...options, apis: { cronJob: 'batch/v1beta1' } });
    const cron = find(older, 'CronJob', 'scheduler');
    expect(cron.apiVersion).toBe('batch/v1beta1');
    validate(cron);
  });

  it('renders the object map in apply order', () => {
    expect(renderApplication(app, RELEASE, options).map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      'NetworkPolicy/berth',
      'ResourceQuota/berth',
      'PersistentVolumeClaim/vol-storage',
      'Service/web',
      'Deployment/web',
      'Deployment/worker-queue',
      'Deployment/worker-horizon',
      'CronJob/scheduler',
      `Ingress/${ingressName('shop.example.com')}`,
      `Ingress/${ingressName('shop-7.apps.example.test')}`,
    ]);
    expect(find(objects, 'Job', `init-${RELEASE}`)).toBeDefined();
  });

  it('labels everything, in the application namespace, with valid names', () => {
    for (const object of objects) {
      expect(object.metadata.labels).toMatchObject(baseLabels(3, 7));
      expect(object.metadata.labels?.['app.kubernetes.io/managed-by']).toBe('berth');
      expect(object.metadata.name).toMatch(RFC1123);
      expect(object.metadata.name.length).toBeLessThanOrEqual(63);
      if (object.kind === 'Namespace') expect(object.metadata.name).toBe(namespace);
      else expect(object.metadata.namespace).toBe(namespace);
    }
    for (const workload of workloads) {
      const template = podTemplate(workload);
      expect(template.metadata.labels).toMatchObject(baseLabels(3, 7));
      expect(template.metadata.annotations).toEqual({ 'berth.dev/release': RELEASE });
    }
    expect(
      podTemplate(find(objects, 'Deployment', 'worker-queue')).metadata.labels['app.kubernetes.io/name'],
    ).toBe('worker-queue');
  });

  it('rolls web out with no unavailable replica, within the deployment timeout, on a stable selector', () => {
    const web = find(objects, 'Deployment', 'web');
    expect(spec(web).replicas).toBe(2);
    expect(spec(web).strategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxUnavailable: 0, maxSurge: 1 },
    });
    // Half the deployment timeout: the controller answers before the deployment's own deadline.
    expect(spec(web).progressDeadlineSeconds).toBe(300);
    expect(spec(web).selector).toEqual({
      matchLabels: { 'berth.dev/application': '7', 'app.kubernetes.io/name': 'web' },
    });
    // Another release changes the template only: selectors are immutable.
    const next = find(renderApplication(app, 'next-release', options), 'Deployment', 'web');
    expect(spec(next).selector).toEqual(spec(web).selector);
    expect(podTemplate(next).metadata.annotations['berth.dev/release']).toBe('next-release');
  });

  it('gives every container memory request = limit, the cpu cap and no privilege', () => {
    for (const workload of workloads) {
      const pod = podSpec(workload);
      expect(pod.automountServiceAccountToken).toBe(false);
      expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 33 });
      for (const container of [...pod.initContainers, ...pod.containers]) {
        expect(container.resources).toEqual({
          requests: { memory: '512Mi' },
          limits: { memory: '512Mi', cpu: '2' },
        });
        expect(container.securityContext).toEqual({
          allowPrivilegeEscalation: false,
          capabilities: { drop: ['ALL'] },
        });
      }
    }
  });

  it('probes the health path on 8080: startup covering the timeout, readiness, liveness with the threshold', () => {
    const container = main(podSpec(find(objects, 'Deployment', 'web')));
    const httpGet = { path: '/up', port: 8080, scheme: 'HTTP' };
    expect(container.startupProbe).toMatchObject({ httpGet, periodSeconds: 10, timeoutSeconds: 3 });
    expect(
      (container.startupProbe?.failureThreshold ?? 0) * (container.startupProbe?.periodSeconds ?? 0),
    ).toBeGreaterThanOrEqual(600);
    expect(container.readinessProbe).toEqual({ httpGet, periodSeconds: 10, timeoutSeconds: 3 });
    expect(container.livenessProbe).toEqual({
      httpGet,
      periodSeconds: 10,
      timeoutSeconds: 3,
      failureThreshold: 3,
    });
    // Workers serve nothing: no probes, no ports.
    const worker = main(podSpec(find(objects, 'Deployment', 'worker-queue')));
    expect(worker.readinessProbe).toBeUndefined();
    expect(worker.ports).toBeUndefined();
    // Health checks off: no probe at all.
    const off = renderApplication({ ...app, health: { ...app.health, enabled: false } }, RELEASE, options);
    const plain = main(podSpec(find(off, 'Deployment', 'web')));
    expect([plain.startupProbe, plain.readinessProbe, plain.livenessProbe]).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('serves web on port 80 → 8080 over TCP, each host name through its Ingress', () => {
    const service = find(objects, 'Service', 'web');
    expect(spec(service).ports).toEqual([{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }]);
    expect(spec(service).selector).toEqual(spec(find(objects, 'Deployment', 'web')).selector.matchLabels);
    for (const host of app.hostnames) {
      const ingress = find(objects, 'Ingress', ingressName(host));
      expect(spec(ingress)).toEqual({
        ingressClassName: 'nginx',
        rules: [
          {
            host,
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
      });
    }
    expect(ingressName('shop.example.com')).toMatch(/^host-[0-9a-f]{10}$/);
  });

  it('fetches the release through the mounted Secret only: the URL is never in a pod spec', () => {
    const secret = find(objects, 'Secret', `release-${RELEASE}`);
    expect(secretValues(secret)).toEqual({ url: URL, sha256: SHA });
    // What pruning a release selects: its Secret and its init Job.
    expect(secret.metadata.labels?.['berth.dev/release']).toBe(RELEASE);
    expect(find(objects, 'Job', `init-${RELEASE}`).metadata.labels?.['berth.dev/release']).toBe(RELEASE);
    for (const workload of workloads) {
      const pod = podSpec(workload);
      const fetch = first(pod.initContainers);
      expect(fetch.name).toBe('fetch-release');
      expect(fetch.image).toBe('alpine:3.20');
      expect(fetch.command).toEqual(['/bin/sh', '-c', FETCH_SCRIPT]);
      expect(fetch.env).toBeUndefined();
      expect(fetch.volumeMounts).toContainEqual({
        name: 'release',
        mountPath: '/berth/release',
        readOnly: true,
      });
      expect(pod.volumes).toContainEqual({ name: 'app', emptyDir: {} });
      expect(pod.volumes).toContainEqual({
        name: 'release',
        secret: { secretName: `release-${RELEASE}`, defaultMode: 0o440 },
      });
      const text = JSON.stringify(workload);
      expect(text).not.toContain(URL);
      expect(text).not.toContain('artifacts.example.test');
      expect(text).not.toContain(SHA);
    }
    expect(FETCH_SCRIPT).toContain('"$(cat /berth/release/url)"');
    expect(FETCH_SCRIPT).toContain('sha256sum -c -');
    expect(() => renderReleaseSecret(app, RELEASE, { url: URL, sha256: 'not-a-hash' }, options)).toThrow(
      /sha256/,
    );
  });

  it('puts the environment in the Secret env with PORT and HOST, read by every container', () => {
    const env = find(objects, 'Secret', 'env');
    expect(secretValues(env)).toMatchObject({ ...app.env, PORT: '8080', HOST: '0.0.0.0' });
    const overriding = renderEnvSecret({ ...app, env: { PORT: '3000' } }, options);
    expect(secretValues(overriding).PORT).toBe('8080');
    for (const workload of workloads) {
      const container = main(podSpec(workload));
      expect(container.envFrom).toEqual([{ secretRef: { name: 'env' } }]);
      expect(JSON.stringify(workload)).not.toContain('base64:secret');
    }
  });

  it('admits traffic only from the namespace and the ingress controller’s namespace', () => {
    const policy = find(objects, 'NetworkPolicy', 'berth');
    expect(spec(policy).podSelector).toEqual({});
    expect(spec(policy).policyTypes).toEqual(['Ingress']);
    const peers = (spec(policy).ingress as Array<{ from: unknown[] }>).flatMap((rule) => rule.from);
    expect(peers).toEqual([
      { podSelector: {} },
      { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } },
    ]);
  });

  it('sizes the volumes and the quota, and mounts the volumes in every process', () => {
    const claim = find(objects, 'PersistentVolumeClaim', 'vol-storage');
    expect(spec(claim)).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '20Gi' } },
      storageClassName: 'fast',
    });
    expect(spec(find(objects, 'ResourceQuota', 'berth')).hard).toEqual({
      'requests.memory': '4096Mi',
      'limits.memory': '4096Mi',
    });
    for (const workload of workloads) {
      const pod = podSpec(workload);
      expect(pod.volumes).toContainEqual({
        name: 'vol-storage',
        persistentVolumeClaim: { claimName: 'vol-storage' },
      });
      expect(main(pod).volumeMounts).toContainEqual({
        name: 'vol-storage',
        mountPath: '/app/storage',
      });
    }
  });

  it('runs init commands once in a Job, the scheduler every minute, one at a time', () => {
    const job = find(objects, 'Job', `init-${RELEASE}`);
    expect(spec(job).backoffLimit).toBe(0);
    expect(spec(job).activeDeadlineSeconds).toBe(600);
    expect(spec(job).ttlSecondsAfterFinished).toBeUndefined();
    expect(podSpec(job).restartPolicy).toBe('Never');
    expect(main(podSpec(job)).command).toEqual([
      '/bin/sh',
      '-c',
      'set -e\nphp artisan migrate --force\nphp artisan cache:clear',
    ]);
    expect(
      renderInitJob({ ...app, commands: { ...app.commands, init: [] } }, RELEASE, options),
    ).toBeUndefined();
    const cron = find(objects, 'CronJob', 'scheduler');
    expect(spec(cron)).toMatchObject({ schedule: '* * * * *', concurrencyPolicy: 'Forbid', suspend: false });
    expect(podSpec(cron).restartPolicy).toBe('Never');
    expect(main(podSpec(cron)).command).toEqual([
      '/bin/sh',
      '-c',
      'php artisan schedule:run --no-interaction',
    ]);
  });

  it('runs PHP types on the PHP image with the built-in server at their document root', () => {
    const web = main(podSpec(find(objects, 'Deployment', 'web')));
    expect(web.image).toBe('php:8.3-apache');
    expect(web.workingDir).toBe('/app');
    expect(web.command).toEqual(['/bin/sh', '-c', 'exec php -S 0.0.0.0:8080 -t /app/public']);
    const wordpress = renderApplication({ ...app, type: 'wordpress', runtime: {} }, RELEASE, options);
    const wp = main(podSpec(find(wordpress, 'Deployment', 'web')));
    expect(wp.image).toBe('php:8.2-apache');
    expect(wp.command).toEqual(['/bin/sh', '-c', 'exec php -S 0.0.0.0:8080 -t /app']);
    // The scheduler is Laravel's, as with the local driver.
    expect(wordpress.find((o) => o.kind === 'CronJob')).toBeUndefined();
  });

  it('runs Node.js on the image of its major as the image’s node user', () => {
    const node: AppSpec = {
      ...app,
      type: 'nodejs',
      runtime: { nodejsVersion: '20.x' },
      commands: { build: [], init: [] },
    };
    const rendered = everything(node);
    for (const object of rendered) validate(object);
    const web = find(rendered, 'Deployment', 'web');
    expect(podSpec(web).securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      fsGroupChangePolicy: 'OnRootMismatch',
    });
    const container = main(podSpec(web));
    expect(container.image).toBe('node:20-bookworm-slim');
    expect(container.command).toEqual(['/bin/sh', '-c', 'npm start']);
    expect(secretValues(find(rendered, 'Secret', 'env'))).toMatchObject({ NODE_ENV: 'production' });
    const started = renderApplication(
      { ...node, runtime: {}, commands: { build: [], init: [], start: 'node server.js' } },
      RELEASE,
      options,
    );
    const other = main(podSpec(find(started, 'Deployment', 'web')));
    expect(other.image).toBe('node:22-bookworm-slim');
    expect(other.command).toEqual(['/bin/sh', '-c', 'node server.js']);
    expect(rendered.find((o) => o.kind === 'Job')).toBeUndefined();
  });

  it('scales everything to 0 and suspends the scheduler when replicas is 0', () => {
    const suspended = renderApplication({ ...app, replicas: 0 }, RELEASE, options);
    for (const deployment of suspended.filter((o) => o.kind === 'Deployment'))
      expect(spec(deployment).replicas).toBe(0);
    expect(spec(find(suspended, 'CronJob', 'scheduler')).suspend).toBe(true);
    const running = renderApplication(app, RELEASE, options);
    expect(spec(find(running, 'Deployment', 'worker-queue')).replicas).toBe(1);
  });

  it('refuses a name too long for Kubernetes, naming what it came from', () => {
    const volume = `v${'x'.repeat(60)}`;
    const long = { ...app, volumes: [{ name: volume, mountPath: '/data', volumeSize: 1 }] };
    expect(() => renderApplication(long, RELEASE, options)).toThrow(
      new RegExp(`volume '${volume}'.*at most 63`),
    );
    const worker = `w${'x'.repeat(60)}`;
    expect(() =>
      renderApplication({ ...app, workers: [{ name: worker, command: 'x' }] }, RELEASE, options),
    ).toThrow(new RegExp(`worker '${worker}'`));
    expect(() => checkName('Upper', 'thing')).toThrow(/thing: .*lower-case/);
    expect(namespaceOf('berth-', 12)).toBe('berth-app-12');
  });

  it('refuses a volume mounted over what the pod runs from, or two at one path, naming them', () => {
    const at = (...paths: string[]): AppSpec => ({
      ...app,
      volumes: paths.map((mountPath, i) => ({ name: `v${i}`, mountPath, volumeSize: 1 })),
    });
    for (const path of ['/', '/app', '/app/', '/berth', '/berth/release', '/berth/release/x'])
      expect(() => renderApplication(at(path), RELEASE, options)).toThrow(
        new RegExp(`volume 'v0': mount path '${path}' would hide what the pod runs from`),
      );
    expect(() => renderApplication(at('/data:x'), RELEASE, options)).toThrow(/volume 'v0': .* has a ':'/);
    expect(() => renderApplication(at('/data', '/data/'), RELEASE, options)).toThrow(
      /volumes 'v0' and 'v1' are both mounted at \/data/,
    );
    const fine = renderApplication(at('/var/www/html/storage', '/app/storage'), RELEASE, options);
    expect(main(podSpec(find(fine, 'Deployment', 'web'))).volumeMounts).toEqual([
      { name: 'app', mountPath: '/app' },
      { name: 'vol-v0', mountPath: '/var/www/html/storage' },
      { name: 'vol-v1', mountPath: '/app/storage' },
    ]);
  });

  it('gives a one-off command’s Job the same pod template', () => {
    const template = renderPodTemplate(app, RELEASE, options, 'exec', 'exec', 'php artisan about', 'Never');
    const job: KubeObject = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'exec-1', namespace, labels: baseLabels(3, 7) },
      spec: { backoffLimit: 0, template },
    };
    validate(job);
    const pod = podSpec(job);
    expect(first(pod.initContainers).name).toBe('fetch-release');
    expect(main(pod)).toMatchObject({ name: 'exec', command: ['/bin/sh', '-c', 'php artisan about'] });
    expect(pod.restartPolicy).toBe('Never');
  });

  it('writes quantities as Kubernetes does', () => {
    expect(memoryQuantity(256 * MI)).toBe('256Mi');
    expect(memoryQuantity(1000)).toBe('1000');
    expect(() => memoryQuantity(0)).toThrow(/memory/);
    expect(storageQuantity(20)).toBe('20Gi');
    expect(() => storageQuantity(1.5)).toThrow(/volume_size/);
  });
});

describe('services on Kubernetes', () => {
  const base: ServiceSpec = {
    id: '9f1c2d3e-aaaa-bbbb-cccc-123456789abc',
    type: 'postgresql',
    applicationId: 7,
    teamId: 3,
    name: 'db',
    version: null,
    memoryMiB: 512,
    volumeGiB: 10,
    username: 'app',
    password: 'Pq7sT2vX9yZ4bC6dE8fG1hJ3',
    settings: {},
    secrets: {},
    volumes: [],
  };
  const serviceOptions = { namespace, storageClass: 'fast' };
  const render = (overrides: Partial<ServiceSpec>) =>
    renderService({ ...base, ...overrides }, serviceOptions);

  it('renders a Secret, a headless Service and a StatefulSet for every type, all valid', () => {
    for (const type of KUBERNETES_SERVICE_TYPES) {
      const rendered = render({ type, name: `s-${type}` });
      const name = `svc-s-${type}`;
      expect(rendered.objects.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
        `Secret/${name}`,
        `Service/${name}`,
        `StatefulSet/${name}`,
      ]);
      expect(rendered.host).toBe(name);
      for (const object of rendered.objects) {
        validate(object);
        expect(object.metadata.namespace).toBe(namespace);
        expect(object.metadata.labels).toMatchObject({ ...baseLabels(3, 7), 'app.kubernetes.io/name': name });
        expect(object.metadata.name).toMatch(RFC1123);
      }
      const service = find(rendered.objects, 'Service', name);
      expect(spec(service).clusterIP).toBe('None');
      for (const port of spec(service).ports) expect(port.protocol).toBe('TCP');
      expect(first(spec(service).ports).port).toBe(rendered.port);
      const set = find(rendered.objects, 'StatefulSet', name);
      expect(spec(set)).toMatchObject({ replicas: 1, serviceName: name });
      expect(spec(set).selector.matchLabels).toEqual({
        'berth.dev/application': '7',
        'app.kubernetes.io/name': name,
      });
      const container = main(podSpec(set));
      expect(container.resources).toEqual({ requests: { memory: '512Mi' }, limits: { memory: '512Mi' } });
      expect(container.readinessProbe?.tcpSocket ?? container.readinessProbe?.httpGet).toBeDefined();
      // The password only in the Secret: the pod reads it through secretKeyRef or $(VAR).
      expect(secretValues(find(rendered.objects, 'Secret', name))).toMatchObject({ password: base.password });
      expect(JSON.stringify(set)).not.toContain(base.password);
      expect(JSON.stringify(service)).not.toContain(base.password);
    }
  });

  it('gives each engine its image, port, data volume and credentials', () => {
    const pg = render({ settings: { database: 'shop' } });
    const pgSet = find(pg.objects, 'StatefulSet', 'svc-db');
    const pgc = main(podSpec(pgSet));
    expect(pgc.image).toBe('postgres:16');
    expect(pg.port).toBe(5432);
    expect(pg.version).toBe('16');
    expect(pgc.env).toEqual(
      expect.arrayContaining([
        { name: 'POSTGRES_USER', value: 'app' },
        { name: 'POSTGRES_DB', value: 'shop' },
        { name: 'POSTGRES_PASSWORD', valueFrom: { secretKeyRef: { name: 'svc-db', key: 'password' } } },
      ]),
    );
    expect(first(spec(pgSet).volumeClaimTemplates).spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '10Gi' } },
      storageClassName: 'fast',
    });
    expect(pgc.volumeMounts).toEqual([
      { name: 'data', mountPath: '/var/lib/postgresql/data', subPath: 'data' },
    ]);

    const mysql = render({ type: 'mysql', volumeGiB: undefined });
    const my = main(podSpec(find(mysql.objects, 'StatefulSet', 'svc-db')));
    expect((my.env ?? []).map((e) => e.name)).toEqual([
      'MYSQL_USER',
      'MYSQL_PASSWORD',
      'MYSQL_DATABASE',
      'MYSQL_ROOT_PASSWORD',
    ]);
    expect(
      first(spec(find(mysql.objects, 'StatefulSet', 'svc-db')).volumeClaimTemplates).spec.resources,
    ).toEqual({
      requests: { storage: '1Gi' },
    });

    const redis = render({ type: 'redis', name: 'cache' });
    const rc = main(podSpec(find(redis.objects, 'StatefulSet', 'svc-cache')));
    // The image's entrypoint is kept (it steps down from root for `redis-server`).
    expect(rc.command).toBeUndefined();
    expect(rc.args.slice(0, 3)).toEqual(['redis-server', '--requirepass', '$(REDIS_PASSWORD)']);
    expect(rc.args).toContain('>$(REDIS_PASSWORD)');
    expect(rc.env).toEqual([
      { name: 'REDIS_PASSWORD', valueFrom: { secretKeyRef: { name: 'svc-cache', key: 'password' } } },
    ]);
    expect(
      main(podSpec(find(render({ type: 'valkey', name: 'kv' }).objects, 'StatefulSet', 'svc-kv'))).image,
    ).toBe('valkey/valkey:8');
  });

  it('gives the application the names the local runners give', () => {
    expect(render({ type: 'rabbitmq', name: 'mq', settings: { vhost: 'orders' } }).extra).toEqual({
      vhost: 'orders',
    });
    expect(render({ type: 'rabbitmq', name: 'mq' }).extra).toEqual({ vhost: 'app' });
    expect(render({ type: 'minio', name: 'files', settings: { bucket: 'uploads' } }).extra).toEqual({
      bucket: 'uploads',
      endpoint: 'http://svc-files:9000',
      region: 'us-east-1',
    });
    expect(render({ type: 'minio', name: 'files' }).extra.bucket).toBe('app-7-files-9f1c2d3e');
    const gotenberg = render({ type: 'gotenberg', name: 'pdf' });
    expect(gotenberg.extra).toEqual({ path: `/${base.password}` });
    expect(secretValues(find(gotenberg.objects, 'Secret', 'svc-pdf'))).toMatchObject({
      'root-path': `/${base.password}/`,
    });
    expect(main(podSpec(find(gotenberg.objects, 'StatefulSet', 'svc-pdf'))).args).toEqual([
      'gotenberg',
      '--api-root-path=$(GOTENBERG_ROOT_PATH)',
    ]);
    const meili = render({ type: 'meilisearch', name: 'search', settings: { MEILI_NO_ANALYTICS: true } });
    const mc = main(podSpec(find(meili.objects, 'StatefulSet', 'svc-search')));
    expect(mc.image).toBe('getmeili/meilisearch:v1.11');
    expect(mc.env).toEqual(
      expect.arrayContaining([
        { name: 'MEILI_NO_ANALYTICS', value: 'true' },
        { name: 'MEILI_ENV', value: 'production' },
        { name: 'MEILI_MASTER_KEY', valueFrom: { secretKeyRef: { name: 'svc-search', key: 'password' } } },
      ]),
    );
    expect(first(mc.volumeMounts).mountPath).toBe('/meili_data');
    expect(mc.readinessProbe?.httpGet).toEqual({ path: '/health', port: 7700, scheme: 'HTTP' });
    const ch = render({ type: 'clickhouse', name: 'olap' });
    expect(ch.port).toBe(8123);
    expect(spec(find(ch.objects, 'Service', 'svc-olap')).ports).toEqual([
      { name: 'main', port: 8123, targetPort: 8123, protocol: 'TCP' },
      { name: 'native', port: 9000, targetPort: 9000, protocol: 'TCP' },
    ]);
  });

  it('runs a container service at the document’s version, on the operator’s image when set', () => {
    const image = (rendered: ReturnType<typeof render>) =>
      main(podSpec(rendered.objects.find((o) => o.kind === 'StatefulSet') as KubeObject)).image;
    const meili = render({ type: 'meilisearch', name: 'search', version: '1.12' });
    expect(image(meili)).toBe('getmeili/meilisearch:v1.12');
    expect(meili.version).toBe('v1.12');
    expect(image(render({ type: 'clickhouse', name: 'olap', version: '25.3' }))).toBe(
      'clickhouse/clickhouse-server:25.3',
    );
    expect(image(render({ type: 'gotenberg', name: 'pdf', version: 'latest' }))).toBe(
      'gotenberg/gotenberg:latest',
    );
    const mirrored = renderService(
      { ...base, type: 'clickhouse', name: 'olap', version: '24.3' },
      { ...serviceOptions, images: { clickhouse: 'registry.local:5000/ch/server:24.8' } },
    );
    expect(image(mirrored)).toBe('registry.local:5000/ch/server:24.3');
    // A database service's image is the operator's: its version is not a tag here.
    expect(image(render({ version: '15' }))).toBe('postgres:16');
    expect(() => render({ type: 'meilisearch', name: 'search', version: '1.12 --x' })).toThrow(
      /search: version '1.12 --x' is not an image tag/,
    );
    // The spec's team labels the objects unless the options name one.
    expect(render({ teamId: 9 }).objects[0]?.metadata.labels?.['berth.dev/team']).toBe('9');
  });

  it('refuses a container service setting that is no environment variable name, naming it', () => {
    expect(() => render({ type: 'meilisearch', name: 'search', settings: { 'NO ANALYTICS': 'x' } })).toThrow(
      /setting 'NO ANALYTICS' is not an environment variable name/,
    );
    expect(() =>
      render({ type: 'meilisearch', name: 'search', settings: { MEILI_MASTER_KEY: 'x' } }),
    ).toThrow(/setting 'MEILI_MASTER_KEY' is set by Berth/);
    expect(() => render({ type: 'clickhouse', name: 'olap', settings: { NESTED: { a: 1 } } })).toThrow(
      /setting 'NESTED' must be a string, a number or a boolean/,
    );
  });

  it('says what does not run on Kubernetes, and refuses it', () => {
    expect(kubernetesUnsupportedServices()).toEqual([
      { type: 'sftp', reason: expect.stringContaining('volume') as string },
    ]);
    expect(() => render({ type: 'sftp', name: 'files' })).toThrow(/'sftp' does not run on Kubernetes/);
    const long = `s${'x'.repeat(60)}`;
    expect(() => render({ name: long })).toThrow(new RegExp(`service '${long}'.*at most 63`));
  });
});
