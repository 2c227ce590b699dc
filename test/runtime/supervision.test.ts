// Replicas kept alive (issue 14, health checks): a replica that stops answering its health path is
// restarted with the reason, by a replacement started beside it at the first failed check (one that
// recovers gets rid of that replacement); with checks disabled the same hang is left alone and reported as not
// monitored; one that outgrows its memory limit is killed by the kernel and restarted, the reason
// shown; one killed by pid comes back; one a backup has paused is not taken for hung, and a pause whose
// backup died is let go. Six applications on one Berth, deployed side by side.
import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectCgroups } from '../../src/drivers/os/cgroups.js';
import { freezeSubtree } from '../../src/drivers/os/freezer.js';
import { appLayout, runtimeTag } from '../../src/drivers/runtime/local/layout.js';
import { pauseApplication } from '../../src/drivers/runtime/local/pause.js';
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

interface InstanceView {
  name: string;
  state: string;
  pid: number | null;
  restarts: number;
  last_restart_reason: string | null;
  healthy: boolean | null;
}

describe('supervised replicas', () => {
  let h: RuntimeHarness;
  const ids = new Map<string, number>();

  const get = async <T>(url: string): Promise<T> =>
    (await h.t.request({ url, headers: h.t.auth.platform })).json<{ data: T }>().data;
  const instances = (name: string) => get<InstanceView[]>(`/api/v1/applications/${ids.get(name)}/instances`);
  const web = async (name: string) => (await instances(name)).find((i) => i.name.startsWith('web-'))!;
  const systemLines = async (name: string) =>
    (
      await get<Array<{ stream: string; line: string }>>(
        `/api/v1/applications/${ids.get(name)}/logs?tail=1000`,
      )
    )
      .filter((entry) => entry.stream === 'system')
      .map((entry) => entry.line);
  /** The host's processes running as a user id (the application's OS account). */
  const processesOf = (uid: number) =>
    fs
      .readdirSync('/proc')
      .filter((entry) => /^\d+$/.test(entry))
      .filter((pid) => {
        try {
          const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
          return new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status);
        } catch {
          return false; // ended meanwhile
        }
      });

  beforeAll(async () => {
    h = await startRuntime('sqlite');
    const settings: Record<string, Record<string, unknown>> = {
      hang: {},
      hiccup: {},
      unchecked: { health_check_enabled: false, health_check_path: undefined },
      hungry: { memory: '96Mi' },
      killed: {},
      paused: {},
    };
    // One after the other: five rollouts at once outran the rollout deadline on a busy machine.
    for (const [name, extra] of Object.entries(settings)) {
      h.repository(name).commit(nodeAppFiles(name));
      const applied = await applyYaml(h.t, nodeDocument('acme', name, h.git.url(name), { settings: extra }));
      ids.set(name, applied.application_id);
      const deployment = await waitForDeployment(h.t, applied.application_id, applied.deployment_id!);
      expect(deployment.error).toBeNull();
    }
  }, 120_000);
  afterAll(() => h.close());

  it('restarts a replica whose health path stops answering, and says why', async () => {
    const before = await web('hang');
    expect((await edgeRequest(h.edgePort, 'hang.test', '/hang')).body).toBe('hanging');
    // Interval 1 s, timeout 1 s, threshold 2 (RUNTIME_TEST_ENV): caught within a few seconds.
    const after = await eventually(
      async () => {
        const now = await web('hang');
        return now.restarts >= 1 && now.state === 'running' ? now : undefined;
      },
      15_000,
      'the hung replica to be restarted',
    );
    expect(after.pid).not.toBe(before.pid);
    expect(after.last_restart_reason).toBe('health check on /health failed 2 times in a row');
    expect((await edgeRequest(h.edgePort, 'hang.test', '/')).status).toBe(200);
    // The replacement was started at the first failed check, before the threshold was reached.
    const lines = await systemLines('hang');
    const prepared = lines.indexOf('health check failed; starting a replacement beside it');
    expect(prepared).toBeGreaterThanOrEqual(0);
    expect(prepared).toBeLessThan(
      lines.indexOf('health check on /health failed 2 times in a row; restarting'),
    );
  });

  it('drops the replacement started at a failed check when the replica recovers', async () => {
    const before = await web('hiccup');
    const { uid } = JSON.parse((await edgeRequest(h.edgePort, 'hiccup.test', '/whoami')).body) as {
      uid: number;
    };
    const running = processesOf(uid).length;
    expect(running).toBeGreaterThan(0);
    expect((await edgeRequest(h.edgePort, 'hiccup.test', '/hiccup')).body).toBe('next check fails');
    await eventually(
      async () =>
        (await systemLines('hiccup')).includes('health check failed; starting a replacement beside it'),
      10_000,
      'a replacement to be started at the failed check',
    );
    await eventually(
      () => Promise.resolve(processesOf(uid).length > running),
      5_000,
      'the replacement to run beside the replica',
    );
    // The next check passes: the replacement goes, the replica stays as it was.
    await eventually(
      async () => (await web('hiccup')).healthy === true && processesOf(uid).length === running,
      10_000,
      'the replacement to be stopped once the replica recovered',
    );
    const after = await web('hiccup');
    expect(after).toMatchObject({ pid: before.pid, restarts: 0, state: 'running' });
  });

  it('leaves a hung replica alone when health checks are disabled, and reports it as not monitored', async () => {
    const before = await web('unchecked');
    expect(before.healthy).toBeNull();
    expect((await edgeRequest(h.edgePort, 'unchecked.test', '/hang')).body).toBe('hanging');
    // Three times as long as the checked application took to be restarted at the latest.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const after = await web('unchecked');
    expect(after.restarts).toBe(0);
    expect(after.pid).toBe(before.pid);
    const status = await get<{ health_check: { enabled: boolean; status: string } }>(
      `/api/v1/applications/${ids.get('unchecked')}/status`,
    );
    expect(status.health_check).toEqual({ enabled: false, status: 'not monitored' });
  });

  it('restarts a replica the kernel killed for memory, with the reason shown', async () => {
    const before = await web('hungry');
    await edgeRequest(h.edgePort, 'hungry.test', '/eat');
    const after = await eventually(
      async () => {
        const now = await web('hungry');
        return now.restarts >= 1 && now.state === 'running' ? now : undefined;
      },
      20_000,
      'the replica killed for memory to be restarted',
    );
    expect(after.pid).not.toBe(before.pid);
    expect(after.last_restart_reason).toBe('killed: out of memory (limit 96 MiB)');
    const status = await get<{ recent_events: Array<{ kind: string; message: string }> }>(
      `/api/v1/applications/${ids.get('hungry')}/status`,
    );
    expect(status.recent_events.map((e) => e.kind)).toContain('oom_killed');
    expect((await edgeRequest(h.edgePort, 'hungry.test', '/')).status).toBe(200);
  });

  const freezer = detectCgroups()?.freezer;
  it.runIf(freezer)('does not count the health checks of an application a backup has paused', async () => {
    const appId = ids.get('paused')!;
    const before = await web('paused');
    const paused = await pauseApplication(h.t.ctx.config.dataDir, appId);
    if ('reason' in paused) throw new Error(paused.reason);
    // Interval 1 s, timeout 1 s, threshold 2: counted, these checks would have restarted it twice over.
    await sleep(6000);
    await paused.resume();
    expect(await systemLines('paused')).not.toContain(
      'health check failed; starting a replacement beside it',
    );
    const after = await eventually(
      async () => ((await web('paused')).healthy === true ? web('paused') : undefined),
      10_000,
      'the replica to answer its checks again',
    );
    expect(after).toMatchObject({ pid: before.pid, restarts: 0, state: 'running' });

    // A backup that was killed while it had the application paused: its pid file names a process
    // that is gone (a start time no process has). The next check lets the application go.
    fs.writeFileSync(appLayout(h.t.ctx.config.dataDir, appId).pausedBy, `${process.pid} 1\n`);
    const frozen = await freezeSubtree(detectCgroups()!, [
      runtimeTag(h.t.ctx.config.dataDir),
      `app-${appId}`,
    ]);
    expect('thaw' in frozen).toBe(true);
    await eventually(
      async () => (await systemLines('paused')).includes('let go of a pause left by a backup that is gone'),
      10_000,
      'the pause to be let go',
    );
    expect((await edgeRequest(h.edgePort, 'paused.test', '/')).status).toBe(200);
    expect(await web('paused')).toMatchObject({ pid: before.pid, restarts: 0 });
  });

  it('brings back a replica killed by pid', async () => {
    const before = await web('killed');
    process.kill(before.pid!, 'SIGKILL');
    const after = await eventually(
      async () => {
        const now = await web('killed');
        return now.restarts >= 1 && now.state === 'running' ? now : undefined;
      },
      15_000,
      'the killed replica to come back',
    );
    expect(after.pid).not.toBe(before.pid);
    expect(after.last_restart_reason).toBe('killed by SIGKILL');
    expect((await edgeRequest(h.edgePort, 'killed.test', '/')).status).toBe(200);
  });
});
