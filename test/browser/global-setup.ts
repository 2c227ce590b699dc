// Starts one Berth per dialect (berth.ts, in its own process) for the whole browser run, in parallel,
// and hands each project its addresses through the environment the workers inherit.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { FullConfig } from '@playwright/test';

export const DIALECTS = (process.env.BERTH_TEST_DIALECTS ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d) => d === 'sqlite' || d === 'postgres');

const READY = 'BERTH_BROWSER_READY ';
/** This run's Node.js runtimes, downloaded once for both Berths (as test/global-setup.ts does for vitest). */
let runtimesDir = '';

function start(dialect: string): Promise<{ child: ChildProcess; info: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/browser/berth.ts', dialect], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, BERTH_BROWSER_RUNTIMES: runtimesDir },
  });
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.on('line', (line) => {
      if (line.startsWith(READY)) resolve({ child, info: line.slice(READY.length) });
      else process.stderr.write(`${line}\n`);
    });
    child.once('exit', (code) =>
      reject(new Error(`the ${dialect} Berth exited (${code}) before it was ready`)),
    );
  });
}

export default async function globalSetup(_config: FullConfig): Promise<() => Promise<void>> {
  runtimesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-browser-runtimes-'));
  fs.chmodSync(runtimesDir, 0o755);
  const started = await Promise.allSettled(DIALECTS.map((dialect) => start(dialect)));
  const children = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value.child] : []));
  const stopAll = () =>
    Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGTERM');
          }),
      ),
    ).then(() => fs.rmSync(runtimesDir, { recursive: true, force: true }));
  const failed = started.find((s) => s.status === 'rejected');
  if (failed) {
    await stopAll();
    throw failed.reason;
  }
  DIALECTS.forEach((dialect, i) => {
    const s = started[i];
    if (s?.status === 'fulfilled') process.env[`BERTH_BROWSER_${dialect.toUpperCase()}`] = s.value.info;
  });
  return stopAll;
}
