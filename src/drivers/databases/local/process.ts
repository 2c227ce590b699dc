// Process plumbing for the local driver: commands as a service user, pids from pid files, ports.
// Servers are tracked by the pid their own pid file names, never by process name: several instances
// of one engine run side by side, and other engineers' servers may share the host.
import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
export { freePort } from '../../net/ports.js';
import path from 'node:path';
import { isRoot } from '../../os/users.js';

export { isRoot };

export interface RunOptions {
  env?: Record<string, string>;
  input?: string;
  timeoutMs?: number;
  cwd?: string;
}

/** argv that runs `command` as `user` when Berth is root (PostgreSQL refuses to run as root). */
export function asUser(user: string | undefined, command: string, args: string[]): [string, string[]] {
  return isRoot() && user ? ['runuser', ['-u', user, '--', command, ...args]] : [command, args];
}

/** Runs a command to completion; the error carries the command's stderr (never its environment). */
export function run(
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  // Name the real program in errors, not `runuser`.
  const label = path.basename(command === 'runuser' ? (args[3] ?? command) : command);
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        env: { ...process.env, ...options.env },
        timeout: options.timeoutMs ?? 60_000,
        maxBuffer: 16 * 1024 * 1024,
        cwd: options.cwd ?? '/',
      },
      (error, stdout, stderr) => {
        if (error) {
          const detail = (stderr || stdout || error.message).trim().split('\n').slice(-5).join(' | ');
          reject(new Error(`${label} failed: ${detail}`));
        } else resolve({ stdout, stderr });
      },
    );
    if (options.input !== undefined) {
      // A child that exits before reading its input (a failed login) makes the write fail with EPIPE:
      // its exit status and stderr above are the error, not this unhandled stream error.
      child.stdin?.on('error', () => undefined);
      child.stdin?.end(options.input);
    }
  });
}

export function runAs(
  user: string | undefined,
  command: string,
  args: string[],
  options: RunOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  const [cmd, argv] = asUser(user, command, args);
  return run(cmd, argv, options);
}

/** Starts a long-running server detached from Berth; its own pid file is the source of truth. */
export function spawnDetached(user: string | undefined, command: string, args: string[]): number | undefined {
  const [cmd, argv] = asUser(user, command, args);
  const child = spawn(cmd, argv, { detached: true, stdio: 'ignore', cwd: '/' });
  child.on('error', () => undefined);
  child.unref();
  return child.pid;
}

/** Alive and not a zombie (an exited server's entry lingers until its parent reaps it). */
export function isAlive(pid: number | null | undefined): pid is number {
  if (!pid || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** The first line of a pid file as a number (postmaster.pid, mysqld.pid, valkey.pid). */
export function readPidFile(file: string): number | null {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').split('\n')[0]?.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/** True when the process's command line mentions `marker` (guards against a recycled pid). */
export function commandLineMentions(pid: number, marker: string): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').includes(marker);
  } catch {
    return false;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function waitUntil(
  probe: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
  stepMs = 20,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}

/** Signals the process and waits for it to be gone; SIGKILL after the grace period. */
export async function terminate(pid: number, signal: NodeJS.Signals, graceMs = 15_000): Promise<void> {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  try {
    await waitUntil(() => !isAlive(pid), graceMs, `pid ${pid} to exit`);
  } catch {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      return;
    }
    await waitUntil(() => !isAlive(pid), 5000, `pid ${pid} to die`);
  }
}

/** Whether a port can be bound on loopback right now. */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export function canConnect(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** Recursively hands a tree to the service user (no-op when Berth is not root). */
export async function chownTree(dir: string, user: string | undefined): Promise<void> {
  if (!isRoot() || !user) return;
  await run('chown', ['-R', `${user}:${user}`, dir]);
}

/**
 * The service user must be able to walk down to its instance directory: every ancestor needs the
 * search bit for others. The data dir gets it (0711: searchable, not listable); any other ancestor
 * without it is reported rather than changed.
 */
export function ensureTraversable(instanceRoot: string, dataDir: string): void {
  if (!isRoot()) return;
  const stat = fs.statSync(dataDir);
  if ((stat.mode & 0o001) === 0) fs.chmodSync(dataDir, (stat.mode & 0o777) | 0o011);
  for (let dir = path.dirname(path.resolve(dataDir)); ; dir = path.dirname(dir)) {
    if ((fs.statSync(dir).mode & 0o001) === 0) {
      throw new Error(`${dir} is not searchable by the database service users (chmod o+x ${dir})`);
    }
    if (dir === path.dirname(dir)) break;
  }
  fs.mkdirSync(instanceRoot, { recursive: true, mode: 0o711 });
  fs.chmodSync(instanceRoot, 0o711);
}

/** Names the engines accept unquoted-safe: letters, digits, `_` and `-`, starting with a letter or `_`. */
export const SAFE_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;
export const SAFE_SETTING = /^[A-Za-z0-9_.@-]{1,64}$/;

/** `<server> --version`, synchronously (asked once per process, for apply's checks); '' when it fails. */
export function serverVersion(binary: string): string {
  try {
    return execFileSync(binary, ['--version'], { encoding: 'utf8', timeout: 10_000 });
  } catch {
    return '';
  }
}

/** The last `count` lines of a text file (at most its last 1 MiB), oldest first; none when it is missing. */
export function tailLines(file: string, count: number): string[] {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return [];
  }
  try {
    const size = fs.fstatSync(fd).size;
    const length = Math.min(size, 1024 * 1024);
    const buffer = Buffer.alloc(length);
    fs.readSync(fd, buffer, 0, length, size - length);
    const lines = buffer.toString('utf8').split('\n');
    if (length < size) lines.shift(); // cut mid-line
    if (lines.at(-1) === '') lines.pop();
    return lines.slice(-count);
  } finally {
    fs.closeSync(fd);
  }
}
