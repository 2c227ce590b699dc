// The runtime benchmark's Berth: a context on a temporary data dir with its background work running
// (jobs, the edge proxy, the runtime), git repositories served on loopback, and the calls the
// measurements make. test/runtime/helpers.ts does the same for vitest (it reads vitest's `inject`,
// which only works inside the runner); the fixtures are shared.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { stringify } from 'yaml';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext, type AppContext } from '../../src/context.js';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { execFile, fork } from 'node:child_process';
import { promisify } from 'node:util';
import type { LoadRequest, LoadResult } from './load.js';
import {
  createRepository,
  serveRepositories,
  type GitServer,
  type TestRepository,
} from '../../test/helpers/git-server.js';

const run = promisify(execFile);

/**
 * Writes `files` into the working copy and commits them, as TestRepository.commit does, but with
 * asynchronous git: the benchmark shares its process, and so its event loop, with Berth's edge, which
 * a synchronous git would stall under load.
 */
export async function commit(repository: TestRepository, files: Record<string, string>): Promise<void> {
  for (const [file, content] of Object.entries(files)) {
    await fs.promises.writeFile(path.join(repository.dir, file), content);
  }
  const env = {
    ...process.env,
    GIT_AUTHOR_NAME: 'Berth Bench',
    GIT_AUTHOR_EMAIL: 'bench@example.com',
    GIT_COMMITTER_NAME: 'Berth Bench',
    GIT_COMMITTER_EMAIL: 'bench@example.com',
    GIT_CONFIG_NOSYSTEM: '1',
    HOME: os.tmpdir(),
  };
  await run('git', ['add', '--all'], { cwd: repository.dir, env });
  await run('git', ['commit', '--quiet', '-m', 'change'], { cwd: repository.dir, env });
}

export interface Berth {
  ctx: AppContext;
  app: FastifyInstance;
  background: Background;
  git: GitServer;
  edgePort: number;
  headers: Record<string, string>;
  team: string;
  repository(name: string): TestRepository;
  close(): Promise<void>;
}

/** Health settings of the hang measurement: every second, 1 s to answer, 3 failures in a row. */
export const HEALTH = { intervalSeconds: 1, timeoutSeconds: 1, failureThreshold: 3 };

/** `env`: more settings (the network benchmark runs one Berth with BERTH_APP_NETWORK=host beside one without). */
export async function startBerth(env: Record<string, string> = {}): Promise<Berth> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-runtime-'));
  const dataDir = path.join(work, 'data');
  const gitRoot = path.join(work, 'git');
  fs.mkdirSync(gitRoot);
  // The applications' own users must traverse every ancestor of their releases (bwrap binds them as
  // that user): mkdtemp's 0700 would hide the data dir from them, as /var/lib (0755) does not.
  fs.chmodSync(work, 0o711);
  const config = loadConfig({
    BERTH_DATA_DIR: dataDir,
    BERTH_LOG_LEVEL: 'silent',
    BERTH_RATE_LIMIT_PER_MINUTE: '0',
    BERTH_S3_PORT: '0',
    BERTH_EDGE_PORT: '0',
    ...(process.env.BERTH_EDGE_PROXY ? { BERTH_EDGE_PROXY: process.env.BERTH_EDGE_PROXY } : {}),
    BERTH_RUNTIMES_DIR: path.join(work, 'runtimes'),
    BERTH_SOURCES_ALLOW_PRIVATE: '127.0.0.1',
    BERTH_HEALTH_INTERVAL: String(HEALTH.intervalSeconds),
    BERTH_HEALTH_TIMEOUT: String(HEALTH.timeoutSeconds),
    BERTH_HEALTH_FAILURE_THRESHOLD: String(HEALTH.failureThreshold),
    BERTH_DRAIN_SECONDS: '5',
    ...env,
  });
  const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
  const app = await buildApp(ctx);
  await app.ready();
  // As `berth serve` runs it: the job runner's default poll, woken by a deploy request.
  const background = await startBackground(ctx);
  const git = await serveRepositories(gitRoot);
  const edgePort = ctx.services.runtime.endpoints.http;
  if (edgePort === undefined) throw new Error('the edge did not start');
  const team = 'bench';
  const user = await ctx.identity.createUser({ email: 'bench@example.com', team });
  return {
    ctx,
    app,
    background,
    git,
    edgePort,
    headers: { authorization: `Bearer ${user.api_token}` },
    team,
    repository: (name) => createRepository(gitRoot, name),
    async close() {
      await background.stop();
      await git.close();
      await app.close();
      await ctx.close();
      fs.rmSync(work, { recursive: true, force: true });
    },
  };
}

/** One call of the platform API; throws unless it answers `expect`. */
export async function api<T>(
  berth: Berth,
  method: 'GET' | 'POST',
  url: string,
  payload?: Record<string, unknown>,
  expect = method === 'POST' ? 202 : 200,
): Promise<T> {
  const response = await berth.app.inject({
    method,
    url,
    headers: berth.headers,
    ...(payload !== undefined ? { payload } : {}),
  });
  if (response.statusCode !== expect)
    throw new Error(`${method} ${url} answered ${response.statusCode}: ${response.body.slice(0, 500)}`);
  return response.json<{ data: T }>().data;
}

/** The Infrastructure document of the benchmark's nodejs application (as the runtime tests deploy it). */
export function nodeDocument(team: string, name: string, repositoryUrl: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: repositoryUrl, branch: 'main' },
        commands: { build: [BUILD_COMMAND], start: START_COMMAND },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
      },
      domains: [{ domain: `${name}.test` }],
      secrets: [{ key: 'APP_SECRET', value: `secret-of-${name}` }],
    },
  });
}

/** What the application's document runs, and what the by-hand baseline runs too. */
export const BUILD_COMMAND = 'node build.js';
export const START_COMMAND = 'npm start';

export async function applyYaml(
  berth: Berth,
  yaml: string,
): Promise<{ application_id: number; deployment_id: number | null }> {
  const response = await berth.app.inject({
    method: 'POST',
    url: '/api/v1/infrastructure/apply',
    headers: { ...berth.headers, 'content-type': 'application/yaml' },
    payload: yaml,
  });
  if (response.statusCode !== 200) throw new Error(`apply answered ${response.statusCode}: ${response.body}`);
  return response.json<{ application_id: number; deployment_id: number | null }>();
}

export interface DeploymentView {
  id: number;
  status: string;
  step: string | null;
  error: string | null;
  release: string | null;
  started_at: string | null;
  finished_at: string | null;
  created_at: string;
}

/** Polls a deployment until it has ended; throws unless it succeeded. */
export async function waitForDeployment(
  berth: Berth,
  appId: number,
  deploymentId: number,
  timeoutMs = 120_000,
): Promise<DeploymentView> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const deployment = await api<DeploymentView>(
      berth,
      'GET',
      `/api/v1/applications/${appId}/deployments/${deploymentId}`,
    );
    if (deployment.status === 'success') return deployment;
    if (['failed', 'cancelled'].includes(deployment.status))
      throw new Error(`deployment ${deploymentId} ${deployment.status}: ${deployment.error}`);
    if (Date.now() > end) throw new Error(`deployment ${deploymentId} still ${deployment.status}`);
    await sleep(50);
  }
}

export interface InstanceView {
  name: string;
  release: string;
  state: string;
  port: number | null;
  started_at: string | null;
  restarts: number;
  last_restart_reason: string | null;
}

export const instances = (berth: Berth, appId: number): Promise<InstanceView[]> =>
  api<InstanceView[]>(berth, 'GET', `/api/v1/applications/${appId}/instances`);

export interface Answer {
  status: number;
  body: string;
}

/** One GET on 127.0.0.1:`port` with `host` (through the edge) or without (direct). */
export function get(
  port: number,
  pathname: string,
  options: { host?: string; agent?: http.Agent; timeoutMs?: number } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        path: pathname,
        headers: options.host ? { host: options.host } : {},
        agent: options.agent ?? false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString() }),
        );
        response.on('error', reject);
      },
    );
    request.setTimeout(options.timeoutMs ?? 5000, () => request.destroy(new Error('request timed out')));
    request.on('error', reject);
    request.end();
  });
}

/** What the fixture application answers on `/`. */
export interface AppAnswer {
  version: string;
  port: string;
}

/** How often a "serving yet?" probe asks, by hand and through the edge alike. */
export const PROBE_MS = 10;

/**
 * Asks every PROBE_MS until an answer is 200 and `accept` holds; resolves with the time it did
 * (performance.now()) and the answer. Connection errors and other statuses are retried.
 */
export async function until(
  ask: () => Promise<Answer>,
  accept: (answer: AppAnswer) => boolean,
  timeoutMs = 120_000,
): Promise<{ at: number; answer: AppAnswer }> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const answer = await ask().catch(() => undefined);
    const at = performance.now();
    if (answer?.status === 200) {
      const parsed = JSON.parse(answer.body) as AppAnswer;
      if (accept(parsed)) return { at, answer: parsed };
    }
    if (Date.now() > end) throw new Error('timed out waiting for an answer');
    await sleep(PROBE_MS);
  }
}

/** Lines of a deployment's log with their times. */
export async function deploymentLog(
  berth: Berth,
  appId: number,
  deploymentId: number,
): Promise<Array<{ at: string; line: string }>> {
  return api<Array<{ at: string; line: string }>>(
    berth,
    'GET',
    `/api/v1/applications/${appId}/deployments/${deploymentId}/logs?tail=1000`,
  );
}

export function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  if (sorted.length === 0) return NaN;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

// ---- the load generator (load.ts), in a child process: never on the event loop of what it measures ----
export interface Load {
  result: Promise<LoadResult>;
  stop(): void;
}

export function startLoad(request: LoadRequest): Load {
  const child = fork(new URL('./load.ts', import.meta.url), {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const result = new Promise<LoadResult>((resolve, reject) => {
    child.once('message', (message) => resolve(message as LoadResult));
    child.once('exit', (code) => reject(new Error(`the load generator exited with ${code}`)));
  });
  child.send(request);
  return { result, stop: () => void child.send('stop') };
}

export const load = (request: LoadRequest): Promise<LoadResult> => startLoad(request).result;
