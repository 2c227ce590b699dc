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
//   namespace… calls; x86_64), death with its parent, and a file system of: read-only /usr (and the merged-/usr
//   symlinks), a few read-only /etc entries, a generated /etc/passwd and /etc/group naming only root and
//   the app user, fresh /proc and /dev, a private tmpfs /tmp, and the binds the caller hands over. The
//   rest of the root is read-only, and nothing else of the host (Berth's data dir, other applications,
//   /home, /root, /etc/shadow) exists inside.
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
import path from 'node:path';
import { Writable, type Readable } from 'node:stream';
import { BWRAP_PATH, ISOLATION_ARGS, PRIVATE_KERNEL_MOUNTS, readOnlySystemArgs } from '../../os/bwrap.js';
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
  /** The application's network namespace (/run/netns/…), joined as root before the drop; none: the host's. */
  network?: { namespacePath: string };
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
  const child = spawn(argv[0]!, argv.slice(1), {
    env: {},
    // Its own process group: a terminal's Ctrl-C reaches Berth, which decides what to stop.
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe', 'pipe', SECCOMP_PROGRAM ? 'pipe' : 'ignore'],
  });
  // Spawn errors are reported by the missing pid below; a later kill error changes nothing.
  child.on('error', () => undefined);
  const pid = child.pid;
  if (pid === undefined || !child.stdout || !child.stderr) {
    throw new Error(`could not start the sandbox (${argv[0]})`);
  }
  const uid = spec.account?.uid ?? process.getuid?.() ?? 0;
  const gid = spec.account?.gid ?? process.getgid?.() ?? 0;
  const descriptors: readonly unknown[] = child.stdio;
  feed(descriptors[ARGS_FD], environment);
  feed(descriptors[PASSWD_FD], passwdFile(uid, gid, spec.cwd));
  feed(descriptors[GROUP_FD], groupFile(gid));
  if (SECCOMP_PROGRAM) feed(descriptors[SECCOMP_FD], SECCOMP_PROGRAM);

  let running = true;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => {
      running = false;
      resolve({ code, signal });
    });
  });
  return {
    pid,
    stdout: child.stdout,
    stderr: child.stderr,
    exited,
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

/** Each process's children, from one pass over /proc. */
function processTree(): Map<number, number[]> {
  const children = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // The command name may hold spaces and parentheses: the fields after the last ')' are fixed
    // (state, then the parent's pid).
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const siblings = children.get(parent) ?? [];
    siblings.push(Number(entry));
    children.set(parent, siblings);
  }
  return children;
}

/** `pid` and everything below it in `tree`, parents before children. */
function descendants(tree: Map<number, number[]>, pid: number): number[] {
  const found = [pid];
  for (let index = 0; index < found.length; index++) found.push(...(tree.get(found[index]!) ?? []));
  return found;
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
