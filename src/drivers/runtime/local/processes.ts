// Starting one process of an application — a build command, a replica, the scheduler, a one-off
// command — in its sandbox: the application's OS user, its own memory group inside the application's
// shared process and CPU limits, its release at /app, its volumes at their mount paths, the language
// runtime read-only, and only the environment given.
import fs from 'node:fs/promises';
import type { AppSpec } from '../driver.js';
import {
  createMemoryGroup,
  limitSubtree,
  openMemoryGroup,
  type CgroupSupport,
  type MemoryGroup,
  type SubtreeLimits,
} from '../../os/cgroups.js';
import { ensureSharedVolume, GIB, unmountImage } from '../../os/disk-images.js';
import type { AppLayout } from './layout.js';
import { adoptSandboxed, spawnSandboxed, type SandboxedProcess, type SandboxRecord } from './sandbox.js';

/** Where the Node.js runtime's directory is bound inside every sandbox. */
export const NODE_MOUNT = '/opt/berth/node';
/** Where a process's own files (PHP-FPM and nginx configuration, sockets) are bound. */
export const RUN_MOUNT = '/run/berth';

/** Each application's CPU weight against the others (the kernel's default: all weigh the same). */
export const APP_CPU_SHARES = 1024;

export const SANDBOX_PATH = `${NODE_MOUNT}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;

export interface LaunchContext {
  support: CgroupSupport | undefined;
  /** Segment naming this Berth's groups (several Berth processes may share one machine). */
  cgroupTag: string;
  /** What all the application's processes share (BERTH_APP_PIDS_MAX, BERTH_APP_CPU_CORES). */
  limits: SubtreeLimits;
  account: { uid: number; gid: number } | undefined;
  layout: AppLayout;
  /** The Node.js runtime's directory on the host, bound at NODE_MOUNT; undefined: none. */
  nodeDir: string | undefined;
  /**
   * Whether a volume's growth waits for sandboxes that just stopped to let go of it (ensureVolume):
   * not while the application's replicas serve, since they hold its volumes for as long as they run.
   */
  volumesInUse?: boolean;
  /**
   * The application's network namespace, which every sandbox joins, and the address its replicas are
   * reached at in it; undefined: the host's network (Berth is not root), replicas on 127.0.0.1.
   */
  network?: { namespacePath: string; address: string };
}

export interface LaunchOptions {
  /** `build-d12`, `web-d12-0-3`, `exec-5`…: names the memory group. */
  instance: string;
  release: string;
  command: string[];
  env: Record<string, string>;
  memoryBytes: number;
  /** Volumes are bound for replicas, init and one-off commands; builds see none. */
  withVolumes: boolean;
  /** A host directory bound writable at RUN_MOUNT. */
  runDir?: string;
  /** More read-only binds (a build's CA files). */
  readOnlyBinds?: ReadonlyArray<{ source: string; target: string }>;
  /** It outlives Berth (replicas, workers): output to the instance's files (layout.output). */
  outlivesBerth?: boolean;
}

export interface Launched {
  process: SandboxedProcess;
  group: MemoryGroup | undefined;
  /** OOM kills counted in the group when the process started. */
  oomBefore: number;
}

/** The environment every process gets; secrets are added by the caller where they belong. */
export function baseEnv(app: AppSpec): Record<string, string> {
  return {
    PATH: SANDBOX_PATH,
    HOME: '/tmp',
    LANG: 'C.UTF-8',
    BERTH_APP_NAME: app.name,
  };
}

/** Volumes being prepared, by host directory: replicas start together and must not mount one twice. */
const preparing = new Map<string, Promise<unknown>>();

/**
 * The host directory of one of the application's volumes, made (owned by its account) when missing.
 * As root (an account) it is the mount point of an ext4 image of `volumeSize` GiB (disk-images.ts),
 * so a write past the size fails with ENOSPC inside, and files made before volumes had images move
 * onto one; every sandbox of the application and its sftp service bind that one mount. `note` says
 * why a growth waits (ensureSharedVolume).
 */
export async function ensureVolume(
  context: Pick<LaunchContext, 'layout' | 'account' | 'volumesInUse'>,
  volume: { name: string; volumeSize: number },
): Promise<{ source: string; note?: string }> {
  // Searchable, not listable, by the application's account (a bind source must be reachable).
  await fs.mkdir(context.layout.volumes, { recursive: true, mode: 0o711 });
  await fs.chmod(context.layout.volumes, 0o711);
  const source = context.layout.volume(volume.name);
  const previous = preparing.get(source) ?? Promise.resolve();
  const prepared = previous
    .catch(() => undefined)
    .then(async () => {
      await fs.mkdir(source, { recursive: true, mode: 0o700 });
      if (context.account) await fs.chown(source, context.account.uid, context.account.gid);
      if (!context.account) return { source };
      const note = await ensureSharedVolume(
        context.layout.volumeImage(volume.name),
        source,
        volume.volumeSize * GIB,
        ...(context.volumesInUse ? [0] : []),
      );
      return note ? { source, note: `Volume '${volume.name}': ${note}` } : { source };
    });
  preparing.set(source, prepared);
  try {
    return await prepared;
  } finally {
    if (preparing.get(source) === prepared) preparing.delete(source);
  }
}

/**
 * Deletes the volumes the application no longer has (removed with DELETE …/volumes/{name}): the mount
 * (detached when a sandbox of the old release still holds it: that one keeps its view until it
 * stops), the image and the directory.
 */
export async function removeOtherVolumes(layout: AppLayout, keep: readonly string[]): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await fs.readdir(layout.volumes).catch(() => [] as string[])) {
    // `<name>.volume`: where a kept volume's files are being copied onto its image (placeOnVolume).
    if (keep.includes(name) || keep.some((kept) => name === `${kept}.volume`)) continue;
    await unmountImage(layout.volume(name), { detach: true });
    await fs.rm(layout.volumeImage(name), { force: true });
    await fs.rm(layout.volume(name), { recursive: true, force: true });
    removed.push(name);
  }
  return removed;
}

/** Unmounts the application's volumes (their images stay); a mount still in use is detached. */
export async function unmountVolumes(layout: AppLayout): Promise<void> {
  for (const name of await fs.readdir(layout.volumes).catch(() => [] as string[])) {
    await unmountImage(layout.volume(name), { detach: true });
  }
}

export async function launch(
  app: AppSpec,
  context: LaunchContext,
  options: LaunchOptions,
): Promise<Launched> {
  let group: MemoryGroup | undefined;
  if (context.support) {
    // Every process of the application (replicas of every rollout, workers, builds, commands) counts
    // against one process and CPU budget: its memory group sits below the application's.
    const application = [context.cgroupTag, `app-${app.id}`];
    await limitSubtree(context.support, application, context.limits);
    group = await createMemoryGroup(
      context.support,
      [...application, options.instance.toLowerCase()],
      options.memoryBytes,
      { tasks: true },
    );
  }
  const oomBefore = group ? await group.oomKills() : 0;
  const binds: Array<{ source: string; target: string; writable: boolean }> = [
    { source: context.layout.release(options.release), target: '/app', writable: true },
  ];
  if (context.nodeDir) binds.push({ source: context.nodeDir, target: NODE_MOUNT, writable: false });
  if (options.runDir) binds.push({ source: options.runDir, target: RUN_MOUNT, writable: true });
  for (const bind of options.readOnlyBinds ?? []) binds.push({ ...bind, writable: false });
  if (options.withVolumes) {
    for (const volume of app.volumes) {
      const { source } = await ensureVolume(context, volume);
      binds.push({ source, target: volume.mountPath, writable: true });
    }
  }
  let outputFiles;
  if (options.outlivesBerth) {
    await fs.mkdir(context.layout.outputs, { recursive: true, mode: 0o700 });
    outputFiles = context.layout.output(options.instance);
    // A file of an earlier process of this name would be read again as this one's output.
    for (const file of Object.values(outputFiles)) await fs.rm(file, { force: true });
  }
  const process = spawnSandboxed({
    command: options.command,
    cwd: '/app',
    env: options.env,
    binds,
    account: context.account,
    memory: group,
    ...(outputFiles ? { outputFiles } : {}),
    ...(context.network ? { network: { namespacePath: context.network.namespacePath } } : {}),
  });
  return { process, group, oomBefore };
}

/**
 * A process an earlier Berth launched with `outlivesBerth` and recorded, when it still runs: its memory
 * group is found again (the cap it was started with stays), its output followed on. Undefined when it
 * has ended meanwhile.
 */
export async function adoptLaunch(
  app: AppSpec,
  context: LaunchContext,
  instance: string,
  record: SandboxRecord,
): Promise<Launched | undefined> {
  const process = adoptSandboxed(record);
  if (!process) return undefined;
  const group = context.support
    ? await openMemoryGroup(context.support, [context.cgroupTag, `app-${app.id}`, instance.toLowerCase()])
    : undefined;
  return { process, group, oomBefore: group ? await group.oomKills() : 0 };
}

/** Removes the output files of a process that has ended and been read to the end. */
export async function removeOutput(layout: AppLayout, instance: string): Promise<void> {
  for (const file of Object.values(layout.output(instance))) await fs.rm(file, { force: true });
}

/** Why a process ended, in the words the status and events show. */
export async function exitReason(
  launched: Launched,
  exit: { code: number | null; signal: NodeJS.Signals | null },
  memoryBytes: number,
): Promise<{ reason: string; oom: boolean }> {
  const oom = launched.group ? (await launched.group.oomKills()) > launched.oomBefore : false;
  if (oom) return { reason: `killed: out of memory (limit ${Math.round(memoryBytes / 1048576)} MiB)`, oom };
  if (exit.signal) return { reason: `killed by ${exit.signal}`, oom };
  return { reason: `exited with ${exit.code ?? 'no code'}`, oom };
}
