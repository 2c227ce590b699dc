// Directories with a hard size: an ext4 file system in a sparse image file, loop-mounted on the
// directory. A process that fills it gets ENOSPC from the kernel, as on a real volume, and nothing else
// on the host runs out of space. Used for the `volume_size` of an application's database and rabbitmq
// services (docs/services.md). The image holds the data; the mount is how it is reached, so a Berth that
// restarts (or a host that reboots) mounts the image again and finds everything where it was.
// Application volumes are images too (ensureSharedVolume): mounted once on the host, and that mount is
// bound into every sandbox of the application and its sftp service.
// Root only: mount(8) and loop devices need CAP_SYS_ADMIN.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const exec = promisify(execFile);

export const GIB = 1024 ** 3;
/** Below this, ext4's own tables (journal, inodes) would leave little for data. */
const MIN_IMAGE_BYTES = 16 * 1024 * 1024;

/** Not executable, no devices, no set-uid: the directory holds a server's data, never its programs. */
const MOUNT_OPTIONS = 'loop,nodev,nosuid,noexec';

/** Runs a tool to completion; `accepted` are exit codes that are not failures (e2fsck's 1: fixed). */
async function command(file: string, args: string[], accepted: number[] = [0]): Promise<void> {
  try {
    await exec(file, args, { timeout: 120_000 });
  } catch (error) {
    const failure = error as { code?: unknown; stderr?: string; message: string };
    if (typeof failure.code === 'number' && accepted.includes(failure.code)) return;
    const detail = failure.stderr?.trim() || failure.message;
    throw new Error(`${file} failed: ${detail.split('\n').slice(-3).join(' | ')}`);
  }
}

/** The mount points of this host (from the kernel's own table, escapes decoded). */
function mountPoints(): Map<string, string> {
  const points = new Map<string, string>();
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-');
    if (separator < 0) continue;
    const decode = (text: string) =>
      text.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
    points.set(decode(fields[4] ?? ''), decode(fields[separator + 2] ?? ''));
  }
  return points;
}

export const isMounted = (dir: string): boolean => mountPoints().has(path.resolve(dir));

/**
 * Makes `dir` the root of the image `image`, at least `sizeBytes` large: the image is made when
 * missing (empty; `dir` must then be empty or missing), grown when smaller (nothing may run on it
 * then), never shrunk (a smaller size is refused: the data may not fit). Mounted when it is not yet.
 */
export async function mountImage(image: string, dir: string, sizeBytes: number): Promise<void> {
  if (!Number.isSafeInteger(sizeBytes) || sizeBytes < MIN_IMAGE_BYTES) {
    throw new Error(`invalid volume size ${sizeBytes}`);
  }
  fs.mkdirSync(path.dirname(image), { recursive: true, mode: 0o700 });
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Images are sparse, so several may promise more than the disk has; one alone may not.
  const host = fs.statfsSync(path.dirname(image));
  if (sizeBytes > host.blocks * host.bsize) {
    throw new Error(
      `a volume of ${sizeName(sizeBytes)} is larger than this host's disk (${sizeName(host.blocks * host.bsize)})`,
    );
  }
  const refusal = shrinkRefusal(image, sizeBytes);
  if (refusal) throw new Error(refusal);
  const current = imageSize(image);
  if (current === undefined) {
    const building = `${image}.building`;
    fs.rmSync(building, { force: true });
    // Sparse: the host's disk is used as the data grows, not at once.
    fs.closeSync(fs.openSync(building, 'wx', 0o600));
    fs.truncateSync(building, sizeBytes);
    // -m 0: no blocks kept back for root (the server is the only writer); lazy init: made in moments.
    await command('mkfs.ext4', [
      '-q',
      '-F',
      '-m',
      '0',
      '-E',
      'lazy_itable_init=1,lazy_journal_init=1',
      '--',
      building,
    ]);
    fs.renameSync(building, image);
  }
  if (current !== undefined && current < sizeBytes) await grow(image, dir, sizeBytes);
  if (!isMounted(dir)) {
    await command('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, '--', image, dir]);
    // A data directory holds the server's files only (MariaDB would list lost+found as a database);
    // e2fsck makes it again should it ever need one.
    fs.rmSync(path.join(dir, 'lost+found'), { recursive: true, force: true });
  }
}

/**
 * Grows an image offline: unmounted (nothing may run on it: the caller has stopped its server), the
 * file, then the file system. Online growth needs a capability containers often lack.
 */
async function grow(image: string, dir: string, sizeBytes: number): Promise<void> {
  await unmountImage(dir);
  fs.truncateSync(image, sizeBytes);
  await command('e2fsck', ['-f', '-p', '--', image], [0, 1]);
  await command('resize2fs', ['--', image]);
}

/**
 * Puts `dir`'s files on the volume `image` of `sizeBytes`, whatever state they are in (nothing may
 * run on them): an existing volume is mounted and grown; files made before there was a volume are
 * copied onto a new one (owner and mode of `dir` kept), then the old ones go. A smaller size than the
 * volume has is refused before anything changes.
 */
export async function placeOnVolume(image: string, dir: string, sizeBytes: number): Promise<void> {
  const refusal = shrinkRefusal(image, sizeBytes);
  if (refusal) throw new Error(refusal);
  const current = imageSize(image);
  const files = fs.existsSync(dir) ? fs.readdirSync(dir) : [];
  if (current !== undefined || files.length === 0) {
    const owner = fs.existsSync(dir) ? fs.statSync(dir) : undefined;
    await mountImage(image, dir, sizeBytes);
    if (owner) keepOwner(dir, owner);
    return;
  }
  const owner = fs.statSync(dir);
  const staging = `${dir}.volume`;
  await unmountImage(staging);
  fs.rmSync(staging, { recursive: true, force: true });
  await mountImage(image, staging, sizeBytes);
  try {
    await command('cp', ['-a', '--', `${dir}/.`, staging]);
    keepOwner(staging, owner);
  } catch (error) {
    await unmountImage(staging);
    fs.rmSync(image, { force: true });
    throw error;
  }
  await unmountImage(staging);
  fs.rmdirSync(staging);
  // The copy is whole: the old files go, and the volume takes their place.
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { mode: 0o700 });
  await mountImage(image, dir, sizeBytes);
}

/**
 * Makes `dir` the volume `image` of `sizeBytes` for processes that may hold it bound in their own
 * mount namespaces while this runs (an application's sandboxes, its sftp service): as placeOnVolume,
 * except growth. A mounted volume grows online (resize2fs on the live file system, which the kernel
 * allows with CAP_SYS_RESOURCE); without that capability it grows offline only when no other mount
 * namespace holds it (an unmount on the host would leave their mounts on a file system being resized).
 * Returns why the growth waits, when it does; the volume keeps its size until then.
 */
export async function ensureSharedVolume(
  image: string,
  dir: string,
  sizeBytes: number,
  releaseWaitMs = RELEASE_WAIT_MS,
): Promise<string | undefined> {
  const current = imageSize(image);
  if (current !== undefined && current < sizeBytes && isMounted(dir)) {
    if (canGrowOnline()) {
      await growOnline(image, dir, sizeBytes);
      return undefined;
    }
    if (await stillMountedElsewhere(dir, releaseWaitMs)) {
      return `volume stays at ${sizeName(current)} until no process uses it (this host refuses to grow a mounted file system: no CAP_SYS_RESOURCE); it grows to ${sizeName(sizeBytes)} when the application next starts from stopped`;
    }
  }
  await placeOnVolume(image, dir, sizeBytes);
  return undefined;
}

/**
 * How long a growth waits for other mount namespaces to let go of the volume: sandboxes stopped just
 * before (a suspend, the replicas a rollout drained) leave their namespace a moment after their parent
 * is gone, longer on a busy host. A growth that would wait for a sandbox still running waits this long
 * and is then left for the next start from stopped; callers that know sandboxes hold the volume (an
 * application's serving replicas, during a rollout) pass 0.
 */
const RELEASE_WAIT_MS = 5000;

async function stillMountedElsewhere(dir: string, waitMs: number): Promise<boolean> {
  const until = Date.now() + waitMs;
  while (mountedElsewhere(dir)) {
    if (Date.now() >= until) return true;
    await sleep(100);
  }
  return false;
}

/** Whether this process may grow a mounted ext4 file system (CAP_SYS_RESOURCE, bit 24 of CapEff). */
export function canGrowOnline(): boolean {
  const line = /^CapEff:\s*([0-9a-f]+)$/m.exec(fs.readFileSync('/proc/self/status', 'utf8'));
  return line !== null && (BigInt(`0x${line[1]}`) & (1n << 24n)) !== 0n;
}

/** The image file, the loop device's idea of its size, then the mounted file system. */
async function growOnline(image: string, dir: string, sizeBytes: number): Promise<void> {
  const device = mountPoints().get(path.resolve(dir));
  if (!device?.startsWith('/dev/loop')) throw new Error(`${dir} is not a mounted volume`);
  const before = imageSize(image)!;
  fs.truncateSync(image, sizeBytes);
  try {
    await command('losetup', ['--set-capacity', '--', device]);
    await command('resize2fs', ['--', device]);
  } catch (error) {
    // The file system kept its size: so does the image (the size Berth reads back).
    fs.truncateSync(image, before);
    await command('losetup', ['--set-capacity', '--', device]).catch(() => undefined);
    throw error;
  }
}

/**
 * Whether the file system mounted at `dir` is also mounted in another mount namespace (a sandbox's
 * bind of it), from every process's mountinfo.
 */
export function mountedElsewhere(dir: string): boolean {
  const dev = fs.statSync(dir).dev;
  // Linux's encoding of a device number (new_encode_dev): 12 bits of major, 20 of minor.
  const major = Math.floor(dev / 256) % 4096;
  const minor = (dev % 256) + Math.floor(dev / 1048576) * 256;
  const device = `${major}:${minor}`;
  const own = fs.readlinkSync('/proc/self/ns/mnt');
  const seen = new Set([own]);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const namespace = fs.readlinkSync(`/proc/${entry}/ns/mnt`);
      if (seen.has(namespace)) continue;
      seen.add(namespace);
      const lines = fs.readFileSync(`/proc/${entry}/mountinfo`, 'utf8').split('\n');
      if (lines.some((line) => line.split(' ')[2] === device)) return true;
    } catch {
      // exited meanwhile
    }
  }
  return false;
}

/** Why the volume `image` cannot take `sizeBytes` (smaller than it is: the data may not fit), if so. */
export function shrinkRefusal(image: string, sizeBytes: number): string | undefined {
  const current = imageSize(image);
  return current !== undefined && current > sizeBytes
    ? `volume_size cannot shrink from ${sizeName(current)} to ${sizeName(sizeBytes)}; keep its size or make a new service`
    : undefined;
}

/** A volume's root is root's and 0755 when made: it takes the owner and mode of the directory it replaces. */
function keepOwner(dir: string, owner: fs.Stats): void {
  fs.chownSync(dir, owner.uid, owner.gid);
  fs.chmodSync(dir, owner.mode & 0o7777);
}

/**
 * Unmounts `dir` when it is mounted (its loop device is freed with it); the image stays. `detach`: for
 * a volume being deleted, a mount still busy (a process with a file open in it) is detached at once
 * and goes when the last user does.
 */
export async function unmountImage(dir: string, options: { detach?: boolean } = {}): Promise<void> {
  if (!isMounted(dir)) return;
  try {
    await command('umount', ['--', path.resolve(dir)]);
  } catch (error) {
    if (!options.detach) throw error;
    await command('umount', ['--lazy', '--', path.resolve(dir)]);
  }
}

/** The size the image was made or grown to, or undefined when there is none. */
export function imageSize(image: string): number | undefined {
  try {
    return fs.statSync(image).size;
  } catch {
    return undefined;
  }
}

/** `2Gi`, or `300Mi` for a size that is not whole gibibytes. */
export const sizeName = (bytes: number): string =>
  bytes % GIB === 0 ? `${bytes / GIB}Gi` : `${Math.round(bytes / (1024 * 1024))}Mi`;
