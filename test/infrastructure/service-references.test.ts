/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-call --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// A secret's value may reference what a service gives (`${services.db.password}`, docs/services.md):
// apply checks every reference against the application's services (stored or in the document) and
// the fields their type gives (422 at the secret's value, dry run included, nothing stored), and the
// export shows a reference as written while an ordinary secret keeps its placeholder.
import { parse } from 'yaml';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { secretPlaceholder } from '../../src/domain/infrastructure/document.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore } from './helpers.js';

type Secret = { key: string; value: string };

function document(team: number, name: string, secrets: Secret[]): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: { name, type: 'nodejs' },
      secrets,
      services: [
        { name: 'db', type: 'mysql', settings: { database: 'shop' } },
        { name: 'cache', type: 'valkey' },
        { name: 'jobs', type: 'worker', command: 'node worker.js' },
      ],
      container_services: [{ name: 'pdf', type: 'gotenberg' }],
    },
  };
}

describe.each(DIALECTS)('service references in secrets (%s)', (dialect) => {
  let t: TestApp;
  let n = 0;
  let name: string;
  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_QUOTA_TEAM_MEMORY: '9999999Gi' } });
  });
  afterAll(() => t.close());
  beforeEach(() => {
    n += 1;
    name = `refs${n}`;
  });
  const doc = (secrets: Secret[]) => document(t.user.team_id, name, secrets);

  it('accepts references to every field a service gives, and exports them as written', async () => {
    const secrets = [
      { key: 'MYSQL_HOST', value: '${services.db.host}' },
      { key: 'MYSQL_PORT', value: '${services.db.port}' },
      { key: 'MYSQL_USER', value: '${services.db.user}' },
      { key: 'MYSQL_PASSWORD', value: '${services.db.password}' },
      { key: 'MYSQL_DATABASE', value: '${services.db.database}' },
      { key: 'MYSQL_URL', value: '${services.db.url}' },
      { key: 'CACHE_ADDRESS', value: '${services.cache.host}:${services.cache.port}' },
      { key: 'PDF_URL', value: '${services.pdf.url}' },
      { key: 'COMPOSED', value: 'mysql://${services.db.user}@${services.db.host}/x' },
      { key: 'LITERAL', value: 'text $${services.db.host} ${HOME}' },
      { key: 'API_TOKEN', value: 'hunter2' },
    ];
    const res = await apply(t, doc(secrets));
    expect(res.statusCode, res.body).toBe(200);
    const id = res.json().application_id as number;

    const exported = await t.request({
      url: `/api/v1/applications/${id}/export-yaml`,
      headers: t.auth.platform,
    });
    expect(exported.statusCode).toBe(200);
    const written = (parse(exported.body) as { spec: { secrets: Secret[] } }).spec.secrets;
    const value = (key: string) => written.find((s) => s.key === key)?.value;
    // Only references: written as is (they name where a value comes from, not the value).
    for (const key of ['MYSQL_HOST', 'MYSQL_PASSWORD', 'MYSQL_URL', 'PDF_URL'])
      expect(value(key)).toBe(secrets.find((s) => s.key === key)!.value);
    // Literal text may be a credential: an ordinary secret and a mixed value keep their placeholder.
    for (const key of ['API_TOKEN', 'CACHE_ADDRESS', 'COMPOSED', 'LITERAL'])
      expect(value(key)).toBe(secretPlaceholder(key));
    expect(exported.body).not.toContain('hunter2');

    // The export applies back without a change.
    const again = await apply(t, exported.body);
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().structured_changes.secrets.map((s: { action: string }) => s.action)).toEqual(
      secrets.map(() => 'unchanged'),
    );
  });

  it('refuses an unknown service, an unknown field and a malformed reference (422 at the value, dry run included, nothing stored)', async () => {
    const bad = doc([
      { key: 'OK', value: '${services.cache.url}' },
      { key: 'A', value: '${services.mysql.password}' },
      { key: 'B', value: 'x${services.cache.database}' },
      { key: 'C', value: '${services.jobs.host}' },
      { key: 'D', value: '${services.db}' },
      { key: 'E', value: '${services.db.PASSWORD}' },
    ]);
    const before = await dumpStore(t.ctx.db);
    for (const query of ['?dry_run=true', '']) {
      const res = await apply(t, bad, query);
      expect(res.statusCode, res.body).toBe(422);
      const errors = res.json<{ errors: Record<string, string[]> }>().errors;
      expect(Object.keys(errors).sort()).toEqual([
        'spec.secrets.1.value',
        'spec.secrets.2.value',
        'spec.secrets.3.value',
        'spec.secrets.4.value',
        'spec.secrets.5.value',
      ]);
      expect(errors['spec.secrets.1.value']![0]).toContain(
        '${services.mysql.password} names no service of this application; its services are cache, db, jobs, pdf.',
      );
      expect(errors['spec.secrets.2.value']![0]).toContain(
        "service 'cache' (valkey) gives host, port, user, password, url.",
      );
      expect(errors['spec.secrets.3.value']![0]).toContain("service 'jobs' (worker) gives no values");
      expect(errors['spec.secrets.4.value']![0]).toContain('expected ${services.<name>.<field>}');
      expect(errors['spec.secrets.5.value']![0]).toContain('is not a service reference');
    }
    expect(await dumpStore(t.ctx.db)).toEqual(before);
  });

  it('accepts a reference to a service stored by an earlier apply that this document leaves out', async () => {
    expect((await apply(t, doc([]))).statusCode).toBe(200);
    const later = doc([{ key: 'MYSQL_PASSWORD', value: '${services.db.password}' }]);
    const spec = later.spec as Record<string, unknown>;
    delete spec.services;
    delete spec.container_services;
    const res = await apply(t, later);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().structured_changes.secrets).toEqual([{ action: 'created', key: 'MYSQL_PASSWORD' }]);
  });
});
