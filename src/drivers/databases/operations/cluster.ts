// Local PostgreSQL clusters that operations create (upgrade targets, clones): initdb, start, stop, state.
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_PG_BIN_DIR } from './common.js';
import { OperationError, type OperationErrorCode } from './errors.js';
import { isRoot, runCommand } from './exec.js';

export interface ClusterRef {
  binDir: string;
  dataDir: string;
  /** System user the server runs as when we are root (root may not run postgres). */
  runAs?: string;
}

export interface StartOptions extends ClusterRef {
  port: number;
  /** Directory for the Unix socket; short paths only (108-byte limit). Without it, TCP only. */
  socketDir?: string;
  /** Extra `name=value` settings passed as -c. */
  settings?: Record<string, string>;
  logFile?: string;
  timeoutSeconds?: number;
  failureCode?: OperationErrorCode;
}

/** A tool of the cluster's installation, else Debian's 15 (the npm PostgreSQL 16 has no pg_controldata, pg_isready). */
const toolOf = (binDir: string, tool: string): string =>
  fs.existsSync(path.join(binDir, tool)) ? path.join(binDir, tool) : path.join(DEFAULT_PG_BIN_DIR, tool);

export const runAsOf = (ref: { runAs?: string }): string | undefined =>
  ref.runAs ?? (isRoot() ? 'postgres' : undefined);

/** Makes a directory (and its data) owned by the server's user; a no-op unless we are root. */
export async function chownToServerUser(dir: string, ref: { runAs?: string }): Promise<void> {
  const user = runAsOf(ref);
  if (user && isRoot()) await runCommand({ command: 'chown', args: ['-R', `${user}:${user}`, dir] });
}

export const logFileOf = (options: StartOptions): string =>
  options.logFile ?? path.join(options.dataDir, 'startup.log');

/** -c options are parsed by a shell inside pg_ctl: quote each value. */
const shellQuote = (value: string): string => `'${value.replace(/'/g, `'\\''`)}'`;

export async function startCluster(options: StartOptions): Promise<void> {
  const settings = {
    listen_addresses: '127.0.0.1',
    // Never /tmp: a lock file left there by a server killed on the same port (another OS account's, or
    // one in another network namespace) makes the start fail with "could not open lock file".
    unix_socket_directories: options.socketDir ?? '',
    ...options.settings,
  };
  const opts = [
    `-p ${options.port}`,
    ...Object.entries(settings).map(([k, v]) => `-c ${shellQuote(`${k}=${v}`)}`),
  ];
  try {
    await runCommand(
      {
        command: path.join(options.binDir, 'pg_ctl'),
        args: [
          '-D',
          options.dataDir,
          '-l',
          logFileOf(options),
          '-w',
          '-t',
          String(options.timeoutSeconds ?? 120),
          '-o',
          opts.join(' '),
          'start',
        ],
        runAs: runAsOf(options),
      },
      { failureCode: options.failureCode ?? 'COMMAND_FAILED' },
    );
  } catch (error) {
    throw withLogTail(error, logFileOf(options), options.failureCode ?? 'COMMAND_FAILED');
  }
}

export async function stopCluster(ref: ClusterRef, mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
  await runCommand({
    command: path.join(ref.binDir, 'pg_ctl'),
    args: ['-D', ref.dataDir, '-m', mode, '-w', '-t', '120', 'stop'],
    runAs: runAsOf(ref),
  });
}

export async function isClusterRunning(ref: ClusterRef): Promise<boolean> {
  try {
    await runCommand({
      command: path.join(ref.binDir, 'pg_ctl'),
      args: ['-D', ref.dataDir, 'status'],
      runAs: runAsOf(ref),
    });
    return true;
  } catch {
    return false;
  }
}

/** `Database cluster state` from pg_controldata, e.g. "in production", "in archive recovery". */
export async function clusterState(ref: ClusterRef): Promise<string> {
  const { stdout } = await runCommand({
    command: toolOf(ref.binDir, 'pg_controldata'),
    args: ['-D', ref.dataDir],
    runAs: runAsOf(ref),
  });
  return /Database cluster state:\s*(.+)/.exec(stdout)?.[1]?.trim() ?? 'unknown';
}

/** Whether the server accepts connections now (pg_isready needs no credentials). */
export async function acceptsConnections(options: StartOptions): Promise<boolean> {
  try {
    await runCommand({
      command: toolOf(options.binDir, 'pg_isready'),
      args: ['-q', '-h', '127.0.0.1', '-p', String(options.port), '-t', '2'],
    });
    return true;
  } catch {
    return false;
  }
}

/** Appends the server log's tail to a failure, where PostgreSQL explains why it would not start. */
export function withLogTail(error: unknown, logFile: string, code: OperationErrorCode): OperationError {
  let tail = '';
  try {
    const lines = fs.readFileSync(logFile, 'utf8').trim().split('\n');
    // The reason is on a FATAL/PANIC line; the last lines are usually just the shutdown.
    const reasons = lines.filter((l) => /\b(FATAL|PANIC|ERROR):/.test(l));
    tail = (reasons.length > 0 ? reasons.slice(-3) : lines.slice(-5)).join('\n');
  } catch {
    // No log was written.
  }
  const message = error instanceof Error ? error.message : String(error);
  return new OperationError(code, tail ? `${message}\nserver log:\n${tail}` : message);
}

/** Writes settings to postgresql.auto.conf (later lines win, so appending overrides the copied ones). */
export function appendAutoConf(dataDir: string, settings: Record<string, string>): void {
  const lines = Object.entries(settings).map(([k, v]) => `${k} = '${v.replace(/'/g, "''")}'`);
  fs.appendFileSync(path.join(dataDir, 'postgresql.auto.conf'), `\n# berth\n${lines.join('\n')}\n`);
}

/** Removes settings from postgresql.auto.conf, wherever they were set (the last one would win). */
export function dropAutoConf(dataDir: string, names: readonly string[]): void {
  const file = path.join(dataDir, 'postgresql.auto.conf');
  if (!fs.existsSync(file)) return;
  const setting = new RegExp(`^\\s*(${names.join('|')})\\s*=`);
  const kept = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => !setting.test(line));
  fs.writeFileSync(file, kept.join('\n'));
}
