// The seam remote drivers plug into (issue 27): Berth composed with a driver of every family that runs
// nothing here (test/helpers/stub-drivers.ts) applies a whole document (an application with a domain,
// a secret, a database service and a rabbitmq service; a managed database; an object storage) over
// its API, deploys it, reports it as running and deletes it, all through the drivers, without
// starting a process, listening on a port of the drivers' own or writing an application's file here.
import fs from 'node:fs';
import path from 'node:path';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBackground, type Background } from '../../src/lifecycle.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import {
  stubArtifactStore,
  stubDatabaseDriver,
  stubObjectStorageDriver,
  stubRuntimeDriver,
  stubServiceRunner,
  type CallLog,
} from '../helpers/stub-drivers.js';

const document = (team: string) =>
  stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'remote', team },
    spec: {
      application: {
        name: 'remote',
        type: 'nodejs',
        repository: { url: 'https://git.example.com/remote.git', branch: 'main' },
        commands: { build: ['npm ci'], start: 'npm start' },
        settings: { replicas: 2, memory: '256Mi' },
      },
      domains: [{ domain: 'remote.example.com' }],
      secrets: [
        { key: 'APP_SECRET', value: 'kept-sealed' },
        { key: 'DB_HOST', value: '${services.db.host}' },
      ],
      services: [
        { name: 'db', type: 'postgresql' },
        { name: 'queue', type: 'rabbitmq' },
      ],
      managed_databases: [{ name: 'main', type: 'pg', plan: '1x1xCPU-2GB-25GB', zone: 'de-fra1' }],
      object_storage: [
        { name: 'files', zone: 'europe-1', buckets: ['uploads'], users: [{ username: 'app', policies: [] }] },
      ],
    },
  });

/** `check`'s first answer that is not undefined; `seen` says what it last saw when it gives up. */
async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  seen?: () => unknown,
): Promise<T> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`gave up waiting for ${what}${seen ? `: ${JSON.stringify(seen())}` : ''}`);
}

describe.each(DIALECTS)('Berth on drivers of every family that run nothing here (%s)', (dialect) => {
  const calls: CallLog = [];
  const runtime = stubRuntimeDriver(calls);
  let t: TestApp;
  let background: Background;

  beforeAll(async () => {
    t = await createTestApp(dialect, {
      services: {
        runtimeDriver: runtime,
        managedDatabaseDriver: stubDatabaseDriver(calls),
        objectStorageDriver: stubObjectStorageDriver(calls),
        artifactStore: stubArtifactStore(calls),
        serviceRunners: [
          stubServiceRunner(calls, ['rabbitmq', 'sftp', 'minio', 'chrome-headless', 'gotenberg']),
        ],
      },
    });
    background = await startBackground(t.ctx, { pollMs: 20 });
  });
  afterAll(async () => {
    await background.stop();
    await t.close();
  });

  const call = async <T>(method: string, url: string, payload?: string) => {
    const res = await t.request({
      method,
      url,
      headers: { ...t.auth.platform, ...(payload ? { 'content-type': 'application/yaml' } : {}) },
      ...(payload ? { payload } : {}),
    });
    return { status: res.statusCode, body: (res.body ? res.json() : undefined) as T };
  };

  it('applies, deploys, serves and deletes a whole document through them', async () => {
    const applied = await call<{ application_id: number; deployment_id: number }>(
      'POST',
      '/api/v1/infrastructure/apply',
      document(t.user.team),
    );
    expect(applied.status, JSON.stringify(applied.body)).toBe(200);
    const appId = applied.body.application_id;

    let last: unknown;
    const deployment = await eventually(
      async () => {
        const { body } = await call<{ data: { status: string; error: string | null } }>(
          'GET',
          `/api/v1/applications/${appId}/deployments/${applied.body.deployment_id}`,
        );
        last = body;
        return ['success', 'failed'].includes(body.data.status) ? body.data : undefined;
      },
      'the deployment',
      () => last,
    );
    expect(deployment, JSON.stringify(deployment)).toMatchObject({ status: 'success' });

    // The runtime received the application as the document says.
    const spec = runtime.specs.get(appId)!;
    // The owning team's id: a remote driver labels what it makes with it.
    expect(spec).toMatchObject({
      name: 'remote',
      teamId: t.user.team_id,
      replicas: 2,
      memoryBytes: 256 * 1024 * 1024,
    });
    expect(spec.hostnames).toContain('remote.example.com');
    expect(spec.env).toMatchObject({ APP_SECRET: 'kept-sealed' });
    // The database service's host as its driver reported it, not this machine's loopback.
    expect(spec.env.DB_HOST).toMatch(/\.databases\.example$/);
    const status = await call<{ data: { status: string; replicas: { running: number } } }>(
      'GET',
      `/api/v1/applications/${appId}/status`,
    );
    expect(status.body.data).toMatchObject({ status: 'active', replicas: { running: 2 } });

    // The services run on their drivers.
    const services = await eventually(async () => {
      const { body } = await call<{ data: Array<{ name: string; status: string; host: string | null }> }>(
        'GET',
        `/api/v1/applications/${appId}/services`,
      );
      return body.data.every((s) => s.status === 'running') ? body.data : undefined;
    }, 'the services to run');
    // Each reported where its driver said it runs.
    expect(services.map((s) => [s.name, s.host]).sort()).toEqual([
      ['db', expect.stringMatching(/\.databases\.example$/)],
      ['queue', 'queue.services.example'],
    ]);

    // The managed database and the object storage, provisioned by theirs.
    await eventually(async () => {
      const { body } = await call<{ data: Array<{ name: string; state: string }> }>(
        'GET',
        `/api/v1/teams/${t.user.team}/managed-databases`,
      );
      return body.data.find((d) => d.name === 'main' && d.state === 'running');
    }, 'the managed database to run');
    let storages: unknown;
    const storage = await eventually(
      async () => {
        const { body } = await call<{ data: Array<{ name: string; state: string }> }>(
          'GET',
          `/api/v1/teams/${t.user.team}/object-storage`,
        );
        storages = body;
        return body.data.find((s) => s.name === 'files' && s.state === 'running');
      },
      'the object storage to run',
      () => storages,
    );
    expect(JSON.stringify(storage)).toContain('s3.stub.example');

    expect(calls).toEqual(
      expect.arrayContaining([
        'runtime.build remote git',
        'runtime.rollout remote replicas=2',
        'services.provision rabbitmq queue',
        'databases.provision pg 1x1xCPU-2GB-25GB',
        'objectStorage.provision files uploads',
      ]),
    );
    // Nothing of the application was made on this machine: its files are its driver's.
    expect(fs.existsSync(path.join(t.ctx.config.dataDir, 'apps'))).toBe(false);

    const removed = await call('DELETE', `/api/v1/applications/${appId}`);
    expect(removed.status).toBe(202);
    await eventually(
      () => Promise.resolve(calls.includes(`runtime.remove ${appId}`) || undefined),
      'the runtime to remove the application',
    );
    expect(calls).toContain('services.delete rabbitmq');
    expect(calls).toContain(`artifacts.removeApplication ${appId}`);
  });
});
