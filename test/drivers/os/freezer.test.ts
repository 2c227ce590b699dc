// Pausing an application's processes for a backup (src/drivers/os/freezer.ts,
// src/drivers/runtime/local/pause.ts), on this machine's real cgroups: a process that counts into a file
// stops counting while its application is paused and goes on after; a pause whose backup is gone is
// let go by the serving Berth's check; processes outside the freezer's groups, or none, are refused.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createMemoryGroup,
  detectCgroups,
  removeTree,
  type MemoryGroup,
} from '../../../src/drivers/os/cgroups.js';
import { freezeSubtree, subtreeFrozen } from '../../../src/drivers/os/freezer.js';
import { appLayout, runtimeTag } from '../../../src/drivers/runtime/local/layout.js';
import { checkPause, pauseApplication } from '../../../src/drivers/runtime/local/pause.js';
import { isRoot } from '../../helpers/processes.js';

const support = detectCgroups();
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-freezer-'));
const tag = runtimeTag(dataDir);
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  if (support) await removeTree(support, [tag]);
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/**
 * A process in group `app-<appId>/<instance>` (joining `procsFiles`: the memory group alone, or every
 * hierarchy) that writes an increasing count to a file every 5 ms; reads that count.
 */
async function counter(appId: number, instance: string, join: 'all' | 'memory only') {
  const group: MemoryGroup = await createMemoryGroup(support!, [tag, `app-${appId}`, instance], 64 << 20, {
    tasks: true,
  });
  fs.mkdirSync(appLayout(dataDir, appId).root, { recursive: true });
  const file = path.join(dataDir, `${instance}.count`);
  const procs = join === 'all' ? group.procsFiles : [group.procsFile];
  // The shell joins first, so that every process it starts is born in the groups.
  const script = `for f in "$@"; do echo $$ > "$f"; done; n=0; while :; do n=$((n+1)); echo $n > ${file}; sleep 0.005; done`;
  const child = spawn('sh', ['-c', script, 'counter', ...procs], { stdio: 'ignore' });
  children.push(child);
  const count = () => Number(fs.readFileSync(file, 'utf8').trim() || 0);
  // Counting, from inside the group (the shell's children are born there).
  const start = await waitForCount(count, 1);
  return { child, count, start };
}

async function waitForCount(count: () => number, above: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const n = safe(count);
    if (n > above) return n;
    await sleep(10);
  }
  throw new Error('the count did not move');
}

const safe = (count: () => number) => {
  try {
    return count();
  } catch {
    return 0;
  }
};

/** The count now, and again after 300 ms. */
async function twice(count: () => number): Promise<[number, number]> {
  const first = safe(count);
  await sleep(300);
  return [first, safe(count)];
}

describe.runIf(isRoot() && support?.version === 1 && support.freezer)('pausing an application', () => {
  it('stops every process of the application until it is resumed, and says who paused it', async () => {
    const web = await counter(1, 'web-1-0', 'all');
    const worker = await counter(1, 'worker-1-0', 'all');
    const paused = await pauseApplication(dataDir, 1, support);
    if ('reason' in paused) throw new Error(paused.reason);
    expect(await subtreeFrozen(support!, [tag, 'app-1'])).toBe(true);
    const [webBefore, webAfter] = await twice(web.count);
    const [workerBefore, workerAfter] = await twice(worker.count);
    expect(webAfter).toBe(webBefore);
    expect(workerAfter).toBe(workerBefore);
    // The serving Berth sees the backup (this process) holding it.
    const layout = appLayout(dataDir, 1);
    expect(fs.readFileSync(layout.pausedBy, 'utf8')).toMatch(new RegExp(`^${process.pid} \\d+\\n$`));
    expect(await checkPause({ support, cgroupTag: tag, layout }, 1)).toBe('paused');

    await paused.resume();
    expect(await subtreeFrozen(support!, [tag, 'app-1'])).toBe(false);
    expect(fs.existsSync(layout.pausedBy)).toBe(false);
    await waitForCount(web.count, webAfter);
    await waitForCount(worker.count, workerAfter);
    expect(await checkPause({ support, cgroupTag: tag, layout }, 1)).toBe('running');
  });

  it('lets an application go when the backup that paused it is gone', async () => {
    const web = await counter(2, 'web-2-0', 'all');
    const layout = appLayout(dataDir, 2);
    // A backup process that paused the application and was then killed: its pid, and a start time
    // no live process has.
    fs.writeFileSync(layout.pausedBy, `${process.pid} 1\n`);
    const frozen = await freezeSubtree(support!, [tag, 'app-2']);
    expect('thaw' in frozen).toBe(true);
    const [before, after] = await twice(web.count);
    expect(after).toBe(before);
    expect(await checkPause({ support, cgroupTag: tag, layout }, 2)).toBe('released');
    await waitForCount(web.count, after);
    expect(fs.existsSync(layout.pausedBy)).toBe(false);
  });

  it('removes a paused application at once: its processes are let go to take their SIGKILL', async () => {
    const web = await counter(5, 'web-5-0', 'all');
    const frozen = await freezeSubtree(support!, [tag, 'app-5']);
    expect('thaw' in frozen).toBe(true);
    const exited = new Promise((resolve) => web.child.once('exit', resolve));
    await removeTree(support!, [tag, 'app-5']);
    await exited;
    expect(fs.existsSync(path.join(support!.freezer!, 'berth', tag, 'app-5'))).toBe(false);
  });

  it('refuses to pause processes outside the freezer, or an application with none, and leaves nothing behind', async () => {
    const old = await counter(3, 'web-3-0', 'memory only');
    const refused = await pauseApplication(dataDir, 3, support);
    expect('reason' in refused && refused.reason).toContain('outside the freezer');
    expect(fs.existsSync(appLayout(dataDir, 3).pausedBy)).toBe(false);
    await waitForCount(old.count, old.start);

    fs.mkdirSync(appLayout(dataDir, 4).root, { recursive: true });
    expect(await pauseApplication(dataDir, 4, support)).toEqual({ reason: 'none of its processes runs' });
    expect(fs.existsSync(appLayout(dataDir, 4).pausedBy)).toBe(false);
  });
});
