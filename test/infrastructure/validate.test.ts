// Whole-document validation (pure): every problem reported at once, at the spec's paths, with
// messages naming the resource, the field and what is accepted.
import fc from 'fast-check';
import { stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/domain/errors.js';
import {
  parseInfrastructureYaml,
  readCarefully,
  readQuickly,
} from '../../src/domain/infrastructure/parse.js';
import { checkDocument, validateDocument } from '../../src/domain/infrastructure/validate.js';
import { fullDocument } from './helpers.js';

type Obj = Record<string, unknown>;

function errorsOf(doc: Obj): Record<string, string[]> {
  const result = checkDocument(doc);
  if (result.ok) throw new Error('expected the document to be invalid');
  return result.errors;
}

function mutate(change: (doc: { spec: Obj; app: Obj; settings: Obj; root: Obj }) => void): Obj {
  const root = structuredClone(fullDocument(1)) as Obj;
  const spec = root.spec as Obj;
  const app = spec.application as Obj;
  change({ root, spec, app, settings: app.settings as Obj });
  return root;
}

const list = (spec: Obj, key: string) => spec[key] as Obj[];

describe('validateDocument', () => {
  it('refuses database users named like the admin, Berth’s accounts or the engines’ own', () => {
    for (const username of [
      'upadmin',
      'UPADMIN',
      'berth_maint',
      'postgres',
      'pg_monitor',
      'root',
      'default',
    ]) {
      const errors = errorsOf(
        mutate(({ spec }) => {
          (list(spec, 'managed_databases')[0] as Obj).users = [{ username }];
        }),
      );
      expect(errors['spec.managed_databases.main-db.users.0.username']?.[0], username).toMatch(
        new RegExp(`username '${username}' is reserved; upadmin, names starting with 'berth'`),
      );
    }
  });

  it('accepts the representative document and normalises it', () => {
    const doc = validateDocument(fullDocument(1));
    expect(doc.application?.type).toBe('laravel');
    expect(doc.domains).toEqual(['shop.example.com']);
    expect(doc.managedDatabases[0]).toMatchObject({ name: 'main-db', type: 'pg' });
    expect(doc.touchesApplication).toBe(true);
  });

  it('reports every invalid entry in one 422 with the spec paths', () => {
    const doc = mutate(({ spec }) => {
      list(spec, 'managed_databases').push(
        { name: 'second', type: 'mongodb', plan: 'big', zone: 'mars-1' },
        { name: 'third', type: 'mysql', plan: '1x1xCPU-2GB', zone: 'de-fra1' },
      );
      list(spec, 'object_storage')[0]!.zone = 'eu-west-1';
    });
    let thrown: unknown;
    try {
      validateDocument(doc);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(AppError);
    const error = thrown as AppError;
    expect(error.status).toBe(422);
    expect(error.message).toBe('YAML validation failed');
    expect(Object.keys(error.errors ?? {}).sort()).toEqual([
      'spec.managed_databases.second.type',
      'spec.managed_databases.second.zone',
      'spec.managed_databases.third.plan',
      'spec.object_storage.files.zone',
    ]);
    const errors = error.errors ?? {};
    expect(errors['spec.managed_databases.second.type']![0]).toBe(
      "Managed database 'second': field 'type' must be one of mysql, pg, valkey, redis (redis is accepted as an alias of valkey); got 'mongodb'.",
    );
    expect(errors['spec.managed_databases.second.zone']![0]).toContain('au-syd1, de-fra1');
    expect(errors['spec.managed_databases.third.plan']![0]).toContain(
      'a mysql plan: one of 1x1xCPU-2GB-25GB',
    );
    expect(errors['spec.object_storage.files.zone']![0]).toContain('apac-1, europe-1, europe-2');
  });

  it('reports unknown fields everywhere, so that a typo is never ignored', () => {
    const errors = errorsOf(
      mutate(({ root, spec, app, settings }) => {
        root.extra = 1;
        spec.databases = [];
        app.typo = 'x';
        settings.health_check_pth = '/x';
        list(spec, 'managed_databases')[0]!.size = 'big';
        list(spec, 'services')[0]!.memroy = '1Gi';
        list(spec, 'domains')[0]!.host = 'x';
      }),
    );
    expect(Object.keys(errors).sort()).toEqual([
      'extra',
      'spec.application.settings.health_check_pth',
      'spec.application.typo',
      'spec.databases',
      'spec.domains.0.host',
      'spec.managed_databases.main-db.size',
      'spec.services.cache.memroy',
    ]);
    expect(errors['spec.services.cache.memroy']![0]).toBe(
      "Service 'cache': field 'memroy' is not a known field; accepted fields: name, type, version, memory, volume_size, settings, command.",
    );
  });

  const cases: Array<
    [string, (d: { spec: Obj; app: Obj; settings: Obj; root: Obj }) => void, string, string]
  > = [
    ['apiVersion', ({ root }) => (root.apiVersion = 'v2'), 'apiVersion', 'one of v1'],
    ['kind', ({ root }) => delete root.kind, 'kind', 'is required'],
    ['metadata.team', ({ root }) => ((root.metadata as Obj).team = ['x']), 'metadata.team', 'team id'],
    [
      'application name mismatch',
      ({ app }) => (app.name = 'other'),
      'spec.application.name',
      'must match metadata.name',
    ],
    [
      'application type',
      ({ app }) => (app.type = 'rails'),
      'spec.application.type',
      'laravel, nodejs, wordpress',
    ],
    ['tags', ({ app }) => (app.tags = 'prod'), 'spec.application.tags', 'a list of'],
    [
      'php_version',
      ({ app }) => ((app.runtime as Obj).php_version = '5.6'),
      'spec.application.runtime.php_version',
      '8.5, 8.4',
    ],
    [
      'commands.build item',
      ({ app }) => ((app.commands as Obj).build = ['ok', 3]),
      'spec.application.commands.build.1',
      'shell commands',
    ],
    [
      'replicas',
      ({ settings }) => (settings.replicas = 'two'),
      'spec.application.settings.replicas',
      'an integer from 1 to 100',
    ],
    ['memory', ({ settings }) => (settings.memory = '1GB'), 'spec.application.settings.memory', 'Mi or Gi'],
    [
      'scheduler_enabled',
      ({ settings }) => (settings.scheduler_enabled = 'yes'),
      'spec.application.settings.scheduler_enabled',
      'true or false',
    ],
    [
      'scheduled_deletion_at',
      ({ settings }) => (settings.scheduled_deletion_at = '2026-13-01'),
      'spec.application.settings.scheduled_deletion_at',
      'ISO 8601',
    ],
    [
      'php settings',
      ({ app }) => ((app.php as Obj).settings = ['memory_limit']),
      'spec.application.php.settings.0',
      '<directive>=<value>',
    ],
    [
      'domain',
      ({ spec }) => (list(spec, 'domains')[0]!.domain = 'not a host'),
      'spec.domains.0.domain',
      'host name',
    ],
    [
      'duplicate domain',
      ({ spec }) => list(spec, 'domains').push({ domain: 'SHOP.example.com' }),
      'spec.domains.1.domain',
      'already listed',
    ],
    [
      'secret key',
      ({ spec }) => (list(spec, 'secrets')[0]!.key = '1-BAD'),
      'spec.secrets.0.key',
      'environment variable name',
    ],
    [
      'secret value',
      ({ spec }) => delete list(spec, 'secrets')[0]!.value,
      'spec.secrets.0.value',
      'is required',
    ],
    [
      'mount path',
      ({ spec }) => (list(spec, 'volumes')[0]!.mount_path = 'storage'),
      'spec.volumes.storage.mount_path',
      'absolute path',
    ],
    [
      'volume size',
      ({ spec }) => (list(spec, 'volumes')[0]!.volume_size = '10Gi'),
      'spec.volumes.storage.volume_size',
      'integer number of GB',
    ],
    [
      'service type',
      ({ spec }) => (list(spec, 'services')[0]!.type = 'mongo'),
      'spec.services.cache.type',
      'mysql, postgresql, redis',
    ],
    [
      'service volume',
      ({ spec }) => (list(spec, 'services')[0]!.volume_size = '20G'),
      'spec.services.cache.volume_size',
      'suffix Gi',
    ],
    [
      'worker command',
      ({ spec }) => delete list(spec, 'services')[1]!.command,
      'spec.services.worker.command',
      'required for type worker',
    ],
    [
      'service settings per type',
      ({ spec }) => (list(spec, 'services')[0]!.settings = { database: 'x' }),
      'spec.services.cache.settings.database',
      'takes no settings',
    ],
    [
      'duplicate service',
      ({ spec }) => list(spec, 'services').push({ name: 'cache', type: 'redis' }),
      'spec.services.cache.name',
      'more than once',
    ],
    [
      'container setting value',
      ({ spec }) => (list(spec, 'container_services')[0]!.settings = { PORT: 3000 }),
      'spec.container_services.pdf.settings.PORT',
      'must be a string',
    ],
    [
      'container type',
      ({ spec }) => (list(spec, 'container_services')[0]!.type = 'nginx'),
      'spec.container_services.pdf.type',
      'gotenberg, chrome-headless, clickhouse, meilisearch',
    ],
    [
      'db user auth',
      ({ spec }) => ((list(spec, 'managed_databases')[0]!.users as Obj[])[0]!.authentication = 'plain'),
      'spec.managed_databases.main-db.users.0.authentication',
      'scram-sha-256',
    ],
    [
      'db name',
      ({ spec }) => (list(spec, 'managed_databases')[0]!.name = 'Main DB'),
      'spec.managed_databases.Main DB.name',
      'lower-case letters',
    ],
    [
      'bucket',
      ({ spec }) => (list(spec, 'object_storage')[0]!.buckets = ['UP']),
      'spec.object_storage.files.buckets.0',
      'bucket names',
    ],
    [
      'storage secret',
      ({ spec }) => (list(spec, 'object_storage')[0]!.secret_key = 'abc'),
      'spec.object_storage.files.secret_key',
      '${STORAGE_FILES_SECRET_KEY}',
    ],
  ];

  it.each(cases)('%s', (_label, change, path, fragment) => {
    const errors = errorsOf(mutate(change));
    expect(Object.keys(errors)).toContain(path);
    expect(errors[path]!.join(' ')).toContain(fragment);
  });

  it('reads YAML numbers written for versions as the intended strings', () => {
    const doc = validateDocument(
      parseInfrastructureYaml(
        'apiVersion: v1\nkind: Infrastructure\nmetadata: {name: a, team: 1}\nspec:\n  application:\n    type: laravel\n    version: 12\n    runtime: {php_version: 8.0, nodejs_version: 24}\n',
      ),
    );
    expect(doc.application?.version).toBe('12');
    expect(doc.application?.runtime).toEqual({ php_version: '8.0', nodejs_version: '24' });
  });

  it('leaves a document with domains but no application block to the plan (the application may exist)', () => {
    const doc = validateDocument({
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'x', team: 'acme' },
      spec: { domains: [{ domain: 'a.example.com' }] },
    });
    expect(doc.application).toBeUndefined();
    expect(doc.touchesApplication).toBe(true);
  });

  it('gives line and column for unreadable YAML and refuses aliases that explode', () => {
    expect(() => parseInfrastructureYaml('a: 1\n  b: [\n')).toThrow(/line \d+, column \d+/);
    expect(() => parseInfrastructureYaml('a: 1\na: 2\n')).toThrow(/line 2, column 1/);
    const bomb = ['a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 8; i += 1)
      bomb.push(
        `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(10)
          .fill(`*${String.fromCharCode(97 + i)}`)
          .join(', ')}]`,
      );
    expect(() => parseInfrastructureYaml(bomb.join('\n'))).toThrow(AppError);
  });
});

const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe('the two YAML parsers agree', () => {
  it('read every document without anchors the same way', () => {
    const scalar = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.double({ noNaN: true, noDefaultInfinity: true }),
      fc.boolean(),
      fc.constant(null),
      fc.constantFrom('8.0', '2026-12-01T00:00:00Z', 'yes', 'no', '0o17', '0x1F', '~', '.inf', '1e3', 'null'),
    );
    const value = fc.letrec((tie) => ({
      any: fc.oneof({ depthSize: 'small' }, scalar, tie('list'), tie('map')),
      list: fc.array(tie('any'), { maxLength: 4 }),
      map: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), tie('any'), { maxKeys: 4 }),
    }));
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), value.any, { minKeys: 1, maxKeys: 5 }),
        (doc) => {
          for (const style of [
            {},
            { defaultStringType: 'QUOTE_SINGLE' as const },
            { collectionStyle: 'flow' as const },
          ]) {
            const text = stringify(doc, style);
            const quick = readQuickly(text);
            if (quick === undefined) continue;
            // Compared as Berth keeps documents, in JSON: js-yaml reads the integer `-0` as 0 and
            // `yaml` as -0, and JSON writes both as 0.
            expect(asJson(quick)).toEqual(asJson(readCarefully(text)));
          }
        },
      ),
      { numRuns: 300 },
    );
    // Plain scalars written by hand, where YAML 1.1 and 1.2 differ or types could drift.
    const text =
      'a: 8.0\nb: yes\nc: 2026-12-01T00:00:00Z\nd: 0o17\ne: 012\nf: ~\ng: TRUE\nh: .NaN\ni: 1_000\n';
    expect(readQuickly(text)).toEqual(readCarefully(text));
  });
});
