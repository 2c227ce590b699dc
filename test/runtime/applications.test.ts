// Applications that run (issue 14): a nodejs application from a git repository on loopback is built,
// initialised, served through the edge by its domain with its secrets and its volume; redeployed under
// load without losing a request; a release whose health check never passes fails and the old one
// keeps serving; rollback, skip_build, suspend and resume; the API's answers and another team's 403s.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectCgroups } from '../../src/drivers/os/cgroups.js';
import { DIALECTS } from '../helpers/store.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { nodeAppFiles } from './node-app.js';

interface StatusView {
  status: string;
  health_check: { status: string };
  hostnames: string[];
  default_hostname: string;
}

/** The `data` of an API answer, typed as the test reads it. */
const data = <T>(response: { json<U>(): U }): T => response.json<{ data: T }>().data;

/** The version the application answers with through the edge. */
const versionAt = async (edgePort: number, host = 'shop.test'): Promise<string> =>
  (JSON.parse((await edgeRequest(edgePort, host, '/')).body) as { version: string }).version;

/**
 * Every store dialect behind the default edge (HAProxy, decision 0005), and the first one behind the
 * Node edge too (BERTH_EDGE_PROXY=node): the rollout under load, suspend's 503 and deletion's routes
 * through either data plane.
 */
const CASES: ReadonlyArray<readonly [(typeof DIALECTS)[number], 'node' | 'haproxy']> = [
  ...DIALECTS.map((dialect) => [dialect, 'haproxy'] as const),
  [DIALECTS[0]!, 'node'],
];

describe.each(CASES)('running applications (%s, %s edge)', (dialect, edgeProxy) => {
  let h: RuntimeHarness;
  let appId: number;
  let firstDeployment: number;
  let firstCommit: string;
  const repo = () => h.repository('shop');
  let repository: ReturnType<typeof repo>;

  const api = (method: string, url: string, payload?: unknown) =>
    h.t.request({
      method,
      url,
      headers: h.t.auth.platform,
      ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}),
    });

  beforeAll(async () => {
    h = await startRuntime(dialect, { BERTH_EDGE_PROXY: edgeProxy });
    repository = repo();
    firstCommit = repository.commit(nodeAppFiles('v1'));
  }, 180_000);
  afterAll(() => h.close());

  it('builds, initialises and serves a nodejs application on its domain, with its secrets and volume', async () => {
    const applied = await applyYaml(
      h.t,
      nodeDocument('acme', 'shop', h.git.url('shop'), {
        application: {
          commands: {
            build: ['node build.js'],
            init: ['echo init-ran > /data/init.txt'],
            start: 'npm start',
          },
        },
      }),
    );
    expect(applied.deployment_id).not.toBeNull();
    appId = applied.application_id;
    firstDeployment = applied.deployment_id!;
    const deployment = await waitForDeployment(h.t, appId, firstDeployment);
    expect(deployment.error).toBeNull();
    expect(deployment.status).toBe('success');
    expect(deployment.commit_sha).toBe(firstCommit);

    const answer = await edgeRequest(h.edgePort, 'shop.test', '/');
    expect(answer.status).toBe(200);
    const body = JSON.parse(answer.body) as Record<string, string>;
    expect(body.version).toBe('v1');
    // The build ran without secrets; the replica has them.
    expect(body.built).toBe('built v1 secret=none');
    expect(body.secret).toBe('secret-of-shop');
    expect(body.forwarded).toBe('127.0.0.1');

    // The volume is the application's directory on the host, written by the application's own user.
    expect((await edgeRequest(h.edgePort, 'shop.test', '/write')).body).toBe('written');
    const volume = `${h.t.ctx.config.dataDir}/apps/${appId}/volumes/data`;
    expect(fs.readFileSync(`${volume}/note.txt`, 'utf8')).toBe('written by v1');
    expect(fs.readFileSync(`${volume}/init.txt`, 'utf8').trim()).toBe('init-ran');
    const whoami = JSON.parse((await edgeRequest(h.edgePort, 'shop.test', '/whoami')).body) as {
      uid: number;
    };
    expect(whoami.uid).not.toBe(0);
    expect(fs.statSync(`${volume}/note.txt`).uid).toBe(whoami.uid);

    // Its release is its account's alone (issue 24): another account can neither list nor read it.
    if (process.getuid?.() === 0) {
      const appDir = `${h.t.ctx.config.dataDir}/apps/${appId}`;
      const [name] = fs.readdirSync(`${appDir}/releases`);
      const release = `${appDir}/releases/${name}`;
      const owner = fs.statSync(release);
      expect({ uid: owner.uid, mode: owner.mode & 0o777 }).toEqual({ uid: whoami.uid, mode: 0o700 });
      for (const dir of [appDir, `${appDir}/releases`]) {
        const stat = fs.statSync(dir);
        expect({ uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o777 }, dir).toEqual({
          uid: 0,
          gid: owner.gid,
          mode: 0o710,
        });
      }
      const sources = fs.statSync(`${appDir}/sources`);
      expect({ uid: sources.uid, mode: sources.mode & 0o777 }).toEqual({ uid: 0, mode: 0o700 });
      const as = (uid: number, gid: number, ...command: string[]) =>
        spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${gid}`, '--clear-groups', '--', ...command], {
          encoding: 'utf8',
        });
      // `nobody` stands for any other account (another application's, a service's).
      for (const command of [
        ['cat', `${release}/server.js`],
        ['ls', release],
        ['ls', `${appDir}/releases`],
        ['ls', appDir],
        ['ls', `${appDir}/sources`],
      ]) {
        const other = as(65534, 65534, ...command);
        expect(other.status, command.join(' ')).not.toBe(0);
        expect(other.stderr).toMatch(/Permission denied/);
      }
      expect(as(owner.uid, owner.gid, 'cat', `${release}/server.js`).status).toBe(0);
    }

    // The default host answers too, and an unknown host is 404.
    const status = data<StatusView>(await api('GET', `/api/v1/applications/${appId}/status`));
    expect(status.status).toBe('active');
    expect(status.health_check.status).toBe('healthy');
    expect(status.hostnames).toEqual(['shop.test', status.default_hostname]);
    expect(status.default_hostname).toBe(`shop-${appId}.localhost`);
    expect((await edgeRequest(h.edgePort, status.default_hostname, '/')).status).toBe(200);
    expect((await edgeRequest(h.edgePort, 'nobody.test', '/')).status).toBe(404);

    // The deployment's steps are in its log; secrets are not.
    const logs = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${appId}/deployments/${firstDeployment}/logs`),
    );
    const text = logs.map((l) => l.line).join('\n');
    expect(text).toContain('==> fetch');
    expect(text).toContain('==> build');
    expect(text).toContain('==> release');
    expect(text).toContain('==> rollout');
    expect(text).not.toContain('secret-of-shop');
  });

  it('deploys a new commit under load without losing a request', async () => {
    repository.commit(nodeAppFiles('v2'));
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    let stop = false;
    const failures: string[] = [];
    const versions = new Set<string>();
    let requests = 0;
    const load = Array.from({ length: 8 }, async () => {
      while (!stop) {
        try {
          const answer = await edgeRequest(h.edgePort, 'shop.test', '/', { agent });
          requests += 1;
          if (answer.status !== 200) failures.push(`status ${answer.status}: ${answer.body}`);
          else versions.add((JSON.parse(answer.body) as { version: string }).version);
        } catch (error) {
          failures.push((error as Error).message);
        }
      }
    });
    const deploy = await api('POST', `/api/v1/applications/${appId}/deploy`, {});
    expect(deploy.statusCode).toBe(202);
    const deployment = await waitForDeployment(h.t, appId, data<{ id: number }>(deploy).id);
    expect(deployment.status).toBe('success');
    // Keep the load on while the old replica drains and stops.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    stop = true;
    await Promise.all(load);
    agent.destroy();
    expect(failures).toEqual([]);
    expect(requests).toBeGreaterThan(50);
    expect([...versions].sort()).toEqual(['v1', 'v2']);
    expect(await versionAt(h.edgePort)).toBe('v2');
  });

  it('fails a release whose health check never passes within the timeout, and the old one keeps serving', async () => {
    repository.commit(nodeAppFiles('v3', 'unhealthy'));
    const started = Date.now();
    const deploy = await api('POST', `/api/v1/applications/${appId}/deploy`, {});
    const deployment = await waitForDeployment(h.t, appId, data<{ id: number }>(deploy).id);
    expect(deployment.status).toBe('failed');
    expect(deployment.error).toMatch(/rollout: timed out after 15 s/);
    expect(Date.now() - started).toBeLessThan(25_000);
    expect(await versionAt(h.edgePort)).toBe('v2');
    const status = data<StatusView>(await api('GET', `/api/v1/applications/${appId}/status`));
    expect(status.status).toBe('active');
    // No replica of the failed release is left.
    const instances = data<Array<{ release: string }>>(
      await api('GET', `/api/v1/applications/${appId}/instances`),
    );
    expect(instances.map((i) => i.release)).not.toContain(deployment.release);
  }, 40_000);

  it('rolls back to a kept release, and redeploys the last good build with skip_build', async () => {
    const rollback = await api('POST', `/api/v1/applications/${appId}/rollback`, {
      deployment_id: firstDeployment,
    });
    expect(rollback.statusCode).toBe(202);
    const rolled = await waitForDeployment(h.t, appId, data<{ id: number }>(rollback).id);
    expect(rolled.status).toBe('success');
    expect(await versionAt(h.edgePort)).toBe('v1');

    const skip = await api('POST', `/api/v1/applications/${appId}/deploy`, { skip_build: true });
    expect(skip.statusCode).toBe(202);
    const skipped = await waitForDeployment(h.t, appId, data<{ id: number }>(skip).id);
    expect(skipped.status).toBe('success');
    // The replicas of the same release it replaced drain and stop; the new one keeps serving, untouched.
    const web = await eventually(async () => {
      const all = data<Array<{ name: string; state: string; restarts: number }>>(
        await api('GET', `/api/v1/applications/${appId}/instances`),
      ).filter((i) => i.name.startsWith('web-'));
      return all.length === 1 ? all : undefined;
    });
    expect(web[0]).toMatchObject({ state: 'running', restarts: 0 });
    expect(await versionAt(h.edgePort)).toBe('v1');
    const logs = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${appId}/deployments/${skipped.id}/logs`),
    );
    expect(logs.map((l) => l.line).join('\n')).not.toContain('==> build');

    const list = (
      await api('GET', `/api/v1/applications/${appId}/deployments?per_page=2&status=success`)
    ).json<{
      data: unknown[];
      meta: { total: number };
    }>();
    expect(list.data).toHaveLength(2);
    expect(list.meta.total).toBeGreaterThanOrEqual(4);
  });

  it('suspends (503 with Retry-After) and resumes', async () => {
    const suspended = await api('POST', `/api/v1/applications/${appId}/suspend`);
    expect(data<StatusView>(suspended).status).toBe('stopped');
    const answer = await edgeRequest(h.edgePort, 'shop.test', '/');
    expect(answer.status).toBe(503);
    expect(answer.headers['retry-after']).toBeDefined();
    const resumed = await api('POST', `/api/v1/applications/${appId}/resume`);
    expect(data<StatusView>(resumed).status).toBe('active');
    expect((await edgeRequest(h.edgePort, 'shop.test', '/')).status).toBe(200);
  });

  it('runs one-off commands in a fresh sandbox and keeps them in the history; logs are readable', async () => {
    const exec = await api('POST', `/api/v1/applications/${appId}/exec`, {
      command: 'cat version.txt; echo; echo $APP_SECRET',
    });
    expect(exec.statusCode).toBe(200);
    expect(data<{ output: string }>(exec).output).toBe('v1\nsecret-of-shop\n');
    expect(data<{ exit_code: number }>(exec).exit_code).toBe(0);
    const history = data<Array<{ command: string }>>(
      await api('GET', `/api/v1/applications/${appId}/command-history`),
    );
    expect(history[0]!.command).toBe('cat version.txt; echo; echo $APP_SECRET');

    const logs = await api('GET', `/api/v1/applications/${appId}/logs?tail=5`);
    expect(logs.statusCode).toBe(200);
    expect(Array.isArray(data<unknown>(logs))).toBe(true);
    expect((await api('GET', `/api/v1/applications/${appId}/logs?since=yesterday`)).statusCode).toBe(422);

    const source = await api('GET', `/api/v1/applications/${appId}/source/download`);
    expect(source.statusCode).toBe(200);
    expect(source.headers['content-type']).toBe('application/gzip');
    expect(source.rawPayload.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
  });

  it('refuses another team everything about the application', async () => {
    const other = await h.t.ctx.identity.createUser({ email: `other-${dialect}@example.com`, team: 'other' });
    const headers = { authorization: `Bearer ${other.api_token}` };
    for (const [method, url] of [
      ['GET', `/api/v1/applications/${appId}/status`],
      ['GET', `/api/v1/applications/${appId}/instances`],
      ['GET', `/api/v1/applications/${appId}/logs`],
      ['GET', `/api/v1/applications/${appId}/deployments`],
      ['GET', `/api/v1/applications/${appId}/deployments/${firstDeployment}/logs`],
      ['POST', `/api/v1/applications/${appId}/deploy`],
      ['POST', `/api/v1/applications/${appId}/suspend`],
      ['POST', `/api/v1/applications/${appId}/exec`],
      ['GET', `/api/v1/applications/${appId}/source/download`],
      ['DELETE', `/api/v1/applications/${appId}`],
    ] as const) {
      const response = await h.t.request({
        method,
        url,
        headers,
        payload: method === 'POST' ? { command: 'id' } : undefined,
      });
      expect(response.statusCode, `${method} ${url}`).toBe(403);
    }
    expect((await edgeRequest(h.edgePort, 'shop.test', '/')).status).toBe(200);
  });

  it('deletes an application: processes, releases, volumes, routes and its cgroup go', async () => {
    const instances = data<Array<{ pid: number | null }>>(
      await api('GET', `/api/v1/applications/${appId}/instances`),
    );
    const pids = instances.map((i) => i.pid).filter((p): p is number => p !== null);
    expect(pids.length).toBeGreaterThan(0);
    // Its processes share the application's pids and cpu groups (BERTH_APP_PIDS_MAX, _CPU_CORES).
    const application = `berth/${cgroupTagOf(h)}/app-${appId}`;
    const { appPidsMax, appCpuCores } = h.t.ctx.config.runtime;
    const support = detectCgroups();
    const hierarchies: { pids?: string; cpu?: string; freezer?: string } =
      support?.version === 1 && support.pids && support.cpu
        ? { pids: support.pids, cpu: support.cpu, ...(support.freezer ? { freezer: support.freezer } : {}) }
        : {};
    // And the freezer's group, so that a backup can pause them (src/drivers/runtime/local/pause.ts).
    if (hierarchies.freezer)
      expect(fs.readFileSync(`${hierarchies.freezer}/${application}/freezer.state`, 'utf8').trim()).toBe(
        'THAWED',
      );
    if (hierarchies.pids && hierarchies.cpu) {
      expect(fs.readFileSync(`${hierarchies.pids}/${application}/pids.max`, 'utf8').trim()).toBe(
        String(appPidsMax),
      );
      const quota = fs.readFileSync(`${hierarchies.cpu}/${application}/cpu.cfs_quota_us`, 'utf8').trim();
      expect(quota).toBe(appCpuCores === undefined ? '-1' : String(Math.round(appCpuCores * 100_000)));
      for (const pid of pids) {
        const groups = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
        expect(groups).toMatch(new RegExp(`^\\d+:pids:/${application}/web-`, 'm'));
        expect(groups).toMatch(new RegExp(`^\\d+:cpu(,cpuacct)?:/${application}/web-`, 'm'));
      }
    }
    const deleted = await api('DELETE', `/api/v1/applications/${appId}`);
    expect(deleted.statusCode).toBe(202);
    await eventually(
      async () => (await api('GET', `/api/v1/applications/${appId}`)).statusCode === 404,
      30_000,
      'the application to be deleted',
    );
    expect((await edgeRequest(h.edgePort, 'shop.test', '/')).status).toBe(404);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
    expect(fs.existsSync(`${h.t.ctx.config.dataDir}/apps/${appId}`)).toBe(false);
    // This Berth's groups only: other test files make and remove theirs meanwhile.
    const own = `/sys/fs/cgroup/memory/berth/${cgroupTagOf(h)}`;
    const groups = fs.existsSync(own) ? fs.readdirSync(own, { recursive: true }).map(String) : [];
    expect(groups.filter((g) => g.endsWith(`app-${appId}`))).toEqual([]);
    for (const root of Object.values(hierarchies))
      expect(fs.existsSync(`${root}/${application}`), root).toBe(false);
  });
});

/** The segment naming this Berth's memory groups (see createLocalRuntimeDriver). */
function cgroupTagOf(h: RuntimeHarness): string {
  return `b${createHash('sha256').update(h.t.ctx.config.dataDir).digest('hex').slice(0, 10)}`;
}
