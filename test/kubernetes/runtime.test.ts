// The kubernetes runtime driver end to end (issue 28): Berth composed with BERTH_RUNTIME_DRIVER=kubernetes
// against a real control plane (test/helpers/kubernetes/cluster.ts: API server, controllers, scheduler,
// a fake kubelet that marks pods ready) applies a document over its API, and every assertion is on
// what the API server holds or its audit log received, not on what Berth meant to send.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { createKubeClient, loadKubeConfig, type KubeClient } from '../../src/drivers/kubernetes/client.js';
import type { KubeObject } from '../../src/drivers/kubernetes/objects.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createRepository, serveRepositories, type GitServer } from '../helpers/git-server.js';
import {
  startTestCluster,
  TEST_INGRESS_CLASS,
  TEST_STORAGE_CLASS,
  type AuditEvent,
  type TestCluster,
} from '../helpers/kubernetes/cluster.js';
import { DIALECTS } from '../helpers/store.js';
import { nodeAppFiles, nodeDocument } from '../runtime/node-app.js';
import {
  applyYaml,
  eventually,
  removeRuntimeAccounts,
  RUNTIME_TEST_ENV,
  waitForDeployment,
  warmNodeRuntime,
} from '../runtime/helpers.js';

/** Long enough for a build under load; the controller's progress deadline is half of it (12 s). */
const DEPLOYMENT_TIMEOUT = 24;
const PREFIX = 'bt-';

/** What a Deployment's status and template say, as the API server holds them. */
interface DeploymentObject extends KubeObject {
  spec: {
    replicas: number;
    progressDeadlineSeconds: number;
    strategy: { rollingUpdate: { maxUnavailable: number } };
    template: {
      metadata: { annotations: Record<string, string> };
      spec: {
        containers: Array<{
          name: string;
          command: string[];
          resources: { requests: Record<string, string>; limits: Record<string, string> };
          readinessProbe?: { httpGet: { path: string; port: number } };
          livenessProbe?: unknown;
          startupProbe?: unknown;
          volumeMounts: Array<{ name: string; mountPath: string }>;
        }>;
        volumes: Array<{ name: string; persistentVolumeClaim?: { claimName: string } }>;
      };
    };
  };
  status?: { availableReplicas?: number; updatedReplicas?: number; replicas?: number };
}

const documentOf = (repositoryUrl: string, replicas: number, start = 'npm start') =>
  nodeDocument('acme', 'shop', repositoryUrl, {
    settings: { replicas },
    application: { commands: { build: ['node build.js'], init: ['echo migrated'], start } },
    spec: {
      services: [
        { name: 'db', type: 'postgresql' },
        { name: 'jobs', type: 'worker', command: 'node build.js' },
      ],
      container_services: [{ name: 'search', type: 'meilisearch', version: '1.11', memory: '512Mi' }],
    },
  });

const decode = (secret: KubeObject, key: string): string =>
  Buffer.from((secret.data as Record<string, string>)[key] ?? '', 'base64').toString('utf8');

describe('applications on Kubernetes (BERTH_RUNTIME_DRIVER=kubernetes)', () => {
  let cluster: TestCluster;
  let kube: KubeClient;
  let t: TestApp;
  let background: Background;
  let git: GitServer;
  let gitRoot: string;
  let appId: number;
  let ns: string;
  const releases: string[] = [];
  /** The successful deployments, with `releases` in the same order. */
  const deployments: number[] = [];

  const api = (method: string, url: string, payload?: Record<string, unknown>) =>
    t.request({ method, url, headers: t.auth.platform, ...(payload ? { payload } : {}) });
  const web = () => kube.read<DeploymentObject>('apps/v1', 'Deployment', 'web', ns);
  const liveRelease = async () => (await web())?.spec.template.metadata.annotations['berth.dev/release'];

  beforeAll(async () => {
    [cluster] = await Promise.all([startTestCluster(), warmNodeRuntime()]);
    kube = createKubeClient(loadKubeConfig({ kubeconfig: cluster.kubeconfigPath }));
    t = await createTestApp(DIALECTS[0]!, {
      env: {
        ...RUNTIME_TEST_ENV,
        BERTH_DEPLOYMENT_TIMEOUT: String(DEPLOYMENT_TIMEOUT),
        BERTH_RUNTIMES_DIR: inject('runtimesDir'),
        BERTH_RUNTIME_DRIVER: 'kubernetes',
        BERTH_KUBECONFIG: cluster.kubeconfigPath,
        BERTH_K8S_STORAGE_CLASS: TEST_STORAGE_CLASS,
        BERTH_K8S_INGRESS_CLASS: TEST_INGRESS_CLASS,
        BERTH_K8S_NAMESPACE_PREFIX: PREFIX,
      },
    });
    background = await startBackground(t.ctx, { pollMs: 100 });
    gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
    git = await serveRepositories(gitRoot);
    createRepository(gitRoot, 'shop').commit(nodeAppFiles('v1'));
  }, 180_000);

  afterAll(async () => {
    await background?.stop();
    await git?.close();
    const dataDir = t?.ctx.config.dataDir;
    await t?.close();
    if (dataDir) removeRuntimeAccounts(dataDir);
    fs.rmSync(gitRoot, { recursive: true, force: true });
    await cluster?.stop();
  });

  it('applies an application with its domain, volume, secret and services as the objects of its namespace', async () => {
    const applied = await applyYaml(t, documentOf(git.url('shop'), 2));
    appId = applied.application_id;
    ns = `${PREFIX}app-${appId}`;
    // On Kubernetes the container service runs: the change line does not call it unavailable.
    expect(applied.changes.join('\n')).not.toContain('unavailable');
    const deployment = await waitForDeployment(t, appId, applied.deployment_id!, 120_000);
    expect(deployment.error).toBeNull();
    expect(deployment.status).toBe('success');
    releases.push(deployment.release!);
    deployments.push(deployment.id);

    const namespace = await kube.read('v1', 'Namespace', ns);
    expect(namespace?.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'berth',
      'berth.dev/team': String(t.user.team_id),
      'berth.dev/application': String(appId),
    });

    // The environment: the secret, and the services' names pointing at their in-cluster Services.
    const env = (await kube.read('v1', 'Secret', 'env', ns))!;
    expect(decode(env, 'APP_SECRET')).toBe('secret-of-shop');
    expect(decode(env, 'PORT')).toBe('8080');
    expect(decode(env, 'DATABASE_URL')).toMatch(/^postgresql:\/\/app:[^@]+@svc-db:5432\/app$/);
    expect(decode(env, 'MEILISEARCH_HOST')).toBe('http://svc-search:7700');

    const d = (await web())!;
    expect(d.spec.replicas).toBe(2);
    expect(d.spec.strategy.rollingUpdate.maxUnavailable).toBe(0);
    expect(d.spec.progressDeadlineSeconds).toBe(DEPLOYMENT_TIMEOUT / 2);
    const container = d.spec.template.spec.containers[0]!;
    expect(container.resources.requests.memory).toBe('256Mi');
    expect(container.resources.limits.memory).toBe('256Mi');
    expect(container.readinessProbe?.httpGet).toMatchObject({ path: '/health', port: 8080 });
    expect(container.livenessProbe).toBeDefined();
    expect(container.startupProbe).toBeDefined();
    expect(container.volumeMounts).toContainEqual(expect.objectContaining({ mountPath: '/data' }));
    expect(d.status).toMatchObject({ availableReplicas: 2, updatedReplicas: 2, replicas: 2 });
    // Reported a success only after the API server answered Berth the Deployment available: the last
    // read of it before the deployment finished says so.
    const finishedAt = Date.parse(
      (await api('GET', `/api/v1/applications/${appId}/deployments/${deployment.id}`)).json<{
        data: { finished_at: string };
      }>().data.finished_at,
    );
    const reads = (await cluster.audit()).filter(
      (e) =>
        e.verb === 'get' &&
        e.objectRef?.resource === 'deployments' &&
        e.objectRef.namespace === ns &&
        e.objectRef.name === 'web' &&
        Date.parse((e as unknown as { stageTimestamp: string }).stageTimestamp) <= finishedAt,
    );
    const lastRead = reads.at(-1)?.responseObject as DeploymentObject | undefined;
    expect(lastRead?.status).toMatchObject({ availableReplicas: 2, updatedReplicas: 2, replicas: 2 });
    // The worker: a Deployment of its own, from the same release.
    const worker = await kube.read<DeploymentObject>('apps/v1', 'Deployment', 'worker-jobs', ns);
    expect(worker?.spec.template.spec.containers[0]!.command.join(' ')).toContain('node build.js');
    expect(worker?.spec.template.metadata.annotations['berth.dev/release']).toBe(deployment.release);

    const service = (await kube.read('v1', 'Service', 'web', ns)) as KubeObject & {
      spec: { ports: Array<{ port: number; targetPort: number; protocol: string }> };
    };
    expect(service.spec.ports[0]).toMatchObject({ port: 80, targetPort: 8080, protocol: 'TCP' });
    const hosts = (await kube.list('networking.k8s.io/v1', 'Ingress', ns)).map(
      (i) => (i.spec as { rules: Array<{ host: string }> }).rules[0]!.host,
    );
    expect(hosts).toContain('shop.test');
    expect(hosts).toHaveLength(2); // the domain and the default host
    const claim = (await kube.read('v1', 'PersistentVolumeClaim', 'vol-data', ns)) as KubeObject & {
      spec: { resources: { requests: { storage: string } } };
    };
    expect(claim.spec.resources.requests.storage).toBe('1Gi');
    expect(await kube.read('networking.k8s.io/v1', 'NetworkPolicy', 'berth', ns)).toBeDefined();
    expect(await kube.read('v1', 'ResourceQuota', 'berth', ns)).toBeDefined();
    // The init commands ran as a Job, to completion, before the rollout.
    const job = (await kube.read('batch/v1', 'Job', `init-${releases[0]}`, ns)) as KubeObject & {
      status: { succeeded?: number };
    };
    expect(job.status.succeeded).toBe(1);

    // The services: StatefulSets with their volumes, and meilisearch runs (it is unavailable locally).
    for (const name of ['svc-db', 'svc-search'])
      expect(await kube.read('apps/v1', 'StatefulSet', name, ns), name).toBeDefined();
    const services = await eventually(
      async () => {
        const body = (await api('GET', `/api/v1/applications/${appId}/services`)).json<{
          data: Array<{ name: string; status: string }>;
        }>();
        return body.data.every((s) => s.status === 'running') ? body.data : undefined;
      },
      30_000,
      'the services to run',
    );
    // The worker runs too: its instance is the worker Deployment's pod.
    expect(services.map((s) => s.name).sort()).toEqual(['db', 'jobs', 'search']);

    // Every object went through server-side apply as field manager berth.
    const events: AuditEvent[] = await cluster.audit();
    const applies = events.filter(
      (e) => e.verb === 'patch' && e.objectRef?.namespace === ns && e.user.username === cluster.adminUser,
    );
    expect(applies.length).toBeGreaterThan(5);
    for (const e of applies) expect(e.requestURI).toContain('fieldManager=berth');
  }, 180_000);

  it('puts the release where a pod fetches it: a signed URL and the SHA-256 in its Secret', async () => {
    const secret = (await kube.read('v1', 'Secret', `release-${releases[0]}`, ns))!;
    // Signed for Berth's public URL; this Berth listens on a free port of its own.
    const url = new URL(decode(secret, 'url'));
    expect(url.origin).toBe(new URL(t.ctx.config.publicUrl).origin);
    url.host = `127.0.0.1:${t.port}`;
    // Fetched as the init container would.
    const answer = await fetch(url);
    expect(answer.status).toBe(200);
    const bytes = Buffer.from(await answer.arrayBuffer());
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(decode(secret, 'sha256'));
    // A tampered signature is refused.
    const tampered = new URL(url);
    tampered.searchParams.set('signature', '0'.repeat(64));
    expect((await fetch(tampered)).status).toBe(403);
  });

  it('reads logs through the log API and runs commands through exec', async () => {
    const logs = (await api('GET', `/api/v1/applications/${appId}/logs?tail=5`)).json<{
      data: Array<{ source: string; line: string }>;
    }>().data;
    expect(logs).toHaveLength(5);
    // The fake kubelet's lines for the pods, named as instances: a pod's name, or worker-<name>.
    for (const l of logs) expect(l.line).toMatch(/^fake log \S+\/(web|worker) line \d+$/);
    expect(logs.some((l) => l.source.startsWith('web-'))).toBe(true);
    const exec = await api('POST', `/api/v1/applications/${appId}/exec`, { command: 'php artisan about' });
    expect(exec.statusCode).toBe(200);
    expect(exec.json<{ data: { output: string; exit_code: number } }>().data).toMatchObject({
      output: 'ran: /bin/sh -c php artisan about\n',
      exit_code: 0,
    });
    const failing = await api('POST', `/api/v1/applications/${appId}/exec`, {
      command: 'false fake-kubelet:exit-3',
    });
    expect(failing.json<{ data: { exit_code: number } }>().data.exit_code).toBe(3);
    // Each went to a web pod's `web` container through pods/exec.
    const execs = (await cluster.audit()).filter(
      (e) => e.objectRef?.subresource === 'exec' && e.objectRef.namespace === ns,
    );
    expect(execs.length).toBeGreaterThanOrEqual(2);
    for (const e of execs) expect(e.requestURI).toContain('container=web');
  });

  it('updates the objects for a changed replica count and a new release', async () => {
    const applied = await applyYaml(t, documentOf(git.url('shop'), 3));
    const deployment = await waitForDeployment(t, appId, applied.deployment_id!, 120_000);
    expect(deployment.status).toBe('success');
    releases.push(deployment.release!);
    deployments.push(deployment.id);
    const d = (await web())!;
    expect(d.spec.replicas).toBe(3);
    expect(d.spec.template.metadata.annotations['berth.dev/release']).toBe(releases[1]);
    expect(d.status).toMatchObject({ availableReplicas: 3, updatedReplicas: 3, replicas: 3 });
    const sets = await kube.list('apps/v1', 'ReplicaSet', ns, 'app.kubernetes.io/name=web');
    expect(sets.length).toBeGreaterThanOrEqual(2); // the new release's and the previous one's
    const status = (await api('GET', `/api/v1/applications/${appId}/instances`)).json<{
      data: Array<{ name: string; release: string; state: string }>;
    }>();
    const web3 = status.data.filter(
      (i) => i.name.startsWith('web-') && i.release === releases[1] && i.state === 'running',
    );
    expect(web3).toHaveLength(3);
  }, 180_000);

  it('reports a failed rollout failed with the controller’s reason, the old release serving', async () => {
    const applied = await applyYaml(t, documentOf(git.url('shop'), 3, 'npm start # fake-kubelet:crash'));
    const deployment = await waitForDeployment(t, appId, applied.deployment_id!, 120_000);
    expect(deployment.status).toBe('failed');
    expect(deployment.error).toMatch(/progress deadline|timed out progressing/i);
    // The Deployment went back to the release that served; its pods stayed available.
    expect(await liveRelease()).toBe(releases[1]);
    await eventually(
      async () => {
        const d = await web();
        return d?.status?.availableReplicas === 3 && d.status.replicas === 3;
      },
      30_000,
      'the old release to be all that runs',
    );
    // Back to a start command that works, for the tests below.
    const fixed = await applyYaml(t, documentOf(git.url('shop'), 3));
    const again = await waitForDeployment(t, appId, fixed.deployment_id!, 120_000);
    expect(again.status).toBe('success');
    releases.push(again.release!);
    deployments.push(again.id);
  }, 180_000);

  it('suspends (no replicas), resumes and rolls back', async () => {
    expect((await api('POST', `/api/v1/applications/${appId}/suspend`)).statusCode).toBe(200);
    expect((await web())!.spec.replicas).toBe(0);
    await eventually(
      async () => {
        const pods = await kube.list('v1', 'Pod', ns, 'app.kubernetes.io/name=web');
        return pods.length === 0;
      },
      30_000,
      'the pods to go',
    );
    expect((await api('POST', `/api/v1/applications/${appId}/resume`)).statusCode).toBe(200);
    expect((await web())!.spec.replicas).toBe(3);

    const rollback = await api('POST', `/api/v1/applications/${appId}/rollback`, {
      deployment_id: deployments[1]!,
    });
    expect(rollback.statusCode).toBe(202);
    const done = await waitForDeployment(
      t,
      appId,
      rollback.json<{ data: { id: number } }>().data.id,
      120_000,
    );
    expect(done.status).toBe('success');
    expect(await liveRelease()).toBe(releases[1]);
  }, 180_000);

  it('exports the same document as a Berth on the local driver', async () => {
    const other = await createTestApp(DIALECTS[0]!, {});
    try {
      // Nothing runs on the local Berth (no background work): its export is what apply stored.
      await applyYaml(other, documentOf(git.url('shop'), 3));
      const exportOf = async (app: TestApp) =>
        (await app.request({ url: '/api/v1/teams/acme/export-yaml', headers: app.auth.platform })).body;
      expect(await exportOf(t)).toBe(await exportOf(other));
    } finally {
      await other.close();
    }
  });

  it('deletes the application: its namespace goes, with its services', async () => {
    expect((await api('DELETE', `/api/v1/applications/${appId}`)).statusCode).toBe(202);
    await eventually(
      async () => (await kube.read('v1', 'Namespace', ns)) === undefined,
      60_000,
      'the namespace to go',
    );
    expect(await kube.list('apps/v1', 'StatefulSet', undefined, `berth.dev/application=${appId}`)).toEqual(
      [],
    );
  }, 90_000);
});
