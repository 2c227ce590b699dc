// The `berth` client as users run it: the built binary (dist/cli/index.js, from `npm run build`) in its
// own process, with a temporary HOME and config dir per test, against a real Berth listening on port 0.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTestApp, type TestApp } from '../helpers/app.js';

export const ROOT = path.resolve(import.meta.dirname, '../..');
export const BIN = path.join(ROOT, 'dist/cli/index.js');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : fs.statSync(full).mtimeMs);
  }
  return newest;
}

const fresh = () => fs.existsSync(BIN) && fs.statSync(BIN).mtimeMs >= newestMtime(path.join(ROOT, 'src'));

/**
 * Runs `npm run build` unless dist is newer than every source file. Test files run in parallel: one
 * builds under a lock file, the others wait for it.
 */
export async function ensureBuilt(): Promise<void> {
  if (fresh()) return;
  fs.mkdirSync(path.join(ROOT, 'dist'), { recursive: true });
  const lock = path.join(ROOT, 'dist', '.build.lock');
  for (;;) {
    let fd: number | undefined;
    try {
      fd = fs.openSync(lock, 'wx');
    } catch {
      // Another file builds; a lock older than five minutes is a dead build's.
      const age = Date.now() - (fs.statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 300_000) fs.rmSync(lock, { force: true });
      await sleep(500);
      if (fresh()) return;
      continue;
    }
    try {
      if (!fresh()) execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe' });
      // tsc leaves files it did not change alone; the entry's time marks the build.
      const now = new Date();
      fs.utimesSync(BIN, now, now);
      return;
    } finally {
      fs.closeSync(fd);
      fs.rmSync(lock, { force: true });
    }
  }
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * BERTH_CLI_TRANSCRIPT=FILE (set by a person, never by the suite) appends each command run through
 * Shell.run with its output and exit code: the sessions docs/cli.md shows are recorded from it.
 */
function record(args: string[], run: Run): void {
  const file = process.env.BERTH_CLI_TRANSCRIPT;
  if (!file) return;
  const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`);
  fs.appendFileSync(
    file,
    `$ berth ${args.map(quote).join(' ')}\n${run.stdout}${run.stderr.replace(/^/gm, '[stderr] ').replace(/\[stderr\] $/, '')}[exit ${run.code}]\n\n`,
  );
}

/** A user's shell: its own HOME and config dir, nothing of the machine's BERTH_* settings. */
export class Shell {
  readonly home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-cli-home-'));
  readonly env: Record<string, string>;

  constructor(extra: Record<string, string> = {}) {
    const base = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k, v]) => v !== undefined && !k.startsWith('BERTH_') && k !== 'NO_COLOR' && k !== 'FORCE_COLOR',
      ),
    ) as Record<string, string>;
    this.env = { ...base, HOME: this.home, XDG_CONFIG_HOME: path.join(this.home, '.config'), ...extra };
  }

  get configFile(): string {
    return path.join(this.home, '.config', 'berth', 'config.json');
  }

  file(name: string, content: string | Buffer): string {
    const full = path.join(this.home, name);
    fs.writeFileSync(full, content);
    return full;
  }

  run(
    args: string[],
    options: { input?: string; env?: Record<string, string>; timeoutMs?: number } = {},
  ): Promise<Run> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [BIN, ...args], {
        cwd: this.home,
        env: { ...this.env, ...options.env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 60_000);
      child.on('error', reject);
      child.on('close', (code) => {
        clearTimeout(timer);
        const run = { code: code ?? -1, stdout, stderr };
        record(args, run);
        resolve(run);
      });
      child.stdin.end(options.input ?? '');
    });
  }

  /** The command in a pseudo-terminal (util-linux `script`): what a person at a terminal sees. */
  runInPty(args: string[], options: { env?: Record<string, string>; input?: string } = {}): Promise<Run> {
    const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
    const line = [process.execPath, BIN, ...args].map(quote).join(' ');
    return new Promise((resolve, reject) => {
      const child = spawn('script', ['-qec', line, '/dev/null'], {
        cwd: this.home,
        env: { ...this.env, TERM: 'xterm-256color', ...options.env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code: code ?? -1, stdout, stderr });
      });
      // Typed at the terminal: the pty holds it until the program reads.
      if (options.input !== undefined) child.stdin.write(options.input);
      else child.stdin.end();
    });
  }

  remove(): void {
    fs.rmSync(this.home, { recursive: true, force: true });
  }
}

/** The base URL of a test Berth (it listens on a free port from the start). */
export function listen(t: TestApp): Promise<string> {
  return Promise.resolve(`http://127.0.0.1:${t.port}`);
}

export async function startBerth(
  options: Parameters<typeof createTestApp>[1] = {},
): Promise<{ t: TestApp; url: string }> {
  const t = await createTestApp('sqlite', options);
  return { t, url: await listen(t) };
}

export const ESC = '\u001b[';

export interface Background {
  output(): string;
  stop(): Promise<void>;
}

/** A long-running command (logs -f): its output so far, and a SIGINT as a person's Ctrl-C. */
export function runInBackground(shell: Shell, args: string[]): Background {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: shell.home,
    env: shell.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stdout += c.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return {
    output: () => stdout,
    async stop() {
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await closed;
      clearTimeout(timer);
    },
  };
}
