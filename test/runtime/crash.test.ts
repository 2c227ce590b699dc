// kill -9 of Berth in the middle of a deployment (issue 14): its sandboxes die with it, and the next
// start settles the deployment (failed, with the reason), starts the live release again so the
// application serves, and leaves no process, cgroup or unfinished release behind. A real `berth serve`
// process, killed for real.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { removeTagNetworks } from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { createRepository, serveRepositories, type GitServer } from '../helpers/git-server.js';
import {
  edgeRequest,
  eventually,
  nodeDocument,
  removeRuntimeAccounts,
  RUNTIME_TEST_ENV,
  warmNodeRuntime,
} from './helpers.js';
import { nodeAppFiles } from './node-app.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
/** Marks the build command, so its process can be found in /proc. */
const SLOW_BUILD = 'sleep 61.25';

interface Berth {
  process: ChildProcess;
  api: string;
  edgePort: number;
}

/** `berth serve` on free ports; resolves with its addresses once it says it is ready. */
async function serve(dataDir: string): Promise<Berth> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/index.ts', 'serve', '--port', '0', '--s3-port', '0', '--edge-port', '0'],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        ...RUNTIME_TEST_ENV,
        BERTH_DEPLOYMENT_TIMEOUT: '120',
        BERTH_RUNTIMES_DIR: inject('runtimesDir'),
        BERTH_DATA_DIR: dataDir,
        BERTH_LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  return new Promise((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (!line.includes('Berth is ready')) continue;
        const ready = JSON.parse(line) as { api: string; apps: string };
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve({ process: child, api: ready.api, edgePort: Number(new URL(ready.apps).port) });
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`berth serve exited with ${code} before it was ready`)));
  });
}

/** Pids of live processes whose command line contains `text`. */
function processesWith(text: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (/^\d+ \(.*\) Z/.test(stat)) continue;
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text))
        found.push(Number(entry));
    } catch {
      // It ended while we looked.
    }
  }
  return found;
}

/** The memory groups of this data dir's applications (cgroup v1 here; none when there is no v1). */
function memoryGroups(dataDir: string): string[] {
  const tag = runtimeTag(dataDir);
  const top = `/sys/fs/cgroup/memory/berth/${tag}`;
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      found.push(path.relative(top, path.join(dir, entry.name)));
      walk(path.join(dir, entry.name));
    }
  };
  if (fs.existsSync(top)) walk(top);
  return found;
}

const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

describe('a deployment whose Berth is killed', () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-crash-'));
  const gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-crash-git-'));
  let git: GitServer;
  let berth: Berth | undefined;

  beforeAll(async () => {
    await warmNodeRuntime();
    git = await serveRepositories(gitRoot);
  }, 180_000);
  afterAll(async () => {
    if (berth?.process.exitCode === null) {
      berth.process.kill('SIGTERM');
      await new Promise((resolve) => berth!.process.once('exit', resolve));
    }
    await git.close();
    removeRuntimeAccounts(dataDir);
    // The applications' networks outlive a Berth on purpose: this one is gone for good.
    await removeTagNetworks(runtimeTag(dataDir));
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(gitRoot, { recursive: true, force: true });
  });

  it('is failed at the next start, the live release serves again, and nothing is left behind', async () => {
    berth = await serve(dataDir);
    const { api_token: token } = JSON.parse(
      fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8'),
    ) as {
      api_token: string;
    };
    const call = async <T>(method: string, url: string, body?: string): Promise<T> => {
      const response = await fetch(`${berth!.api}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/yaml' } : {}),
        },
        ...(body !== undefined ? { body } : {}),
      });
      if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
      return (await response.json()) as T;
    };
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
      nodeDocument('default', 'shop', git.url('shop')),
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
      nodeDocument('default', 'shop', git.url('shop'), {
        application: { commands: { build: ['node build.js', SLOW_BUILD], start: 'npm start' } },
      }),
    );
    const builds = await eventually(
      () => Promise.resolve(processesWith(SLOW_BUILD).length > 0 ? processesWith(SLOW_BUILD) : undefined),
      30_000,
      'the slow build to start',
    );
    expect((await deployment(appId, second.deployment_id)).step).toBe('build');
    berth.process.kill('SIGKILL');
    await new Promise((resolve) => berth!.process.once('exit', resolve));

    // Its sandboxes die with it: the build and the serving replica.
    await eventually(
      () => Promise.resolve([...builds, ...replicas].every((pid) => !alive(pid)) || undefined),
      10_000,
      'the sandboxes to die with Berth',
    );
    expect(processesWith(SLOW_BUILD)).toEqual([]);

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

    berth = await serve(dataDir);
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
    // The killed build's group is gone: the application's group holds its one replica.
    if (fs.existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')) {
      expect(memoryGroups(dataDir).filter((g) => g.includes('build'))).toEqual([]);
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

    // A clean stop takes the replicas with it.
    const now = (
      await call<{ data: Array<{ pid: number | null }> }>('GET', `/api/v1/applications/${appId}/instances`)
    ).data.map((i) => i.pid!);
    berth.process.kill('SIGTERM');
    await new Promise((resolve) => berth!.process.once('exit', resolve));
    expect(now.filter(alive)).toEqual([]);
    expect(memoryGroups(dataDir)).toEqual([]);
  }, 150_000);
});
