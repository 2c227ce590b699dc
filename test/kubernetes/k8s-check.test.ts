// `berth admin k8s-check`, the built command run as a process, against a real control plane
// (test/helpers/kubernetes/cluster.ts): the admin is granted everything, a user without RBAC rights
// misses each right by name until a ClusterRole grants it, and a server that is not there is named.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import yaml from 'js-yaml';
import {
  createKubeClient,
  loadKubeConfig,
  type KubeClient,
  type KubeObject,
} from '../../src/drivers/kubernetes/client.js';
import { BERTH_RIGHTS, berthClusterRole, describeRight } from '../../src/drivers/kubernetes/rights.js';
import { BIN, ensureBuilt } from '../cli-client/helpers.js';
import { startTestCluster, type TestCluster } from '../helpers/kubernetes/cluster.js';
import { execFileAsync, freePort, waitFor } from '../helpers/processes.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `berth admin k8s-check …` with `env` on top of a clean environment (no KUBECONFIG of the host's). */
function k8sCheck(env: Record<string, string>, ...args: string[]): Promise<Run> {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(KUBECONFIG|KUBERNETES_|BERTH_)/.test(name)),
  );
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, 'admin', 'k8s-check', ...args],
      { cwd: ROOT, env: { ...base, ...env }, timeout: 60_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** The first yaml block of docs/runtime.md's section "Kubernetes: configuration and rights". */
function documentedClusterRole(): KubeObject {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/runtime.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Kubernetes: configuration and rights'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  const role = yaml.load(block ?? '') as KubeObject;
  expect(role).toMatchObject({ kind: 'ClusterRole', metadata: { name: 'berth' } });
  return role;
}

const missingLines = (stdout: string): string[] =>
  stdout.split('\n').filter((line) => line.startsWith('missing: '));

describe('berth admin k8s-check', { timeout: 120_000 }, () => {
  let cluster: TestCluster;
  let admin: KubeClient;
  let restricted: KubeClient;
  beforeAll(async () => {
    [cluster] = await Promise.all([startTestCluster(), ensureBuilt()]);
    admin = createKubeClient(loadKubeConfig({ kubeconfig: cluster.kubeconfigPath }));
    restricted = createKubeClient(loadKubeConfig({ kubeconfig: cluster.restrictedKubeconfigPath }));
  }, 300_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  it('is in berth --help with the kubernetes flags', async () => {
    const { stdout: help } = await execFileAsync(process.execPath, [BIN, '--help'], { cwd: ROOT });
    expect(help).toContain('berth admin k8s-check [--json]');
    for (const flag of [
      '--kubeconfig',
      '--k8s-ingress-class',
      '--k8s-storage-class',
      '--k8s-namespace-prefix',
      '--k8s-ingress-namespace',
      '--k8s-image-nodejs',
      '--k8s-image-php',
      '--k8s-image-fetch',
    ])
      expect(help).toContain(flag);
  });

  it('says an admin is granted every right, exit 0', async () => {
    const run = await k8sCheck({ BERTH_KUBECONFIG: cluster.kubeconfigPath });
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toBe(
      `reachable: ${cluster.server} (Kubernetes v1.20.2)\nall ${BERTH_RIGHTS.length} rights granted\n`,
    );
    // The cluster named by --kubeconfig, as berth serve takes it, and KUBECONFIG when nothing else is.
    const flag = await k8sCheck({}, '--kubeconfig', cluster.kubeconfigPath);
    expect(flag.code).toBe(0);
    const kubeconfigVar = await k8sCheck({ KUBECONFIG: cluster.kubeconfigPath }, '--json');
    expect(kubeconfigVar.code).toBe(0);
    expect(JSON.parse(kubeconfigVar.stdout)).toEqual({
      ok: true,
      server: cluster.server,
      reachable: true,
      version: 'v1.20.2',
      rights: BERTH_RIGHTS.length,
      missing: [],
    });
  });

  it('names each right a user without them misses, until a ClusterRole grants them', async () => {
    const before = await k8sCheck({ BERTH_KUBECONFIG: cluster.restrictedKubeconfigPath });
    expect(before.code).toBe(1);
    expect(before.stdout.split('\n')[0]).toBe(`reachable: ${cluster.server} (Kubernetes v1.20.2)`);
    expect(missingLines(before.stdout)).toEqual(BERTH_RIGHTS.map((r) => `missing: ${describeRight(r)}`));
    expect(missingLines(before.stdout)).toContain('missing: create deployments.apps (cluster-wide)');
    expect(missingLines(before.stdout)).toContain('missing: create pods/exec (cluster-wide)');
    expect(before.stderr).toBe(
      `berth: the Kubernetes API server ${cluster.server} does not grant ${BERTH_RIGHTS.length} of the ${BERTH_RIGHTS.length} rights Berth needs (docs/runtime.md, "Kubernetes: configuration and rights")\n`,
    );

    // Deployments and the namespaces themselves, granted to the user cluster-wide.
    await admin.apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'berth-some' },
      rules: [
        {
          apiGroups: ['apps'],
          resources: ['deployments'],
          verbs: ['get', 'list', 'create', 'patch', 'delete'],
        },
        { apiGroups: [''], resources: ['namespaces'], verbs: ['*'] },
      ],
    });
    await bind('berth-some');
    // RBAC reads bindings from an informer: wait until the server answers with the new role.
    await waitFor(async () =>
      (await restricted.reviewAccess({ verb: 'create', group: 'apps', resource: 'deployments' }))
        ? true
        : undefined,
    );
    const some = await k8sCheck({ BERTH_KUBECONFIG: cluster.restrictedKubeconfigPath }, '--json');
    expect(some.code).toBe(1);
    const answer = JSON.parse(some.stdout) as { ok: boolean; missing: Array<{ description: string }> };
    const granted = BERTH_RIGHTS.filter(
      (r) => (r.group === 'apps' && r.resource === 'deployments') || r.resource === 'namespaces',
    );
    expect(granted).toHaveLength(10);
    expect(answer.ok).toBe(false);
    expect(answer.missing.map((m) => m.description)).toEqual(
      BERTH_RIGHTS.filter((r) => !granted.includes(r)).map(describeRight),
    );
    expect(answer.missing).toContainEqual({
      verb: 'list',
      group: 'apps',
      resource: 'replicasets',
      namespaced: true,
      description: 'list replicasets.apps (cluster-wide)',
    });

    // The ClusterRole docs/runtime.md gives, as written there, is berthClusterRole() and grants all of them.
    const documented = documentedClusterRole();
    expect(documented.rules).toEqual(berthClusterRole().rules);
    await admin.apply(documented);
    await bind('berth');
    await waitFor(async () =>
      (await restricted.reviewAccess({
        verb: 'delete',
        group: 'networking.k8s.io',
        resource: 'networkpolicies',
      }))
        ? true
        : undefined,
    );
    const all = await k8sCheck({ BERTH_KUBECONFIG: cluster.restrictedKubeconfigPath });
    expect(all).toMatchObject({ code: 0, stderr: '' });
    expect(all.stdout).toContain(`all ${BERTH_RIGHTS.length} rights granted`);
  });

  it('exits 1 naming a server that is not there', async () => {
    // A free port with nothing listening on it, in a copy of the admin's kubeconfig.
    const port = await freePort();
    const dead = path.join(cluster.dir, 'dead.kubeconfig');
    fs.writeFileSync(
      dead,
      fs.readFileSync(cluster.kubeconfigPath, 'utf8').replace(cluster.server, `https://127.0.0.1:${port}`),
    );
    const run = await k8sCheck({ BERTH_KUBECONFIG: dead });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `berth: cannot reach the Kubernetes API server https://127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}\n`,
    );
    const json = await k8sCheck({ BERTH_KUBECONFIG: dead }, '--json');
    expect(json.code).toBe(1);
    expect(JSON.parse(json.stdout)).toMatchObject({
      ok: false,
      server: `https://127.0.0.1:${port}`,
      reachable: false,
      error: expect.stringContaining(`https://127.0.0.1:${port}`) as unknown,
    });
    // No kubeconfig anywhere and not in a pod: said, naming the setting.
    const none = await k8sCheck({});
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('BERTH_KUBECONFIG');
  });

  /** Binds the ClusterRole `role` to the restricted user. */
  async function bind(role: string): Promise<void> {
    await admin.apply({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: role },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: cluster.restrictedUser }],
    });
  }
});
