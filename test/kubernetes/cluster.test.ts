// The test control plane itself (test/helpers/kubernetes/cluster.ts): real API server, controllers
// and scheduler, with the fake kubelet. What the Kubernetes driver's tests rely on is asserted here on
// what the API server holds and on its audit log.
import fs from 'node:fs';
import { Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestCluster, TEST_STORAGE_CLASS, type TestCluster } from '../helpers/kubernetes/cluster.js';
import { isAlive, waitFor } from '../helpers/processes.js';

const NS = 'berth-testenv';
const LABELS = { 'app.kubernetes.io/name': 'web', 'app.kubernetes.io/managed-by': 'berth' };

/** Live children of this process, from /proc (zombies count as dead). */
function children(): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const match = /^\d+ \(.*\) (\S) (\d+)/.exec(fs.readFileSync(`/proc/${entry}/stat`, 'utf8'));
      if (match && match[1] !== 'Z' && Number(match[2]) === process.pid) found.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

function deployment(
  name: string,
  command: string[],
  extra: Record<string, unknown> = {},
): k8s.KubernetesObject {
  const labels = { ...LABELS, 'app.kubernetes.io/name': name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: NS, labels },
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [
            { name: 'app', image: 'node:24-bookworm-slim', command, ports: [{ containerPort: 8080 }] },
          ],
        },
      },
      ...extra,
    },
  } as k8s.KubernetesObject;
}

function job(name: string, command: string[]): k8s.KubernetesObject {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace: NS, labels: LABELS },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'init', image: 'node:24-bookworm-slim', command }],
        },
      },
    },
  } as k8s.KubernetesObject;
}

describe('the Kubernetes test control plane', () => {
  let cluster: TestCluster;
  let kc: k8s.KubeConfig;
  let objects: k8s.KubernetesObjectApi;
  let core: k8s.CoreV1Api;
  let apps: k8s.AppsV1Api;
  let batch: k8s.BatchV1Api;
  const apply = (object: k8s.KubernetesObject): Promise<k8s.KubernetesObject> =>
    objects.patch(object, undefined, undefined, 'berth', true, k8s.PatchStrategy.ServerSideApply);

  beforeAll(async () => {
    cluster = await startTestCluster();
    kc = new k8s.KubeConfig();
    kc.loadFromFile(cluster.kubeconfigPath);
    objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    core = kc.makeApiClient(k8s.CoreV1Api);
    apps = kc.makeApiClient(k8s.AppsV1Api);
    batch = kc.makeApiClient(k8s.BatchV1Api);
    await apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS, labels: LABELS } });
    // The start's own waits (30 s for the API server, 30 s for the rest) under a loaded machine.
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('rolls out a Deployment, completes a Job and binds a claim of class berth-test', async () => {
    const web = deployment('web', ['node', 'server.js']);
    const spec = (web as { spec: { template: { spec: Record<string, unknown> } } }).spec.template.spec;
    spec.initContainers = [{ name: 'fetch', image: 'curl', command: ['fetch-release'] }];
    spec.volumes = [{ name: 'data', persistentVolumeClaim: { claimName: 'vol-data' } }];
    await apply({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'vol-data', namespace: NS },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: TEST_STORAGE_CLASS,
        resources: { requests: { storage: '3Gi' } },
      },
    } as k8s.KubernetesObject);
    await apply(web);
    await apply(job('init-r1', ['node', 'migrate.js']));

    const claim = await waitFor(async () => {
      const c = await core.readNamespacedPersistentVolumeClaim({ name: 'vol-data', namespace: NS });
      return c.status?.phase === 'Bound' ? c : undefined;
    }, 20_000);
    expect(claim.status?.capacity?.storage).toBe('3Gi');
    const volume = await core.readPersistentVolume({ name: claim.spec?.volumeName ?? '' });
    expect(volume.spec?.storageClassName).toBe(TEST_STORAGE_CLASS);
    // berth-test is the default class: a claim that names none gets it.
    const unnamed = await core.createNamespacedPersistentVolumeClaim({
      namespace: NS,
      body: {
        metadata: { name: 'no-class' },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      },
    });
    expect(unnamed.spec?.storageClassName).toBe(TEST_STORAGE_CLASS);

    const rolledOut = await waitFor(async () => {
      const d = await apps.readNamespacedDeployment({ name: 'web', namespace: NS });
      const available = d.status?.conditions?.find((c) => c.type === 'Available');
      return (d.status?.observedGeneration ?? 0) >= (d.metadata?.generation ?? 1) &&
        d.status?.availableReplicas === 2 &&
        available?.status === 'True'
        ? d
        : undefined;
    }, 25_000);
    expect(rolledOut.status?.readyReplicas).toBe(2);
    const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=web' });
    expect(pods.items).toHaveLength(2);
    for (const pod of pods.items) {
      expect(pod.status?.phase).toBe('Running');
      expect(pod.spec?.nodeName).toBe('fake-node-1');
      expect(pod.status?.initContainerStatuses?.map((s) => [s.name, s.state?.terminated?.reason])).toEqual([
        ['fetch', 'Completed'],
      ]);
    }

    const done = await waitFor(async () => {
      const j = await batch.readNamespacedJob({ name: 'init-r1', namespace: NS });
      return j.status?.conditions?.find((c) => c.type === 'Complete' && c.status === 'True') ? j : undefined;
    }, 20_000);
    expect(done.status?.succeeded).toBe(1);
  });

  it('keeps a crash-looping Deployment unavailable until its progress deadline passes', async () => {
    await apply(
      deployment('crashing', ['node', 'server.js', 'fake-kubelet:crash'], { progressDeadlineSeconds: 3 }),
    );
    const stuck = await waitFor(async () => {
      const d = await apps.readNamespacedDeployment({ name: 'crashing', namespace: NS });
      const progressing = d.status?.conditions?.find((c) => c.type === 'Progressing');
      return progressing?.status === 'False' ? { d, progressing } : undefined;
    }, 25_000);
    expect(stuck.progressing.reason).toBe('ProgressDeadlineExceeded');
    expect(stuck.d.status?.availableReplicas ?? 0).toBe(0);
    const pods = await core.listNamespacedPod({
      namespace: NS,
      labelSelector: 'app.kubernetes.io/name=crashing',
    });
    const status = pods.items[0]?.status?.containerStatuses?.[0];
    expect(status?.ready).toBe(false);
    expect(status?.state?.waiting?.reason).toBe('CrashLoopBackOff');
    expect(status?.restartCount).toBeGreaterThan(0);
  });

  it('fails a Job whose container holds the fail marker', async () => {
    await apply(job('init-bad', ['node', 'migrate.js', 'fake-kubelet:fail']));
    const failed = await waitFor(async () => {
      const j = await batch.readNamespacedJob({ name: 'init-bad', namespace: NS });
      return j.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True') ? j : undefined;
    }, 20_000);
    expect(failed.status?.failed).toBe(1);
    const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: 'job-name=init-bad' });
    expect(pods.items[0]?.status?.phase).toBe('Failed');
    expect(pods.items[0]?.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(1);
  });

  it('records the server-side apply of field manager berth in the audit log', async () => {
    const events = await cluster.audit();
    const patch = events.find(
      (e) =>
        e.verb === 'patch' &&
        e.objectRef?.resource === 'deployments' &&
        e.objectRef.name === 'web' &&
        e.objectRef.namespace === NS,
    );
    expect(patch).toBeDefined();
    expect(patch?.user.username).toBe(cluster.adminUser);
    expect(new URL(patch?.requestURI ?? '', cluster.server).searchParams.get('fieldManager')).toBe('berth');
    expect(patch?.responseStatus?.code).toBe(201);
    expect(patch?.requestObject).toMatchObject({ kind: 'Deployment', spec: { replicas: 2 } });
  });

  it('refuses everything to the restricted user, and audits it', async () => {
    const restricted = new k8s.KubeConfig();
    restricted.loadFromFile(cluster.restrictedKubeconfigPath);
    const error = await restricted
      .makeApiClient(k8s.CoreV1Api)
      .listNamespacedPod({ namespace: NS })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect((error as k8s.ApiException<unknown>).code).toBe(403);
    const events = await cluster.audit();
    expect(
      events.some(
        (e) =>
          e.user.username === cluster.restrictedUser &&
          e.verb === 'list' &&
          e.objectRef?.resource === 'pods' &&
          e.responseStatus?.code === 403,
      ),
    ).toBe(true);
  });

  it("serves a pod's logs and exec through the API server", async () => {
    const pods = await core.listNamespacedPod({ namespace: NS, labelSelector: 'app.kubernetes.io/name=web' });
    const pod = pods.items[0]?.metadata?.name ?? '';
    const logs = await core.readNamespacedPodLog({
      name: pod,
      namespace: NS,
      container: 'app',
      tailLines: 2,
      timestamps: true,
    });
    expect(logs).toBe(
      `2026-01-01T00:00:19Z fake log ${pod}/app line 19\n2026-01-01T00:00:20Z fake log ${pod}/app line 20\n`,
    );

    const run = async (command: string[]): Promise<{ stdout: string; status: k8s.V1Status }> => {
      let stdout = '';
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          stdout += chunk.toString();
          callback();
        },
      });
      const status = await new Promise<k8s.V1Status>((resolve, reject) => {
        new k8s.Exec(kc).exec(NS, pod, 'app', command, sink, null, null, false, resolve).catch(reject);
      });
      return { stdout, status };
    };
    const ok = await run(['php', 'artisan', 'migrate']);
    expect(ok).toEqual({ stdout: 'ran: php artisan migrate\n', status: { metadata: {}, status: 'Success' } });
    const bad = await run(['sh', '-c', 'fake-kubelet:exit-3']);
    expect(bad.stdout).toBe('ran: sh -c fake-kubelet:exit-3\n');
    expect(bad.status.status).toBe('Failure');
    expect(bad.status.details?.causes).toEqual([{ reason: 'ExitCode', message: '3' }]);
  });

  it('deletes the volume of a deleted claim, and finishes pod deletions', async () => {
    const claim = await core.readNamespacedPersistentVolumeClaim({ name: 'vol-data', namespace: NS });
    await core.deleteNamespace({ name: NS });
    await waitFor(async () => {
      try {
        await core.readNamespace({ name: NS });
        return undefined;
      } catch (error) {
        return (error as k8s.ApiException<unknown>).code === 404 ? true : undefined;
      }
    }, 25_000);
    await waitFor(async () => {
      try {
        await core.readPersistentVolume({ name: claim.spec?.volumeName ?? '' });
        return undefined;
      } catch (error) {
        return (error as k8s.ApiException<unknown>).code === 404 ? true : undefined;
      }
    }, 10_000);
  });

  it('stops every process and removes its directory', async () => {
    expect(cluster.pids).toHaveLength(5);
    expect(cluster.pids.every(isAlive)).toBe(true);
    await cluster.stop();
    expect(cluster.pids.filter(isAlive)).toEqual([]);
    expect(fs.existsSync(cluster.dir)).toBe(false);
  });
});

describe('a test cluster whose process dies while it starts', () => {
  it("fails with the tail of that process's log and leaves no process or directory behind", async () => {
    const before = children();
    const error = await startTestCluster({ apiServerFlags: ['--no-such-flag'] }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(error?.message).toMatch(/^kube-apiserver exited \(1\) while the test cluster in (\S+) started:\n/);
    expect(error?.message).toContain('unknown flag: --no-such-flag');
    const dir = /in (\S+) started/.exec(error?.message ?? '')?.[1] ?? '';
    expect(fs.existsSync(dir)).toBe(false);
    expect(children().filter((pid) => !before.includes(pid))).toEqual([]);
  });
});
