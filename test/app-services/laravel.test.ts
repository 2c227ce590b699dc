// Issue 15's "done when" for PHP: a laravel-shaped application with mysql, redis, rabbitmq and minio
// services and a worker service reads and writes through each using only the environment Berth
// injects (the names Laravel's stock configuration reads), and the worker consumes the queue. One
// dialect: the store's side is the same SQL services.test.ts runs on both.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DIALECTS } from '../helpers/store.js';
import {
  applyYaml,
  edgeRequest,
  eventually,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { laravelServicesAppFiles } from './laravel-services-app.js';
import { data } from './helpers.js';

describe.each(DIALECTS.slice(0, 1))('a laravel application with its services (%s)', (dialect) => {
  let h: RuntimeHarness;
  let appId: number;

  const get = async (pathname: string) => {
    const answer = await edgeRequest(h.edgePort, 'laravel.test', pathname);
    expect(answer.status, answer.body).toBe(200);
    return JSON.parse(answer.body) as Record<string, unknown>;
  };

  beforeAll(async () => {
    h = await startRuntime(dialect, { BERTH_DEPLOYMENT_TIMEOUT: '180' });
    await h.t.ctx.services.managedDatabases.driver.warmUp?.();
    h.repository('laravel').commit(laravelServicesAppFiles());
    const applied = await applyYaml(
      h.t,
      stringify({
        apiVersion: 'v1',
        kind: 'Infrastructure',
        metadata: { name: 'laravel', team: 'acme' },
        spec: {
          application: {
            name: 'laravel',
            type: 'laravel',
            repository: { url: h.git.url('laravel'), branch: 'main' },
            settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
            php: { extensions: ['redis', 'amqp'] },
          },
          domains: [{ domain: 'laravel.test' }],
          services: [
            { name: 'db', type: 'mysql', memory: '256Mi' },
            { name: 'cache', type: 'redis', memory: '64Mi' },
            { name: 'queue', type: 'rabbitmq', memory: '256Mi' },
            { name: 'files', type: 'minio' },
            { name: 'jobs', type: 'worker', command: 'php worker.php' },
          ],
        },
      }),
    );
    appId = applied.application_id;
    const deployment = await waitForDeployment(h.t, appId, applied.deployment_id!, 240_000);
    expect(deployment.error).toBeNull();
  }, 300_000);
  afterAll(() => h?.close());

  it('gets the names Laravel reads for each service, and every service runs', async () => {
    const services = data<Array<{ name: string; status: string }>>(
      await h.t.request({
        method: 'GET',
        url: `/api/v1/applications/${appId}/services`,
        headers: h.t.auth.platform,
      }),
    );
    await eventually(
      async () => {
        const now = data<Array<{ name: string; status: string }>>(
          await h.t.request({
            method: 'GET',
            url: `/api/v1/applications/${appId}/services`,
            headers: h.t.auth.platform,
          }),
        );
        return now.every((s) => s.status === 'running') ? now : undefined;
      },
      30_000,
      'every service running',
    );
    expect(services.map((s) => s.name)).toEqual(['db', 'cache', 'queue', 'files', 'jobs']);
    const injected = data<Array<{ key: string; value: string }>>(
      await h.t.request({
        method: 'GET',
        url: `/api/v1/applications/${appId}/secrets/injected`,
        headers: h.t.auth.platform,
      }),
    );
    expect(injected.map((e) => e.key)).toEqual(
      expect.arrayContaining([
        'DB_CONNECTION',
        'DB_HOST',
        'DB_PASSWORD',
        'REDIS_HOST',
        'REDIS_PASSWORD',
        'QUEUE_CONNECTION',
        'RABBITMQ_HOST',
        'RABBITMQ_VHOST',
        'AMQP_URL',
        'FILESYSTEM_DISK',
        'AWS_ACCESS_KEY_ID',
        'AWS_BUCKET',
        'AWS_ENDPOINT',
        'AWS_USE_PATH_STYLE_ENDPOINT',
        'S3_ENDPOINT',
      ]),
    );
    expect(new Set(injected.map((e) => e.value))).toEqual(new Set(['********']));
  }, 60_000);

  it('writes and reads through MySQL, Redis and S3 with the injected names', async () => {
    expect(await get('/mysql?value=from-laravel')).toEqual({
      body: 'from-laravel',
      user: expect.stringMatching(/^app@/) as unknown,
    });
    expect(await get('/redis?value=cached')).toEqual({ got: 'cached' });
    expect(await get('/s3?value=stored')).toEqual({ put: 200, get: 200, body: 'stored', disk: 's3' });
  }, 60_000);

  it('queues a job on RabbitMQ that the worker service takes and records in MySQL', async () => {
    expect(await get('/queue?value=job-1')).toEqual({ queued: 'job-1', connection: 'rabbitmq' });
    const processed = await eventually(
      async () => {
        const rows = (await get('/processed')) as unknown as Array<{ body: string; worker: number }>;
        return rows.some((r) => r.body === 'job-1') ? rows : undefined;
      },
      30_000,
      'the worker to take the job',
    );
    const worker = (await h.t.ctx.services.runtime.status(appId)).instances.find(
      (i) => i.name === 'worker-jobs',
    );
    expect(worker?.state).toBe('running');
    expect(processed.find((r) => r.body === 'job-1')?.worker).toBeGreaterThan(0);
  }, 60_000);
});
