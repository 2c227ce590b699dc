// What one document may ask for: lists within their limits, a team within its quotas, a body within
// the apply limit; and the largest document Berth accepts does not hold up other requests.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from './helpers.js';

type Obj = Record<string, unknown>;
const specOf = (doc: Obj) => doc.spec as Obj;

describe.each(DIALECTS)('apply limits and team quotas (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect, {
      env: { BERTH_QUOTA_MANAGED_DATABASES: '2', BERTH_QUOTA_APPLICATIONS: '1' },
    });
  });
  afterAll(() => t.close());

  it('refuses a list over its limit with 422 naming the list and the limit', async () => {
    const doc = fullDocument(t.user.team_id) as Obj;
    specOf(doc).secrets = Array.from({ length: 501 }, (_, i) => ({ key: `K${i}`, value: 'v' }));
    (specOf(doc).application as Obj).tags = Array.from({ length: 51 }, (_, i) => `t${i}`);
    const res = await apply(t, doc, '?dry_run=true');
    expect(res.statusCode).toBe(422);
    const errors = res.json<{ errors: Record<string, string[]> }>().errors;
    expect(errors['spec.secrets']).toEqual([
      "Secrets: field 'secrets' has 501 items; at most 500 are accepted.",
    ]);
    expect(errors['spec.application.tags']?.[0]).toMatch(/has 51 items; at most 50 are accepted/);
    const big = fullDocument(t.user.team_id, 'big') as Obj;
    specOf(big).secrets = [{ key: 'CERT', value: 'x'.repeat(33 * 1024) }];
    expect(
      (await apply(t, big, '?dry_run=true')).json<{ errors: Record<string, string[]> }>().errors,
    ).toHaveProperty('spec.secrets.0.value');
  });

  it('keeps a team within its quotas, dry run included, and names the setting that raises them', async () => {
    const doc = fullDocument(t.user.team_id, 'quota') as Obj;
    specOf(doc).managed_databases = ['a', 'b', 'c'].map((n) => ({
      name: `db-${n}`,
      type: 'valkey',
      plan: '1x1xCPU-2GB',
      zone: 'fi-hel1',
    }));
    for (const query of ['?dry_run=true', '']) {
      const res = await apply(t, doc, query);
      expect(res.statusCode).toBe(422);
      expect(res.json<{ errors: Record<string, string[]> }>().errors['spec.managed_databases']).toEqual([
        'The team may have at most 2 managed databases; this document would make 3. Delete some first, or ask the operator to raise BERTH_QUOTA_MANAGED_DATABASES.',
      ]);
    }
    // Within the quota it applies; a second application is over the quota of one.
    specOf(doc).managed_databases = (specOf(doc).managed_databases as Obj[]).slice(0, 2);
    specOf(doc).object_storage = [];
    expect((await apply(t, doc)).statusCode).toBe(200);
    const second = fullDocument(t.user.team_id, 'second') as Obj;
    specOf(second).managed_databases = [];
    specOf(second).object_storage = [];
    const refused = await apply(t, second);
    expect(refused.statusCode).toBe(422);
    expect(refused.json<{ errors: Record<string, string[]> }>().errors['spec.application']?.[0]).toMatch(
      /at most 1 applications.*BERTH_QUOTA_APPLICATIONS/,
    );
  });

  it('answers 413 naming the limit for a body over it, and other requests go on during the largest document', async () => {
    const huge = `apiVersion: v1\nkind: Infrastructure\n# ${'x'.repeat(3 * 1024 * 1024)}\n`;
    const tooLarge = await apply(t, huge);
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json()).toEqual({
      message: 'Request body is too large: the limit is 2097152 bytes (2 MiB).',
    });

    // Just under the limit, with every secret a list may hold: parsed, validated and planned.
    const doc = fullDocument(t.user.team_id, 'quota') as Obj;
    specOf(doc).managed_databases = [];
    specOf(doc).object_storage = [];
    specOf(doc).secrets = Array.from({ length: 500 }, (_, i) => ({ key: `K${i}`, value: 'v'.repeat(3900) }));
    let polls = 0;
    let longestGap = 0;
    let last = Date.now();
    let finished = false;
    const pending = apply(t, doc, '?dry_run=true').finally(() => (finished = true));
    while (!finished) {
      expect((await t.request({ url: '/healthz' })).statusCode).toBe(200);
      polls += 1;
      longestGap = Math.max(longestGap, Date.now() - last);
      last = Date.now();
      await new Promise((r) => setImmediate(r));
    }
    expect((await pending).statusCode).toBe(200);
    expect(polls).toBeGreaterThan(0);
    // Loose on purpose (a busy CI machine); docs/api/apply.md gives the measured figure.
    expect(longestGap).toBeLessThan(1000);
  });
});
