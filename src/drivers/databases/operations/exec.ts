// Child processes for engine tools: secrets travel in the environment (never argv, which `ps` shows),
// dumps flow kernel-to-kernel between two processes (never buffered in this process), stderr is redacted.
// Every child is started through setpriv: it dies with Berth (a parent-death signal, so a killed Berth
// leaves no dump writing on alone), and runs as the account it names, never as root by accident.
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import path from 'node:path';
import { ensureSystemAccount, isRoot, SHARED_ACCOUNTS } from '../../os/users.js';
import { OperationError, type OperationErrorCode } from './errors.js';
import { redactText } from '../../../domain/redact.js';

export interface CommandSpec {
  command: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /**
   * Run as this system user (root may not run postgres/initdb). Ignored unless we are root. Tools
   * that read what a tenant controls (dumps, restores) run as TOOL_ACCOUNT.
   */
  runAs?: string;
  cwd?: string;
}

export interface RunOptions {
  secrets?: readonly string[];
  signal?: AbortSignal;
  /** Text fed to stdin. */
  input?: string;
  timeoutMs?: number;
  /** Code of the OperationError thrown on a non-zero exit. */
  failureCode?: OperationErrorCode;
}

export { isRoot };

/** The unprivileged account of dump, restore and client tools (they only talk to servers over TCP). */
export const TOOL_ACCOUNT = SHARED_ACCOUNTS.tools;

/**
 * setpriv, not runuser: runuser forks and waits, so the tool's parent would be runuser and a killed
 * Berth would leave it running; setpriv switches the user and execs, so Berth stays the parent.
 */
function argv(spec: CommandSpec): [string, string[]] {
  const user: string[] = [];
  if (spec.runAs && isRoot()) {
    if (spec.runAs.startsWith('berth-')) ensureSystemAccount(spec.runAs);
    user.push(`--reuid=${spec.runAs}`, `--regid=${spec.runAs}`, '--init-groups');
  }
  return ['setpriv', [...user, '--pdeathsig', 'KILL', '--', spec.command, ...spec.args]];
}

/** What a tool gets of Berth's environment: no secrets of Berth's own (BERTH_SECRET_KEY, …). */
function toolEnvironment(extra: NodeJS.ProcessEnv | undefined): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' };
  for (const name of ['LANG', 'LC_ALL', 'TZ', 'TMPDIR']) if (process.env[name]) env[name] = process.env[name];
  return { ...env, ...extra };
}

function spawnSpec(spec: CommandSpec, stdio: SpawnOptions['stdio'], signal?: AbortSignal): ChildProcess {
  const [cmd, args] = argv(spec);
  return spawn(cmd, args, {
    env: toolEnvironment(spec.env),
    stdio,
    cwd: spec.cwd,
    signal,
    // A hung engine tool must not keep Node alive after an abort.
    killSignal: 'SIGTERM',
  });
}

/** Keeps only the last `max` characters of a stream, enough for an error message. */
function tail(child: ChildProcess, which: 'stdout' | 'stderr', max = 8192): () => string {
  let text = '';
  child[which]?.setEncoding('utf8');
  child[which]?.on('data', (chunk: string) => {
    text = (text + chunk).slice(-max);
  });
  return () => text;
}

function exitOf(child: ChildProcess): Promise<{ code: number | null; error?: Error }> {
  return new Promise((resolve) => {
    child.once('error', (error) => resolve({ code: null, error }));
    child.once('close', (code) => resolve({ code }));
  });
}

const name = (spec: CommandSpec): string => path.basename(spec.command);

/**
 * Refuses a database name that a tool could read as an option, or that holds control characters.
 * Names travel after `--`, in the environment or in a connection string anyway; this is the clear
 * error in front of that.
 */
export function checkToolSafeName(dbname: string): void {
  if (dbname.startsWith('-') || /[\u0000-\u001f\u007f]/.test(dbname)) {
    throw new OperationError(
      'MIGRATION_FAILED',
      `Database name ${JSON.stringify(dbname)} is refused: a name may not start with '-' or hold control characters`,
    );
  }
}

function failure(
  spec: CommandSpec,
  exit: { code: number | null; error?: Error },
  stderr: string,
  options: RunOptions,
) {
  const why = exit.error ? exit.error.message : `exit code ${exit.code}`;
  const detail = stderr.trim().split('\n').slice(-6).join('\n');
  return new OperationError(
    options.failureCode ?? 'COMMAND_FAILED',
    `${name(spec)} failed (${why})${detail ? `: ${detail}` : ''}`,
    options.secrets,
  );
}

/** Runs one command to completion; returns its output (stdout fully, stderr tail). */
export async function runCommand(
  spec: CommandSpec,
  options: RunOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  const child = spawnSpec(
    spec,
    [options.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    options.signal,
  );
  let stdout = '';
  child.stdout?.setEncoding('utf8');
  child.stdout?.on('data', (chunk: string) => (stdout += chunk));
  const stderr = tail(child, 'stderr');
  const timer = options.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), options.timeoutMs) : undefined;
  if (options.input !== undefined) child.stdin?.end(options.input);
  const exit = await exitOf(child);
  if (timer) clearTimeout(timer);
  if (exit.code !== 0) throw failure(spec, exit, stderr(), options);
  return { stdout, stderr: redactText(stderr(), options.secrets) };
}

/**
 * `producer | consumer` with the producer's stdout handed to the consumer as its stdin file descriptor,
 * so the data never passes through this process. Fails if either side fails.
 */
export async function runPipeline(
  producer: CommandSpec,
  consumer: CommandSpec,
  options: RunOptions = {},
): Promise<{ producerStderr: string; consumerStderr: string }> {
  const left = spawnSpec(producer, ['ignore', 'pipe', 'pipe'], options.signal);
  const leftErr = tail(left, 'stderr');
  const leftExit = exitOf(left);
  if (!left.stdout) throw new OperationError('COMMAND_FAILED', `${name(producer)} has no stdout`);
  const right = spawnSpec(consumer, [left.stdout, 'pipe', 'pipe'], options.signal);
  const rightErr = tail(right, 'stderr');
  const rightExit = exitOf(right);
  // Our copy of the pipe's read end must close, or the producer never sees EPIPE if the consumer dies.
  left.stdout.destroy();
  const [l, r] = await Promise.all([leftExit, rightExit]);
  // A producer that failed by itself explains more than the consumer's "input file is too short"; a
  // producer killed by SIGPIPE, or failing with EPIPE, only tells that the consumer died first.
  // Node hands children socketpairs, not pipes: a dead reader shows as ECONNRESET rather than EPIPE.
  const brokenPipe = l.code === null || /broken pipe|EPIPE|connection reset/i.test(leftErr());
  if (l.code !== 0 && !brokenPipe) throw failure(producer, l, leftErr(), options);
  if (r.code !== 0) throw failure(consumer, r, rightErr(), options);
  if (l.code !== 0) throw failure(producer, l, leftErr(), options);
  return {
    producerStderr: redactText(leftErr(), options.secrets),
    consumerStderr: redactText(rightErr(), options.secrets),
  };
}
