// Memory caps for the processes Berth runs for tenants (replicas, workers, services), as kernel control
// groups, without systemd. Every group lives under `<root>/berth/`, one level per path segment
// (`berth/app-12/web-5-0`, `berth/databases/<uuid>`), so an application's groups are one subtree that
// can be killed and removed at once, and a Berth that restarts finds whatever its predecessor left
// running there.
// - cgroup v1 (this machine kind): the memory hierarchy at /sys/fs/cgroup/memory; a cap is
//   memory.limit_in_bytes plus memory.memsw.limit_in_bytes (when swap accounting is on), so swapping
//   does not lift the cap; the OOM count is `oom_kill` in memory.oom_control.
// - cgroup v2 (most production hosts): the unified hierarchy at /sys/fs/cgroup; the memory controller is
//   enabled in each ancestor's cgroup.subtree_control, the cap is memory.max with memory.swap.max 0; the
//   OOM count is `oom_kill` in memory.events.
// A process joins a group by writing its pid into `procsFile` (cgroup.procs in both versions).
//
// Applications also share a process and CPU budget (limitSubtree): the pids and cpu controllers cap a
// subtree (`berth/<tag>/app-<id>`) as a whole, and every group below it counts against that cap. In
// v1 these are hierarchies of their own (/sys/fs/cgroup/pids, /sys/fs/cgroup/cpu or cpu,cpuacct): an
// application's group is made at the same path in each, and its processes join all of them
// (`procsFiles`). In v2 it is one directory with the controllers enabled from the root down.
// The v1 freezer is one more such hierarchy, so that an application's processes can be paused together
// (freezer.ts); v2 has cgroup.freeze in every group.
import fsSync from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface CgroupSupport {
  version: 1 | 2;
  /** The hierarchy holding the memory controller; Berth's groups are under `<root>/berth`. */
  root: string;
  /** The hierarchy holding the pids controller (v2: `root`), when there is a usable one. */
  pids?: string;
  /** The hierarchy holding the cpu controller (v2: `root`), when there is a usable one. */
  cpu?: string;
  /** The v1 freezer hierarchy, when there is a usable one (v2 freezes any group: no hierarchy). */
  freezer?: string;
}

/** What every process of one subtree (an application) shares: see limitSubtree. */
export interface SubtreeLimits {
  /** Most processes and threads at once (pids.max). */
  pidsMax: number;
  /** Relative weight against the subtree's siblings (v1 cpu.shares; 1024 is the kernel's default). */
  cpuShares: number;
  /** Most CPU time, in cores (1.5: one and a half cores' worth per period); undefined: no cap. */
  cpuCores: number | undefined;
}

export interface MemoryGroup {
  /** The group's directory. */
  dir: string;
  /** Writing a pid here moves that process (and its future children) into the group. */
  procsFile: string;
  /**
   * Every procs file a process joins (`procsFile` first, then the group's pids, cpu and freezer
   * hierarchies in v1 when it was made with `tasks`), so the memory cap and its subtree's shared
   * limits hold.
   */
  procsFiles: string[];
  /** How many processes the kernel's OOM killer has killed in this group since it was created. */
  oomKills(): Promise<number>;
  /** The processes in the group now (empty when the group is gone). */
  pids(): Promise<number[]>;
  /**
   * Moves a running process and all its descendants into the group, for servers that daemonise
   * themselves (pg_ctl) and cannot join before they exec. What they allocate from then on is capped;
   * what they hold already moves with them only where the kernel still does that (cgroup v1, older).
   */
  adopt(pid: number): Promise<void>;
  /** Sends `signal` to every process in the group. */
  killAll(signal: NodeJS.Signals): Promise<void>;
  /** Kills what is left, waits until the group is empty and deletes it; nothing happens when it is gone. */
  remove(): Promise<void>;
}

const CGROUP_BASE = '/sys/fs/cgroup';
/** The CFS period Berth writes quotas against (the kernel's default, 100 ms). */
const CFS_PERIOD_US = 100_000;
/** The directory under the hierarchy's root that holds every group of Berth. */
const BERTH_DIR = 'berth';
const SEGMENT = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** How long remove() waits for the processes of a group to die before giving up. */
const REMOVE_TIMEOUT_MS = 10_000;

/**
 * Which cgroup version serves the memory controller here, or undefined when none can be used (no
 * memory controller, or a hierarchy Berth cannot write to, as when it is not root). `base` is for tests.
 */
export function detectCgroups(base = CGROUP_BASE): CgroupSupport | undefined {
  const unified = readTextSync(path.join(base, 'cgroup.controllers'));
  if (unified !== undefined) {
    const controllers = unified.split(/\s+/);
    if (!controllers.includes('memory') || !writable(base)) return undefined;
    return {
      version: 2,
      root: base,
      ...(controllers.includes('pids') ? { pids: base } : {}),
      ...(controllers.includes('cpu') ? { cpu: base } : {}),
    };
  }
  const v1 = path.join(base, 'memory');
  if (!fsSync.existsSync(path.join(v1, 'memory.limit_in_bytes')) || !writable(v1)) return undefined;
  const pids = path.join(base, 'pids');
  const freezer = path.join(base, 'freezer');
  // Debian mounts cpu and cpuacct together (cpu,cpuacct); some hosts mount them apart.
  const cpu = ['cpu,cpuacct', 'cpu']
    .map((name) => path.join(base, name))
    .find((dir) => usableV1(dir, 'cpu.shares'));
  return {
    version: 1,
    root: v1,
    ...(usableV1(pids, 'cgroup.procs') ? { pids } : {}),
    ...(cpu ? { cpu } : {}),
    ...(usableV1(freezer, 'cgroup.procs') ? { freezer } : {}),
  };
}

function usableV1(dir: string, file: string): boolean {
  return fsSync.existsSync(path.join(dir, file)) && writable(dir);
}

/** The directory of the group `path` (each segment checked, so no input can leave Berth's subtree). */
export function groupDir(support: CgroupSupport, segments: readonly string[]): string {
  return path.join(support.root, BERTH_DIR, ...checked(segments));
}

/**
 * Creates (or reuses) the group at `path` under Berth's subtree with a memory cap of `limitBytes`,
 * swap included. Processes join it before they exec, so the cap holds from their first byte.
 */
export async function createMemoryGroup(
  support: CgroupSupport,
  segments: readonly string[],
  limitBytes: number,
  options: { tasks?: boolean } = {},
): Promise<MemoryGroup> {
  if (segments.length === 0) throw new Error('a memory group needs a path under berth/');
  if (!Number.isSafeInteger(limitBytes) || limitBytes < 1024 * 1024) {
    throw new Error(`invalid memory limit ${limitBytes}`);
  }
  const dir = groupDir(support, segments);
  if (support.version === 2) {
    // v2 hands a controller to a group only when every ancestor enables it for its children.
    let parent = support.root;
    for (const segment of [BERTH_DIR, ...segments]) {
      await enableControllers(parent, ['memory']);
      parent = path.join(parent, segment);
      await fs.mkdir(parent, { recursive: true });
    }
    await fs.writeFile(path.join(dir, 'memory.max'), String(limitBytes));
    await writeIfPresent(path.join(dir, 'memory.swap.max'), '0');
  } else {
    await fs.mkdir(dir, { recursive: true });
    await setV1Limit(dir, limitBytes);
  }
  // `tasks`: the group also sits in the pids, cpu and freezer hierarchies, below the ancestor whose
  // limits (limitSubtree) its processes share. In v2 it is the same directory.
  const others = options.tasks
    ? taskHierarchies(support).map((root) => path.join(root, BERTH_DIR, ...segments))
    : [];
  for (const other of others) await fs.mkdir(other, { recursive: true });
  return openGroup(support, dir, others);
}

/**
 * The existing group at `segments` (made by createMemoryGroup with `tasks`, maybe by an earlier Berth
 * process), its limits as they are; undefined when it is gone.
 */
export async function openMemoryGroup(
  support: CgroupSupport,
  segments: readonly string[],
): Promise<MemoryGroup | undefined> {
  const dir = groupDir(support, segments);
  if (
    !(await fs.stat(dir).then(
      () => true,
      () => false,
    ))
  )
    return undefined;
  const others = taskHierarchies(support).map((root) => path.join(root, BERTH_DIR, ...checked(segments)));
  return openGroup(support, dir, others);
}

/**
 * Caps every process under `segments` together (an application's replicas, workers, builds and
 * one-off commands): at most `pidsMax` processes and threads (a fork past it fails with EAGAIN), a CPU
 * weight of `cpuShares` against the subtree's siblings, and at most `cpuCores` cores. Groups made below
 * it with `tasks` share these limits. Idempotent: a later call sets the new values. Controllers this
 * host lacks are skipped.
 */
export async function limitSubtree(
  support: CgroupSupport,
  segments: readonly string[],
  limits: SubtreeLimits,
): Promise<void> {
  if (segments.length === 0) throw new Error('limits need a path under berth/');
  const { pidsMax, cpuShares, cpuCores } = limits;
  if (!Number.isSafeInteger(pidsMax) || pidsMax < 1) throw new Error(`invalid pids limit ${pidsMax}`);
  if (!Number.isSafeInteger(cpuShares) || cpuShares < 2 || cpuShares > 262_144) {
    throw new Error(`invalid CPU shares ${cpuShares}`);
  }
  if (cpuCores !== undefined && !(cpuCores > 0 && cpuCores <= 4096))
    throw new Error(`invalid CPU cores ${cpuCores}`);
  const quota = cpuCores === undefined ? undefined : Math.max(1000, Math.round(cpuCores * CFS_PERIOD_US));
  if (support.version === 2) {
    const controllers = [support.pids ? 'pids' : undefined, support.cpu ? 'cpu' : undefined].filter(
      (name): name is string => name !== undefined,
    );
    let dir = support.root;
    for (const segment of [BERTH_DIR, ...segments]) {
      await enableControllers(dir, controllers);
      dir = path.join(dir, segment);
      await fs.mkdir(dir, { recursive: true });
    }
    if (support.pids) await fs.writeFile(path.join(dir, 'pids.max'), String(pidsMax));
    if (support.cpu) {
      // cgroup v2's weight (1 to 10000, default 100) from v1's shares (2 to 262144, default 1024).
      const weight = Math.round(1 + ((cpuShares - 2) * 9999) / 262_142);
      await fs.writeFile(path.join(dir, 'cpu.weight'), String(weight));
      await fs.writeFile(path.join(dir, 'cpu.max'), `${quota ?? 'max'} ${CFS_PERIOD_US}`);
    }
    return;
  }
  if (support.pids) {
    const dir = path.join(support.pids, BERTH_DIR, ...checked(segments));
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(path.join(dir, 'pids.max'), String(pidsMax));
  }
  if (support.cpu) {
    const dir = path.join(support.cpu, BERTH_DIR, ...checked(segments));
    await fs.mkdir(dir, { recursive: true });
    await fs.writeFile(path.join(dir, 'cpu.shares'), String(cpuShares));
    await fs.writeFile(path.join(dir, 'cpu.cfs_period_us'), String(CFS_PERIOD_US));
    await fs.writeFile(path.join(dir, 'cpu.cfs_quota_us'), String(quota ?? -1));
  }
}

/** The v1 hierarchies other than memory's that application groups join (none in v2: one directory). */
function taskHierarchies(support: CgroupSupport): string[] {
  if (support.version === 2) return [];
  return [support.pids, support.cpu, support.freezer].filter((root): root is string => root !== undefined);
}

/** The directory of `segments` under Berth's subtree of another hierarchy (`root`: v1 pids, cpu, freezer). */
export function hierarchyDir(root: string, segments: readonly string[]): string {
  return path.join(root, BERTH_DIR, ...checked(segments));
}

/**
 * The file that freezes every process under `segments` (freezer.ts), and what to write to it; undefined
 * on a v1 host without a usable freezer hierarchy.
 */
export function freezeControl(
  support: CgroupSupport,
  segments: readonly string[],
): { file: string; frozen: string; thawed: string } | undefined {
  if (support.version === 2)
    return { file: path.join(groupDir(support, segments), 'cgroup.freeze'), frozen: '1', thawed: '0' };
  if (!support.freezer) return undefined;
  return {
    file: path.join(hierarchyDir(support.freezer, segments), 'freezer.state'),
    frozen: 'FROZEN',
    thawed: 'THAWED',
  };
}

/** Every process in the group at `dir` and the groups below it (empty when it is gone). */
export async function subtreePids(dir: string): Promise<number[]> {
  const pids: number[] = [];
  for (const group of await subtree(dir)) pids.push(...(await groupPids(group).catch(() => [])));
  return pids;
}

function checked(segments: readonly string[]): readonly string[] {
  for (const segment of segments) {
    if (!SEGMENT.test(segment)) throw new Error(`invalid cgroup path segment '${segment}'`);
  }
  return segments;
}

/**
 * Kills every process under `path` (an application's groups, or all of Berth's with []) and deletes
 * the groups, leaves first (a group with children cannot be removed). Nothing happens when it is gone.
 */
export async function removeTree(support: CgroupSupport, segments: readonly string[]): Promise<void> {
  const top = groupDir(support, segments);
  const groups = await subtree(top);
  // A frozen process takes a SIGKILL only once thawed (a backup's pause, freezer.ts).
  const control = freezeControl(support, segments);
  if (control) await fs.writeFile(control.file, control.thawed).catch(() => undefined);
  // Children were pushed before their parents.
  for (const dir of groups) await openGroup(support, dir, []).remove();
  // Then the same subtree in the pids, cpu and freezer hierarchies (v1), emptied by the kills above.
  for (const root of taskHierarchies(support)) {
    for (const dir of await subtree(path.join(root, BERTH_DIR, ...segments))) await removeGroupDir(dir);
  }
}

/**
 * Deletes the groups under `segments` made before `before` that hold no process (left by processes
 * that died with an earlier Berth), leaves first; groups in use, and those made since (a build
 * starting now), stay.
 */
export async function removeEmptyGroups(
  support: CgroupSupport,
  segments: readonly string[],
  before: Date,
): Promise<void> {
  const roots = [support.root, ...taskHierarchies(support)];
  for (const root of roots) {
    for (const dir of await subtree(path.join(root, BERTH_DIR, ...checked(segments)))) {
      const made = await fs.stat(dir).then(
        (stat) => stat.ctime,
        () => undefined,
      );
      if (!made || made >= before || (await groupPids(dir)).length > 0) continue;
      // A group with children in use, or a task that has just joined: it stays.
      await fs.rmdir(dir).catch(() => undefined);
    }
  }
}

/** What every process under a subtree uses now (an application's replicas, workers, builds). */
export interface SubtreeUsage {
  /** Memory charged to the subtree (v1 memory.usage_in_bytes, v2 memory.current), page cache included. */
  memoryBytes: number;
  /**
   * CPU time, in seconds: the subtree's own account where the kernel keeps one (v2 cpu.stat, v1
   * cpuacct.usage when cpuacct is mounted with cpu); otherwise the sum over the processes alive in it
   * now, which drops when one exits (a counter reset to Prometheus).
   */
  cpuSeconds: number;
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ, 100 on every Linux Berth runs on). */
const USER_HZ = 100;

/** What the subtree at `segments` uses now; undefined when it is not there (nothing ran yet). */
export async function subtreeUsage(
  support: CgroupSupport,
  segments: readonly string[],
): Promise<SubtreeUsage | undefined> {
  const dir = groupDir(support, segments);
  const memory = await readText(
    path.join(dir, support.version === 2 ? 'memory.current' : 'memory.usage_in_bytes'),
  );
  if (memory === undefined) return undefined;
  const memoryBytes = Number(memory.trim()) || 0;
  if (support.version === 2) {
    const usec = /^usage_usec (\d+)$/m.exec((await readText(path.join(dir, 'cpu.stat'))) ?? '')?.[1];
    return { memoryBytes, cpuSeconds: Number(usec ?? 0) / 1e6 };
  }
  if (support.cpu) {
    const nanoseconds = await readText(
      path.join(support.cpu, BERTH_DIR, ...checked(segments), 'cpuacct.usage'),
    );
    if (nanoseconds !== undefined) return { memoryBytes, cpuSeconds: Number(nanoseconds.trim()) / 1e9 };
  }
  let ticks = 0;
  for (const pid of await subtreePids(dir)) ticks += await processTicks(pid);
  return { memoryBytes, cpuSeconds: ticks / USER_HZ };
}

/** utime + stime of a process and of its children it waited for, in clock ticks (0 when it is gone). */
async function processTicks(pid: number): Promise<number> {
  const stat = await readText(`/proc/${pid}/stat`).catch(() => undefined);
  if (stat === undefined) return 0;
  // The command name (field 2) may hold spaces and parentheses: the fields after its last ')' count.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // Fields 14 to 17 (utime, stime, cutime, cstime) are the 12th to 15th after the name.
  return fields.slice(11, 15).reduce((sum, value) => sum + (Number(value) || 0), 0);
}

/** The groups directly below `segments` (memory hierarchy), with the time each was made. */
export async function childGroups(
  support: CgroupSupport,
  segments: readonly string[],
): Promise<Array<{ name: string; made: Date }>> {
  const top = groupDir(support, segments);
  const entries = await fs.readdir(top, { withFileTypes: true }).catch((error: unknown) => {
    if (isCode(error, 'ENOENT')) return [];
    throw error;
  });
  const groups: Array<{ name: string; made: Date }> = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || !SEGMENT.test(entry.name)) continue;
    const stat = await fs.stat(path.join(top, entry.name)).catch(() => undefined);
    if (stat) groups.push({ name: entry.name, made: stat.ctime });
  }
  return groups;
}

/** `top` and every group below it, children before their parents (empty when `top` is gone). */
async function subtree(top: string): Promise<string[]> {
  const groups: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    let entries: fsSync.Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch (error) {
      if (isCode(error, 'ENOENT')) return;
      throw error;
    }
    for (const entry of entries) if (entry.isDirectory()) await walk(path.join(dir, entry.name));
    groups.push(dir);
  };
  await walk(top);
  return groups;
}

/** The processes in the group at `dir` now (empty when it is gone). */
async function groupPids(dir: string): Promise<number[]> {
  const text = await readText(path.join(dir, 'cgroup.procs'));
  return (text ?? '')
    .split('\n')
    .filter((line) => line !== '')
    .map(Number);
}

/** Kills what is left in the group at `dir`, waits until it is empty and deletes it. */
async function removeGroupDir(dir: string): Promise<void> {
  const deadline = Date.now() + REMOVE_TIMEOUT_MS;
  for (;;) {
    // Kill in a loop: a process may fork between reading the list and the signal.
    for (const pid of await groupPids(dir)) signalQuietly(pid, 'SIGKILL');
    if ((await groupPids(dir)).length === 0) {
      try {
        await fs.rmdir(dir);
        return;
      } catch (error) {
        if (isCode(error, 'ENOENT')) return;
        // EBUSY: the kernel has not let go of an exiting task yet.
        if (!isCode(error, 'EBUSY')) throw error;
      }
    }
    if (Date.now() > deadline) throw new Error(`cgroup ${dir} did not empty in time`);
    await sleep(20);
  }
}

/** `others`: the group's directories in the pids, cpu and freezer hierarchies (v1), removed with it. */
function openGroup(support: CgroupSupport, dir: string, others: readonly string[]): MemoryGroup {
  const procsFile = path.join(dir, 'cgroup.procs');
  const pids = () => groupPids(dir);
  const killAll = async (signal: NodeJS.Signals): Promise<void> => {
    for (const pid of await pids()) signalQuietly(pid, signal);
  };
  return {
    dir,
    procsFile,
    procsFiles: [procsFile, ...others.map((other) => path.join(other, 'cgroup.procs'))],
    async oomKills() {
      const file = support.version === 2 ? 'memory.events' : 'memory.oom_control';
      const text = (await readText(path.join(dir, file))) ?? '';
      const line = text.split('\n').find((candidate) => candidate.startsWith('oom_kill '));
      return line ? Number(line.slice('oom_kill '.length)) : 0;
    },
    pids,
    killAll,
    async adopt(pid) {
      if (support.version === 1) {
        // Best effort: newer kernels refuse it (deprecated), and the charge then stays behind.
        await writeIfPresent(path.join(dir, 'memory.move_charge_at_immigrate'), '3').catch(() => undefined);
      }
      // Parents first: a child forked after its parent moved is born in the group. The kernel's list
      // of children can miss one being forked while it is read: passes until one finds none outside.
      for (let pass = 0; pass < 5; pass += 1) {
        const inside = new Set(await pids());
        const outside = (await processTree(pid)).filter((member) => !inside.has(member));
        if (outside.length === 0) return;
        for (const member of outside) {
          try {
            await fs.writeFile(procsFile, String(member));
          } catch (error) {
            if (!isCode(error, 'ESRCH')) throw error; // it exited meanwhile
          }
        }
      }
    },
    async remove() {
      for (const group of [dir, ...others]) await removeGroupDir(group);
    },
  };
}

async function setV1Limit(dir: string, limitBytes: number): Promise<void> {
  const limit = path.join(dir, 'memory.limit_in_bytes');
  const withSwap = path.join(dir, 'memory.memsw.limit_in_bytes');
  const swapAccounted = fsSync.existsSync(withSwap);
  try {
    await fs.writeFile(limit, String(limitBytes));
  } catch (error) {
    // The kernel keeps memsw >= limit: raising the cap of an existing group needs memsw raised first.
    if (!swapAccounted || !isCode(error, 'EINVAL')) throw error;
    await fs.writeFile(withSwap, String(limitBytes));
    await fs.writeFile(limit, String(limitBytes));
  }
  if (swapAccounted) await fs.writeFile(withSwap, String(limitBytes));
}

async function enableControllers(dir: string, controllers: readonly string[]): Promise<void> {
  const control = path.join(dir, 'cgroup.subtree_control');
  const enabled = ((await readText(control)) ?? '').split(/\s+/);
  const missing = controllers.filter((controller) => !enabled.includes(controller));
  if (missing.length > 0) await fs.writeFile(control, missing.map((name) => `+${name}`).join(' '));
}

/** memory.swap.max exists only when the kernel accounts swap; without it there is no swap to cap. */
async function writeIfPresent(file: string, value: string): Promise<void> {
  if (fsSync.existsSync(file)) await fs.writeFile(file, value);
}

/** `pid` and its descendants, parents before their children (empty when `pid` is gone). */
async function processTree(pid: number): Promise<number[]> {
  const tree: number[] = [];
  const visit = async (member: number): Promise<void> => {
    let tasks: string[];
    try {
      tasks = await fs.readdir(`/proc/${member}/task`);
    } catch (error) {
      if (isCode(error, 'ENOENT')) return;
      throw error;
    }
    tree.push(member);
    for (const task of tasks) {
      // A task that ended meanwhile has no children to follow.
      const children = (await readText(`/proc/${member}/task/${task}/children`).catch(() => '')) ?? '';
      for (const child of children.split(/\s+/).filter(Boolean)) await visit(Number(child));
    }
  };
  await visit(pid);
  return tree;
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if (!isCode(error, 'ESRCH')) throw error;
  }
}

async function readText(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (error) {
    if (isCode(error, 'ENOENT')) return undefined;
    throw error;
  }
}

function readTextSync(file: string): string | undefined {
  try {
    return fsSync.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

function writable(dir: string): boolean {
  try {
    fsSync.accessSync(dir, fsSync.constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

function isCode(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code;
}
