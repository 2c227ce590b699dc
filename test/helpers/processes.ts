// Small helpers for tests that start real servers: free ports, running as a service user, waiting.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
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
