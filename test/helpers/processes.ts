// Small helpers for tests that start real servers: free ports, running as a service user, waiting.
import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

export const execFileAsync = promisify(execFile);

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export const isRoot = (): boolean => process.getuid?.() === 0;

/** argv that runs `command` as `user` when we are root (root may not run postgres). */
export function asUser(user: string, command: string, args: string[]): [string, string[]] {
  return isRoot() ? ['runuser', ['-u', user, '--', command, ...args]] : [command, args];
}

export function whichSync(name: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

export async function waitFor<T>(
  probe: () => Promise<T | undefined>,
  timeoutMs = 10_000,
  stepMs = 50,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms`, { cause: lastError });
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

/** Whether `pid` runs (a zombie, reaped or not, counts as dead), from /proc. */
export const isAlive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

/**
 * `script` (TypeScript, run under tsx) in a Node process of its own that prints `PORT <n>` once it
 * listens: the process, its URL on loopback, and a stop that ends it (SIGTERM) and waits for its exit.
 * Rejects when it exits before it listens.
 */
export async function startListeningScript(
  script: string,
  env: Record<string, string>,
  nodeArgs: string[] = [],
): Promise<{ child: ChildProcess; url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', script], {
    env: { ...process.env, ...env, NODE_NO_WARNINGS: '1' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /PORT (\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    child.once('exit', (code) => reject(new Error(`${path.basename(script)} exited with ${code}`)));
  });
  return {
    child,
    url: `http://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}
