// Starts one Berth per dialect (berth.ts, in its own process) for the whole browser run, in parallel,
// and hands each project its addresses through the environment the workers inherit.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { FullConfig } from '@playwright/test';

export const DIALECTS = (process.env.BERTH_TEST_DIALECTS ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d) => d === 'sqlite' || d === 'postgres');

const READY = 'BERTH_BROWSER_READY ';

function start(dialect: string): Promise<{ child: ChildProcess; info: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/browser/berth.ts', dialect], {
    stdio: ['pipe', 'pipe', 'inherit'],
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
    ).then(() => undefined);
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
