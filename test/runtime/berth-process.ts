// A real `berth serve` process for the tests that kill and restart Berth (crash.test.ts,
// restart.test.ts), and what they look at from outside: processes, memory groups, the API.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import os from 'node:os';
import { afterAll, beforeAll, inject } from 'vitest';
import { removeTagNetworks } from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { serveRepositories, type GitServer } from '../helpers/git-server.js';
import { removeRuntimeAccounts, RUNTIME_TEST_ENV, warmNodeRuntime } from './helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

export interface BerthProcess {
  process: ChildProcess;
  api: string;
  edgePort: number;
  /** Calls the API with the bootstrap owner's token; throws on an error status. */
  call<T>(method: string, url: string, body?: string): Promise<T>;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
}

function environment(dataDir: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ...RUNTIME_TEST_ENV,
    BERTH_DEPLOYMENT_TIMEOUT: '120',
    BERTH_RUNTIMES_DIR: inject('runtimesDir'),
    BERTH_DATA_DIR: dataDir,
    BERTH_LOG_LEVEL: 'info',
    BERTH_LOG_FORMAT: 'json',
  };
}

/**
 * `berth serve` on free ports (the edge on `edgePort` when given: a Berth started again must find
 * its edge where it left it); resolves with its addresses once it says it is ready.
 */
export async function serveBerth(dataDir: string, edgePort = 0): Promise<BerthProcess> {
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      'src/cli/index.ts',
      'serve',
      '--port',
      '0',
      '--s3-port',
      '0',
      '--edge-port',
      String(edgePort),
    ],
    { cwd: ROOT, env: environment(dataDir), stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<{ api: string; apps: string }>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString();
      let newline: number;
      while ((newline = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, newline);
        buffered = buffered.slice(newline + 1);
        if (!line.includes('Berth is ready')) continue;
        child.stdout.off('data', onData);
        child.stdout.resume();
        resolve(JSON.parse(line) as { api: string; apps: string });
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => reject(new Error(`berth serve exited with ${code} before it was ready`)));
  });
  const { api_token: token } = JSON.parse(fs.readFileSync(path.join(dataDir, 'bootstrap.json'), 'utf8')) as {
    api_token: string;
  };
  return {
    process: child,
    api: ready.api,
    edgePort: Number(new URL(ready.apps).port),
    exited,
    async call<T>(method: string, url: string, body?: string): Promise<T> {
      const response = await fetch(`${ready.api}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/yaml' } : {}),
        },
        ...(body !== undefined ? { body } : {}),
      });
      if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
      return (await response.json()) as T;
    },
  };
}

/** Stops a Berth: SIGTERM (what serves keeps running) or SIGKILL; resolves when it has exited. */
export async function stopBerth(berth: BerthProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!berth || berth.process.exitCode !== null || berth.process.signalCode !== null) return;
  berth.process.kill(signal);
  await berth.exited;
}

/**
 * `berth admin stop-all` on the data dir (Berth down): what serves stops. Returns its exit status.
 * Every port it is configured with is held by another process meanwhile (as a second Berth on the
 * machine would hold them): stop-all must bind none.
 */
export async function stopAll(dataDir: string): Promise<{ status: number | null; output: string }> {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  const port = String((taken.address() as net.AddressInfo).port);
  try {
    return await new Promise((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', 'src/cli/index.ts', 'admin', 'stop-all'],
        {
          cwd: ROOT,
          env: { ...environment(dataDir), BERTH_PORT: port, BERTH_S3_PORT: port, BERTH_EDGE_PORT: port },
          timeout: 60_000,
        },
        (error, stdout, stderr) =>
          resolve({
            status: error ? ((error.code as number | undefined) ?? 1) : 0,
            output: `${stdout}${stderr}`,
          }),
      );
    });
  } finally {
    taken.close();
  }
}

/**
 * A test file's data dir and git server for the `berth serve` processes it runs (the Berth now serving
 * is `current()`): set up before the file, and after it the Berth stopped, what it left serving stopped,
 * and its accounts, networks and directories removed.
 */
export function useBerthProcesses(
  name: string,
  current: () => BerthProcess | undefined,
): { dataDir: string; gitRoot: string; git: () => GitServer } {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `berth-${name}-`));
  const gitRoot = fs.mkdtempSync(path.join(os.tmpdir(), `berth-${name}-git-`));
  let git: GitServer | undefined;
  beforeAll(async () => {
    await warmNodeRuntime();
    git = await serveRepositories(gitRoot);
  }, 180_000);
  afterAll(async () => {
    await stopBerth(current(), 'SIGTERM');
    await stopAll(dataDir);
    await git?.close();
    removeRuntimeAccounts(dataDir);
    // The applications' networks outlive a Berth on purpose: this one is gone for good.
    await removeTagNetworks(runtimeTag(dataDir));
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(gitRoot, { recursive: true, force: true });
  });
  return {
    dataDir,
    gitRoot,
    git: () => {
      if (!git) throw new Error('the git server starts before the first test');
      return git;
    },
  };
}

/** Pids of live processes whose command line contains `text`. */
export function processesWith(text: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (/^\d+ \(.*\) Z/.test(stat)) continue;
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').includes(text))
        found.push(Number(entry));
    } catch {
      // It ended while we looked.
    }
  }
  return found;
}

/** The memory groups of this data dir's applications (cgroup v1 here; none when there is no v1). */
export function memoryGroups(dataDir: string): string[] {
  const tag = runtimeTag(dataDir);
  const top = `/sys/fs/cgroup/memory/berth/${tag}`;
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      found.push(path.relative(top, path.join(dir, entry.name)));
      walk(path.join(dir, entry.name));
    }
  };
  if (fs.existsSync(top)) walk(top);
  return found;
}

export const alive = (pid: number): boolean => {
  try {
    return !/^\d+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};
