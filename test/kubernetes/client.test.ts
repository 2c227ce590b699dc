// The Kubernetes client the kubernetes runtime driver uses (src/drivers/kubernetes/client.ts), against
// a real control plane (test/helpers/kubernetes/cluster.ts): asserted on what the API server holds and
// on its audit log, not on what the client meant to send.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createKubeClient,
  KubernetesApiError,
  KubernetesUnreachableError,
  loadKubeConfig,
  type KubeClient,
  type KubeObject,
} from '../../src/drivers/kubernetes/client.js';
import { FAKE_NODE, startTestCluster, type TestCluster } from '../helpers/kubernetes/cluster.js';
import { freePort, waitFor } from '../helpers/processes.js';

const NS = 'berth-client-test';

/** How a thrown promise settled: the error, for assertions on its fields. */
async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('Kubernetes client', { timeout: 60_000 }, () => {
  let cluster: TestCluster;
  let client: KubeClient;
  beforeAll(async () => {
    cluster = await startTestCluster();
    client = createKubeClient(loadKubeConfig({ kubeconfig: cluster.kubeconfigPath }));
    await client.apply({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
  }, 120_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('applies server-side as field manager berth: twice is the same object, the same resourceVersion', async () => {
    const secret: KubeObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'env', namespace: NS, labels: { 'app.kubernetes.io/managed-by': 'berth' } },
      // `data`, as Berth renders Secrets: an apply of `stringData` (write-only, folded into `data`) is a
      // change each time on 1.20 once a second has passed, so its resourceVersion moves (seen in CI).
      data: { GREETING: Buffer.from('hello').toString('base64') },
    };
    const first = await client.apply(secret);
    const second = await client.apply(secret);
    const version = (o: KubeObject) => (o.metadata as { resourceVersion?: string }).resourceVersion;
    expect(version(first)).toBeDefined();
    expect(version(second)).toBe(version(first));
    expect(second.data).toEqual({ GREETING: Buffer.from('hello').toString('base64') });

    // What the server holds: the object, its fields owned by berth through Apply.
    const held = await client.read('v1', 'Secret', 'env', NS);
    const managed = (held?.metadata as { managedFields?: Array<{ manager: string; operation: string }> })
      .managedFields;
    expect(managed?.map((f) => `${f.manager}/${f.operation}`)).toEqual(['berth/Apply']);

    // The audit log: both applies were PATCHes with fieldManager=berth and force, answered 200 / 201.
    const applies = (await cluster.audit()).filter(
      (e) => e.stage === 'ResponseComplete' && e.verb === 'patch' && e.objectRef?.resource === 'secrets',
    );
    expect(applies).toHaveLength(2);
    for (const event of applies) {
      const query = new URL(event.requestURI, 'https://x').searchParams;
      expect(query.get('fieldManager')).toBe('berth');
      expect(query.get('force')).toBe('true');
      expect(event.user.username).toBe(cluster.adminUser);
    }
    expect(applies.map((e) => e.responseStatus?.code)).toEqual([201, 200]);
  });

  it('reads a missing object as undefined, lists with a label selector, removes, merge-patches', async () => {
    expect(await client.read('v1', 'Secret', 'nothing-here', NS)).toBeUndefined();
    expect(await client.read('v1', 'Namespace', 'no-such-namespace')).toBeUndefined();
    // A namespaced kind is never read from a default namespace.
    expect((await failure(client.read('v1', 'Secret', 'env'))).message).toContain('namespace is needed');

    for (const name of ['a', 'b'])
      await client.apply({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace: NS, labels: { 'berth.dev/part': name } },
        data: { name },
      });
    const listed = await client.list('v1', 'ConfigMap', NS, 'berth.dev/part=b');
    expect(listed.map((o) => [o.apiVersion, o.kind, o.metadata.name])).toEqual([['v1', 'ConfigMap', 'b']]);
    expect((await client.list('v1', 'ConfigMap', NS, 'berth.dev/part')).map((o) => o.metadata.name)).toEqual([
      'a',
      'b',
    ]);
    // All namespaces, and a cluster-scoped kind.
    expect((await client.list('v1', 'Namespace', undefined)).map((o) => o.metadata.name)).toContain(NS);

    const patched = await client.patchMerge(
      'v1',
      'ConfigMap',
      'a',
      NS,
      { metadata: { annotations: { note: 'x' } }, data: { name: null, extra: 'y' } },
      'berth-test-patch',
    );
    expect(patched.data).toEqual({ extra: 'y' });
    const held = await client.read('v1', 'ConfigMap', 'a', NS);
    expect(held?.metadata.annotations).toEqual({ note: 'x' });
    const patches = (await cluster.audit()).filter(
      (e) => e.verb === 'patch' && e.objectRef?.resource === 'configmaps' && e.objectRef.name === 'a',
    );
    expect(patches.map((e) => new URL(e.requestURI, 'https://x').searchParams.get('fieldManager'))).toEqual([
      'berth',
      'berth-test-patch',
    ]);

    await client.remove('v1', 'ConfigMap', 'a', NS, { propagation: 'Background' });
    expect(await client.read('v1', 'ConfigMap', 'a', NS)).toBeUndefined();
    // Gone already: fine.
    await client.remove('v1', 'ConfigMap', 'a', NS, { propagation: 'Foreground' });
    const deletes = (await cluster.audit()).filter(
      (e) => e.verb === 'delete' && e.objectRef?.resource === 'configmaps' && e.objectRef.name === 'a',
    );
    expect(
      deletes.map((e) => new URL(e.requestURI, 'https://x').searchParams.get('propagationPolicy')),
    ).toEqual(['Background', 'Foreground']);
    expect(deletes.map((e) => e.responseStatus?.code)).toEqual([200, 404]);
  });

  it('discovers what the server serves: the version, group versions and each kind', async () => {
    expect(await client.serverVersion()).toMatchObject({ gitVersion: 'v1.20.2', major: '1', minor: '20' });
    const served = await client.groupVersions();
    for (const gv of ['v1', 'apps/v1', 'batch/v1', 'batch/v1beta1', 'networking.k8s.io/v1'])
      expect(served.has(gv)).toBe(true);
    expect(served.has('policy/v1')).toBe(false);
    // 1.20 serves batch/v1 (Job) but CronJob only in batch/v1beta1.
    expect(await client.supports('batch/v1', 'Job')).toBe(true);
    expect(await client.supports('batch/v1', 'CronJob')).toBe(false);
    expect(await client.supports('batch/v1beta1', 'CronJob')).toBe(true);
    expect(await client.supports('policy/v1', 'PodDisruptionBudget')).toBe(false);
    expect((await failure(client.read('batch/v1', 'CronJob', 'scheduler', NS))).message).toBe(
      `the Kubernetes API server ${cluster.server} does not serve CronJob in batch/v1`,
    );
  });

  it("wraps the API's refusals with status, reason and message, and names a server it cannot reach", async () => {
    const invalid = await failure(
      client.apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'Not_A_Name', namespace: NS } }),
    );
    expect(invalid).toBeInstanceOf(KubernetesApiError);
    expect(invalid).toMatchObject({ statusCode: 422, reason: 'Invalid' });
    expect(invalid.message).toContain('ConfigMap "Not_A_Name" is invalid');

    const restricted = createKubeClient(loadKubeConfig({ kubeconfig: cluster.restrictedKubeconfigPath }));
    const forbidden = await failure(restricted.read('v1', 'Secret', 'env', NS));
    expect(forbidden).toMatchObject({ statusCode: 403, reason: 'Forbidden' });
    expect(forbidden.message).toContain(`User "${cluster.restrictedUser}" cannot get resource "secrets"`);
    // The token is in no error.
    const token = /token: (\S+)/.exec(fs.readFileSync(cluster.restrictedKubeconfigPath, 'utf8'))?.[1];
    expect(token).toBeDefined();
    expect(JSON.stringify({ ...forbidden, message: forbidden.message })).not.toContain(token);
    expect(await restricted.reviewAccess({ verb: 'get', group: '', resource: 'secrets' })).toBe(false);
    expect(await client.reviewAccess({ verb: 'get', group: '', resource: 'secrets' })).toBe(true);

    const port = await freePort();
    const dead = path.join(cluster.dir, 'client-dead.kubeconfig');
    fs.writeFileSync(
      dead,
      fs.readFileSync(cluster.kubeconfigPath, 'utf8').replace(cluster.server, `https://127.0.0.1:${port}`),
    );
    const unreachable = await failure(
      createKubeClient(loadKubeConfig({ kubeconfig: dead })).read('v1', 'Namespace', NS),
    );
    expect(unreachable).toBeInstanceOf(KubernetesUnreachableError);
    expect(unreachable.message).toBe(
      `cannot reach the Kubernetes API server https://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`,
    );
  });

  it('reads pod logs and runs commands in a pod over the exec WebSocket', async () => {
    await client.apply({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'web-0', namespace: NS },
      spec: { nodeName: FAKE_NODE, containers: [{ name: 'web', image: 'node:22-bookworm-slim' }] },
    });
    await waitFor(async () => {
      const pod = await client.read<KubeObject & { status?: { phase?: string } }>('v1', 'Pod', 'web-0', NS);
      return pod?.status?.phase === 'Running' ? true : undefined;
    }, 30_000);

    const log = await client.podLog(NS, 'web-0', 'web', { tailLines: 2, timestamps: true });
    expect(log).toBe(
      '2026-01-01T00:00:19Z fake log web-0/web line 19\n2026-01-01T00:00:20Z fake log web-0/web line 20\n',
    );
    const logs = (await cluster.audit()).filter((e) => e.objectRef?.subresource === 'log');
    expect(new URL(logs.at(-1)!.requestURI, 'https://x').searchParams.get('timestamps')).toBe('true');

    const ok = await client.exec(NS, 'web-0', 'web', ['/bin/sh', '-c', 'echo hi'], {
      maxOutputBytes: 1024,
      timeoutMs: 10_000,
    });
    expect(ok).toEqual({ exitCode: 0, output: 'ran: /bin/sh -c echo hi\n', truncated: false });
    const chunks: string[] = [];
    const failed = await client.exec(NS, 'web-0', 'web', ['false', 'fake-kubelet:exit-3'], {
      maxOutputBytes: 5,
      timeoutMs: 10_000,
      onOutput: (chunk) => chunks.push(chunk.toString()),
    });
    expect(failed).toEqual({ exitCode: 3, output: 'ran: ', truncated: true });
    expect(chunks.join('')).toBe('ran: false fake-kubelet:exit-3\n');
    const execs = (await cluster.audit()).filter(
      (e) => e.stage === 'ResponseComplete' && e.objectRef?.subresource === 'exec',
    );
    expect(execs.map((e) => new URL(e.requestURI, 'https://x').searchParams.getAll('command'))).toEqual([
      ['/bin/sh', '-c', 'echo hi'],
      ['false', 'fake-kubelet:exit-3'],
    ]);

    const noPod = await failure(
      client.exec(NS, 'missing', 'web', ['true'], { maxOutputBytes: 10, timeoutMs: 10_000 }),
    );
    expect(noPod).toBeInstanceOf(KubernetesApiError);
    expect(noPod).toMatchObject({ statusCode: 404 });
    expect(noPod.message).toContain(`exec in pod ${NS}/missing (web) refused`);
    const aborted = new AbortController();
    aborted.abort(new Error('cancelled'));
    const cancelled = await failure(
      client.exec(NS, 'web-0', 'web', ['true'], {
        maxOutputBytes: 10,
        timeoutMs: 10_000,
        signal: aborted.signal,
      }),
    );
    expect(cancelled.message).toBe('cancelled');
  });
});
