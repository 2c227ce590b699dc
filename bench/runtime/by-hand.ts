// The baseline of the deploy measurements: what a person would do by hand on the same machine, with
// plain child processes and no Berth: clone the same branch from the same git server, run the same build
// command, start the same start command on a free port and ask it until it answers 200. The environment
// is the one Berth gives its replicas (a fresh HOME, NODE_ENV=production, the secret), without the
// sandbox, the memory group, the app's own user or any bookkeeping.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../src/drivers/net/ports.js';
import { BUILD_COMMAND, get, START_COMMAND, until } from './harness.js';

const run = promisify(execFile);

export interface ByHandTimes {
  /** `git clone --depth 1` of the branch. */
  cloneMs: number;
  /** The build command. */
  buildMs: number;
  /** The start command until the first 200 on `/`. */
  startMs: number;
  totalMs: number;
}

export interface Started {
  ms: number;
  port: number;
  stop(): Promise<void>;
}

function environment(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
  };
}

/** Starts the start command in `dir` and resolves once it answers 200 on `/`. */
export async function startByHand(dir: string, home: string): Promise<Started> {
  const t0 = performance.now();
  const port = await freePort();
  const child: ChildProcess = spawn('/bin/sh', ['-c', START_COMMAND], {
    cwd: dir,
    env: {
      ...environment(home),
      NODE_ENV: 'production',
      APP_SECRET: 'secret-of-shop',
      PORT: String(port),
    },
    // Its own process group, so that npm and the server it starts are stopped together.
    detached: true,
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const { at } = await until(
      () => get(port, '/'),
      () => true,
      60_000,
    );
    return {
      ms: at - t0,
      port,
      async stop() {
        try {
          process.kill(-(child.pid ?? 0), 'SIGTERM');
        } catch {
          // Already gone.
        }
        await exited;
      },
    };
  } catch (error) {
    process.kill(-(child.pid ?? 0), 'SIGKILL');
    throw error;
  }
}

/**
 * Clone, build, start until 200, by hand; the server is stopped and everything removed afterwards.
 * `work` is a directory for the checkout.
 */
export async function deployByHand(url: string, work: string): Promise<ByHandTimes> {
  const t0 = performance.now();
  const dir = fs.mkdtempSync(path.join(work, 'hand-'));
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-home-'));
  try {
    const env = environment(home);
    await run(
      'git',
      [
        'clone',
        '--quiet',
        '--depth',
        '1',
        '--single-branch',
        '--no-tags',
        '--branch',
        'main',
        '--',
        url,
        dir,
      ],
      { env },
    );
    const t1 = performance.now();
    await run('/bin/sh', ['-c', BUILD_COMMAND], {
      cwd: dir,
      env: { ...env, CI: 'true', NODE_ENV: 'production', npm_config_update_notifier: 'false' },
    });
    const t2 = performance.now();
    const started = await startByHand(dir, home);
    const t3 = t2 + started.ms;
    await started.stop();
    return { cloneMs: t1 - t0, buildMs: t2 - t1, startMs: started.ms, totalMs: t3 - t0 };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(home, { recursive: true, force: true });
  }
}
