// The `sftp` service: an SFTP server (ssh2) confined to one of the application's volumes.
//
//   bash (closes inherited descriptors) → setpriv (the application's account, as root) → bwrap → node
//
// The server is a Node process of its own (./sftp-server-source.ts), never Berth's: application code is
// untrusted and may plant symlinks in its volume, so confinement cannot rest on path checks in a process
// that sees the host. The jail holds the volume read-write at /data and, read-only, /usr (Node and its
// libraries) and ssh2's modules; no /etc, no /proc, a private /dev and /tmp. The network is the host's:
// the server listens on a loopback port. It runs as the application's OS account, so everything it
// writes belongs to the application, and it can open nothing the application could not.
//
// Per instance, under <data dir>/services/<id>/ (0700): `host_key` (ed25519, OpenSSH format, 0600,
// generated once) and `sftp.log` (logins, refusals, exits; never a password). The password and the host
// key reach the server on its stdin, never in argv or its environment.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import readline from 'node:readline';
import type { Logger } from 'pino';
import ssh2 from 'ssh2';
import { BWRAP_PATH, DIE_WITH_BERTH, ISOLATION_ARGS, readOnlySystemArgs } from '../os/bwrap.js';
import { dropPrivileges, isRoot } from '../os/users.js';
import { processTree } from '../os/processes.js';
import { SFTP_SERVER_SOURCE } from './sftp-server-source.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from './types.js';

const BASH_PATH = '/bin/bash';
const HOST = '127.0.0.1';
/** Where ssh2's node_modules appear inside the jail (read-only), and the volume (read-write). */
const JAIL_MODULES = '/opt/berth/node_modules';
const JAIL_NODE = '/opt/berth/node';
const JAIL_DATA = '/data';
const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 5_000;
const LOG_FILE = 'sftp.log';
const LOG_MAX_BYTES = 1024 * 1024;
const INSTANCE_ID = /^[A-Za-z0-9][A-Za-z0-9-]{0,63}$/;
const VOLUME_NAME = /^[a-z0-9][a-z0-9_.-]{0,99}$/i;
const USERNAME = /^[A-Za-z0-9._-]{1,64}$/;

/** Closes every descriptor above stderr (Berth's, inherited without close-on-exec), then runs argv. */
const PREPARE_SCRIPT = [
  'for fd in /proc/self/fd/*; do n=${fd##*/}; if [ "$n" -gt 2 ]; then exec {n}>&-; fi; done 2>/dev/null',
  'exec "$@"',
].join('\n');

interface Running {
  child: ChildProcess;
  /** The outermost process (bwrap once the chain has exec'd). */
  outer: number;
  /** The Node process that serves, when found below bwrap; else the outer one. */
  pid: number;
  port: number;
  exited: Promise<void>;
  done: boolean;
  runtime: ServiceRuntime;
}

export function createSftpRunner(deps: { dataDir: string; logger: Logger }): ServiceRunner {
  const running = new Map<string, Running>();
  const starting = new Map<string, Promise<ServiceRuntime>>();
  const modules = ssh2Modules();

  const instanceDir = (id: string): string => {
    if (!INSTANCE_ID.test(id)) throw new Error(`invalid service instance id '${id}'`);
    return path.join(deps.dataDir, 'services', id);
  };

  function appendLog(id: string, line: string): void {
    const file = path.join(instanceDir(id), LOG_FILE);
    try {
      if (fs.statSync(file).size > LOG_MAX_BYTES) fs.renameSync(file, `${file}.1`);
    } catch {
      // no log yet
    }
    try {
      fs.appendFileSync(file, `${new Date().toISOString()} ${line}\n`, { mode: 0o600 });
    } catch {
      // the instance is being deleted
    }
  }

  function alive(instance: Running | undefined): instance is Running {
    if (!instance || instance.done) return false;
    try {
      process.kill(instance.pid, 0);
      return true;
    } catch {
      return false;
    }
  }

  async function launch(spec: ServiceSpec): Promise<ServiceRuntime> {
    const current = running.get(spec.id);
    if (alive(current)) return current.runtime;
    if (current) await stopInstance(spec.id, current);
    const plan = prepare(spec);
    // The server listens on the preferred port, or on one the kernel picks when that is taken (a port
    // probed free here could be taken by another process before the server binds it).
    const port = spec.port;
    const preferred = port !== undefined && Number.isInteger(port) && port > 0 && port < 65536 ? port : 0;
    return spawnServer(spec, plan, preferred);
  }

  interface Plan {
    dir: string;
    volume: { name: string; hostPath: string };
    username: string;
    password: string;
    hostKey: string;
    account: { uid: number; gid: number } | undefined;
  }

  function prepare(spec: ServiceSpec): Plan {
    const dir = instanceDir(spec.id);
    const usernameSetting = spec.settings.username;
    if (usernameSetting !== undefined && typeof usernameSetting !== 'string') {
      throw new Error(`sftp service '${spec.name}': settings.username must be a string`);
    }
    const username = usernameSetting ?? spec.username;
    if (!USERNAME.test(username)) {
      throw new Error(
        `sftp service '${spec.name}': the username must be 1 to 64 letters, digits, '.', '_' or '-'`,
      );
    }
    const password = spec.secrets.password ?? spec.password;
    if (!password) throw new Error(`sftp service '${spec.name}' needs a password`);
    const volume = chooseVolume(spec);
    const account = isRoot() && spec.appUser ? spec.appUser : undefined;
    if (account) {
      for (const id of [account.uid, account.gid]) {
        // Root would keep every privilege the drop is for.
        if (!Number.isSafeInteger(id) || id < 1) throw new Error(`invalid application account id ${id}`);
      }
    }
    ensureVolume(volume.hostPath, account);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
    return { dir, volume, username, password, hostKey: ensureHostKey(dir), account };
  }

  function spawnServer(spec: ServiceSpec, plan: Plan, port: number): Promise<ServiceRuntime> {
    const heapMiB = Math.max(32, Math.floor(spec.memoryMiB * 0.75));
    const nodeBinds = process.execPath.startsWith('/usr/') ? [] : ['--ro-bind', process.execPath, JAIL_NODE];
    const node = nodeBinds.length > 0 ? JAIL_NODE : process.execPath;
    const bwrap = [
      BWRAP_PATH,
      ...ISOLATION_ARGS,
      // Tracked in Berth's memory only (not adopted at a restart): it ends with Berth.
      ...DIE_WITH_BERTH,
      '--clearenv',
      ...readOnlySystemArgs(),
      '--dev',
      '/dev',
      '--tmpfs',
      '/tmp',
      ...nodeBinds,
      '--ro-bind',
      modules.dir,
      JAIL_MODULES,
      '--bind',
      plan.volume.hostPath,
      JAIL_DATA,
      '--remount-ro',
      '/',
      '--chdir',
      '/',
      '--',
      node,
      `--max-old-space-size=${heapMiB}`,
      '-e',
      SFTP_SERVER_SOURCE,
      `${JAIL_MODULES}/ssh2`,
    ];
    // --norc: stdin is a socket, and bash would read root's ~/.bashrc for a "remote shell".
    const argv = [
      BASH_PATH,
      '--norc',
      '--noprofile',
      '-c',
      PREPARE_SCRIPT,
      'berth-sftp',
      ...(plan.account ? dropPrivileges(plan.account) : []),
      ...bwrap,
    ];
    const child = spawn(argv[0]!, argv.slice(1), {
      env: {},
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.on('error', () => undefined);
    const outer = child.pid;
    if (outer === undefined || !child.stdin || !child.stdout || !child.stderr) {
      return Promise.reject(new Error(`sftp service '${spec.name}': the server could not be started`));
    }
    child.stdin.on('error', () => undefined);
    child.stdin.end(
      JSON.stringify({ username: plan.username, password: plan.password, hostKey: plan.hostKey, port }),
    );
    const log = deps.logger.child({ service: spec.id, type: 'sftp' });
    const stderr: string[] = [];
    readline.createInterface({ input: child.stderr }).on('line', (line) => {
      stderr.push(line);
      if (stderr.length > 20) stderr.shift();
      appendLog(spec.id, `stderr: ${line.slice(0, 500)}`);
    });

    return new Promise<ServiceRuntime>((resolve, reject) => {
      let settled = false;
      let instance: Running | undefined;
      let listenError: { code?: string; message?: string } | undefined;
      const timer = setTimeout(() => {
        fail(new Error(`sftp service '${spec.name}': the server did not listen within 15 s`));
        signal(outer, 'SIGKILL');
      }, READY_TIMEOUT_MS);
      const fail = (error: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(error);
      };
      const exited = new Promise<void>((done) => {
        // 'close', not 'exit': 'exit' may come before the last lines of stdout and stderr are read, and
        // the failure would then lose its reason (the error event, bwrap's message).
        child.once('close', (code, sig) => {
          if (instance) {
            instance.done = true;
            if (running.get(spec.id) === instance) running.delete(spec.id);
          }
          appendLog(spec.id, `server exited (${sig ?? `code ${code}`})`);
          if (instance) log.warn({ code, signal: sig }, 'sftp server exited');
          const reason = listenError
            ? `${listenError.code ?? 'error'}: ${listenError.message ?? ''}`
            : stderr.slice(-3).join(' | ') || `exit ${sig ?? code}`;
          fail(
            Object.assign(new Error(`sftp service '${spec.name}': the server stopped (${reason})`), {
              code: listenError?.code,
            }),
          );
          done();
        });
      });
      readline.createInterface({ input: child.stdout }).on('line', (line) => {
        let event: Record<string, unknown>;
        try {
          event = JSON.parse(line) as Record<string, unknown>;
        } catch {
          appendLog(spec.id, `stdout: ${line.slice(0, 500)}`);
          return;
        }
        const username = JSON.stringify(
          typeof event.username === 'string' ? event.username.slice(0, 100) : '',
        );
        switch (event.event) {
          case 'listening': {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            const pid = serverPid(outer);
            const runtime: ServiceRuntime = {
              host: HOST,
              port: Number(event.port),
              pid,
              version: `ssh2 ${modules.version}`,
              location: plan.dir,
              extra: { volume: plan.volume.name },
            };
            instance = { child, outer, pid, port: runtime.port, exited, done: false, runtime };
            running.set(spec.id, instance);
            appendLog(
              spec.id,
              `listening on ${HOST}:${runtime.port}, volume ${plan.volume.name}, user ${JSON.stringify(plan.username)}`,
            );
            log.info({ port: runtime.port, pid }, 'sftp server listening');
            resolve(runtime);
            return;
          }
          case 'login':
            appendLog(
              spec.id,
              `login ${event.ok ? 'ok' : 'failed'} username=${username} remote=${String(event.remote)}`,
            );
            if (event.ok) log.info({ username: event.username }, 'sftp login');
            else log.warn({ username: event.username }, 'sftp login failed');
            return;
          case 'refused':
            appendLog(spec.id, `refused ${String(event.what)} username=${username}`);
            return;
          case 'error':
            listenError = { code: String(event.code), message: String(event.message) };
            appendLog(spec.id, `error ${String(event.code)}: ${String(event.message).slice(0, 500)}`);
            return;
          default:
            appendLog(spec.id, `stdout: ${line.slice(0, 500)}`);
        }
      });
    });
  }

  async function stopInstance(id: string, instance: Running): Promise<void> {
    if (!instance.done) {
      // The server first (it closes and exits); bwrap follows it. Then everything, by force.
      signal(instance.pid, 'SIGTERM');
      if (!(await settledWithin(instance.exited, STOP_TIMEOUT_MS))) {
        for (const pid of [instance.pid, instance.outer]) signal(pid, 'SIGKILL');
        await settledWithin(instance.exited, STOP_TIMEOUT_MS);
      }
    }
    if (running.get(id) === instance) running.delete(id);
  }

  async function serialized(id: string, work: () => Promise<ServiceRuntime>): Promise<ServiceRuntime> {
    const previous = starting.get(id);
    const next = (previous ?? Promise.resolve()).catch(() => undefined).then(work);
    starting.set(id, next);
    try {
      return await next;
    } finally {
      if (starting.get(id) === next) starting.delete(id);
    }
  }

  async function stop(ref: ServiceRef): Promise<void> {
    instanceDir(ref.id);
    const instance = running.get(ref.id);
    if (instance) await stopInstance(ref.id, instance);
  }

  return {
    types: ['sftp'],
    usesVolumes: true,
    provision: (spec) => serialized(spec.id, () => launch(spec)),
    start: (spec) => serialized(spec.id, () => launch(spec)),
    restart: (spec) =>
      serialized(spec.id, async () => {
        await stop(spec);
        return launch(spec);
      }),
    stop,
    async delete(ref) {
      await stop(ref);
      fs.rmSync(instanceDir(ref.id), { recursive: true, force: true });
    },
    status(ref) {
      instanceDir(ref.id);
      const instance = running.get(ref.id);
      return Promise.resolve(
        alive(instance) ? { running: true, pid: instance.pid } : { running: false, pid: null },
      );
    },
    logs(ref, tail) {
      const dir = instanceDir(ref.id);
      const lines: string[] = [];
      for (const file of [`${LOG_FILE}.1`, LOG_FILE]) {
        try {
          lines.push(...fs.readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean));
        } catch {
          // absent
        }
      }
      return Promise.resolve(tail > 0 ? lines.slice(-tail) : []);
    },
  };
}

/** The volume the service serves: `settings.volume` when given, else the first of the application's. */
function chooseVolume(spec: ServiceSpec): { name: string; hostPath: string } {
  const wanted = spec.settings.volume;
  if (
    wanted !== undefined &&
    (typeof wanted !== 'string' || !VOLUME_NAME.test(wanted) || wanted.includes('..'))
  ) {
    throw new Error(`sftp service '${spec.name}': settings.volume must be a volume name`);
  }
  if (spec.volumes.length === 0)
    throw new Error(`sftp service '${spec.name}' needs a volume in spec.volumes`);
  const volume = wanted === undefined ? spec.volumes[0]! : spec.volumes.find((v) => v.name === wanted);
  if (!volume) {
    throw new Error(
      `sftp service '${spec.name}': settings.volume '${wanted}' is not one of the application's volumes (${spec.volumes.map((v) => v.name).join(', ')})`,
    );
  }
  if (!VOLUME_NAME.test(volume.name) || volume.name.includes('..')) {
    throw new Error(`sftp service '${spec.name}': invalid volume name '${volume.name}'`);
  }
  if (!path.isAbsolute(volume.hostPath)) throw new Error(`volume '${volume.name}' has no absolute host path`);
  return { name: volume.name, hostPath: path.normalize(volume.hostPath) };
}

/** The volume's directory, made for the application when missing; never a link (bwrap would follow it). */
function ensureVolume(hostPath: string, account: { uid: number; gid: number } | undefined): void {
  let stats: fs.Stats;
  try {
    stats = fs.lstatSync(hostPath);
  } catch {
    fs.mkdirSync(hostPath, { recursive: true, mode: 0o750 });
    if (account) fs.chownSync(hostPath, account.uid, account.gid);
    stats = fs.lstatSync(hostPath);
  }
  if (!stats.isDirectory()) throw new Error(`the volume at ${hostPath} is not a directory`);
}

function ensureHostKey(dir: string): string {
  const file = path.join(dir, 'host_key');
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = ssh2.utils.generateKeyPairSync('ed25519').private;
  try {
    fs.writeFileSync(file, key, { mode: 0o600, flag: 'wx' });
    return key;
  } catch (error) {
    // Written by a concurrent provisioning meanwhile: that one is the instance's key.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return fs.readFileSync(file, 'utf8');
    throw error;
  }
}

/** ssh2's package: the node_modules directory that holds it (bound read-only) and its version. */
function ssh2Modules(): { dir: string; version: string } {
  const require = createRequire(import.meta.url);
  const manifest = require.resolve('ssh2/package.json');
  const packageDir = path.dirname(manifest);
  const version =
    (JSON.parse(fs.readFileSync(manifest, 'utf8')) as { version?: string }).version ?? 'unknown';
  return { dir: path.dirname(packageDir), version };
}

/** The deepest process below `outer` (bwrap → its namespace's init → node), or `outer` itself. */
function serverPid(outer: number): number {
  const children = processTree();
  let pid = outer;
  for (let depth = 0; depth < 4; depth++) {
    const below = children.get(pid);
    if (!below || below.length !== 1) break;
    pid = below[0]!;
  }
  return pid;
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // gone already
  }
}

function settledWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
