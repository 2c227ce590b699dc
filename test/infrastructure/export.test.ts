/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-argument --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Exports (team and application) and the round trip: for random valid documents apply → export →
// apply reports no change and an export recreates the same configuration in an empty team; for
// random invalid documents nothing is stored and every invalid entry is reported.
import fc from 'fast-check';
import { parse } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MANAGED_DATABASE_PLANS,
  MANAGED_DATABASE_ZONES,
  OBJECT_STORAGE_REGIONS,
} from '../../src/domain/plans.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore, fullDocument } from './helpers.js';

type Obj = Record<string, unknown>;

async function exportTeam(t: TestApp, team: string | number) {
  return t.request({ url: `/api/v1/teams/${team}/export-yaml`, headers: t.auth.platform });
}
async function exportApp(t: TestApp, id: number) {
  return t.request({ url: `/api/v1/applications/${id}/export-yaml`, headers: t.auth.platform });
}

type Change = { action: string };
interface ApplyBody {
  structured_changes: { application: Change | null } & Record<
    | 'domains'
    | 'secrets'
    | 'volumes'
    | 'services'
    | 'container_services'
    | 'managed_databases'
    | 'object_storage',
    Change[]
  >;
}

function allActions(body: ApplyBody): string[] {
  const s = body.structured_changes;
  return [
    ...(s.application ? [s.application] : []),
    ...s.domains,
    ...s.secrets,
    ...s.volumes,
    ...s.services,
    ...s.container_services,
    ...s.managed_databases,
    ...s.object_storage,
  ].map((c) => c.action);
}

// ---- generators of valid documents ----------------------------------------------------------
const label = fc.stringMatching(/^[a-z][a-z0-9]{0,6}$/);
const uniqueNames = (max: number) => fc.uniqueArray(label, { maxLength: max });
const size = fc
  .tuple(fc.integer({ min: 1, max: 4096 }), fc.constantFrom('Mi', 'Gi'))
  .map(([n, u]) => `${n}${u}`);
const opt = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const text = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ._:/-]{0,19}$/);

function withoutUndefined(obj: Obj): Obj {
  return JSON.parse(JSON.stringify(obj)) as Obj;
}

const applicationArb = fc
  .record({
    type: fc.constantFrom('laravel', 'nodejs', 'wordpress'),
    version: opt(fc.constantFrom('1', '12', '6.5')),
    label: opt(text),
    tags: opt(fc.uniqueArray(label, { maxLength: 3 })),
    repository: opt(fc.record({ url: fc.constant('https://github.com/acme/x'), branch: label })),
    runtime: opt(
      fc.record({ php_version: fc.constantFrom('8.2'), nodejs_version: fc.constantFrom('20', '22', '24') }),
    ),
    commands: opt(fc.record({ build: fc.array(text, { maxLength: 2 }), start: opt(text) })),
    health: fc.constantFrom<'omit' | 'path' | 'off'>('omit', 'path', 'off'),
    healthPath: fc.stringMatching(/^\/[a-z]{0,8}$/),
    replicas: opt(fc.integer({ min: 1, max: 100 })),
    memory: opt(size),
    scheduler_enabled: opt(fc.boolean()),
    php: opt(
      fc.record({
        // Extensions this host's PHP has: apply refuses any other (nothing unprovisionable is accepted).
        extensions: fc.uniqueArray(fc.constantFrom('intl', 'gd', 'mbstring', 'redis', 'zip'), {
          maxLength: 2,
        }),
        // Directives this host's PHP knows: apply refuses any other.
        settings: fc.uniqueArray(
          fc.constantFrom('memory_limit=256M', 'max_execution_time=60', 'upload_max_filesize=20M'),
          { maxLength: 2 },
        ),
      }),
    ),
    deletion: opt(fc.integer({ min: 1, max: 1000 }).map((d) => new Date(Date.UTC(2031, 0, d)).toISOString())),
  })
  .map((a) => {
    const settings: Obj = {
      replicas: a.replicas,
      memory: a.memory,
      scheduler_enabled: a.scheduler_enabled,
      scheduled_deletion_at: a.deletion,
    };
    if (a.health === 'path') settings.health_check_path = a.healthPath;
    if (a.health === 'off') settings.health_check_enabled = false;
    return withoutUndefined({
      type: a.type,
      version: a.version,
      label: a.label,
      tags: a.tags,
      repository: a.repository,
      runtime: a.runtime,
      commands: a.commands,
      settings,
      php: a.php,
    });
  });

const serviceArb = (name: string) =>
  fc.oneof(
    fc.record({
      name: fc.constant(name),
      type: fc.constantFrom('redis', 'valkey', 'rabbitmq', 'minio'),
      version: opt(fc.constantFrom('7', 'latest')),
      memory: opt(size),
    }),
    fc.record({
      name: fc.constant(name),
      type: fc.constant('postgresql'),
      settings: fc.record({
        database: label,
        // Extensions must be installable here (a 422 otherwise): contrib's, which Debian ships.
        extensions: fc.uniqueArray(fc.constantFrom('citext', 'pg_trgm', 'hstore', 'uuid-ossp'), {
          maxLength: 2,
        }),
      }),
    }),
    fc.record({
      name: fc.constant(name),
      type: fc.constant('sftp'),
      settings: fc.record({ username: label, password: text }),
    }),
    fc.record({
      name: fc.constant(name),
      type: fc.constant('worker'),
      command: text,
      volume_size: opt(fc.integer({ min: 1, max: 99 }).map((n) => `${n}Gi`)),
    }),
  );

const databaseArb = (name: string) =>
  fc.constantFrom('mysql', 'pg', 'valkey', 'redis').chain((type) => {
    const engine = type === 'redis' ? 'valkey' : type;
    return fc.record({
      name: fc.constant(name),
      type: fc.constant(type),
      plan: fc.constantFrom(...MANAGED_DATABASE_PLANS[engine]),
      zone: fc.constantFrom(...MANAGED_DATABASE_ZONES),
      users: opt(
        fc
          .uniqueArray(label, { maxLength: 2 })
          .map((names) =>
            names.map((username) =>
              engine === 'pg' ? { username, authentication: 'scram-sha-256' } : { username },
            ),
          ),
      ),
      ...(engine === 'valkey'
        ? {}
        : {
            logical_databases: opt(
              fc.uniqueArray(label, { maxLength: 2 }).map((names) => names.map((n) => ({ name: n }))),
            ),
          }),
    });
  });

const storageArb = (name: string) =>
  fc.record({
    name: fc.constant(name),
    zone: fc.constantFrom(...OBJECT_STORAGE_REGIONS),
    buckets: opt(fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9]{2,8}$/), { maxLength: 2 })),
    users: opt(
      fc
        .uniqueArray(label, { maxLength: 2 })
        .map((names) => names.map((username) => ({ username, policies: [] }))),
    ),
  });

const arrayOf = <T>(names: fc.Arbitrary<string[]>, entry: (name: string) => fc.Arbitrary<T>) =>
  names.chain((list) => (list.length === 0 ? fc.constant([] as T[]) : fc.tuple(...list.map(entry))));

const documentArb = fc.record({
  application: applicationArb,
  domains: uniqueNames(3),
  secrets: fc.uniqueArray(fc.record({ key: fc.stringMatching(/^[A-Z][A-Z0-9_]{0,8}$/), value: text }), {
    selector: (s) => s.key,
    maxLength: 3,
  }),
  volumes: arrayOf(uniqueNames(2), (name) =>
    fc.record({
      name: fc.constant(name),
      mount_path: label.map((l) => `/data/${l}`),
      volume_size: fc.integer({ min: 1, max: 100 }),
    }),
  ),
  services: arrayOf(uniqueNames(3), serviceArb),
  container_services: arrayOf(uniqueNames(2), (name) =>
    fc.record({
      name: fc.constant(name),
      type: fc.constantFrom('gotenberg', 'chrome-headless', 'clickhouse', 'meilisearch'),
      memory: opt(size),
      settings: opt(fc.dictionary(fc.stringMatching(/^[A-Z][A-Z_]{0,6}$/), text, { maxKeys: 2 })),
    }),
  ),
  managed_databases: arrayOf(uniqueNames(3), databaseArb),
  object_storage: arrayOf(uniqueNames(2), storageArb),
});

describe.each(DIALECTS)('export (%s)', (dialect) => {
  let t: TestApp;
  let run = 0;
  beforeAll(async () => {
    // The generated documents span the sizes the format takes (up to 4096Gi × 100 replicas): ceilings
    // high enough for them; the operator's ceilings are tested in memory-ceilings.test.ts.
    t = await createTestApp(dialect, {
      env: { BERTH_MAX_APP_MEMORY: '4096Gi', BERTH_QUOTA_TEAM_MEMORY: '9999999Gi' },
    });
  });
  afterAll(() => t.close());

  async function newTeam(): Promise<string> {
    run += 1;
    const team = `t${run}`;
    await t.ctx.identity.createUser({ email: 'owner@example.com', team });
    return team;
  }

  it('exports the team with placeholders and no credentials, as application/yaml', async () => {
    const team = await newTeam();
    const doc = fullDocument(team, 'shop');
    const [database] = (doc.spec as Obj).managed_databases as Obj[];
    database!.name = 'main_db-2'.replace('_', '-');
    const res = await apply(t, doc);
    expect(res.statusCode, res.body).toBe(200);
    const exported = await exportTeam(t, (await t.ctx.identity.requireTeam(t.user.user_id, team)).id);
    expect(exported.statusCode).toBe(200);
    expect(exported.headers['content-type']).toContain('application/yaml');
    expect(exported.body).toContain('password: ${DB_MAIN_DB_2_PASSWORD}');
    expect(exported.body).toContain('secret_key: ${STORAGE_FILES_SECRET_KEY}');
    const body = parse(exported.body) as Obj;
    expect(body).toMatchObject({ apiVersion: 'v1', kind: 'Infrastructure' });
    expect(Object.keys(body.spec as Obj)).toEqual(['managed_databases', 'object_storage']);
    expect(((body.spec as Obj).managed_databases as Obj[])[0]).toEqual({
      name: 'main-db-2',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
      zone: 'de-fra1',
      password: '${DB_MAIN_DB_2_PASSWORD}',
      users: [{ username: 'app', authentication: 'scram-sha-256' }],
      logical_databases: [{ name: 'shop' }],
    });
    // Applying the export changes nothing.
    const again = (await apply(t, exported.body)).json();
    expect(again.changes).toEqual([]);
    expect(new Set(allActions(again))).toEqual(new Set(['unchanged']));

    const json = await t.request({
      url: `/api/v1/teams/${team}/export-yaml`,
      headers: { ...t.auth.platform, accept: 'application/json' },
    });
    expect(json.statusCode).toBe(406);
    expect(
      (await t.request({ url: '/api/v1/teams/nope/export-yaml', headers: t.auth.platform })).statusCode,
    ).toBe(404);
    const stranger = await t.ctx.identity.createUser({ email: `x${run}@example.com`, team: `x${run}` });
    expect(
      (await t.request({ url: `/api/v1/teams/${stranger.team_id}/export-yaml`, headers: t.auth.platform }))
        .statusCode,
    ).toBe(403);
  });

  it('exports one application with secrets as placeholders and disabled health checks', async () => {
    const team = await newTeam();
    const doc = fullDocument(team, 'blog');
    const app = (doc.spec as Obj).application as Obj;
    app.settings = { health_check_enabled: false };
    (doc.spec as Obj).services = [
      { name: 'files', type: 'sftp', settings: { username: 'u', password: 'pw-secret' } },
    ];
    const applied = (await apply(t, doc)).json();
    const exported = await exportApp(t, applied.application_id);
    expect(exported.statusCode).toBe(200);
    expect(exported.body).not.toContain('base64:abc');
    expect(exported.body).not.toContain('pw-secret');
    const body = parse(exported.body) as Obj;
    const spec = body.spec as Obj;
    expect((spec.application as Obj).settings).toEqual({ health_check_enabled: false });
    expect(spec.secrets).toEqual([{ key: 'APP_KEY', value: '${SECRET_APP_KEY}' }]);
    expect(spec.services).toEqual([
      { name: 'files', type: 'sftp', settings: { username: 'u', password: '${SERVICE_FILES_PASSWORD}' } },
    ]);
    const again = (await apply(t, exported.body)).json();
    expect(again.changes).toEqual([]);
    expect(again.needs_deployment).toBe(false);
  });

  it('round trip: apply → export → apply reports no change; the export recreates the team elsewhere', async () => {
    await fc.assert(
      fc.asyncProperty(documentArb, async (generated) => {
        const team = await newTeam();
        const doc = {
          apiVersion: 'v1',
          kind: 'Infrastructure',
          metadata: { name: 'app', team },
          spec: withoutUndefined({
            ...generated,
            domains: generated.domains.map((d) => ({ domain: `${d}.${team}.example.com` })),
          }),
        };
        const first = await apply(t, doc);
        expect(first.statusCode, first.body).toBe(200);
        const appId = first.json().application_id as number;

        const appExport = await exportApp(t, appId);
        const appAgain = (await apply(t, appExport.body)).json();
        expect(appAgain.changes, appExport.body).toEqual([]);
        expect(new Set(allActions(appAgain))).toEqual(new Set(['unchanged']));
        expect(appAgain.needs_deployment).toBe(false);

        // The application export recreates the same application in an empty team (domains are
        // unique on the platform and credentials are not exported: those are put back by hand).
        const copyTeam = await newTeam();
        const copy = parse(appExport.body) as Obj;
        (copy.metadata as Obj).team = copyTeam;
        const copySpec = copy.spec as Obj;
        delete copySpec.domains;
        copySpec.secrets = generated.secrets;
        for (const service of (copySpec.services as Obj[] | undefined) ?? []) {
          const original = (generated.services as Obj[]).find((s) => s.name === service.name);
          if (service.type === 'sftp') service.settings = (original as Obj).settings;
        }
        const copied = await apply(t, copy);
        expect(copied.statusCode, copied.body).toBe(200);
        // Compared on what the API shows of each application, so a field the export drops is caught.
        const view = async (id: number) => {
          const data = (
            await t.request({ url: `/api/v1/applications/${id}`, headers: t.auth.platform })
          ).json().data as Obj;
          for (const key of ['id', 'team_id', 'created_at', 'updated_at', 'domains', 'latest_deployment'])
            delete data[key];
          return data;
        };
        expect(await view(copied.json().application_id as number)).toEqual(await view(appId));

        const teamExport = await exportTeam(t, team);
        const teamAgain = (await apply(t, teamExport.body)).json();
        expect(teamAgain.changes, teamExport.body).toEqual([]);

        // An empty team gets the same configuration from the export.
        const empty = await newTeam();
        const moved = (parse(teamExport.body) as Obj) ?? {};
        (moved.metadata as Obj).team = empty;
        const recreated = await apply(t, moved);
        expect(recreated.statusCode, recreated.body).toBe(200);
        const strip = (text: string) => {
          const value = parse(text) as Obj;
          delete value.metadata;
          return value;
        };
        expect(strip((await exportTeam(t, empty)).body)).toEqual(strip(teamExport.body));
      }),
      { numRuns: dialect === 'sqlite' ? 40 : 15 },
    );
  }, 180_000);

  it('random invalid documents: nothing stored, every invalid entry reported', async () => {
    const corruption = fc.constantFrom(
      (e: Obj) => (e.zone = 'nowhere-1'),
      (e: Obj) => (e.type = 'oracle'),
      (e: Obj) => (e.plan = 'huge'),
      (e: Obj) => (e.unknown_field = true),
    );
    await fc.assert(
      fc.asyncProperty(
        documentArb.filter((d) => d.managed_databases.length > 0),
        fc.array(fc.tuple(fc.nat(), corruption), { minLength: 1, maxLength: 3 }),
        async (generated, picks) => {
          const team = await newTeam();
          const databases = generated.managed_databases.map((d) => ({ ...d })) as Obj[];
          const broken = new Set<string>();
          for (const [index, corrupt] of picks) {
            const entry = databases[index % databases.length]!;
            corrupt(entry);
            broken.add(`spec.managed_databases.${String(entry.name)}.`);
          }
          const doc = {
            apiVersion: 'v1',
            kind: 'Infrastructure',
            metadata: { name: 'app', team },
            spec: withoutUndefined({ ...generated, domains: [], managed_databases: databases }),
          };
          const before = await dumpStore(t.ctx.db);
          const res = await apply(t, doc);
          expect(res.statusCode, res.body).toBe(422);
          const paths = Object.keys(res.json().errors as Obj);
          for (const prefix of broken)
            expect(
              paths.some((p) => p.startsWith(prefix)),
              `${prefix} in ${paths.join(', ')}`,
            ).toBe(true);
          expect(await dumpStore(t.ctx.db)).toEqual(before);
        },
      ),
      { numRuns: dialect === 'sqlite' ? 40 : 15 },
    );
  }, 180_000);
});
