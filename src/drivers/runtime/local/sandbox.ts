// The sandbox every application process runs in (builds, init commands, replicas, workers): tenants'
// code, so it is treated as hostile. One process tree per sandbox:
//
//   bash (as root: joins the groups) → nsenter (as root: joins the application's network namespace)
//     → setpriv (drops to the app's account) → bwrap → command
//
// - The groups (memory; and the application's shared pids and cpu limits) are joined before anything
//   of the tenant runs, so the caps hold from the first byte and the first fork; when a join fails
//   nothing runs at all. Descriptors Berth inherited are closed first.
// - setpriv drops to the per-app account `berth-app-<id>` with no groups, no capabilities (inheritable
//   and bounding set emptied) and no_new_privs, so an escape is an unprivileged user owning only its
//   application's files. bwrap then runs unprivileged, in its own user namespace that maps that account
//   to itself (files written to binds belong to it on the host), and forbids nested user namespaces.
// - bwrap gives new PID, IPC, UTS and cgroup namespaces, a new session (no TIOCSTI into a terminal), no
//   capabilities, a seccomp filter (src/drivers/os/seccomp.ts: no mount, ptrace, keyctl, bpf, module,
//   namespace… calls; x86_64), and a file system of: read-only /usr (and the merged-/usr
//   symlinks), a few read-only /etc entries, a generated /etc/passwd and /etc/group naming only root and
//   the app user, fresh /proc and /dev, a private tmpfs /tmp, and the binds the caller hands over. The
//   rest of the root is read-only, and nothing else of the host (Berth's data dir, other applications,
//   /home, /root, /etc/shadow) exists inside.
// - What serves (replicas, workers: `outputFiles`) outlives Berth: no parent-death signal, output
//   appended to files Berth follows (a pipe would break with Berth), and a Berth started again adopts
//   it (adoptSandboxed). Everything else (builds, init and one-off commands) dies with Berth.
// - The environment is exactly the caller's: the chain outside bwrap runs with an empty one, and the
//   variables reach bwrap through a pipe (`--args`), never a command line, because they hold secrets
//   and every user on the host can read a command line.
//
// - The network (as root) is the application's own namespace (src/drivers/os/netns.ts), shared by all
//   its sandboxes: its own loopback, a veth to the host where only its services' ports and the public
//   ports answer, no path to other applications, egress NATed. The namespace belongs to the init user
//   namespace, so nothing inside (bwrap's user namespace holds no capability over it) can change it.
//
// Known limits:
// - Without root there is no namespace: sandboxes share the host's network (every loopback port).
// - /etc/php and /etc/nginx are visible read-only as the host has them: per-app configuration (pools
//   with `env[]`) must live in the app's own directories, never there.
// - Bind sources must be reachable (search permission on every ancestor) by the app's account.
// - bwrap follows symlinks in a bind's target: a target nested inside a writable bind (a volume inside
//   /app) must be checked by the caller not to be a symlink the tenant planted; at worst it lands
//   elsewhere inside this sandbox, never outside it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import fsPromises from 'node:fs/promises';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import {
  BWRAP_PATH,
  DIE_WITH_BERTH,
  ISOLATION_ARGS,
  PRIVATE_KERNEL_MOUNTS,
  readOnlySystemArgs,
} from '../../os/bwrap.js';
import {
  dropPrivileges,
  ensureSystemAccount,
  findAccount,
  isRoot,
  removeSystemAccount,
  type SystemAccount,
} from '../../os/users.js';
import type { MemoryGroup } from '../../os/cgroups.js';
import { NSENTER } from '../../os/netns.js';
import { descendants, processStartTime, processTree, watchAdoptedExit } from '../../os/processes.js';
import { seccompProgram } from '../../os/seccomp.js';

export interface SandboxBind {
  /** A host path. */
  source: string;
  /** Where it appears inside the sandbox (absolute, normalised). */
  target: string;
  writable: boolean;
}

export interface SandboxSpec {
  /** argv inside the sandbox, e.g. ['/bin/sh', '-c', 'npm start']. */
  command: string[];
  /** The working directory inside the sandbox, e.g. '/app'. */
  cwd: string;
  /** The whole environment (nothing of Berth's own leaks in); the caller includes PATH. */
  env: Record<string, string>;
  /** The release dir at /app (rw), volumes at their mount path (rw), runtimes (ro). Nested targets work in any order. */
  binds: SandboxBind[];
  /** The unprivileged user to run as; undefined when Berth is not root (it runs as Berth's user). */
  account: { uid: number; gid: number } | undefined;
  /** Joined before exec (all its `procsFiles`), so the caps hold from the first byte. */
  memory: MemoryGroup | undefined;
  /**
   * Host files (root's, outside every bind) the output is appended to, for a sandbox that outlives
   * Berth (replicas, workers); `stdout` and `stderr` follow them. Without them the sandbox dies with
   * Berth and its output comes through pipes.
   */
  outputFiles?: OutputFiles;
  /** The application's network namespace (/run/netns/…), joined as root before the drop; none: the host's. */
  network?: { namespacePath: string };
}

export interface OutputFiles {
  stdout: string;
  stderr: string;
}

/** What identifies a sandbox that outlives Berth, for the next Berth to adopt it. */
export interface SandboxRecord {
  pid: number;
  /** The process's start time in clock ticks since boot (/proc/<pid>/stat): a reused pid differs. */
  startTime: number;
  outputFiles: OutputFiles;
  /** How far Berth had read each output file. */
  offsets: { stdout: number; stderr: number };
}

export interface SandboxedProcess {
  /** The host pid of the outermost process spawned (bwrap once the chain has exec'd). */
  pid: number;
  stdout: Readable;
  stderr: Readable;
  /** Settles when the outermost process exits (output may still be buffered in stdout and stderr). */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /**
   * Signals the whole sandbox: SIGKILL ends every process in it at once (`exited` then reports code
   * 137, as for an OOM kill); another signal (SIGTERM by default) goes to every process of the
   * application, as a service manager does, so it can shut down cleanly; when the application's first
   * process exits, the sandbox ends and takes the rest with it. Nothing happens after the exit.
   */
  kill(signal?: NodeJS.Signals): void;
  /** What a Berth started later needs to adopt it (sandboxes with `outputFiles` only). */
  record(): SandboxRecord | undefined;
}

const BASH_PATH = '/bin/bash';
/**
 * The chain's first step, as root: closes every descriptor above bwrap's (neither Node nor bwrap closes
 * those Berth inherited without close-on-exec, and they would reach the tenant), writes its own pid into
 * each of the groups' procs files given (`$1`, separated by `:`; Berth makes those paths), then becomes
 * the rest of argv. bash, not dash: dash cannot name a descriptor above 9.
 */
const PREPARE_SCRIPT = [
  'for fd in /proc/self/fd/*; do n=${fd##*/}; if [ "$n" -gt 6 ]; then exec {n}>&-; fi; done',
  'IFS=: read -r -a groups <<< "$1"',
  'for group in "${groups[@]}"; do echo $$ > "$group" || exit 125; done',
  'shift',
  'exec "$@"',
].join('\n');

/** The /etc entries Node, npm, git, PHP and nginx need (DNS, TLS roots, time zone, loader, MIME types). */
const ETC_ENTRIES = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/host.conf',
  '/etc/nsswitch.conf',
  '/etc/gai.conf',
  '/etc/protocols',
  '/etc/services',
  '/etc/ssl/certs',
  '/etc/ssl/openssl.cnf',
  '/etc/alternatives',
  '/etc/localtime',
  '/etc/timezone',
  '/etc/ld.so.cache',
  '/etc/os-release',
  '/etc/mime.types',
  '/etc/fonts',
  '/etc/ImageMagick-6',
  '/etc/php',
  '/etc/nginx',
];

/** Targets that would hide the sandbox's own system. */
const RESERVED_TARGETS = ['/usr', '/bin', '/lib', '/lib64', '/sbin', '/etc', '/proc', '/dev'];
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const NAMESPACE_PATH = /^\/run\/netns\/berth-[a-z0-9-]{1,40}$/;
/** The extra descriptors of the spawned chain: bwrap's options, the passwd and group files, the filter. */
const ARGS_FD = 3;
const PASSWD_FD = 4;
const GROUP_FD = 5;
const SECCOMP_FD = 6;
/** The seccomp program, built once; undefined on architectures Berth has none for. */
const SECCOMP_PROGRAM = seccompProgram();

/** Starts `spec.command` in a new sandbox. Throws when the spec is invalid or nothing could be spawned. */
export function spawnSandboxed(spec: SandboxSpec): SandboxedProcess {
  const argv = sandboxCommandLine(spec);
  const environment = environmentArgs(spec.env); // checked before anything is spawned
  const files = spec.outputFiles;
  const output = files ? [openOutput(files.stdout), openOutput(files.stderr)] : (['pipe', 'pipe'] as const);
  let child;
  try {
    child = spawn(argv[0]!, argv.slice(1), {
      env: {},
      // Its own process group: a terminal's Ctrl-C reaches Berth, which decides what to stop.
      detached: true,
      stdio: ['ignore', ...output, 'pipe', 'pipe', 'pipe', SECCOMP_PROGRAM ? 'pipe' : 'ignore'],
    });
  } finally {
    for (const fd of output) if (typeof fd === 'number') fs.closeSync(fd);
  }
  // Spawn errors are reported by the missing pid below; a later kill error changes nothing.
  child.on('error', () => undefined);
  const pid = child.pid;
  const streams = files
    ? { stdout: new OutputFollower(files.stdout, 0), stderr: new OutputFollower(files.stderr, 0) }
    : child.stdout && child.stderr
      ? { stdout: child.stdout, stderr: child.stderr }
      : undefined;
  if (pid === undefined || !streams) {
    if (streams && files)
      for (const stream of Object.values(streams)) void (stream as OutputFollower).finish();
    throw new Error(`could not start the sandbox (${argv[0]})`);
  }
  const uid = spec.account?.uid ?? process.getuid?.() ?? 0;
  const gid = spec.account?.gid ?? process.getgid?.() ?? 0;
  const descriptors: readonly unknown[] = child.stdio;
  feed(descriptors[ARGS_FD], environment);
  feed(descriptors[PASSWD_FD], passwdFile(uid, gid, spec.cwd));
  feed(descriptors[GROUP_FD], groupFile(gid));
  if (SECCOMP_PROGRAM) feed(descriptors[SECCOMP_FD], SECCOMP_PROGRAM);

  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const startTime = files ? processStartTime(pid) : undefined;
  return sandboxHandle(pid, streams, exit, () =>
    files && startTime !== undefined && streams.stdout instanceof OutputFollower
      ? {
          pid,
          startTime,
          outputFiles: files,
          offsets: {
            stdout: streams.stdout.offset,
            stderr: (streams.stderr as OutputFollower).offset,
          },
        }
      : undefined,
  );
}

/**
 * The sandbox an earlier Berth started and recorded, when it still runs (same pid and start time);
 * its output is followed from where that Berth had read it. Its exit status is not known (it is not
 * this process's child): `exited` reports it ended, with neither code nor signal.
 */
export function adoptSandboxed(record: SandboxRecord): SandboxedProcess | undefined {
  if (processStartTime(record.pid) !== record.startTime) return undefined;
  const streams = {
    stdout: new OutputFollower(record.outputFiles.stdout, record.offsets.stdout),
    stderr: new OutputFollower(record.outputFiles.stderr, record.offsets.stderr),
  };
  const { exited } = watchAdoptedExit(record.pid, record.startTime);
  return sandboxHandle(record.pid, streams, exited, () => ({
    ...record,
    offsets: { stdout: streams.stdout.offset, stderr: streams.stderr.offset },
  }));
}

function sandboxHandle(
  pid: number,
  streams: { stdout: Readable; stderr: Readable },
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>,
  record: () => SandboxRecord | undefined,
): SandboxedProcess {
  let running = true;
  const exited = exit.then(async (status) => {
    running = false;
    // What it wrote last is read before anyone hears that it ended.
    for (const stream of [streams.stdout, streams.stderr])
      if (stream instanceof OutputFollower) await stream.finish();
    return status;
  });
  return {
    pid,
    stdout: streams.stdout,
    stderr: streams.stderr,
    exited,
    record,
    kill(signal: NodeJS.Signals = 'SIGTERM') {
      if (!running) return;
      // Below bwrap: the PID namespace's init (bwrap's reaper), and below it the application.
      const tree = processTree();
      const inits = tree.get(pid) ?? [];
      const application = inits.flatMap((init) => descendants(tree, init).slice(1));
      if (signal === 'SIGKILL' && inits.length > 0) {
        // The init's death ends its namespace (the kernel kills every process left in it), and bwrap,
        // which reaps it, exits with 137. Killing bwrap instead would leave its init a zombie for the
        // host's init to reap.
        for (const target of [...application, ...inits]) signalQuietly(target, signal);
      } else if (application.length === 0) {
        // Still starting (bash or setpriv, before bwrap forked): nothing of the tenant runs yet.
        signalQuietly(pid, signal);
      } else {
        // Not bwrap: its default action would end it, and the whole sandbox with SIGKILL.
        for (const target of application) signalQuietly(target, signal);
      }
    },
  };
}

/** The argv that runs `spec` (exported for tests): the group join, the privilege drop, then bwrap. */
export function sandboxCommandLine(spec: SandboxSpec): string[] {
  if (spec.command.length === 0) throw new Error('the sandbox needs a command');
  if (!path.posix.isAbsolute(spec.cwd)) throw new Error(`the sandbox's working directory must be absolute`);
  const bwrap = [
    BWRAP_PATH,
    '--args',
    String(ARGS_FD),
    ...ISOLATION_ARGS,
    ...readOnlySystemArgs(),
    ...ETC_ENTRIES.flatMap((entry) => ['--ro-bind-try', entry, entry]),
    '--ro-bind-data',
    String(PASSWD_FD),
    '/etc/passwd',
    '--ro-bind-data',
    String(GROUP_FD),
    '/etc/group',
    ...PRIVATE_KERNEL_MOUNTS,
    ...(SECCOMP_PROGRAM ? ['--seccomp', String(SECCOMP_FD)] : []),
    ...(spec.outputFiles ? [] : DIE_WITH_BERTH),
    ...bindArgs(spec.binds),
    // Last of the mounts: the root tmpfs (the mount points bwrap made) turns read-only.
    '--remount-ro',
    '/',
    '--chdir',
    spec.cwd,
    '--',
    ...spec.command,
  ];
  const dropped = spec.account ? [...dropPrivileges(spec.account), ...bwrap] : bwrap;
  const namespace = spec.network?.namespacePath;
  if (namespace !== undefined && !NAMESPACE_PATH.test(namespace))
    throw new Error('invalid network namespace');
  const joined = namespace ? [NSENTER, `--net=${namespace}`, '--', ...dropped] : dropped;
  const groups = spec.memory?.procsFiles ?? [];
  if (groups.some((file) => !path.isAbsolute(file) || file.includes(':')))
    throw new Error('invalid cgroup procs file');
  return [BASH_PATH, '-c', PREPARE_SCRIPT, 'berth-sandbox', groups.join(':'), ...joined];
}

/**
 * The account of application `appId` (`berth-<tag>-<id>`; the tag names the Berth it belongs to, so
 * two Berths on one machine never share an application's user), created when missing; undefined when
 * Berth is not root.
 */
export function ensureAppAccount(appId: number, tag = 'app'): SystemAccount | undefined {
  if (!isRoot()) return undefined;
  const name = appAccountName(appId, tag);
  const account = findAccount(name) ?? ensureSystemAccount(name);
  // ensureSystemAccount remembers accounts: one removed earlier in this process would come back stale.
  if (findAccount(name)?.uid !== account.uid) {
    throw new Error(`system account '${name}' was removed while Berth remembered it`);
  }
  return account;
}

/**
 * Deletes the account of application `appId` and its group; nothing happens when it is missing. Call it
 * after the application's processes are stopped (userdel refuses a user that runs something) and its
 * files are deleted: a later account may receive the same uid.
 */
export function removeAppAccount(appId: number, tag = 'app'): void {
  if (!isRoot()) return;
  removeSystemAccount(appAccountName(appId, tag));
}

function appAccountName(appId: number, tag: string): string {
  if (!Number.isSafeInteger(appId) || appId < 1) throw new Error(`invalid application id ${appId}`);
  if (!/^[a-z0-9]{1,12}$/.test(tag)) throw new Error(`invalid account tag '${tag}'`);
  return `berth-${tag}-${appId}`;
}

function bindArgs(binds: readonly SandboxBind[]): string[] {
  for (const bind of binds) {
    if (!path.isAbsolute(bind.source)) throw new Error(`bind source '${bind.source}' must be absolute`);
    const target = bind.target;
    if (!path.posix.isAbsolute(target) || path.posix.normalize(target) !== target || target === '/') {
      throw new Error(`invalid bind target '${target}'`);
    }
    if (RESERVED_TARGETS.some((reserved) => target === reserved || target.startsWith(`${reserved}/`))) {
      throw new Error(`bind target '${target}' would hide the sandbox's system`);
    }
  }
  // Parents first, so /app/storage is mounted on top of /app and not hidden by it.
  const ordered = [...binds].sort((a, b) => depth(a.target) - depth(b.target));
  return ordered.flatMap((bind) => [bind.writable ? '--bind' : '--ro-bind', bind.source, bind.target]);
}

const depth = (target: string): number => target.split('/').length;

/** bwrap options for the environment, NUL-separated as `--args` reads them. */
function environmentArgs(env: Record<string, string>): string {
  const args = ['--clearenv'];
  for (const [name, value] of Object.entries(env)) {
    if (!ENV_NAME.test(name)) throw new Error(`invalid environment variable name '${name}'`);
    // A NUL would end the value and make the rest an option of bwrap.
    if (value.includes('\0')) throw new Error(`environment variable ${name} holds a NUL byte`);
    args.push('--setenv', name, value);
  }
  return args.map((arg) => `${arg}\0`).join('');
}

function passwdFile(uid: number, gid: number, home: string): string {
  const root = 'root:x:0:0:root:/root:/usr/sbin/nologin\n';
  return uid === 0 ? root : `${root}app:x:${uid}:${gid}:app:${home}:/bin/sh\n`;
}

function groupFile(gid: number): string {
  const root = 'root:x:0:\n';
  return gid === 0 ? root : `${root}app:x:${gid}:\n`;
}

/** Writes `data` to one of the extra descriptors and closes it (bwrap reads each until its end). */
function feed(stream: unknown, data: string | Buffer): void {
  if (!(stream instanceof Writable)) throw new Error('the sandbox descriptor is not writable');
  // When the chain fails before bwrap reads (the group join failed), the write fails: the exit says why.
  stream.on('error', () => undefined);
  stream.end(data);
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** Opens an output file for appending (root's alone), created when missing. */
function openOutput(file: string): number {
  return fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_APPEND | fs.constants.O_CREAT, 0o600);
}

/** Past this size a followed output file is emptied once Berth has read all of it. */
const OUTPUT_FILE_CAP = 8 * 1024 * 1024;
const OUTPUT_POLL_MS = 500;

/**
 * A readable stream of what is appended to a file by a process that is not Berth's pipe: read as it
 * grows (inotify, and a slow poll in case an event is missed), emptied when it passes OUTPUT_FILE_CAP
 * and has been read (the writer appends, so it goes on at the start; a line written between the last
 * read and the truncation is lost), ended by finish() after a last read.
 */
export class OutputFollower extends Readable {
  private position: number;
  private reading: Promise<void> | undefined;
  private again = false;
  private readonly watcher: fs.FSWatcher | undefined;
  private readonly timer: NodeJS.Timeout;
  private finished: Promise<void> | undefined;

  constructor(
    private readonly file: string,
    start: number,
  ) {
    super();
    this.position = start;
    try {
      this.watcher = fs.watch(file, () => void this.pull());
      this.watcher.on('error', () => undefined);
    } catch {
      this.watcher = undefined; // missing: the poll reads it once it is there
    }
    this.timer = setInterval(() => void this.pull(), OUTPUT_POLL_MS);
    this.timer.unref();
    void this.pull();
  }

  /** How far the file has been read. */
  get offset(): number {
    return this.position;
  }

  override _read(): void {
    // Data is pushed as the file grows.
  }

  /** Reads what is left, then ends the stream. */
  finish(): Promise<void> {
    this.finished ??= (async () => {
      this.watcher?.close();
      clearInterval(this.timer);
      await this.pull();
      this.push(null);
    })();
    return this.finished;
  }

  private pull(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      do {
        this.again = false;
        await this.readAvailable().catch(() => undefined);
      } while (this.again);
    })().finally(() => (this.reading = undefined));
    return this.reading;
  }

  private async readAvailable(): Promise<void> {
    const handle = await fsPromises.open(this.file, 'r+');
    try {
      const { size } = await handle.stat();
      // Emptied by someone else (or a Berth that read it before): start over.
      if (size < this.position) this.position = 0;
      const buffer = Buffer.alloc(64 * 1024);
      while (this.position < size) {
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, this.position);
        if (bytesRead === 0) break;
        this.position += bytesRead;
        this.push(Buffer.from(buffer.subarray(0, bytesRead)));
      }
      if (this.position >= OUTPUT_FILE_CAP && this.position === (await handle.stat()).size) {
        await handle.truncate(0);
        this.position = 0;
      }
    } finally {
      await handle.close();
    }
  }
}
