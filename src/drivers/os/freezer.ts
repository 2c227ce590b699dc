// Pausing every process of a subtree of Berth's groups at once (an application's replicas, workers and
// commands), and letting them go on: the kernel's freezer. A frozen process is stopped where it stands,
// without a signal it could see; what it wrote before is in the page cache for any reader. A backup
// reads an application's volumes while it is frozen, so that the copy is the volume as it was at one
// moment (src/backup.ts).
// - cgroup v1: the freezer hierarchy (/sys/fs/cgroup/freezer), which application groups join beside
//   memory, pids and cpu (cgroups.ts); `FROZEN` in the subtree's freezer.state, read back `FROZEN`
//   once every process of it is stopped (`FREEZING` until then).
// - cgroup v2: `1` in the subtree's cgroup.freeze; cgroup.events says `frozen 1` once it holds.
import fs from 'node:fs/promises';
import fsSync from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freezeControl, groupDir, hierarchyDir, subtreePids, type CgroupSupport } from './cgroups.js';

/** How long a freeze may take to hold before it is given up (a process stuck in the kernel). */
const FREEZE_TIMEOUT_MS = 5_000;

export interface Frozen {
  /** Lets the processes go on. */
  thaw(): Promise<void>;
  /** The same, synchronously: for a process that is about to exit on a signal. */
  thawSync(): void;
}

/**
 * The subtree's freeze control (cgroups.ts freezeControl) and whether it is frozen, or why there is
 * none.
 */
function freezerFiles(
  support: CgroupSupport,
  segments: readonly string[],
): { control: string; frozen: () => Promise<boolean>; on: string; off: string } | string {
  const control = freezeControl(support, segments);
  if (!control) return 'this host has no usable cgroup v1 freezer hierarchy';
  const events = path.join(path.dirname(control.file), 'cgroup.events');
  return {
    control: control.file,
    on: control.frozen,
    off: control.thawed,
    frozen: async () =>
      support.version === 2
        ? /^frozen 1$/m.test(await readOr(events, ''))
        : (await readOr(control.file, '')).trim() === 'FROZEN',
  };
}

async function readOr(file: string, fallback: string): Promise<string> {
  return fs.readFile(file, 'utf8').catch(() => fallback);
}

/**
 * Freezes every process under `segments`; resolves once all of them are stopped. A reason instead when
 * that cannot be done: no freezer here, or processes of the subtree outside the freezer's groups
 * (started by a Berth before it placed them there), or a freeze that did not hold within 5 s (it is
 * undone then).
 */
export async function freezeSubtree(
  support: CgroupSupport,
  segments: readonly string[],
  timeoutMs = FREEZE_TIMEOUT_MS,
): Promise<Frozen | { reason: string }> {
  const files = freezerFiles(support, segments);
  if (typeof files === 'string') return { reason: files };
  if (support.version === 1 && support.freezer) {
    const outside = await outsideFreezer(
      support.freezer,
      segments,
      await subtreePids(groupDir(support, segments)),
    );
    if (outside.length > 0)
      return {
        reason: `${outside.length} of its processes were started outside the freezer's groups (by an earlier Berth); they join at their next start`,
      };
  }
  try {
    await fs.writeFile(files.control, files.on);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { reason: 'none of its processes runs' };
    throw error;
  }
  const thawSync = () => {
    try {
      fsSync.writeFileSync(files.control, files.off);
    } catch {
      // The group is gone: nothing is frozen.
    }
  };
  const deadline = Date.now() + timeoutMs;
  while (!(await files.frozen())) {
    if (Date.now() > deadline) {
      thawSync();
      return { reason: `its processes did not all stop within ${timeoutMs / 1000} s` };
    }
    await sleep(5);
  }
  return { thaw: () => Promise.resolve(thawSync()), thawSync };
}

/**
 * Of `pids` (the subtree's processes in the memory hierarchy), those that are not in the subtree of
 * the v1 freezer. The lists are read one after the other, so each candidate is looked at again in
 * /proc: one that exited meanwhile (its groups are then the roots) does not count.
 */
async function outsideFreezer(
  freezer: string,
  segments: readonly string[],
  pids: number[],
): Promise<number[]> {
  const inFreezer = new Set(await subtreePids(hierarchyDir(freezer, segments)));
  const within = `/berth/${segments.join('/')}`;
  const inside = (at: string | undefined) => at === within || at?.startsWith(`${within}/`) === true;
  const outside: number[] = [];
  for (const pid of pids.filter((candidate) => !inFreezer.has(candidate))) {
    // Lines `<id>:<controllers>:<path>`.
    const groups = new Map<string, string>();
    for (const line of (await fs.readFile(`/proc/${pid}/cgroup`, 'utf8').catch(() => '')).split('\n')) {
      const [, controllers = '', at = ''] = line.split(':');
      for (const controller of controllers.split(',')) groups.set(controller, at);
    }
    if (inside(groups.get('memory')) && !inside(groups.get('freezer'))) outside.push(pid);
  }
  return outside;
}

/** Whether the subtree at `segments` is frozen, or being frozen, now. */
export async function subtreeFrozen(support: CgroupSupport, segments: readonly string[]): Promise<boolean> {
  const files = freezerFiles(support, segments);
  if (typeof files === 'string') return false;
  if (support.version === 2) return (await readOr(files.control, '0')).trim() === '1';
  return ['FROZEN', 'FREEZING'].includes((await readOr(files.control, 'THAWED')).trim());
}

/** Lets every process under `segments` go on (nothing happens when it is not frozen, or gone). */
export async function thawSubtree(support: CgroupSupport, segments: readonly string[]): Promise<void> {
  const files = freezerFiles(support, segments);
  if (typeof files === 'string') return;
  await fs.writeFile(files.control, files.off).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  });
}
