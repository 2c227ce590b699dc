/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-argument, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-call --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// POST /api/v1/infrastructure/apply: create-or-update, the response body, dry run, idempotence,
// immutability, health-check rules, schedules, domains, placeholders and jobs, on both stores.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { createTestApp, authHeaders, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore, fullDocument, FUTURE } from './helpers.js';

type Doc = ReturnType<typeof fullDocument>;
const spec = (doc: Doc) => doc.spec as Record<string, unknown>;
const application = (doc: Doc) => spec(doc).application as Record<string, unknown>;
const settings = (doc: Doc) => application(doc).settings as Record<string, unknown>;

describe.each(DIALECTS)('apply (%s)', (dialect) => {
  let t: TestApp;
  const clock = createManualClock('2026-11-23T10:00:00Z');
  let n = 0;
  let name: string;
  beforeAll(async () => {
    // One team applies dozens of applications here; the team memory quota has its own test
    // (memory-ceilings.test.ts) and would otherwise depend on how many ran before.
    t = await createTestApp(dialect, { clock, env: { BERTH_QUOTA_TEAM_MEMORY: '9999999Gi' } });
  });
  afterAll(() => t.close());
  beforeEach(() => {
    n += 1;
    name = `app${n}`;
  });
  const doc = () => fullDocument(t.user.team_id, name);

  it('creates everything and reports every field of the response body', async () => {
    const res = await apply(t, doc());
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(
      [
        'application_id',
        'application_name',
        'auto_deploy_enabled',
        'changes',
        'deployment_id',
        'dry_run',
        'errors',
        'needs_deployment',
        'resource_changes',
        'structured_changes',
        'success',
        'team',
      ].sort(),
    );
    expect(body).toMatchObject({
      success: true,
      application_name: name,
      team: 'acme',
      dry_run: false,
      errors: [],
      needs_deployment: true,
      auto_deploy_enabled: true,
    });
    expect(body.application_id).toEqual(expect.any(Number));
    expect(body.deployment_id).toEqual(expect.any(Number));
    expect(body.changes).toEqual([
      `Application '${name}' created`,
      `Domain '${name}.example.com' added`,
      "Secret 'APP_KEY' created",
      "Volume 'storage' created (10 GB at /var/www/html/storage)",
      "Service 'cache' (valkey) created",
      "Service 'worker' (worker) created",
      "Container service 'pdf' (gotenberg) created",
      "Managed database 'main-db' created (provisioning started)",
      "Object storage 'files' created (provisioning started)",
    ]);
    expect(body.structured_changes).toEqual({
      application: { action: 'created', name },
      domains: [{ action: 'created', domain: `${name}.example.com` }],
      secrets: [{ action: 'created', key: 'APP_KEY' }],
      volumes: [{ action: 'created', name: 'storage' }],
      services: [
        { action: 'created', name: 'cache', type: 'valkey' },
        { action: 'created', name: 'worker', type: 'worker' },
      ],
      container_services: [{ action: 'created', name: 'pdf', type: 'gotenberg' }],
      managed_databases: [{ action: 'created', name: 'main-db', type: 'pg' }],
      object_storage: [{ action: 'created', name: 'files' }],
    });

    const deployment = await t.ctx.db
      .selectFrom('deployments')
      .selectAll()
      .where('id', '=', body.deployment_id)
      .executeTakeFirstOrThrow();
    expect(deployment).toMatchObject({ application_id: body.application_id, status: 'pending' });
    const db = await t.ctx.db
      .selectFrom('managed_databases')
      .selectAll()
      .where('name', '=', 'main-db')
      .executeTakeFirstOrThrow();
    expect(db.state).toBe('pending');
    const storage = await t.ctx.db
      .selectFrom('object_storages')
      .selectAll()
      .where('name', '=', 'files')
      .executeTakeFirstOrThrow();
    expect(storage.state).toBe('pending');
    const jobs = await t.ctx.db.selectFrom('jobs').select(['type', 'key', 'payload']).orderBy('id').execute();
    expect(jobs).toEqual(
      expect.arrayContaining([
        {
          type: 'managed_database.provision',
          key: `managed_database.provision:${db.uuid}`,
          payload: JSON.stringify({ uuid: db.uuid }),
        },
        {
          type: 'object_storage.provision',
          key: `object_storage.provision:${storage.uuid}`,
          payload: JSON.stringify({ uuid: storage.uuid }),
        },
      ]),
    );
    // Secrets are sealed at rest; the hash compares without the plaintext.
    const secret = await t.ctx.db
      .selectFrom('secrets')
      .selectAll()
      .where('key', '=', 'APP_KEY')
      .executeTakeFirstOrThrow();
    expect(secret.value_encrypted).not.toContain('base64:abc');
    expect(t.ctx.secretBox.decrypt(secret.value_encrypted)).toBe('base64:abc');
  });

  it('reports everything unchanged on a second apply and deploys nothing', async () => {
    const first = await apply(t, doc());
    expect(first.statusCode).toBe(200);
    const before = await dumpStore(t.ctx.db);
    const second = await apply(t, doc());
    expect(second.statusCode).toBe(200);
    const body = second.json();
    expect(body.changes).toEqual([]);
    expect(body.needs_deployment).toBe(false);
    expect(body.deployment_id).toBeNull();
    expect(body.application_id).toBe(first.json().application_id);
    const actions = [
      body.structured_changes.application,
      ...body.structured_changes.domains,
      ...body.structured_changes.secrets,
      ...body.structured_changes.volumes,
      ...body.structured_changes.services,
      ...body.structured_changes.container_services,
      ...body.structured_changes.managed_databases,
      ...body.structured_changes.object_storage,
    ].map((c: { action: string }) => c.action);
    expect(new Set(actions)).toEqual(new Set(['unchanged']));
    expect(await dumpStore(t.ctx.db)).toEqual(before);
  });

  it('dry run validates, previews with [DRY RUN] Would …, and stores nothing', async () => {
    await t.ctx.identity.createUser({ email: 'owner@example.com', team: `fresh${n}` });
    const fresh = doc();
    (fresh.metadata as Record<string, unknown>).team = `fresh${n}`;
    const before = await dumpStore(t.ctx.db);
    const res = await apply(t, fresh, '?dry_run=true');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.dry_run).toBe(true);
    expect(body.deployment_id).toBeNull();
    expect(body.needs_deployment).toBe(true);
    expect(body.application_id).toBeNull();
    expect(body.changes.length).toBe(9);
    for (const line of body.changes as string[]) expect(line).toMatch(/^\[DRY RUN\] Would /);
    expect(body.changes).toContain(
      "[DRY RUN] Would create managed database 'main-db' (provisioning would start)",
    );
    expect(await dumpStore(t.ctx.db)).toEqual(before);

    const invalid = doc();
    settings(invalid).replicas = 0;
    const rejected = await apply(t, invalid, '?dry_run=true');
    expect(rejected.statusCode).toBe(422);
  });

  it('refuses character sets and collations the engine here does not offer, dry run included', async () => {
    const before = await dumpStore(t.ctx.db);
    const wrong = doc();
    (spec(wrong).managed_databases as unknown[]).push({
      name: 'maria',
      type: 'mysql',
      plan: '1x1xCPU-2GB-25GB',
      zone: 'de-fra1',
      logical_databases: [
        { name: 'ok', character_set: 'utf8mb4', collation: 'utf8mb4_unicode_ci' },
        { name: 'alien', character_set: 'klingon' },
        { name: 'mixed', character_set: 'latin1', collation: 'utf8mb4_unicode_ci' },
      ],
    });
    const pg = (spec(wrong).managed_databases as Array<Record<string, unknown>>)[0]!;
    pg.logical_databases = [
      { name: 'shop', character_set: 'UTF8', collation: 'C.UTF-8' },
      { name: 'german', collation: 'de_DE.UTF-8' },
    ];
    for (const query of ['?dry_run=true', '']) {
      const res = await apply(t, wrong, query);
      expect(res.statusCode).toBe(422);
      expect(Object.keys(res.json<{ errors: Record<string, string[]> }>().errors).sort()).toEqual([
        'spec.managed_databases.main-db.logical_databases.1.collation',
        'spec.managed_databases.maria.logical_databases.1.character_set',
        'spec.managed_databases.maria.logical_databases.2.collation',
      ]);
      expect(JSON.stringify(res.json())).toContain("locale 'de_DE.UTF-8' is not installed");
    }
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    pg.logical_databases = [{ name: 'shop', character_set: 'UTF8', collation: 'C.UTF-8' }];
    (spec(wrong).managed_databases as unknown[]).pop();
    expect((await apply(t, wrong, '?dry_run=true')).statusCode).toBe(200);
  });

  it('auto_deploy=false applies without a deployment; a change later deploys', async () => {
    const res = await apply(t, doc(), '?auto_deploy=false');
    expect(res.json()).toMatchObject({
      needs_deployment: true,
      auto_deploy_enabled: false,
      deployment_id: null,
    });
    const count = await t.ctx.db
      .selectFrom('deployments')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('application_id', '=', res.json().application_id)
      .executeTakeFirstOrThrow();
    expect(Number(count.n)).toBe(0);

    const changed = doc();
    settings(changed).replicas = 3;
    const again = await apply(t, changed);
    expect(again.json()).toMatchObject({
      needs_deployment: true,
      structured_changes: { application: { action: 'updated' } },
    });
    expect(again.json().changes).toEqual([`Application '${name}' updated (replicas)`]);
    expect(again.json().deployment_id).toEqual(expect.any(Number));
  });

  it('updates in place, never deletes what the document omits, and detects secret changes by hash', async () => {
    await apply(t, doc());
    const next = doc();
    spec(next).domains = [{ domain: `www.${name}.example.com` }];
    spec(next).secrets = [
      { key: 'APP_KEY', value: 'base64:new' },
      { key: 'OTHER', value: 1 },
    ];
    spec(next).volumes = [];
    spec(next).services = [{ name: 'cache', type: 'valkey', memory: '1Gi' }];
    delete spec(next).container_services;
    const res = await apply(t, next);
    const body = res.json();
    expect(body.structured_changes.domains).toEqual([
      { action: 'created', domain: `www.${name}.example.com` },
    ]);
    expect(body.structured_changes.secrets).toEqual([
      { action: 'updated', key: 'APP_KEY' },
      { action: 'created', key: 'OTHER' },
    ]);
    expect(body.structured_changes.services).toEqual([{ action: 'updated', name: 'cache', type: 'valkey' }]);
    expect(body.changes).toContain("Service 'cache' (valkey) updated (memory)");
    const view = (
      await t.request({ url: `/api/v1/applications/${body.application_id}`, headers: t.auth.platform })
    ).json().data;
    expect(view.domains.map((d: { domain: string }) => d.domain).sort()).toEqual([
      `${name}.example.com`,
      `www.${name}.example.com`,
    ]);
    expect(view.volumes).toHaveLength(1);
    expect(view.services.map((s: { name: string }) => s.name)).toEqual(['cache', 'worker']);
    expect(view.container_services).toHaveLength(1);
    expect(view.secrets).toEqual([{ key: 'APP_KEY' }, { key: 'OTHER' }]);
  });

  it('refuses a type change of the application (422) and stores nothing of that document', async () => {
    await apply(t, doc());
    const before = await dumpStore(t.ctx.db);
    const next = doc();
    application(next).type = 'nodejs';
    spec(next).domains = [{ domain: `new-${name}.example.com` }];
    const res = await apply(t, next);
    expect(res.statusCode).toBe(422);
    expect(res.json().message).toBe('YAML validation failed');
    expect(res.json().errors['spec.application.type'][0]).toContain('cannot change');
    expect(await dumpStore(t.ctx.db)).toEqual(before);
  });

  it('refuses a smaller volume_size of a service (422 at the field, naming both sizes); a larger one is an update', async () => {
    const sized = (cache: string, pdf: string) => {
      const next = doc();
      (spec(next).services as Array<Record<string, unknown>>)[0]!.volume_size = cache;
      (spec(next).container_services as Array<Record<string, unknown>>)[0]!.volume_size = pdf;
      return next;
    };
    expect((await apply(t, sized('2Gi', '2Gi'))).statusCode).toBe(200);
    const before = await dumpStore(t.ctx.db);
    const res = await apply(t, sized('1Gi', '1Gi'));
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual({
      'spec.services.cache.volume_size': [
        "Service 'cache': field 'volume_size' cannot shrink; it is 2Gi, the document says 1Gi. Keep it, or make a new service for a smaller volume.",
      ],
      'spec.container_services.pdf.volume_size': [
        "Container service 'pdf': field 'volume_size' cannot shrink; it is 2Gi, the document says 1Gi. Keep it, or make a new service for a smaller volume.",
      ],
    });
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    const grown = (await apply(t, sized('3Gi', '2Gi'))).json();
    expect(grown.structured_changes.services).toEqual([
      { action: 'updated', name: 'cache', type: 'valkey' },
      { action: 'unchanged', name: 'worker', type: 'worker' },
    ]);
  });

  it('refuses a smaller volume_size of a volume (422 at the field, naming both sizes); a larger one is an update', async () => {
    const sized = (size: number) => {
      const next = doc();
      spec(next).volumes = [{ name: 'storage', mount_path: '/var/www/html/storage', volume_size: size }];
      return next;
    };
    expect((await apply(t, sized(20))).statusCode).toBe(200);
    const before = await dumpStore(t.ctx.db);
    const res = await apply(t, sized(5));
    expect(res.statusCode).toBe(422);
    expect(res.json().errors).toEqual({
      'spec.volumes.storage.volume_size': [
        "Volume 'storage': field 'volume_size' cannot shrink; it is 20 GB, the document says 5 GB. Keep it, or make a new volume for a smaller size.",
      ],
    });
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    const grown = (await apply(t, sized(30))).json();
    expect(grown.structured_changes.volumes).toEqual([{ action: 'updated', name: 'storage' }]);
  });

  it('reports a plan or zone change of a managed database as needing action and keeps it pending', async () => {
    await apply(t, doc());
    const next = doc();
    const [database] = spec(next).managed_databases as Array<Record<string, unknown>>;
    database!.plan = '2x2xCPU-4GB-100GB';
    const [storage] = spec(next).object_storage as Array<Record<string, unknown>>;
    storage!.zone = 'us-1';
    const res = await apply(t, next);
    const body = res.json();
    expect(body.structured_changes.managed_databases).toEqual([
      { action: 'needs_action', name: 'main-db', type: 'pg' },
    ]);
    expect(body.structured_changes.object_storage).toEqual([{ action: 'needs_action', name: 'files' }]);
    expect(body.changes).toContain(
      "Managed database 'main-db' plan change from '1x1xCPU-2GB-25GB' to '2x2xCPU-4GB-100GB' needs action in the panel (not applied)",
    );
    expect(body.changes).toContain(
      "Object storage 'files' zone change from 'europe-1' to 'us-1' needs action in the panel (not applied)",
    );
    const row = await t.ctx.db
      .selectFrom('managed_databases')
      .selectAll()
      .where('name', '=', 'main-db')
      .executeTakeFirstOrThrow();
    expect(row.plan).toBe('1x1xCPU-2GB-25GB');
    expect(row.pending_plan).toBe('2x2xCPU-4GB-100GB');
    const list = (
      await t.request({
        url: `/api/v1/teams/${t.user.team_id}/managed-databases`,
        headers: t.auth.platform,
      })
    ).json().data;
    expect(list.find((d: { name: string }) => d.name === 'main-db').pending_changes).toEqual({
      plan: '2x2xCPU-4GB-100GB',
      zone: null,
    });
    // Back to the document as it was: nothing to do (the pending request stays for the panel).
    const back = await apply(t, doc());
    expect(back.json().structured_changes.managed_databases[0].action).toBe('unchanged');
  });

  it('accepts redis as a managed-database type and stores valkey', async () => {
    const res = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name, team: 'acme' },
      spec: {
        managed_databases: [{ name: `cache-${name}`, type: 'redis', plan: '1x1xCPU-2GB', zone: 'fi-hel1' }],
      },
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().structured_changes.managed_databases).toEqual([
      { action: 'created', name: `cache-${name}`, type: 'valkey' },
    ]);
    expect(res.json()).toMatchObject({ application_id: null, needs_deployment: false, deployment_id: null });
    expect(res.json().structured_changes.application).toBeNull();
    const row = await t.ctx.db
      .selectFrom('managed_databases')
      .select('type')
      .where('name', '=', `cache-${name}`)
      .executeTakeFirstOrThrow();
    expect(row.type).toBe('valkey');
    // No application was created by a document that only holds team resources.
    const apps = await t.ctx.db.selectFrom('applications').select('id').where('name', '=', name).execute();
    expect(apps).toEqual([]);
  });

  it('health checks: omitted keeps, new gets the default, false disables, path with false or empty is refused', async () => {
    const d = doc();
    delete settings(d).health_check_path;
    const created = (await apply(t, d)).json();
    const view = async () =>
      (
        await t.request({
          url: `/api/v1/applications/${created.application_id}`,
          headers: t.auth.platform,
        })
      ).json().data;
    expect((await view()).health_check).toEqual({ enabled: true, path: '/', status: 'unknown' });

    const custom = doc();
    settings(custom).health_check_path = '/ping';
    await apply(t, custom);
    expect((await view()).health_check.path).toBe('/ping');

    // (a) omitted: unchanged.
    const omitted = (await apply(t, d)).json();
    expect(omitted.structured_changes.application.action).toBe('unchanged');
    expect((await view()).health_check.path).toBe('/ping');

    const disabled = doc();
    delete settings(disabled).health_check_path;
    settings(disabled).health_check_enabled = false;
    const off = (await apply(t, disabled)).json();
    expect(off.changes).toEqual([`Application '${name}' updated (health_check_enabled)`]);
    expect((await view()).health_check).toEqual({ enabled: false, path: '/ping', status: 'not monitored' });

    // (b) false together with a path.
    const both = doc();
    settings(both).health_check_enabled = false;
    const refused = await apply(t, both);
    expect(refused.statusCode).toBe(422);
    expect(refused.json().errors['spec.application.settings.health_check_path'][0]).toContain(
      'health_check_enabled: false',
    );

    // (c) empty or relative path.
    for (const bad of ['', 'health', null]) {
      const wrong = doc();
      settings(wrong).health_check_path = bad;
      const res = await apply(t, wrong);
      expect(res.statusCode, String(bad)).toBe(422);
      expect(res.json().errors['spec.application.settings.health_check_path'][0]).toMatch(
        /path starting with '\/'/,
      );
    }
  });

  it('scheduled deletion: set, change, refuse past values, clear when omitted', async () => {
    const d = doc();
    settings(d).scheduled_deletion_at = '2029-06-01T12:00:00+02:00';
    const created = (await apply(t, d)).json();
    const row = () =>
      t.ctx.db
        .selectFrom('applications')
        .select('scheduled_deletion_at')
        .where('id', '=', created.application_id)
        .executeTakeFirstOrThrow();
    expect((await row()).scheduled_deletion_at).toBe('2029-06-01T10:00:00.000Z');
    expect(created.changes).toContain(
      `Application '${name}' scheduled for deletion at 2029-06-01T10:00:00.000Z`,
    );

    settings(d).scheduled_deletion_at = FUTURE;
    expect((await apply(t, d)).json().changes).toEqual([
      `Application '${name}' scheduled for deletion at ${FUTURE}`,
    ]);

    settings(d).scheduled_deletion_at = '2020-01-01T00:00:00Z';
    const past = await apply(t, d);
    expect(past.statusCode).toBe(422);
    expect(past.json().errors['spec.application.settings.scheduled_deletion_at'][0]).toContain('future');

    settings(d).scheduled_deletion_at = 'next tuesday';
    expect((await apply(t, d)).json().errors['spec.application.settings.scheduled_deletion_at'][0]).toContain(
      'ISO 8601',
    );

    // A document without the application block does not touch the schedule.
    settings(d).scheduled_deletion_at = FUTURE;
    await apply(t, d);
    const secretsOnly = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name, team: 'acme' },
      spec: { secrets: [{ key: 'EXTRA', value: 'x' }] },
    });
    expect(secretsOnly.json().structured_changes.application).toEqual({ action: 'unchanged', name });
    expect((await row()).scheduled_deletion_at).toBe(FUTURE);

    delete settings(d).scheduled_deletion_at;
    const cleared = (await apply(t, d)).json();
    expect(cleared.changes).toEqual([`Application '${name}' deletion schedule cleared`]);
    expect((await row()).scheduled_deletion_at).toBeNull();
  });

  it('keeps domains unique across the platform, also across teams', async () => {
    await apply(t, doc());
    const other = await t.ctx.identity.createUser({ email: `other${n}@example.com`, team: `other${n}` });
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: { ...authHeaders(other).platform, 'content-type': 'application/yaml' },
      payload: `apiVersion: v1\nkind: Infrastructure\nmetadata: {name: x, team: other${n}}\nspec:\n  application: {type: nodejs}\n  domains:\n    - domain: ${name.toUpperCase()}.example.com\n`,
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors['spec.domains.0.domain'][0]).toContain('already used by another application');
  });

  it('answers 403 for a team of someone else and 404 for no team, 400 for unreadable YAML', async () => {
    const stranger = await t.ctx.identity.createUser({ email: `s${n}@example.com`, team: `solo${n}` });
    const d = doc();
    (d.metadata as Record<string, unknown>).team = `solo${n}`;
    expect((await apply(t, d)).statusCode).toBe(403);
    expect(stranger.team).toBe(`solo${n}`);
    (d.metadata as Record<string, unknown>).team = 'no-such-team';
    const missing = await apply(t, d);
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ message: expect.any(String) });

    const broken = await apply(t, 'apiVersion: v1\nkind: [unclosed\n');
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toEqual({
      success: false,
      message: expect.stringMatching(/line \d+, column \d+/),
      errors: null,
    });
    const two = await apply(t, 'a: 1\n---\nb: 2\n');
    expect(two.statusCode).toBe(400);
    expect(two.json().message).toContain('2 YAML documents');
    const list = await apply(t, '- a\n- b\n');
    expect(list.statusCode).toBe(400);
    expect(list.json().message).toContain('mapping');
    const noAuth = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      payload: 'a: 1',
      headers: { 'content-type': 'application/yaml' },
    });
    expect(noAuth.statusCode).toBe(401);
  });

  it('takes the export placeholders: keeps secrets, refuses them for values it does not hold', async () => {
    await apply(t, doc());
    const d = doc();
    spec(d).secrets = [{ key: 'APP_KEY', value: '${SECRET_APP_KEY}' }];
    const [database] = spec(d).managed_databases as Array<Record<string, unknown>>;
    database!.password = '${DB_MAIN_DB_PASSWORD}';
    const kept = (await apply(t, d)).json();
    expect(kept.structured_changes.secrets).toEqual([{ action: 'unchanged', key: 'APP_KEY' }]);
    const secret = await t.ctx.db
      .selectFrom('secrets')
      .innerJoin('applications', 'applications.id', 'secrets.application_id')
      .select('value_encrypted')
      .where('applications.name', '=', name)
      .executeTakeFirstOrThrow();
    expect(t.ctx.secretBox.decrypt(secret.value_encrypted)).toBe('base64:abc');

    spec(d).secrets = [{ key: 'NEW_ONE', value: '${SECRET_NEW_ONE}' }];
    database!.password = 'hunter2';
    const res = await apply(t, d);
    expect(res.statusCode).toBe(422);
    expect(Object.keys(res.json().errors)).toEqual(['spec.managed_databases.main-db.password']);
    database!.password = '${DB_MAIN_DB_PASSWORD}';
    const res2 = await apply(t, d);
    expect(res2.statusCode).toBe(422);
    expect(res2.json().errors['spec.secrets.0.value'][0]).toContain('${SECRET_NEW_ONE}');
  });

  it('merges database users, logical databases, buckets and storage users, and provisions again', async () => {
    const team = `merge${n}`;
    await t.ctx.identity.createUser({ email: 'owner@example.com', team });
    const teamDoc = (databases: unknown[], storages: unknown[]) => ({
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name, team },
      spec: { managed_databases: databases, object_storage: storages },
    });
    const db = { name: 'db', type: 'mysql', plan: '1x1xCPU-2GB-25GB', zone: 'de-fra1' };
    await apply(
      t,
      teamDoc([{ ...db, users: [{ username: 'a' }] }], [{ name: 'st', zone: 'us-1', buckets: ['one-b'] }]),
    );
    await t.ctx.db.updateTable('jobs').set({ state: 'done' }).execute();
    const res = await apply(
      t,
      teamDoc(
        [
          {
            ...db,
            users: [{ username: 'b', authentication: 'mysql_native_password' }],
            logical_databases: [{ name: 'shop' }],
          },
        ],
        [{ name: 'st', zone: 'us-1', buckets: ['two-b'], users: [{ username: 'u', policies: ['read'] }] }],
      ),
    );
    expect(res.json().changes).toEqual([
      "Managed database 'db' updated (users, logical_databases)",
      "Object storage 'st' updated (buckets, users)",
    ]);
    const list = (
      await t.request({ url: `/api/v1/teams/${team}/managed-databases`, headers: t.auth.platform })
    ).json().data;
    expect(list[0].users).toEqual([
      { username: 'a' },
      { username: 'b', authentication: 'mysql_native_password' },
    ]);
    expect(list[0].logical_databases).toEqual([{ name: 'shop' }]);
    const storages = (
      await t.request({ url: `/api/v1/teams/${team}/object-storage`, headers: t.auth.platform })
    ).json().data;
    expect(storages[0]).toMatchObject({
      buckets: ['one-b', 'two-b'],
      users: [{ username: 'u', policies: ['read'] }],
    });
    const queued = await t.ctx.db.selectFrom('jobs').select('key').where('state', '=', 'queued').execute();
    expect(queued.map((j) => j.key).sort()).toEqual(
      [`managed_database.provision:${list[0].uuid}`, `object_storage.provision:${storages[0].uuid}`].sort(),
    );
  });

  it('updates volumes and container services, previews updates in a dry run', async () => {
    await apply(t, doc());
    const next = doc();
    spec(next).volumes = [{ name: 'storage', mount_path: '/srv/storage', volume_size: 20 }];
    spec(next).container_services = [{ name: 'pdf', type: 'gotenberg', settings: { LOG: 'debug' } }];
    const dry = (await apply(t, next, '?dry_run=true')).json();
    expect(dry.changes).toEqual([
      "[DRY RUN] Would update volume 'storage' (mount_path, volume_size)",
      "[DRY RUN] Would update container service 'pdf' (gotenberg) (settings)",
    ]);
    const real = (await apply(t, next)).json();
    expect(real.structured_changes.volumes).toEqual([{ action: 'updated', name: 'storage' }]);
    expect(real.structured_changes.container_services).toEqual([
      { action: 'updated', name: 'pdf', type: 'gotenberg' },
    ]);
    expect(real.needs_deployment).toBe(true);
  });

  it('resource_changes: every entry with its kind, action and the paths of the fields that change, dry run alike', async () => {
    const entry = (resource: string, entryName: string, type: string | null, action = 'created') => ({
      resource,
      name: entryName,
      type,
      action,
      fields: [],
      pending: [],
    });
    // A team of its own: the team's managed databases and storages of earlier tests would be unchanged.
    await t.ctx.identity.createUser({ email: 'owner@example.com', team: `changes${n}` });
    const teamDoc = () => {
      const d = doc();
      (d.metadata as Record<string, unknown>).team = `changes${n}`;
      return d;
    };
    const created = (await apply(t, teamDoc())).json();
    expect(created.resource_changes).toEqual([
      entry('application', name, 'laravel'),
      entry('domain', `${name}.example.com`, null),
      entry('secret', 'APP_KEY', null),
      entry('volume', 'storage', null),
      entry('service', 'cache', 'valkey'),
      entry('service', 'worker', 'worker'),
      entry('container_service', 'pdf', 'gotenberg'),
      entry('managed_database', 'main-db', 'pg'),
      entry('object_storage', 'files', null),
    ]);

    const next = teamDoc();
    settings(next).replicas = 3;
    (application(next).repository as Record<string, unknown>).branch = 'release';
    (application(next).commands as Record<string, unknown>).build = ['composer install --no-dev'];
    spec(next).secrets = [{ key: 'APP_KEY', value: 'base64:new' }];
    (spec(next).services as Array<Record<string, unknown>>)[0]!.memory = '1Gi';
    spec(next).container_services = [
      {
        name: 'pdf',
        type: 'gotenberg',
        version: '8',
        memory: '1Gi',
        settings: { LOG: 'debug', MODE: 'fast' },
      },
    ];
    const [database] = spec(next).managed_databases as Array<Record<string, unknown>>;
    database!.plan = '2x2xCPU-4GB-100GB';
    database!.users = [{ username: 'reporter' }];
    const [storage] = spec(next).object_storage as Array<Record<string, unknown>>;
    storage!.zone = 'us-1';

    const before = await dumpStore(t.ctx.db);
    const dry = (await apply(t, next, '?dry_run=true')).json();
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    const real = (await apply(t, next)).json();
    const expected = [
      {
        ...entry('application', name, 'laravel', 'updated'),
        fields: ['repository.branch', 'commands.build', 'settings.replicas'],
      },
      entry('domain', `${name}.example.com`, null, 'unchanged'),
      { ...entry('secret', 'APP_KEY', null, 'updated'), fields: ['value'] },
      entry('volume', 'storage', null, 'unchanged'),
      { ...entry('service', 'cache', 'valkey', 'updated'), fields: ['memory'] },
      entry('service', 'worker', 'worker', 'unchanged'),
      {
        ...entry('container_service', 'pdf', 'gotenberg', 'updated'),
        fields: ['settings.LOG', 'settings.MODE'],
      },
      {
        ...entry('managed_database', 'main-db', 'pg', 'needs_action'),
        fields: ['users'],
        pending: [{ field: 'plan', from: '1x1xCPU-2GB-25GB', to: '2x2xCPU-4GB-100GB' }],
      },
      {
        ...entry('object_storage', 'files', null, 'needs_action'),
        pending: [{ field: 'zone', from: 'europe-1', to: 'us-1' }],
      },
    ];
    expect(real.resource_changes).toEqual(expected);
    expect(dry.resource_changes).toEqual(expected);
    // The spec's fields keep their shape beside it.
    expect(real.structured_changes.application).toEqual({ action: 'updated', name });
    expect(real.changes).toContain(`Application '${name}' updated (repository, commands, replicas)`);

    // Applied again: nothing changes; what waits for the panel is reported again, with nothing applied.
    const again = (await apply(t, next)).json();
    expect(again.resource_changes).toEqual(
      expected.map((e) =>
        e.action === 'needs_action' ? { ...e, fields: [] } : { ...e, action: 'unchanged', fields: [] },
      ),
    );
  });

  it('refuses attached blocks for an application that does not exist', async () => {
    const res = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name, team: 'acme' },
      spec: { secrets: [{ key: 'A', value: 'b' }] },
    });
    expect(res.statusCode).toBe(422);
    expect(res.json().errors['spec.application'][0]).toContain('does not exist');
  });

  it('refuses storage policies that provisioning would refuse, in the same 422 as the rest', async () => {
    const d = doc();
    const [storage] = spec(d).object_storage as Array<Record<string, unknown>>;
    storage!.users = [{ username: 'u', policies: ['read', 'fly'] }];
    settings(d).replicas = 0;
    const res = await apply(t, d);
    expect(res.statusCode).toBe(422);
    expect(Object.keys(res.json().errors).sort()).toEqual([
      'spec.application.settings.replicas',
      'spec.object_storage.files.users.0.policies',
    ]);
    expect(res.json().errors['spec.object_storage.files.users.0.policies'][0]).toMatch(
      /^Object storage 'files': /,
    );
  });

  it('takes the YAML media types', async () => {
    for (const type of ['application/x-yaml', 'text/yaml', 'text/plain']) {
      const res = await t.request({
        method: 'POST',
        url: '/api/v1/infrastructure/apply?dry_run=true',
        headers: { ...t.auth.platform, 'content-type': type },
        payload: `apiVersion: v1\nkind: Infrastructure\nmetadata: {name: ${name}, team: acme}\nspec: {}\n`,
      });
      expect(res.statusCode, type).toBe(200);
    }
  });

  it('accepts a JSON body (JSON is YAML) as clients that always send JSON do', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?dry_run=1',
      headers: { ...t.auth.platform, 'content-type': 'application/json' },
      payload: JSON.stringify(doc()),
    });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().dry_run).toBe(true);
  });
});
