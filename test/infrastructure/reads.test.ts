/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// What a client reads after an apply: applications, one application, deployments, team resources,
// and the JSON Schema; with the 401/403/404 rules.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from './helpers.js';

describe.each(DIALECTS)('reads (%s)', (dialect) => {
  let t: TestApp;
  let appId: number;
  let strangerHeaders: Record<string, string>;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    const res = await apply(t, fullDocument('acme', 'shop'));
    appId = res.json().application_id;
    const stranger = await t.ctx.identity.createUser({ email: 'stranger@example.com', team: 'elsewhere' });
    strangerHeaders = authHeaders(stranger).platform;
  });
  afterAll(() => t.close());

  const get = (url: string, headers = t.auth.platform) => t.request({ url, headers });

  it('lists applications of the caller’s teams, filtered by team', async () => {
    const all = (await get('/api/v1/applications')).json().data;
    expect(all.map((a: { name: string }) => a.name)).toEqual(['shop']);
    expect(all[0]).toMatchObject({
      id: appId,
      type: 'laravel',
      health_check: { enabled: true, path: '/health', status: 'unknown' },
    });
    expect((await get('/api/v1/applications?team=acme')).json().data).toHaveLength(1);
    expect((await get('/api/v1/applications?team=elsewhere')).statusCode).toBe(403);
    expect((await get('/api/v1/applications?team=none')).statusCode).toBe(404);
    expect((await get('/api/v1/applications', strangerHeaders)).json().data).toEqual([]);
  });

  it('shows one application with everything attached and no secret values', async () => {
    const res = await get(`/api/v1/applications/${appId}`);
    expect(res.statusCode).toBe(200);
    const app = res.json().data;
    expect(app).toMatchObject({
      id: appId,
      name: 'shop',
      type: 'laravel',
      settings: { health_check_path: '/health', health_check_enabled: true, replicas: 2, memory: '1024Mi' },
      health_check: { enabled: true, path: '/health', status: 'unknown' },
      scheduled_deletion_at: null,
      domains: [{ domain: 'shop.example.com' }],
      secrets: [{ key: 'APP_KEY' }],
      volumes: [{ name: 'storage', mount_path: '/var/www/html/storage', volume_size: 10 }],
      latest_deployment: { status: 'pending', application_id: appId },
    });
    expect(app.services.map((s: { name: string }) => s.name)).toEqual(['cache', 'worker']);
    expect(app.container_services[0]).toMatchObject({ name: 'pdf', settings: { LOG: 'info' } });
    expect(res.body).not.toContain('base64:abc');
    expect((await get(`/api/v1/applications/${appId}`, strangerHeaders)).statusCode).toBe(403);
    expect((await get('/api/v1/applications/99999')).statusCode).toBe(404);
    expect((await get(`/api/v1/applications/${appId}`, {})).statusCode).toBe(401);
  });

  it('lists deployments newest first', async () => {
    const doc = fullDocument('acme', 'shop');
    (
      ((doc.spec as Record<string, unknown>).application as Record<string, unknown>).settings as Record<
        string,
        unknown
      >
    ).replicas = 4;
    await apply(t, doc);
    const list = (await get(`/api/v1/applications/${appId}/deployments`)).json().data;
    expect(list).toHaveLength(2);
    expect(list[0].id).toBeGreaterThan(list[1].id);
    expect(list[0]).toMatchObject({ application_id: appId, status: 'pending', reason: 'apply' });
    expect((await get(`/api/v1/applications/${appId}/deployments?per_page=1`)).json().data).toHaveLength(1);
    expect((await get(`/api/v1/applications/${appId}/deployments`, strangerHeaders)).statusCode).toBe(403);
  });

  it('lists the team’s managed databases and object storage with their states', async () => {
    const dbs = (await get('/api/v1/teams/acme/managed-databases')).json().data;
    expect(dbs).toEqual([
      expect.objectContaining({
        name: 'main-db',
        type: 'pg',
        plan: '1x1xCPU-2GB-25GB',
        zone: 'de-fra1',
        state: 'pending',
        pending_changes: null,
      }),
    ]);
    expect(dbs[0].uuid).toMatch(/^[0-9a-f-]{36}$/);
    const storages = (await get(`/api/v1/teams/${t.user.team_id}/object-storage`)).json().data;
    expect(storages).toEqual([
      expect.objectContaining({
        name: 'files',
        zone: 'europe-1',
        state: 'pending',
        buckets: ['shop-uploads'],
      }),
    ]);
    expect((await get('/api/v1/teams/acme/managed-databases', strangerHeaders)).statusCode).toBe(403);
    expect((await get('/api/v1/teams/nope/object-storage')).statusCode).toBe(404);
  });

  it('publishes the JSON Schema of the document without a token', async () => {
    const res = await get('/schemas/infrastructure.json', {});
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('application/schema+json');
    const schema = res.json();
    expect(schema.properties.kind).toEqual({ const: 'Infrastructure' });
    expect(schema.properties.spec.properties.managed_databases.items.properties.zone.enum).toContain(
      'de-fra1',
    );
    expect(schema.properties.spec.properties.object_storage.items.properties.zone.enum).toContain('europe-1');
  });
});
