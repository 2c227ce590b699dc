// Where an application reaches its services comes from what runs them (issue 27): the host a runner
// answers with is recorded and given to the application (its environment, the services API), and a
// minio service is where Berth's S3 endpoint listens (BERTH_HOST). Instances whose files a runner keeps
// outside this Berth's data dir are another Berth's: not stopped when this one stops.
import net from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceRunner, ServiceSpec } from '../../src/drivers/services/types.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { appDocument, data } from './helpers.js';

/** A rabbitmq runner that runs nothing: it answers with a host elsewhere and a location it is told. */
function remoteRunner(locationOf: (spec: ServiceSpec) => string | null) {
  const stopped: string[] = [];
  const runner: ServiceRunner = {
    types: ['rabbitmq'],
    provision: (spec) =>
      Promise.resolve({
        host: `${spec.name}.services.internal`,
        port: 5672,
        pid: null,
        version: '3.13.7',
        location: locationOf(spec),
        extra: { vhost: `/${spec.name}` },
      }),
    start: (spec) => runner.provision(spec),
    restart: (spec) => runner.provision(spec),
    stop(ref) {
      stopped.push(ref.id);
      return Promise.resolve();
    },
    delete: () => Promise.resolve(),
    status: () => Promise.resolve({ running: true, pid: null }),
    logs: () => Promise.resolve([]),
  };
  return { runner, stopped };
}

describe('where applications reach their services', () => {
  let t: TestApp | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  const apply = async (app: TestApp, body: string) => {
    const response = await app.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?auto_deploy=false',
      headers: { ...app.auth.platform, 'content-type': 'application/yaml' },
      payload: body,
    });
    expect(response.statusCode, response.body).toBe(200);
    return response.json<{ application_id: number }>().application_id;
  };
  const get = (app: TestApp, url: string) => app.request({ method: 'GET', url, headers: app.auth.platform });
  const environment = async (app: TestApp, appId: number, service: string) =>
    Object.fromEntries(
      data<Array<{ key: string; value: string }>>(
        await get(app, `/api/v1/applications/${appId}/services/${service}/environment`),
      ).map((e) => [e.key, e.value]),
    );

  it("gives the host the runner answers with, and leaves another Berth's instances running", async () => {
    t = await createTestApp('sqlite');
    const app = t;
    // `queue`'s files are under this Berth's data dir; `other`'s are another Berth's.
    const remote = remoteRunner((spec) =>
      spec.name === 'queue'
        ? path.join(app.ctx.config.dataDir, 'services', spec.id)
        : `/srv/another-berth/services/${spec.id}`,
    );
    // Composed before the application services are made: the last runner of a type runs it.
    t.ctx.services.serviceRunners.push(remote.runner);
    const appId = await apply(
      t,
      appDocument('shop', [
        { name: 'queue', type: 'rabbitmq' },
        { name: 'other', type: 'rabbitmq' },
      ]),
    );
    await t.ctx.services.appServices.ensureApplication(appId);

    const env = await environment(t, appId, 'queue');
    // Two of one type: each is named by its service.
    expect(env.AMQP_URL_QUEUE).toMatch(/^amqp:\/\/[^@]+@queue\.services\.internal:5672\/%2Fqueue$/);
    const listed = data<Array<{ name: string; host: string | null; port: number | null }>>(
      await get(t, `/api/v1/applications/${appId}/services`),
    );
    expect(listed.map((s) => [s.name, s.host, s.port])).toEqual([
      ['queue', 'queue.services.internal', 5672],
      ['other', 'other.services.internal', 5672],
    ]);

    const ids = Object.fromEntries(
      (
        await t.ctx.db
          .selectFrom('app_service_instances')
          .innerJoin('services', 'services.id', 'app_service_instances.service_id')
          .select(['services.name', 'app_service_instances.uuid'])
          .where('app_service_instances.application_id', '=', appId)
          .execute()
      ).map((row) => [row.name, row.uuid]),
    );
    await t.ctx.services.appServices.close();
    expect(remote.stopped).toEqual([ids.queue]);
  });

  it("puts a minio service where Berth's S3 endpoint listens (BERTH_HOST)", async () => {
    t = await createTestApp('sqlite', { env: { BERTH_HOST: '127.0.0.2' } });
    const appId = await apply(t, appDocument('blog', [{ name: 'media', type: 'minio' }]));
    await t.ctx.services.appServices.ensureApplication(appId);
    const [media] = data<Array<{ name: string; host: string | null; port: number | null }>>(
      await get(t, `/api/v1/applications/${appId}/services`),
    );
    const served = t.ctx.services.objectStorage.served();
    expect(media).toMatchObject({ name: 'media', host: '127.0.0.2', port: served?.port });
    // And it is there.
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(media!.port!, media!.host!, () => {
        socket.end();
        resolve();
      });
      socket.on('error', reject);
    });
  });
});
