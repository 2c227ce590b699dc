// The `rabbitmq` service runner: one RabbitMQ node (Debian's rabbitmq-server) per service instance,
// never the system service. Each node has its own directory (<dataDir>/services/<id>/: mnesia, logs,
// configuration, an empty enabled_plugins, its Erlang cookie), its own OS account when Berth is root
// (`berth-mq-<20 hex>`), its own loopback ports (AMQP, Erlang distribution) and its own epmd on a
// loopback port of its own (ERL_EPMD_PORT), which Berth starts before the node and stops after it: a
// node never shares the system's epmd (4369) or another instance's.
//
// Processes are found by what their command line names (the instance's directory, its epmd port),
// never by process name alone: several nodes run side by side. Request values reach rabbitmqctl after
// `--` or on its standard input (the password), never as an option.
import { execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import {
  canConnect,
  ensureTraversable,
  freePort,
  isAlive,
  portIsFree,
  sleep,
  tailLines,
  waitUntil,
} from '../databases/local/process.js';
import { ensureSystemAccount, findAccount, isRoot, removeSystemAccount } from '../os/users.js';
import { GIB, placeOnVolume, shrinkRefusal, unmountImage } from '../os/disk-images.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from './types.js';
import { createKeyedLock } from '../../domain/keyed-lock.js';

const RABBIT_BIN = '/usr/lib/rabbitmq/bin';
const RABBIT_LIB = '/usr/lib/rabbitmq/lib';
const SERVER = path.join(RABBIT_BIN, 'rabbitmq-server');
const CTL = path.join(RABBIT_BIN, 'rabbitmqctl');

const INSTANCE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** What RabbitMQ and Berth both take as a user name: no spaces, quotes or shell characters. */
const USERNAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
/** A vhost the document may name: letters, digits, `_`, `.` and `-`, starting with a letter or digit. */
export const VHOST = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const DEFAULT_VHOST = 'app';
const NODE_NAME = /^berth-[0-9a-f]{12}@localhost$/;

const START_TIMEOUT_MS = 120_000;
const STOP_GRACE_MS = 30_000;
const CTL_TIMEOUT_MS = 60_000;

const execFileAsync = promisify(execFile);

export interface RabbitmqRunnerDeps {
  dataDir: string;
  logger: Logger;
}

/** What Berth remembers of an instance between calls (ports kept across restarts). */
interface InstanceState {
  node: string;
  amqpPort: number;
  distPort: number;
  epmdPort: number;
  vhost: string;
}

interface Account {
  name: string;
  uid: number;
  gid: number;
}

export function rabbitmqVersion(): string {
  try {
    const dirs = fs.readdirSync(RABBIT_LIB).filter((d) => /^rabbitmq_server-\d+\.\d+\.\d+$/.test(d));
    return dirs.sort().at(-1)?.slice('rabbitmq_server-'.length) ?? '';
  } catch {
    return '';
  }
}

function epmdBinary(): string {
  if (fs.existsSync('/usr/bin/epmd')) return '/usr/bin/epmd';
  const erts = fs.readdirSync('/usr/lib/erlang').find((d) => d.startsWith('erts-'));
  if (!erts) throw new Error('epmd is not installed (erlang-base)');
  return path.join('/usr/lib/erlang', erts, 'bin', 'epmd');
}

function checkId(id: string): string {
  if (!INSTANCE_ID.test(id)) throw new Error(`invalid service instance id '${id}'`);
  return id;
}

const hexOf = (id: string): string => id.replace(/-/g, '');
const accountName = (id: string): string => `berth-mq-${hexOf(id).slice(0, 20)}`;
const nodeName = (id: string): string => `berth-${hexOf(id).slice(0, 12)}@localhost`;

/** The vhost the document asks for when it is a name RabbitMQ and Berth both take, else `app`. */
export function vhostOf(spec: Pick<ServiceSpec, 'settings'>): string {
  const asked = spec.settings.vhost;
  return typeof asked === 'string' && VHOST.test(asked) ? asked : DEFAULT_VHOST;
}

const isPort = (value: unknown): value is number =>
  typeof value === 'number' && Number.isInteger(value) && value > 0 && value < 65536;

/** Every process whose command line (NUL-separated arguments) satisfies `test`. */
function processes(test: (args: string[], pid: number) => boolean): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (test(args, pid) && isAlive(pid)) found.push(pid);
    } catch {
      // exited while walking
    }
  }
  return found;
}

function environOf(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

function uidOf(pid: number): number | undefined {
  try {
    const line = fs
      .readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Uid:'));
    return line ? Number(line.split(/\s+/)[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Signals every pid, then waits until all are gone; SIGKILL after the grace period. */
async function terminateAll(pids: number[], signal: NodeJS.Signals, graceMs: number): Promise<void> {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone already
    }
  }
  try {
    await waitUntil(() => pids.every((pid) => !isAlive(pid)), graceMs, 'processes to exit', 50);
  } catch {
    for (const pid of pids) {
      try {
        if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    await waitUntil(() => pids.every((pid) => !isAlive(pid)), 5000, 'processes to die', 50);
  }
}

/**
 * RabbitMQ's own stored form of a password (rabbit_password_hashing_sha256, its default): base64 of a
 * 4-byte salt followed by SHA-256(salt ‖ password). The node imports it from the definitions file, so
 * the password itself is never written to disk nor passed to a command.
 */
export function rabbitPasswordHash(password: string, salt: Buffer = randomBytes(4)): string {
  const digest = createHash('sha256')
    .update(Buffer.concat([salt, Buffer.from(password, 'utf8')]))
    .digest();
  return Buffer.concat([salt, digest]).toString('base64');
}

function hashMatches(hash: string, password: string): boolean {
  const stored = Buffer.from(hash, 'base64');
  if (stored.length !== 36) return false;
  const expected = Buffer.from(rabbitPasswordHash(password, stored.subarray(0, 4)), 'base64');
  return timingSafeEqual(stored, expected);
}

/** The definitions the node imports at every boot: the one user, its vhost and its rights there. */
interface Definitions {
  users: Array<{ name: string; password_hash: string; hashing_algorithm: string; tags: string }>;
  vhosts: Array<{ name: string }>;
  permissions: Array<{ user: string; vhost: string; configure: string; write: string; read: string }>;
}

function definitionsOf(user: string, passwordHash: string, vhost: string): Definitions {
  return {
    users: [
      {
        name: user,
        password_hash: passwordHash,
        hashing_algorithm: 'rabbit_password_hashing_sha256',
        tags: '',
      },
    ],
    vhosts: [{ name: vhost }],
    permissions: [{ user, vhost, configure: '.*', write: '.*', read: '.*' }],
  };
}

/** `://user:secret@` and `password=…` style values, whatever wrote them. */
function redact(line: string): string {
  return line
    .replace(/(\w+:\/\/[^\s:/@]*:)[^\s@]*@/g, '$1[redacted]@')
    .replace(/((?:password|passwd|pass|secret|cookie)\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi, '$1[redacted]');
}

export function createRabbitmqRunner(deps: RabbitmqRunnerDeps): ServiceRunner {
  const logger = deps.logger.child({ runner: 'rabbitmq' });
  const servicesDir = path.join(deps.dataDir, 'services');
  const version = rabbitmqVersion();
  // One operation at a time per instance in this process: Berth's calls converge, they must not race.
  const locks = createKeyedLock();

  function serialized<T>(id: string, work: () => Promise<T>): Promise<T> {
    return locks.run(id, work);
  }

  const rootOf = (id: string): string => path.join(servicesDir, checkId(id));
  const imageOf = (id: string): string => path.join(servicesDir, '.volumes', `${checkId(id)}.ext4`);
  const stateFile = (root: string): string => path.join(root, 'state.json');
  const pidFile = (root: string): string => path.join(root, 'rabbit.pid');
  const logFile = (root: string): string => path.join(root, 'log', 'rabbit.log');
  const definitionsFile = (root: string): string => path.join(root, 'definitions.json');

  /** The instance's OS account when Berth is root (created when missing), else undefined. */
  function accountFor(id: string): Account | undefined {
    if (!isRoot()) return undefined;
    return ensureSystemAccount(accountName(id));
  }

  function readState(root: string): InstanceState | undefined {
    let raw: unknown;
    try {
      raw = JSON.parse(fs.readFileSync(stateFile(root), 'utf8'));
    } catch {
      return undefined;
    }
    // The file lies in a directory the instance's account owns: trust nothing in it unchecked.
    const s = raw as Partial<InstanceState> | null;
    if (
      !s ||
      typeof s.node !== 'string' ||
      !NODE_NAME.test(s.node) ||
      !isPort(s.amqpPort) ||
      !isPort(s.distPort) ||
      !isPort(s.epmdPort) ||
      typeof s.vhost !== 'string' ||
      !VHOST.test(s.vhost)
    ) {
      return undefined;
    }
    return { node: s.node, amqpPort: s.amqpPort, distPort: s.distPort, epmdPort: s.epmdPort, vhost: s.vhost };
  }

  /** The environment every RabbitMQ script of the instance runs with (no secret in it). */
  function envOf(root: string, state: InstanceState): Record<string, string> {
    return {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      HOME: root, // where the cookie is, for the node and for rabbitmqctl
      RABBITMQ_NODENAME: state.node,
      RABBITMQ_NODE_IP_ADDRESS: '127.0.0.1',
      RABBITMQ_NODE_PORT: String(state.amqpPort),
      RABBITMQ_DIST_PORT: String(state.distPort),
      RABBITMQ_MNESIA_BASE: path.join(root, 'mnesia'),
      RABBITMQ_LOG_BASE: path.join(root, 'log'),
      RABBITMQ_LOGS: logFile(root),
      RABBITMQ_CONFIG_FILE: path.join(root, 'rabbitmq.conf'),
      RABBITMQ_ADVANCED_CONFIG_FILE: path.join(root, 'advanced.config'),
      RABBITMQ_CONF_ENV_FILE: path.join(root, 'rabbitmq-env.conf'),
      RABBITMQ_ENABLED_PLUGINS_FILE: path.join(root, 'enabled_plugins'),
      RABBITMQ_PID_FILE: pidFile(root),
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
      ERL_EPMD_PORT: String(state.epmdPort),
      ERL_EPMD_ADDRESS: '127.0.0.1',
    };
  }

  const ids = (account: Account | undefined): { uid?: number; gid?: number } =>
    account ? { uid: account.uid, gid: account.gid } : {};

  /** Runs rabbitmqctl against the instance's node; the error carries its last lines, never its input. */
  function ctl(
    root: string,
    state: InstanceState,
    account: Account | undefined,
    args: string[],
    input?: string,
  ): Promise<{ code: number; out: string }> {
    return new Promise((resolve, reject) => {
      const child = execFile(
        CTL,
        ['-n', state.node, ...args],
        { env: envOf(root, state), cwd: root, timeout: CTL_TIMEOUT_MS, ...ids(account) },
        (error, stdout, stderr) => {
          const out = `${stdout}\n${stderr}`.trim();
          if (!error) return resolve({ code: 0, out });
          const code = typeof error.code === 'number' ? error.code : -1;
          if (code === -1) return reject(new Error(`rabbitmqctl ${args[0]} failed: ${error.message}`));
          resolve({ code, out });
        },
      );
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(input ?? '');
    });
  }

  async function ctlOk(
    root: string,
    state: InstanceState,
    account: Account | undefined,
    args: string[],
    input?: string,
  ): Promise<string> {
    const { code, out } = await ctl(root, state, account, args, input);
    if (code !== 0) {
      const detail = out.split('\n').slice(-3).join(' | ');
      throw new Error(`rabbitmqctl ${args[0]} failed (exit ${code}): ${detail}`);
    }
    return out;
  }

  function beamPids(root: string): number[] {
    const fromFile = (() => {
      try {
        const pid = Number(fs.readFileSync(pidFile(root), 'utf8').trim());
        return Number.isInteger(pid) && pid > 0 ? pid : null;
      } catch {
        return null;
      }
    })();
    const isOurs = (args: string[]): boolean =>
      path.basename(args[0] ?? '') === 'beam.smp' &&
      args.some((a, i) => a === '-home' && args[i + 1] === root);
    if (fromFile && isAlive(fromFile)) {
      try {
        const args = fs.readFileSync(`/proc/${fromFile}/cmdline`, 'utf8').split('\0');
        if (isOurs(args)) return [fromFile];
      } catch {
        // exited meanwhile
      }
    }
    return processes(isOurs);
  }

  /** The epmd of this instance's port: the one Berth started and any the node or its CLI started. */
  function epmdPids(epmdPort: number): number[] {
    return processes((args, pid) => {
      if (path.basename(args[0] ?? '') !== 'epmd') return false;
      if (args.some((a, i) => a === '-port' && args[i + 1] === String(epmdPort))) return true;
      return environOf(pid).includes(`ERL_EPMD_PORT=${epmdPort}`);
    });
  }

  /** The wrapper scripts (rabbitmq-server's sh) of this instance. */
  function wrapperPids(root: string): number[] {
    return processes(
      (args, pid) =>
        args.some((a) => a === SERVER) && environOf(pid).includes(`RABBITMQ_PID_FILE=${pidFile(root)}`),
    );
  }

  async function pickPort(preferred: number | undefined, taken: number[]): Promise<number> {
    if (isPort(preferred) && !taken.includes(preferred) && (await portIsFree(preferred))) return preferred;
    for (;;) {
      const port = await freePort();
      if (!taken.includes(port)) return port;
    }
  }

  /** What changed in the instance's access since the definitions file was last written. */
  interface Prepared {
    state: InstanceState;
    /** The definitions differ from what the node imported (a new password, user or vhost). */
    changed: boolean;
    /** The user and vhost of the previous definitions, when they were others. */
    formerUser?: string;
    formerVhost?: string;
  }

  /** Directories, cookie, configuration, definitions and ports of the instance. */
  async function prepare(spec: ServiceSpec, account: Account | undefined): Promise<Prepared> {
    const id = checkId(spec.id);
    if (!USERNAME.test(spec.username) || spec.username === 'guest') {
      throw new Error('invalid rabbitmq username: letters, digits, _ . @ - and not guest');
    }
    if (!spec.password || /[\u0000-\u001f\u007f]/.test(spec.password)) {
      throw new Error('invalid rabbitmq password: empty or with control characters');
    }
    const root = rootOf(id);
    fs.mkdirSync(servicesDir, { recursive: true, mode: 0o711 });
    if (isRoot()) {
      fs.chmodSync(servicesDir, 0o711);
      ensureTraversable(root, deps.dataDir);
    }
    fs.mkdirSync(root, { recursive: true, mode: 0o700 });
    for (const dir of ['mnesia', 'log']) fs.mkdirSync(path.join(root, dir), { recursive: true, mode: 0o700 });

    const previous = readState(root);
    const running = beamPids(root).length > 0;
    // Messages and queues on a volume of volume_size (docs/services.md): RabbitMQ's free-disk alarm
    // then blocks publishers as it fills, instead of the host's disk running out.
    if (!running && spec.volumeGiB && isRoot()) {
      await placeOnVolume(imageOf(id), path.join(root, 'mnesia'), spec.volumeGiB * GIB);
    }
    const vhost = vhostOf(spec);
    let state: InstanceState;
    if (previous && running) {
      state = { ...previous, vhost };
    } else {
      const amqpPort = await pickPort(spec.port ?? previous?.amqpPort, []);
      const distPort = await pickPort(previous?.distPort, [amqpPort]);
      // An epmd of ours still up on the old port (a crashed node) is reused, not replaced.
      const epmdPort =
        previous && epmdPids(previous.epmdPort).length > 0
          ? previous.epmdPort
          : await pickPort(previous?.epmdPort, [amqpPort, distPort]);
      state = { node: nodeName(id), amqpPort, distPort, epmdPort, vhost };
    }

    const cookie = path.join(root, '.erlang.cookie');
    if (!fs.existsSync(cookie)) {
      fs.writeFileSync(cookie, randomBytes(24).toString('hex').toUpperCase(), { mode: 0o600 });
    }
    fs.chmodSync(cookie, 0o600);

    // The definitions: rewritten only when the user, its password or the vhost changed, so that a
    // provision that changes nothing runs no rabbitmqctl at all.
    const definitions = definitionsFile(root);
    let existing: Definitions | undefined;
    try {
      existing = JSON.parse(fs.readFileSync(definitions, 'utf8')) as Definitions;
    } catch {
      existing = undefined;
    }
    const oldUser = existing?.users?.[0];
    const oldVhost = existing?.vhosts?.[0]?.name;
    const same =
      oldUser?.name === spec.username &&
      typeof oldUser.password_hash === 'string' &&
      hashMatches(oldUser.password_hash, spec.password) &&
      oldVhost === vhost;
    if (!same) {
      const content = definitionsOf(spec.username, rabbitPasswordHash(spec.password), vhost);
      fs.writeFileSync(definitions, JSON.stringify(content), { mode: 0o600 });
      fs.chmodSync(definitions, 0o600);
    }

    const memoryBytes = Math.max(64, Math.floor(spec.memoryMiB)) * 1024 * 1024;
    const config = [
      '# Written by Berth at every start; edits are lost.',
      'listeners.tcp.1 = 127.0.0.1:' + state.amqpPort,
      'listeners.ssl = none',
      // With definitions to load, the node never seeds the default `guest` user nor the `/` vhost.
      `load_definitions = ${definitions}`,
      `vm_memory_high_watermark.absolute = ${memoryBytes}`,
      'log.console = false',
      'log.file.level = info',
      'log.file.rotation.size = 10485760',
      'log.file.rotation.count = 3',
      '',
    ].join('\n');
    fs.writeFileSync(path.join(root, 'rabbitmq.conf'), config, { mode: 0o600 });
    fs.writeFileSync(path.join(root, 'advanced.config'), '[].\n', { mode: 0o600 });
    fs.writeFileSync(path.join(root, 'rabbitmq-env.conf'), '', { mode: 0o600 });
    fs.writeFileSync(path.join(root, 'enabled_plugins'), '[].\n', { mode: 0o600 });
    fs.writeFileSync(stateFile(root), JSON.stringify(state), { mode: 0o600 });
    if (account) {
      await execFileAsync('chown', ['-R', `${account.uid}:${account.gid}`, '--', root]);
    }
    fs.chmodSync(root, 0o700);
    return {
      state,
      changed: !same,
      ...(oldUser?.name && oldUser.name !== spec.username && USERNAME.test(oldUser.name)
        ? { formerUser: oldUser.name }
        : {}),
      ...(oldVhost && oldVhost !== vhost && VHOST.test(oldVhost) ? { formerVhost: oldVhost } : {}),
    };
  }

  async function ensureEpmd(root: string, state: InstanceState, account: Account | undefined): Promise<void> {
    if (epmdPids(state.epmdPort).length > 0 && (await canConnect(state.epmdPort))) return;
    const child = spawn(epmdBinary(), ['-port', String(state.epmdPort), '-address', '127.0.0.1'], {
      detached: true,
      stdio: 'ignore',
      cwd: root,
      env: envOf(root, state),
      ...ids(account),
    });
    child.on('error', () => undefined);
    child.unref();
    await waitUntil(() => canConnect(state.epmdPort), 10_000, `epmd on port ${state.epmdPort}`, 20);
  }

  /**
   * Starts the node (and its epmd) unless it runs; resolves once it has booted (definitions imported)
   * and accepts AMQP connections. `wasRunning`: it ran before, so it did not import new definitions.
   */
  async function startNode(spec: ServiceSpec): Promise<Prepared & { wasRunning: boolean }> {
    const root = rootOf(spec.id);
    const account = accountFor(spec.id);
    const prepared = await prepare(spec, account);
    const { state } = prepared;
    if (beamPids(root).length > 0) {
      // A node that runs without listening yet is still booting: wait for it rather than start another.
      if (!(await canConnect(state.amqpPort))) await waitForAmqp(root, state, 0);
      return { ...prepared, wasRunning: true };
    }
    const started = Date.now();
    await ensureEpmd(root, state, account);
    fs.rmSync(pidFile(root), { force: true });
    let logOffset = 0;
    try {
      logOffset = fs.statSync(logFile(root)).size;
    } catch {
      // first start
    }
    const child = spawn(SERVER, [], {
      detached: true,
      stdio: 'ignore',
      cwd: root,
      env: envOf(root, state),
      ...ids(account),
    });
    let exited = false;
    child.on('exit', () => {
      exited = true;
    });
    child.on('error', () => {
      exited = true;
    });
    child.unref();
    await waitForAmqp(root, state, logOffset, () => exited);
    logger.info(
      { serviceId: spec.id, port: state.amqpPort, ms: Date.now() - started },
      'rabbitmq node started',
    );
    return { ...prepared, wasRunning: false };
  }

  /** Whether the log says, past `offset`, that the node finished booting (definitions included). */
  function bootedSince(root: string, offset: number): boolean {
    let fd: number;
    try {
      fd = fs.openSync(logFile(root), 'r');
    } catch {
      return false;
    }
    try {
      const size = fs.fstatSync(fd).size;
      // A rotated log starts over.
      const from = size < offset ? 0 : offset;
      const buffer = Buffer.alloc(Math.min(size - from, 4 * 1024 * 1024));
      fs.readSync(fd, buffer, 0, buffer.length, from);
      return buffer.toString('utf8').includes('Server startup complete');
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Polls (no fixed sleep) until the node accepts AMQP and has logged the end of its boot. */
  async function waitForAmqp(
    root: string,
    state: InstanceState,
    logOffset: number,
    hasExited?: () => boolean,
  ): Promise<void> {
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (bootedSince(root, logOffset) && (await canConnect(state.amqpPort)) && beamPids(root).length > 0)
        return;
      if (hasExited?.()) {
        const tail = tailLines(logFile(root), 5).map(redact).join(' | ');
        throw new Error(`rabbitmq node exited while starting${tail ? `: ${tail}` : ''}`);
      }
      if (Date.now() > deadline) throw new Error(`rabbitmq node did not accept AMQP on ${state.amqpPort}`);
      await sleep(100);
    }
  }

  async function stopNode(id: string): Promise<void> {
    const root = rootOf(id);
    const state = readState(root);
    const beams = beamPids(root);
    // SIGTERM is RabbitMQ's orderly shutdown: queues and messages are flushed to disk.
    if (beams.length > 0) await terminateAll(beams, 'SIGTERM', STOP_GRACE_MS);
    const wrappers = wrapperPids(root);
    if (wrappers.length > 0) await terminateAll(wrappers, 'SIGTERM', 5000);
    if (state) {
      const epmds = epmdPids(state.epmdPort);
      if (epmds.length > 0) await terminateAll(epmds, 'SIGTERM', 5000);
    }
    fs.rmSync(pidFile(root), { force: true });
    // Its volume is mounted again before the next start.
    await unmountImage(path.join(root, 'mnesia'));
    if (beams.length > 0) logger.info({ serviceId: id }, 'rabbitmq node stopped');
  }

  function runtimeOf(spec: ServiceSpec, state: InstanceState): ServiceRuntime {
    const root = rootOf(spec.id);
    return {
      host: '127.0.0.1',
      port: state.amqpPort,
      pid: beamPids(root)[0] ?? null,
      version,
      location: root,
      extra: { vhost: state.vhost },
    };
  }

  /**
   * A node that ran before the definitions changed imports them now; a former user and the rights on
   * a former vhost go (the vhost and its messages stay). `rabbitmqctl` gets the definitions file, whose
   * password is a salted hash, and request values only after `--`.
   */
  async function converge(spec: ServiceSpec, prepared: Prepared & { wasRunning: boolean }): Promise<void> {
    const root = rootOf(spec.id);
    const account = accountFor(spec.id);
    const { state } = prepared;
    if (prepared.changed && prepared.wasRunning) {
      await ctlOk(root, state, account, ['import_definitions', '--', definitionsFile(root)]);
    }
    const steps: Array<Promise<unknown>> = [];
    if (prepared.formerUser) {
      steps.push(
        ctl(root, state, account, ['delete_user', '--', prepared.formerUser]).then(({ code, out }) => {
          if (code !== 0 && !/does not exist/i.test(out))
            throw new Error(`rabbitmqctl delete_user failed (exit ${code})`);
        }),
      );
    }
    if (prepared.formerVhost) {
      steps.push(
        ctl(root, state, account, [
          'clear_permissions',
          '-p',
          prepared.formerVhost,
          '--',
          spec.username,
        ]).then(({ code, out }) => {
          if (code !== 0 && !/does not exist|no_such/i.test(out)) {
            throw new Error(`rabbitmqctl clear_permissions failed (exit ${code})`);
          }
        }),
      );
    }
    await Promise.all(steps);
  }

  const runner: ServiceRunner = {
    types: ['rabbitmq'],

    provision(spec) {
      return serialized(spec.id, async () => {
        const started = Date.now();
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        const { state } = prepared;
        logger.info(
          { serviceId: spec.id, port: state.amqpPort, vhost: state.vhost, ms: Date.now() - started },
          'rabbitmq service provisioned',
        );
        return runtimeOf(spec, state);
      });
    },

    start(spec) {
      return serialized(spec.id, async () => {
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        return runtimeOf(spec, prepared.state);
      });
    },

    restart(spec) {
      return serialized(spec.id, async () => {
        // Refused while the node still runs on the volume it has.
        const refusal = spec.volumeGiB ? shrinkRefusal(imageOf(spec.id), spec.volumeGiB * GIB) : undefined;
        if (refusal) throw new Error(refusal);
        await stopNode(checkId(spec.id));
        const prepared = await startNode(spec);
        await converge(spec, prepared);
        return runtimeOf(spec, prepared.state);
      });
    },

    stop(ref: ServiceRef) {
      return serialized(ref.id, () => stopNode(checkId(ref.id)));
    },

    delete(ref: ServiceRef) {
      return serialized(ref.id, async () => {
        const id = checkId(ref.id);
        await stopNode(id);
        const name = accountName(id);
        const account = isRoot() ? findAccount(name) : undefined;
        if (account) {
          // Anything still running as the account (a CLI, a stray epmd) goes before the account does.
          const left = processes((_args, pid) => uidOf(pid) === account.uid);
          if (left.length > 0) await terminateAll(left, 'SIGKILL', 5000);
        }
        await unmountImage(path.join(rootOf(id), 'mnesia'), { detach: true });
        fs.rmSync(imageOf(id), { force: true });
        fs.rmSync(rootOf(id), { recursive: true, force: true });
        if (account) removeSystemAccount(name);
        logger.info({ serviceId: id }, 'rabbitmq service deleted');
      });
    },

    async status(ref: ServiceRef) {
      const root = rootOf(ref.id);
      const pid = beamPids(root)[0] ?? null;
      const state = readState(root);
      const running = pid !== null && state !== undefined && (await canConnect(state.amqpPort));
      return { running, pid };
    },

    logs(ref: ServiceRef, tail: number) {
      const count = Math.max(0, Math.min(Math.floor(tail), 10_000));
      if (count === 0) return Promise.resolve([]);
      return Promise.resolve(tailLines(logFile(rootOf(ref.id)), count).map(redact));
    },
  };
  return runner;
}
