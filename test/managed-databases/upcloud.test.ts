// Managed databases on the upcloud driver (BERTH_MANAGED_DATABASE_DRIVER=upcloud) against a fake
// UpCloud that answers only the recorded exchanges of test/fixtures/upcloud (test/helpers/upcloud/
// fake.ts): a database applied through Berth's API becomes an UpCloud service labelled with its team
// and uuid, runs, is listed by Berth's /1.3, is powered off and on, refuses a plan change (no
// recording shows one), and is deleted; no request the recordings do not cover is ever made. The
// start checks the credential and the zone against UpCloud and names the variable at fault.
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/index.js';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { createTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { waitFor } from '../helpers/processes.js';
import { stubRuntimeDriver } from '../helpers/stub-drivers.js';
import { startFakeUpCloud, type FakeUpCloud } from '../helpers/upcloud/fake.js';

const CREDENTIAL = { username: 'berth-api', password: 'right-password' };
// The plan and zone of the recorded pg services (UpCloud's answers describe those).
const PLAN = '2x2xCPU-4GB-100GB';
const ZONE = 'fi-hel2';

const upcloudEnv = (url: string, overrides: Record<string, string> = {}) => ({
  BERTH_MANAGED_DATABASE_DRIVER: 'upcloud',
  BERTH_UPCLOUD_API_URL: url,
  BERTH_UPCLOUD_USERNAME: CREDENTIAL.username,
  BERTH_UPCLOUD_PASSWORD: CREDENTIAL.password,
  BERTH_UPCLOUD_ZONE: ZONE,
  ...overrides,
});

interface ServiceObject {
  uuid: string;
  name: string;
  type: string;
  state: string;
  plan: string;
  powered: boolean;
  service_uri: string;
  service_uri_params: Record<string, string>;
  users: Array<{ username: string }>;
  databases?: Array<{ name: string }>;
  state_error?: { message: string };
}

describe('the upcloud driver settings', () => {
  it('are all required with the driver and reported together', () => {
    expect(() =>
      testConfig({ BERTH_MANAGED_DATABASE_DRIVER: 'upcloud', BERTH_UPCLOUD_API_URL: 'ftp://nope' }),
    ).toThrow(ConfigError);
    try {
      testConfig({ BERTH_MANAGED_DATABASE_DRIVER: 'upcloud', BERTH_UPCLOUD_API_URL: 'ftp://nope' });
    } catch (error) {
      const message = (error as Error).message;
      for (const variable of [
        'BERTH_UPCLOUD_API_URL',
        'BERTH_UPCLOUD_USERNAME',
        'BERTH_UPCLOUD_PASSWORD',
        'BERTH_UPCLOUD_ZONE',
      ])
        expect(message).toContain(variable);
    }
    const config = testConfig({
      BERTH_MANAGED_DATABASE_DRIVER: 'upcloud',
      BERTH_UPCLOUD_USERNAME: 'u',
      BERTH_UPCLOUD_PASSWORD: 'p',
      BERTH_UPCLOUD_ZONE: 'de-fra1',
    });
    expect(config.upcloud).toEqual({
      apiUrl: 'https://api.upcloud.com',
      username: 'u',
      password: 'p',
      zone: 'de-fra1',
    });
    // The local default is untouched and needs none of them.
    expect(testConfig().upcloud).toBeUndefined();
    expect(testConfig().drivers.managedDatabases).toBe('local');
  });
});

describe.each(DIALECTS)('managed databases on the upcloud driver (%s)', (dialect) => {
  let fake: FakeUpCloud;
  let t: TestApp;
  let background: Background;

  beforeAll(async () => {
    fake = await startFakeUpCloud(CREDENTIAL);
    t = await createTestApp(dialect, {
      env: upcloudEnv(fake.url),
      // Applications run nowhere here: only the managed-database driver is under test.
      services: { runtimeDriver: stubRuntimeDriver([]) },
    });
    background = await startBackground(t.ctx, { pollMs: 20 });
  });
  afterAll(async () => {
    await background?.stop();
    await t?.close();
    await fake?.close();
  });

  /** The database once `done` holds for it (the background's job runner carries the jobs out). */
  const settled = async (done: (o: ServiceObject) => boolean): Promise<ServiceObject> => {
    let last: ServiceObject | undefined;
    for (let attempt = 0; attempt < 400; attempt++) {
      last = await orders().catch(() => undefined);
      if (last && done(last)) return last;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`gave up waiting: ${JSON.stringify(last)}; unmatched ${JSON.stringify(fake.unmatched)}`);
  };
  const dbApi = (method: string, url: string, payload?: unknown) =>
    t.request({
      method,
      url,
      headers: { ...t.auth.dbApi, ...(payload ? { 'content-type': 'application/json' } : {}) },
      ...(payload ? { payload: JSON.stringify(payload) } : {}),
    });
  const apply = (plan: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: stringify({
        apiVersion: 'v1',
        kind: 'Infrastructure',
        metadata: { name: 'shop', team: t.user.team },
        spec: {
          managed_databases: [
            {
              name: 'orders',
              type: 'pg',
              plan,
              zone: ZONE,
              users: [{ username: 'app' }],
              logical_databases: [{ name: 'appdb' }],
            },
          ],
        },
      }),
    });
  const orders = async (): Promise<ServiceObject> => {
    const list = (await dbApi('GET', '/1.3/database')).json<ServiceObject[]>();
    const found = list.find((o) => o.name === 'orders');
    if (!found) throw new Error(`no database 'orders' in ${JSON.stringify(list)}`);
    return found;
  };

  it('checks the credential and zone at start, then creates, powers, refuses a plan change and deletes through UpCloud', async () => {
    // The start read UpCloud's plans with the credential (one GET).
    expect(fake.served[0]).toMatchObject({ method: 'GET', path: '/1.3/database/service-types', status: 200 });

    const applied = await apply(PLAN);
    expect(applied.statusCode, applied.body).toBe(200);

    const created = await settled((o) => o.state !== 'pending' && o.state !== 'setup-service');
    expect(created).toMatchObject({ type: 'pg', state: 'running', plan: PLAN, powered: true });
    // Clients reach UpCloud's host and port, as UpCloud answered them.
    const [service] = fake.services();
    expect(service).toBeDefined();
    expect(created.service_uri_params.host).toMatch(
      new RegExp(`^${service!.name}-[a-z]+\\.db\\.upclouddatabases\\.com$`),
    );
    expect(created.service_uri_params.port).toBe('11569');
    // UpCloud's servers take TLS only: the URI says so, as UpCloud's own does.
    expect(created.service_uri).toMatch(
      new RegExp(
        `^postgres://upadmin:[^@]+@${service!.name}-[a-z]+\\.db\\.upclouddatabases\\.com:11569/defaultdb\\?sslmode=require$`,
      ),
    );
    expect(created.service_uri_params.ssl_mode).toBe('require');
    expect(created.users.map((u) => u.username)).toEqual(['upadmin', 'app']);
    expect(created.databases?.map((d) => d.name)).toEqual(['defaultdb', 'appdb']);
    // The mapping of teams to services is UpCloud's labels.
    expect(service!.labels).toEqual([
      { key: 'berth_database', value: created.uuid },
      { key: 'berth_team', value: String(t.user.team_id) },
    ]);
    // What reached UpCloud: the service, its admin's and user's passwords, the user and the database.
    const writes = fake.served
      .filter((s) => s.method !== 'GET')
      .map((s) => `${s.method} ${s.path.replace(service!.uuid, '{uuid}')}`);
    expect(writes).toEqual([
      'POST /1.3/database',
      'PATCH /1.3/database/{uuid}/users/upadmin',
      'POST /1.3/database/{uuid}/users',
      'PATCH /1.3/database/{uuid}/users/app',
      'POST /1.3/database/{uuid}/databases',
    ]);
    expect(
      fake.served.find((s) => s.path === '/1.3/database/{uuid}/users'.replace('{uuid}', service!.uuid))?.body,
    ).toEqual({
      username: 'app',
    });

    // Power off: UpCloud's PATCH {powered:false}; Berth says stopped.
    const off = await dbApi('PATCH', `/1.3/database/${created.uuid}`, { powered: false });
    expect(off.statusCode, off.body).toBe(200);
    expect(await settled((o) => o.state !== 'pending')).toMatchObject({ state: 'stopped', powered: false });
    expect(fake.services()[0]?.last).toMatchObject({ powered: false });

    // Power on: PATCH {powered:true}, then running once UpCloud says so.
    const on = await dbApi('PATCH', `/1.3/database/${created.uuid}`, { powered: true });
    expect(on.statusCode, on.body).toBe(200);
    expect(await settled((o) => o.state !== 'pending')).toMatchObject({ state: 'running', powered: true });
    expect(fake.services()[0]?.last).toMatchObject({ powered: true, state: 'running' });

    // The /1.3 operations are refused by name: UpCloud's tasks, migration and clone calls are not
    // carried out by this driver (docs/drivers.md); nothing reaches UpCloud.
    const sent = fake.served.length;
    const source = 'postgres://u:p@db.example:5432/x';
    for (const [operation, body] of [
      ['tasks', { operation: 'migration_check', migration_check: { source_service_uri: source } }],
      ['migration', { source_service_uri: source }],
      ['maintenance', {}],
      ['clone', { name: 'copy' }],
    ] as const) {
      const refusedOperation = await dbApi('POST', `/1.3/database/${created.uuid}/${operation}`, body);
      expect(refusedOperation.statusCode, operation).toBe(400);
      expect(refusedOperation.json<{ error: { error_message: string } }>().error.error_message).toContain(
        'not supported by the upcloud driver',
      );
    }
    expect(fake.served.slice(sent).filter((s) => s.method !== 'GET')).toEqual([]);

    // A plan change: no recording shows UpCloud's PATCH {plan}, so the driver refuses it by name and
    // nothing is sent.
    const before = fake.served.length;
    expect((await apply('2x4xCPU-8GB-100GB')).statusCode).toBe(200);
    const pending = await t.request({
      method: 'POST',
      url: `/api/v1/managed-databases/${created.uuid}/apply-pending-change`,
      headers: t.auth.platform,
    });
    expect(pending.statusCode, pending.body).toBe(202);
    const refused = await settled((o) => !['pending', 'setup-service'].includes(o.state));
    expect(refused.state).toBe('error');
    expect(refused.state_error?.message).toContain(
      'not supported by the upcloud driver: plan change (2x2xCPU-4GB-100GB to 2x4xCPU-8GB-100GB)',
    );
    expect(fake.served.slice(before).filter((s) => s.method !== 'GET')).toEqual([]);

    // Delete: UpCloud's DELETE, then Berth answers 404.
    const deleted = await dbApi('DELETE', `/1.3/database/${created.uuid}`);
    expect(deleted.statusCode).toBe(204);
    for (let attempt = 0; attempt < 400 && fake.services().length > 0; attempt++)
      await new Promise((resolve) => setTimeout(resolve, 25));
    expect((await dbApi('GET', `/1.3/database/${created.uuid}`)).statusCode).toBe(404);
    expect(fake.services()).toEqual([]);
    expect(fake.served.at(-1)).toMatchObject({
      method: 'DELETE',
      path: `/1.3/database/${service!.uuid}`,
      status: 204,
    });

    console.log(fake.served.map((x) => `${x.method} ${x.path} ${x.status} ${x.recording}`).join('\n'));
    expect(fake.refused).toEqual([]);
    expect(fake.unmatched).toEqual([]);
  });
});

describe('the fake UpCloud', () => {
  it('answers recorded exchanges only: any other request is a 501 kept as unmatched', async () => {
    const fake = await startFakeUpCloud(CREDENTIAL);
    const auth = `Basic ${Buffer.from(`${CREDENTIAL.username}:${CREDENTIAL.password}`).toString('base64')}`;
    const call = async (method: string, url: string, body?: unknown) => {
      const response = await fetch(`${fake.url}${url}`, {
        method,
        headers: { authorization: auth, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: response.status, body: (await response.text()) || undefined };
    };
    try {
      const create = {
        hostname_prefix: 'probe',
        plan: PLAN,
        properties: {
          automatic_utility_network_ip_filter: true,
          ip_filter: ['0.0.0.0/0'],
          public_access: true,
        },
        title: 'probe',
        type: 'pg',
        zone: ZONE,
        maintenance: { dow: 'monday', time: '12:00:00' },
      };
      const made = await call('POST', '/1.3/database', create);
      expect(made.status).toBe(201);
      const uuid = (JSON.parse(made.body!) as { uuid: string; name: string }).uuid;
      // Not recorded: another plan for pg, a plan change, maintenance, an unknown service.
      expect((await call('POST', '/1.3/database', { ...create, plan: '1x1xCPU-2GB-25GB' })).status).toBe(501);
      expect((await call('PATCH', `/1.3/database/${uuid}`, { plan: '2x4xCPU-8GB-100GB' })).status).toBe(501);
      expect((await call('PUT', `/1.3/database/${uuid}/start-maintenance`)).status).toBe(501);
      expect((await call('GET', '/1.3/database/09000000-0000-4000-8000-000000000000')).status).toBe(501);
      // Recorded: a power-off; not recorded: reading the service while it is off.
      expect((await call('PATCH', `/1.3/database/${uuid}`, { powered: false })).status).toBe(200);
      expect((await call('GET', `/1.3/database/${uuid}`)).status).toBe(501);
      expect(fake.unmatched.map((u) => `${u.method} ${u.path}`)).toEqual([
        'POST /1.3/database',
        `PATCH /1.3/database/${uuid}`,
        `PUT /1.3/database/${uuid}/start-maintenance`,
        'GET /1.3/database/09000000-0000-4000-8000-000000000000',
        `GET /1.3/database/${uuid}`,
      ]);
    } finally {
      await fake.close();
    }
  });
});

describe('Berth closing on the upcloud driver', () => {
  it('leaves the UpCloud services running: UpCloud supervises them, not this process', async () => {
    const fake = await startFakeUpCloud(CREDENTIAL);
    const t = await createTestApp('sqlite', {
      env: upcloudEnv(fake.url),
      services: { runtimeDriver: stubRuntimeDriver([]) },
    });
    try {
      const background = await startBackground(t.ctx, { pollMs: 20 });
      const applied = await t.request({
        method: 'POST',
        url: '/api/v1/infrastructure/apply',
        headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
        payload: stringify({
          apiVersion: 'v1',
          kind: 'Infrastructure',
          metadata: { name: 'shop', team: t.user.team },
          spec: { managed_databases: [{ name: 'kept', type: 'pg', plan: PLAN, zone: ZONE }] },
        }),
      });
      expect(applied.statusCode, applied.body).toBe(200);
      // Running in Berth's answer once the provisioning job is done.
      await waitFor(async () => {
        const row = await t.ctx.db.selectFrom('managed_databases').select('state').executeTakeFirst();
        return row?.state === 'running' ? row : undefined;
      });
      await background.stop();
      const before = fake.served.length;
      await t.close();
      expect(fake.served.slice(before)).toEqual([]);
      expect(fake.services()[0]?.last).toMatchObject({ powered: true, state: 'running' });
      expect(fake.unmatched).toEqual([]);
    } finally {
      await fake.close();
    }
  });
});

describe('the start of Berth on the upcloud driver', () => {
  let fake: FakeUpCloud;
  beforeAll(async () => {
    fake = await startFakeUpCloud(CREDENTIAL);
  });
  afterAll(async () => {
    await fake?.close();
  });

  const startWith = async (overrides: Record<string, string>) => {
    const t = await createTestApp('sqlite', {
      env: upcloudEnv(fake.url, overrides),
      services: { runtimeDriver: stubRuntimeDriver([]) },
    });
    try {
      const background = await startBackground(t.ctx, { pollMs: 20 });
      await background.stop();
      return undefined;
    } catch (error) {
      return error as Error;
    } finally {
      await t.close();
    }
  };

  it('fails naming BERTH_UPCLOUD_PASSWORD when UpCloud refuses the credential', async () => {
    const error = await startWith({ BERTH_UPCLOUD_PASSWORD: 'wrong-password' });
    expect(error?.message).toContain('BERTH_UPCLOUD_PASSWORD');
    expect(error?.message).not.toContain('wrong-password');
    expect(fake.refused).toEqual([{ method: 'GET', path: '/1.3/database/service-types', body: null }]);
  });

  it('fails naming BERTH_UPCLOUD_ZONE for a zone without database plans', async () => {
    const error = await startWith({ BERTH_UPCLOUD_ZONE: 'xx-nop1' });
    expect(error?.message).toContain("BERTH_UPCLOUD_ZONE 'xx-nop1' has no managed database plans");
    expect(error?.message).toContain('fi-hel2');
    expect(fake.unmatched).toEqual([]);
  });
});
