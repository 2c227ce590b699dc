// Application services on runners, on a real Berth (issue 15): a nodejs application with a
// postgresql service with an extension, a chrome-headless container service that renders its own page
// over the DevTools protocol, a gotenberg container service that converts HTML as a Gotenberg client
// asks, an sftp service writes into the application's volume, a worker service runs in the
// release's sandbox and comes back when killed, and a meilisearch container service is accepted and
// reported unavailable with its reason (apply's change line, the services API, the deployment log).
// Another application's credentials open none of them; a restart of Berth brings them back.
// One dialect: the store's side is the same SQL services.test.ts runs on both.
import fs from 'node:fs';
import { Client as SshClient } from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import { createAppServicesService } from '../../src/services/app-services/index.js';
import { DIALECTS } from '../helpers/store.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { runnerAppFiles } from './runner-app.js';
import { data } from './helpers.js';

interface ServiceView {
  name: string;
  kind: string;
  type: string;
  status: string;
  status_reason: string | null;
  port: number | null;
  restarts: number;
  last_restart_reason: string | null;
}

const SFTP_PASSWORD = 'uploader-pass-5Kq9';

function document(name: string, repositoryUrl: string, withEverything: boolean): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team: 'acme' },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: repositoryUrl, branch: 'main' },
        commands: { start: 'npm start' },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
      },
      domains: [{ domain: `${name}.test` }],
      secrets: [{ key: 'APP_SECRET', value: `secret-of-${name}` }],
      volumes: [{ name: 'data', mount_path: '/data', volume_size: 1 }],
      ...(withEverything
        ? {
            services: [
              { name: 'db', type: 'postgresql', memory: '128Mi', settings: { extensions: ['citext'] } },
              { name: 'jobs', type: 'worker', command: 'node worker.js' },
              {
                name: 'files',
                type: 'sftp',
                settings: { username: 'uploader', password: SFTP_PASSWORD },
              },
            ],
          }
        : {}),
      container_services: [
        { name: 'browser', type: 'chrome-headless', memory: '512Mi' },
        ...(withEverything
          ? [
              { name: 'pdf', type: 'gotenberg' },
              { name: 'search', type: 'meilisearch' },
            ]
          : []),
      ],
    },
  });
}

/** An SFTP session with the given login; resolves to the connection's sftp object, or rejects. */
function sftpLogin(port: number, username: string, password: string) {
  return new Promise<{ ssh: SshClient; sftp: import('ssh2').SFTPWrapper }>((resolve, reject) => {
    const ssh = new SshClient();
    ssh.on('ready', () => ssh.sftp((error, sftp) => (error ? reject(error) : resolve({ ssh, sftp }))));
    ssh.on('error', reject);
    ssh.connect({ host: '127.0.0.1', port, username, password, readyTimeout: 20_000 });
  });
}

describe.each(DIALECTS.slice(0, 1))('application services on runners (%s)', (dialect) => {
  let h: RuntimeHarness;
  let appId: number;
  let otherId: number;
  let repositoryUrl: string;

  const api = (method: string, url: string) =>
    h.t.request({ method: method, url, headers: h.t.auth.platform });
  const services = async (id: number) =>
    data<ServiceView[]>(await api('GET', `/api/v1/applications/${id}/services`));
  const environment = async (id: number, service: string) =>
    Object.fromEntries(
      data<Array<{ key: string; value: string }>>(
        await api('GET', `/api/v1/applications/${id}/services/${service}/environment`),
      ).map((e) => [e.key, e.value]),
    );
  const volumeFile = (id: number, name: string) =>
    `${h.t.ctx.config.dataDir}/apps/${id}/volumes/data/${name}`;

  beforeAll(async () => {
    h = await startRuntime(dialect, { BERTH_DEPLOYMENT_TIMEOUT: '90' });
    h.repository('runners').commit(runnerAppFiles());
    repositoryUrl = h.git.url('runners');
  }, 180_000);
  afterAll(() => h?.close());

  it('runs every service with the application; a type that cannot run here is said unavailable, never running', async () => {
    const applied = await applyYaml(h.t, document('tools', repositoryUrl, true));
    appId = applied.application_id;
    expect(applied.changes).toContain(
      "Container service 'search' (meilisearch) created; unavailable: meilisearch is not installable on this machine kind (no Debian package); it runs on the Kubernetes driver from its image",
    );
    const deployment = await waitForDeployment(h.t, appId, applied.deployment_id!, 120_000);
    expect(deployment.error).toBeNull();
    expect(deployment.status).toBe('success');

    const byName = Object.fromEntries((await services(appId)).map((s) => [s.name, s]));
    expect(byName.browser).toMatchObject({ kind: 'container', status: 'running', status_reason: null });
    expect(byName.files).toMatchObject({ kind: 'service', status: 'running' });
    expect(byName.search).toMatchObject({ kind: 'container', status: 'unavailable', port: null });
    expect(byName.search?.status_reason).toMatch(/not installable on this machine kind/);
    await eventually(
      async () => (await services(appId)).find((s) => s.name === 'jobs' && s.status === 'running'),
      30_000,
      'the worker running',
    );

    const log = data<Array<{ line: string }>>(
      await api('GET', `/api/v1/applications/${appId}/deployments/${applied.deployment_id}/logs`),
    )
      .map((l) => l.line)
      .join('\n');
    expect(log).toMatch(/Service browser \(chrome-headless [\d.]+\) is running/);
    expect(log).toMatch(/Service search \(meilisearch\) is unavailable: meilisearch is not installable/);

    // The application has the URL forms of what runs, and nothing of what does not.
    const env = JSON.parse((await edgeRequest(h.edgePort, 'tools.test', '/env')).body) as { keys: string[] };
    expect(env.keys).toEqual(
      expect.arrayContaining([
        'CHROME_URL',
        'BROWSER_WS_ENDPOINT',
        'SFTP_URL',
        'SFTP_HOST',
        'SFTP_PORT',
        'SFTP_USERNAME',
        'SFTP_PASSWORD',
      ]),
    );
    expect(env.keys.filter((k) => k.startsWith('MEILI'))).toEqual([]);
  }, 180_000);

  it('renders the application’s own page in its chrome-headless service, with only the injected endpoint', async () => {
    const answer = await edgeRequest(h.edgePort, 'tools.test', '/chrome');
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ title: 'Rendered for tools' });
    const chrome = await environment(appId, 'browser');
    // At the host end of the application's network as root (10.200.0.0/14), else on loopback.
    expect(chrome.CHROME_URL).toMatch(
      /^http:\/\/(127\.0\.0\.1|10\.20[0-3]\.\d+\.\d+):\d+\/[A-Za-z0-9_-]{20,}$/,
    );
    expect(chrome.BROWSER_WS_ENDPOINT?.startsWith(chrome.CHROME_URL!.replace('http:', 'ws:'))).toBe(true);
    // The token is a credential: sealed at rest like the passwords.
    const token = new URL(chrome.CHROME_URL!).pathname.slice(1);
    const rows = await h.t.ctx.db.selectFrom('app_service_instances').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(token);
  }, 60_000);

  it('uses its postgresql service with the extension the document asked for', async () => {
    const answer = await edgeRequest(h.edgePort, 'tools.test', '/pg?value=berth');
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toEqual({ found: 'berth' });
  }, 60_000);

  it('converts HTML to PDF through its gotenberg service as a Gotenberg client would, with only GOTENBERG_URL', async () => {
    const balance = async () =>
      (
        await h.t.request({ method: 'GET', url: '/api/v1/user/tools/balance', headers: h.t.auth.platform })
      ).json<unknown>();
    const before = await balance();
    const answer = await edgeRequest(h.edgePort, 'tools.test', '/gotenberg');
    expect(answer.status, answer.body).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ status: 200, type: 'application/pdf', magic: '%PDF-' });
    // No credit was spent: the service is the application's, not the tools API.
    expect(await balance()).toEqual(before);
  }, 90_000);

  it('lets an SFTP client log in with the document’s username and password and write into the volume the application reads', async () => {
    const sftpEnv = await environment(appId, 'files');
    expect(sftpEnv.SFTP_USERNAME).toBe('uploader');
    expect(sftpEnv.SFTP_PASSWORD).toBe(SFTP_PASSWORD);
    const port = Number(sftpEnv.SFTP_PORT);
    const { ssh, sftp } = await sftpLogin(port, 'uploader', SFTP_PASSWORD);
    try {
      await new Promise<void>((resolve, reject) =>
        sftp.writeFile('/upload.txt', 'sent over sftp', (error) => (error ? reject(error) : resolve())),
      );
    } finally {
      ssh.end();
    }
    const read = await edgeRequest(h.edgePort, 'tools.test', '/file?name=upload.txt');
    expect(JSON.parse(read.body)).toEqual({ content: 'sent over sftp' });
    await expect(sftpLogin(port, 'uploader', 'not-the-password')).rejects.toThrow(/authentication/i);
  }, 60_000);

  it('starts a worker killed by its pid again, in the release’s sandbox with the application’s secrets', async () => {
    // The host's pid of the worker (the file in the volume holds the sandbox's own, in its namespace).
    const workerPid = async () =>
      (await h.t.ctx.services.runtime.status(appId)).instances.find((i) => i.name === 'worker-jobs')?.pid ??
      undefined;
    const first = await eventually(workerPid, 30_000, 'the worker pid');
    expect(isAlive(first)).toBe(true);
    process.kill(first, 'SIGKILL');
    const next = await eventually(
      async () => {
        const pid = await workerPid();
        return pid !== undefined && pid !== first && isAlive(pid) ? pid : undefined;
      },
      20_000,
      'a new worker process',
    );
    expect(next).not.toBe(first);
    const jobs = (await services(appId)).find((s) => s.name === 'jobs');
    expect(jobs).toMatchObject({ status: 'running', restarts: 1, last_restart_reason: 'killed by SIGKILL' });
    // Each start wrote its line, with the application's secrets in its environment.
    await eventually(
      () =>
        Promise.resolve(
          /started \d+ with secrets\n.*started \d+ with secrets/s.test(
            fs.readFileSync(volumeFile(appId, 'worker.log'), 'utf8'),
          ) || undefined,
        ),
      20_000,
      'the restarted worker to write its line',
    );
  }, 60_000);

  it('keeps another application out of these services with its own credentials', async () => {
    const applied = await applyYaml(h.t, document('other', repositoryUrl, false));
    otherId = applied.application_id;
    await waitForDeployment(h.t, otherId, applied.deployment_id!, 120_000);
    const mine = await environment(appId, 'browser');
    const theirs = await environment(otherId, 'browser');
    const myPort = new URL(mine.CHROME_URL!).port;
    const theirToken = new URL(theirs.CHROME_URL!).pathname;
    const refused = await fetch(`http://127.0.0.1:${myPort}${theirToken}/json/version`);
    expect(refused.status).toBe(404);
    const allowed = await fetch(`${mine.CHROME_URL}/json/version`);
    expect(allowed.status).toBe(200);
    // Its password does not open this application's SFTP either.
    const sftpPort = Number((await environment(appId, 'files')).SFTP_PORT);
    await expect(
      sftpLogin(sftpPort, 'uploader', new URL(theirs.CHROME_URL!).pathname.slice(1)),
    ).rejects.toThrow(/authentication/i);
  }, 180_000);

  it('brings every service back after a restart of Berth, and removes them with the application', async () => {
    const before = Object.fromEntries((await services(appId)).map((s) => [s.name, s.port]));
    await h.t.ctx.services.appServices.close();
    // A new Berth process on the same store and data dir: its supervisor's first pass starts them.
    const again = createAppServicesService({
      db: h.t.ctx.db,
      clock: h.t.ctx.clock,
      ids: h.t.ctx.ids,
      logger: h.t.ctx.logger,
      secretBox: h.t.ctx.secretBox,
      runners: h.t.ctx.services.serviceRunners,
      appHost: (id, volumes) => h.t.ctx.services.runtime.hostFiles!(id, volumes),
      runtimeInstances: async (id) => (await h.t.ctx.services.runtime.status(id)).instances,
      queries: h.t.ctx.services.resources,
    });
    const supervisor = again.startSupervisor({ intervalMs: 60_000 });
    await supervisor.tick();
    try {
      const after = await services(appId);
      for (const service of after.filter((s) => s.name === 'browser' || s.name === 'files')) {
        expect(service.status).toBe('running');
        expect(service.port).toBe(before[service.name]);
        // A clean stop and start is no crash.
        expect(service.restarts).toBe(0);
      }
      const answer = await edgeRequest(h.edgePort, 'tools.test', '/chrome');
      expect(JSON.parse(answer.body)).toEqual({ title: 'Rendered for tools' });

      const chromePort = Number(before.browser);
      const deleted = await api('DELETE', `/api/v1/applications/${appId}`);
      expect(deleted.statusCode).toBeLessThan(300);
      await eventually(
        async () =>
          (
            await h.t.ctx.db
              .selectFrom('app_service_instances')
              .where('application_id', '=', appId)
              .selectAll()
              .execute()
          ).length === 0,
        60_000,
        "the application's service instances removed",
      );
      await expect(fetch(`http://127.0.0.1:${chromePort}/`)).rejects.toThrow();
    } finally {
      await again.close();
    }
  }, 180_000);
});
