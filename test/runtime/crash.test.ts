// kill -9 of Berth in the middle of a deployment (issues 14 and 25): the build dies with it, the live
// replica serves on through the edge while Berth is down, and the next start settles the deployment
// (failed, with the reason) and adopts the replica as it runs, leaving no build process, cgroup or
// unfinished release behind. A SIGTERM leaves the application serving too; `berth admin stop-all`
// then stops it. A real `berth serve` process, killed for real.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { createRepository } from '../helpers/git-server.js';
import {
  alive,
  memoryGroups,
  processesWith,
  serveBerth,
  stopAll,
  stopBerth,
  type BerthProcess,
  useBerthProcesses,
} from './berth-process.js';
import { edgeRequest, eventually, nodeDocument } from './helpers.js';
import { nodeAppFiles } from './node-app.js';

/** Marks the build command, so its process can be found in /proc. */
const SLOW_BUILD = 'sleep 61.25';

/** The build command itself (not the shell or bwrap that run it). */
const isSleep = (pid: number): boolean => {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\0');
  } catch {
    return false;
  }
};

/**
 * A process in the memory group `group` of this data dir's Berth, as a build whose sandbox outlived
 * Berth would be; undefined without cgroup v1 memory.
 */
function startInGroup(dataDir: string, group: string): ChildProcess | undefined {
  const dir = `/sys/fs/cgroup/memory/berth/${runtimeTag(dataDir)}/${group}`;
  if (!fs.existsSync(path.dirname(dir))) return undefined;
  fs.mkdirSync(dir);
  const child = spawn('sleep', ['60'], { stdio: 'ignore' });
  fs.writeFileSync(path.join(dir, 'cgroup.procs'), String(child.pid));
  child.unref();
  return child;
}

describe('a deployment whose Berth is killed', () => {
  let berth: BerthProcess | undefined;
  const { dataDir, gitRoot, git } = useBerthProcesses('crash', () => berth);

  it('is failed at the next start, the live replica serves on and is adopted, and nothing is left behind', async () => {
    berth = await serveBerth(dataDir);
    const call = <T>(method: string, url: string, body?: string) => berth!.call<T>(method, url, body);
    const edgePort = berth.edgePort;
    const deployment = (appId: number, id: number) =>
      call<{ data: { status: string; step: string | null; error: string | null } }>(
        'GET',
        `/api/v1/applications/${appId}/deployments/${id}`,
      ).then((r) => r.data);

    const repository = createRepository(gitRoot, 'shop');
    repository.commit(nodeAppFiles('v1'));
    const first = await call<{ application_id: number; deployment_id: number }>(
      'POST',
      '/api/v1/infrastructure/apply',
      nodeDocument('default', 'shop', git().url('shop')),
    );
    const appId = first.application_id;
    await eventually(
      async () => (await deployment(appId, first.deployment_id)).status === 'success',
      60_000,
      'the first deployment',
    );
    expect(JSON.parse((await edgeRequest(berth.edgePort, 'shop.test', '/')).body)).toMatchObject({
      version: 'v1',
    });
    const replicas = (
      await call<{ data: Array<{ pid: number | null }> }>('GET', `/api/v1/applications/${appId}/instances`)
    ).data.map((i) => i.pid!);
    expect(replicas.length).toBe(1);

    // A second deployment, held in its build step, when Berth is killed.
    repository.commit(nodeAppFiles('v2'));
    const second = await call<{ deployment_id: number }>(
      'POST',
      '/api/v1/infrastructure/apply',
      nodeDocument('default', 'shop', git().url('shop'), {
        application: { commands: { build: ['node build.js', SLOW_BUILD], start: 'npm start' } },
      }),
    );
    // Waited for until the command runs inside its sandbox: bwrap has set its parent-death signal.
    const builds = await eventually(
      () => {
        const found = processesWith(SLOW_BUILD);
        return Promise.resolve(found.some(isSleep) ? found : undefined);
      },
      30_000,
      'the slow build to start',
    );
    expect((await deployment(appId, second.deployment_id)).step).toBe('build');
    await stopBerth(berth, 'SIGKILL');

    // The build dies with it; the replica serves on through the edge, Berth being down.
    await eventually(
      () => Promise.resolve(builds.every((pid) => !alive(pid)) || undefined),
      10_000,
      'the build to die with Berth',
    );
    expect(processesWith(SLOW_BUILD)).toEqual([]);
    expect(replicas.every(alive)).toBe(true);
    // A build whose sandbox started only as Berth died (its parent-death signal set too late to fire)
    // runs on in its group: the next start ends it.
    const lateBuild = startInGroup(dataDir, `app-${appId}/build-late`);
    expect(JSON.parse((await edgeRequest(edgePort, 'shop.test', '/')).body)).toMatchObject({ version: 'v1' });

    // The live release as a Berth before issue 24 left it, readable by every account: the start
    // makes it the application's account's alone again.
    const appDir = path.join(dataDir, 'apps', String(appId));
    const releasesDir = path.join(appDir, 'releases');
    const [live] = fs.readdirSync(releasesDir).filter((name) => !name.endsWith('.building'));
    const liveRelease = path.join(releasesDir, live!);
    const appAccount = fs.statSync(liveRelease);
    for (const dir of [appDir, releasesDir]) {
      fs.chownSync(dir, 0, 0);
      fs.chmodSync(dir, 0o711);
    }
    fs.chmodSync(liveRelease, 0o755);

    berth = await serveBerth(dataDir, edgePort);
    expect(berth.edgePort).toBe(edgePort);
    const modeOf = (dir: string) => {
      const stat = fs.statSync(dir);
      return { uid: stat.uid, gid: stat.gid, mode: stat.mode & 0o777 };
    };
    expect(modeOf(liveRelease)).toEqual({ uid: appAccount.uid, gid: appAccount.gid, mode: 0o700 });
    if (process.getuid?.() === 0)
      for (const dir of [appDir, releasesDir])
        expect(modeOf(dir), dir).toEqual({ uid: 0, gid: appAccount.gid, mode: 0o710 });
    const settled = await eventually(
      async () => {
        const now = await deployment(appId, second.deployment_id);
        return now.status === 'running' || now.status === 'pending' ? undefined : now;
      },
      30_000,
      'the interrupted deployment to be settled',
    );
    expect(settled).toMatchObject({
      status: 'failed',
      error: 'Interrupted: Berth stopped during the deployment',
    });
    const served = await eventually(
      async () => {
        const answer = await edgeRequest(berth!.edgePort, 'shop.test', '/');
        return answer.status === 200 ? answer : undefined;
      },
      30_000,
      'the live release to serve again',
    );
    expect(JSON.parse(served.body)).toMatchObject({ version: 'v1' });
    // Routed first, then recorded as active: the status may lag the first answer by a moment.
    await eventually(
      async () =>
        (await call<{ data: { status: string } }>('GET', `/api/v1/applications/${appId}/status`)).data
          .status === 'active' || undefined,
      10_000,
      'the application to be active again',
    );
    // Adopted as it ran: the same process, not a restart.
    const adopted = (
      await call<{ data: Array<{ pid: number | null; state: string }> }>(
        'GET',
        `/api/v1/applications/${appId}/instances`,
      )
    ).data;
    expect(adopted.map((i) => [i.pid, i.state])).toEqual([[replicas[0], 'running']]);
    // The killed build's group is gone (once the start has settled what the earlier Berth left, just
    // after the application is active again): the application's group holds its one replica.
    if (lateBuild) {
      await eventually(
        () => Promise.resolve(!alive(lateBuild.pid!) || undefined),
        10_000,
        'the late build to end',
      );
    }
    if (fs.existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) {
      await eventually(
        () => Promise.resolve(memoryGroups(dataDir).every((g) => !g.includes('build')) || undefined),
        10_000,
        'the killed build’s group to be removed',
      );
      expect(memoryGroups(dataDir).filter((g) => g.startsWith(`app-${appId}/web-`))).toHaveLength(1);
    }
    // The interrupted release is gone; the live one is the only release kept.
    await eventually(
      () =>
        Promise.resolve(
          fs.readdirSync(path.join(dataDir, 'apps', String(appId), 'releases')).join() === 'd1' || undefined,
        ),
      10_000,
      'the interrupted release to be removed',
    );

    // A stop (SIGTERM, as for an upgrade) leaves the application serving; stop-all then stops it.
    await stopBerth(berth, 'SIGTERM');
    expect(replicas.every(alive)).toBe(true);
    expect((await edgeRequest(edgePort, 'shop.test', '/')).status).toBe(200);
    const stopped = await stopAll(dataDir);
    expect(stopped, stopped.output).toMatchObject({ status: 0 });
    expect(replicas.filter(alive)).toEqual([]);
    expect(memoryGroups(dataDir)).toEqual([]);
    await expect(edgeRequest(edgePort, 'shop.test', '/')).rejects.toThrow(/ECONNREFUSED/);
  }, 150_000);
});
