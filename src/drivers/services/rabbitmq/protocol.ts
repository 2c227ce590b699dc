// What Berth says to a RabbitMQ node: the definitions it imports at boot (the one user with a salted
// hash of its password, its vhost, its rights), rabbitmqctl (request values only after `--` or on
// standard input, never as an option), and the boot log and AMQP port that say it is ready.
import { execFile } from 'node:child_process';
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import fs from 'node:fs';
import { canConnect, sleep, tailLines } from '../../databases/local/process.js';
import {
  beamPids,
  CTL,
  envOf,
  ids,
  logFile,
  USERNAME,
  VHOST,
  type Account,
  type InstanceState,
} from './broker.js';

export const START_TIMEOUT_MS = 120_000;
export const CTL_TIMEOUT_MS = 60_000;

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

export function hashMatches(hash: string, password: string): boolean {
  const stored = Buffer.from(hash, 'base64');
  if (stored.length !== 36) return false;
  const expected = Buffer.from(rabbitPasswordHash(password, stored.subarray(0, 4)), 'base64');
  return timingSafeEqual(stored, expected);
}

/** The definitions the node imports at every boot: the one user, its vhost and its rights there. */
export interface Definitions {
  users: Array<{ name: string; password_hash: string; hashing_algorithm: string; tags: string }>;
  vhosts: Array<{ name: string }>;
  permissions: Array<{ user: string; vhost: string; configure: string; write: string; read: string }>;
}

export function definitionsOf(user: string, passwordHash: string, vhost: string): Definitions {
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
export function redact(line: string): string {
  return line
    .replace(/(\w+:\/\/[^\s:/@]*:)[^\s@]*@/g, '$1[redacted]@')
    .replace(/((?:password|passwd|pass|secret|cookie)\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/gi, '$1[redacted]');
}

/** Runs rabbitmqctl against the instance's node; the error carries its last lines, never its input. */
export function ctl(
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

export async function ctlOk(
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

/** Whether the log says, past `offset`, that the node finished booting (definitions included). */
export function bootedSince(root: string, offset: number): boolean {
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
export async function waitForAmqp(
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

/** What changed in the instance's access since its definitions file was last written. */
export interface AccessChange {
  /** The definitions differ from what the node imported (a new password, user or vhost). */
  changed: boolean;
  /** The user and vhost of the previous definitions, when they were others. */
  formerUser?: string;
  formerVhost?: string;
}

/**
 * Writes the definitions file for the user, its password and vhost, only when one of them changed, so
 * that a provision that changes nothing runs no rabbitmqctl at all.
 */
export function writeDefinitions(
  file: string,
  username: string,
  password: string,
  vhost: string,
): AccessChange {
  let existing: Definitions | undefined;
  try {
    existing = JSON.parse(fs.readFileSync(file, 'utf8')) as Definitions;
  } catch {
    existing = undefined;
  }
  const oldUser = existing?.users?.[0];
  const oldVhost = existing?.vhosts?.[0]?.name;
  const same =
    oldUser?.name === username &&
    typeof oldUser.password_hash === 'string' &&
    hashMatches(oldUser.password_hash, password) &&
    oldVhost === vhost;
  if (!same) {
    const content = definitionsOf(username, rabbitPasswordHash(password), vhost);
    fs.writeFileSync(file, JSON.stringify(content), { mode: 0o600 });
    fs.chmodSync(file, 0o600);
  }
  return {
    changed: !same,
    ...(oldUser?.name && oldUser.name !== username && USERNAME.test(oldUser.name)
      ? { formerUser: oldUser.name }
      : {}),
    ...(oldVhost && oldVhost !== vhost && VHOST.test(oldVhost) ? { formerVhost: oldVhost } : {}),
  };
}
