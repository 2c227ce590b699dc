// Broker state of the `rabbitmq` runner: where an instance lives on disk (<dataDir>/services/<id>/), what
// Berth remembers of it between calls (state.json: node name and ports), the environment its scripts
// run with, and which processes are its (found by what their command line or environment names, never
// by process name alone: several nodes run side by side).
import fs from 'node:fs';
import path from 'node:path';
import { isAlive, waitUntil } from '../../databases/local/process.js';
import type { ServiceSpec } from '../types.js';

export const RABBIT_BIN = '/usr/lib/rabbitmq/bin';
export const RABBIT_LIB = '/usr/lib/rabbitmq/lib';
export const SERVER = path.join(RABBIT_BIN, 'rabbitmq-server');
export const CTL = path.join(RABBIT_BIN, 'rabbitmqctl');

export const INSTANCE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** What RabbitMQ and Berth both take as a user name: no spaces, quotes or shell characters. */
export const USERNAME = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$/;
/** A vhost the document may name: letters, digits, `_`, `.` and `-`, starting with a letter or digit. */
export const VHOST = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
export const DEFAULT_VHOST = 'app';
export const NODE_NAME = /^berth-[0-9a-f]{12}@localhost$/;

/** What Berth remembers of an instance between calls (ports kept across restarts). */
export interface InstanceState {
  node: string;
  amqpPort: number;
  distPort: number;
  epmdPort: number;
  vhost: string;
}

export interface Account {
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

export function epmdBinary(): string {
  if (fs.existsSync('/usr/bin/epmd')) return '/usr/bin/epmd';
  const erts = fs.readdirSync('/usr/lib/erlang').find((d) => d.startsWith('erts-'));
  if (!erts) throw new Error('epmd is not installed (erlang-base)');
  return path.join('/usr/lib/erlang', erts, 'bin', 'epmd');
}

export function checkId(id: string): string {
  if (!INSTANCE_ID.test(id)) throw new Error(`invalid service instance id '${id}'`);
  return id;
}

export const hexOf = (id: string): string => id.replace(/-/g, '');
export const accountName = (id: string): string => `berth-mq-${hexOf(id).slice(0, 20)}`;
export const nodeName = (id: string): string => `berth-${hexOf(id).slice(0, 12)}@localhost`;

/** The vhost the document asks for when it is a name RabbitMQ and Berth both take, else `app`. */
export function vhostOf(spec: Pick<ServiceSpec, 'settings'>): string {
  const asked = spec.settings.vhost;
  return typeof asked === 'string' && VHOST.test(asked) ? asked : DEFAULT_VHOST;
}

export const isPort = (value: unknown): value is number =>
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

export function environOf(pid: number): string[] {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
  } catch {
    return [];
  }
}

/** Signals every pid, then waits until all are gone; SIGKILL after the grace period. */
export async function terminateAll(pids: number[], signal: NodeJS.Signals, graceMs: number): Promise<void> {
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

export const stateFile = (root: string): string => path.join(root, 'state.json');
export const pidFile = (root: string): string => path.join(root, 'rabbit.pid');
export const logFile = (root: string): string => path.join(root, 'log', 'rabbit.log');
export const definitionsFile = (root: string): string => path.join(root, 'definitions.json');

export function readState(root: string): InstanceState | undefined {
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
export function envOf(root: string, state: InstanceState): Record<string, string> {
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

export const ids = (account: Account | undefined): { uid?: number; gid?: number } =>
  account ? { uid: account.uid, gid: account.gid } : {};

export function beamPids(root: string): number[] {
  const fromFile = (() => {
    try {
      const pid = Number(fs.readFileSync(pidFile(root), 'utf8').trim());
      return Number.isInteger(pid) && pid > 0 ? pid : null;
    } catch {
      return null;
    }
  })();
  const isOurs = (args: string[]): boolean =>
    path.basename(args[0] ?? '') === 'beam.smp' && args.some((a, i) => a === '-home' && args[i + 1] === root);
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
export function epmdPids(epmdPort: number): number[] {
  return processes((args, pid) => {
    if (path.basename(args[0] ?? '') !== 'epmd') return false;
    if (args.some((a, i) => a === '-port' && args[i + 1] === String(epmdPort))) return true;
    return environOf(pid).includes(`ERL_EPMD_PORT=${epmdPort}`);
  });
}

/** The wrapper scripts (rabbitmq-server's sh) of this instance. */
export function wrapperPids(root: string): number[] {
  return processes(
    (args, pid) =>
      args.some((a) => a === SERVER) && environOf(pid).includes(`RABBITMQ_PID_FILE=${pidFile(root)}`),
  );
}

/** The node's configuration files, written at every start (memory in MiB: its high watermark). */
export function writeConfiguration(
  root: string,
  state: InstanceState,
  definitions: string,
  memoryMiB: number,
): void {
  const memoryBytes = Math.max(64, Math.floor(memoryMiB)) * 1024 * 1024;
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
}
