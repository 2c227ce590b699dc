// A Berth with its background work running (jobs, the edge proxy, the runtime), git repositories on
// loopback, and the calls the runtime tests make: apply, deploy, wait for a deployment, ask the edge.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inject } from 'vitest';
export { nodeDocument } from './node-app.js';
import type { Dialect } from '../../src/db/connect.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { removeTagNetworks } from '../../src/drivers/os/netns.js';
import { DEFAULT_NODE_MAJOR, ensureNodeRuntime } from '../../src/drivers/runtime/local/node-runtime.js';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import {
  createRepository,
  serveRepositories,
  type GitServer,
  type TestRepository,
} from '../helpers/git-server.js';

export interface RuntimeHarness {
  t: TestApp;
  background: Background;
  git: GitServer;
  root: string;
  edgePort: number;
  repository(name: string): TestRepository;
  close(): Promise<void>;
}

/** Timings short enough for tests; the defaults are documented in README.md. */
export const RUNTIME_TEST_ENV = {
  BERTH_SOURCES_ALLOW_PRIVATE: '127.0.0.1',
  BERTH_HEALTH_INTERVAL: '1',
  BERTH_HEALTH_TIMEOUT: '1',
  BERTH_HEALTH_FAILURE_THRESHOLD: '2',
  BERTH_DRAIN_SECONDS: '2',
  BERTH_DEPLOYMENT_TIMEOUT: '15',
};

/**
 * Downloads the default Node.js into the run's shared runtimes directory, once for all test files
 * (the others wait on its lock), so no test's deployment deadline pays for the download.
 */
export async function warmNodeRuntime(): Promise<void> {
  await ensureNodeRuntime(DEFAULT_NODE_MAJOR, inject('runtimesDir'));
}

export async function startRuntime(
  dialect: Dialect,
  env: Record<string, string> = {},
  /** Runs on the data dir before the background work (and the edge) starts: certificates, say. */
  beforeStart: (dataDir: string) => void = () => undefined,
): Promise<RuntimeHarness> {
  await warmNodeRuntime();
  const t = await createTestApp(dialect, {
    env: { ...RUNTIME_TEST_ENV, BERTH_RUNTIMES_DIR: inject('runtimesDir'), ...env },
  });
  beforeStart(t.ctx.config.dataDir);
  const background = await startBackground(t.ctx, { pollMs: 100 });
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-git-'));
  const git = await serveRepositories(root);
  const edgePort = t.ctx.services.runtime.endpoints.http;
  if (edgePort === undefined) throw new Error('the edge did not start');
  return {
    t,
    background,
    git,
    root,
    edgePort,
    repository: (name) => createRepository(root, name),
    async close() {
      await background.stop();
      await git.close();
      const dataDir = t.ctx.config.dataDir;
      await t.close();
      removeRuntimeAccounts(dataDir);
      await removeTagNetworks(runtimeTag(dataDir));
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}

/**
 * Removes the OS accounts the runtime made for the applications of `dataDir` (`berth-<tag>-<id>`):
 * Berth keeps them while the applications exist, and a test's applications end with its data dir.
 */
export function removeRuntimeAccounts(dataDir: string): void {
  const prefix = `berth-${runtimeTag(dataDir)}-`;
  for (const line of fs.readFileSync('/etc/passwd', 'utf8').split('\n')) {
    const name = line.split(':')[0] ?? '';
    if (name.startsWith(prefix)) execFileSync('userdel', ['--', name], { stdio: 'ignore' });
  }
}

export interface EdgeAnswer {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
}

/** A request through the edge proxy, as a browser on `host` would make it. */
export function edgeRequest(
  port: number,
  host: string,
  pathname = '/',
  options: {
    method?: string;
    agent?: http.Agent;
    timeoutMs?: number;
    /** A form, sent urlencoded (as POST unless `method` says otherwise). */
    form?: Record<string, string>;
  } = {},
): Promise<EdgeAnswer> {
  const body = options.form ? new URLSearchParams(options.form).toString() : undefined;
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        path: pathname,
        method: options.method ?? (body === undefined ? 'GET' : 'POST'),
        headers:
          body === undefined
            ? { host }
            : {
                host,
                'content-type': 'application/x-www-form-urlencoded',
                'content-length': Buffer.byteLength(body),
              },
        agent: options.agent ?? false,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            headers: response.headers,
          }),
        );
        response.on('error', reject);
      },
    );
    request.setTimeout(options.timeoutMs ?? 10_000, () =>
      request.destroy(new Error('edge request timed out')),
    );
    request.on('error', reject);
    request.end(body);
  });
}

export async function applyYaml(t: TestApp, yaml: string, query = '') {
  const response = await t.request({
    method: 'POST',
    url: `/api/v1/infrastructure/apply${query}`,
    headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
    payload: yaml,
  });
  if (response.statusCode !== 200) throw new Error(`apply answered ${response.statusCode}: ${response.body}`);
  return response.json<{ application_id: number; deployment_id: number | null; changes: string[] }>();
}

export interface DeploymentView {
  id: number;
  status: string;
  step: string | null;
  error: string | null;
  commit_sha: string | null;
  release: string | null;
}

/** Polls a deployment until it has ended (success, failed, cancelled). */
export async function waitForDeployment(
  t: TestApp,
  appId: number,
  deploymentId: number,
  timeoutMs = 60_000,
): Promise<DeploymentView> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const response = await t.request({
      url: `/api/v1/applications/${appId}/deployments/${deploymentId}`,
      headers: t.auth.platform,
    });
    const deployment = response.json<{ data: DeploymentView }>().data;
    if (['success', 'failed', 'cancelled'].includes(deployment.status)) return deployment;
    if (Date.now() > end)
      throw new Error(`deployment ${deploymentId} still ${deployment.status} (${deployment.step})`);
    await sleep(100);
  }
}

/** Polls until `check` holds (a process restarted, a status changed). */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  timeoutMs = 30_000,
  what = 'condition',
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check().catch(() => undefined);
    if (value !== undefined && value !== false) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}
