// Ploi's removal routes: one domain, secret or volume of an application goes, and stays gone when
// the document is applied without it (apply never deletes, so it never brings it back either).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from './helpers.js';

type View = {
  data: {
    domains: Array<{ domain: string }>;
    secrets: Array<{ key: string }>;
    volumes: Array<{ name: string }>;
  };
};

describe.each(DIALECTS)('removing domains, secrets and volumes (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  it('removes each by its name, answers 404 for what is not there and 403 for another team', async () => {
    const doc = fullDocument(t.user.team_id, 'removals') as { spec: Record<string, unknown> };
    doc.spec.managed_databases = [];
    doc.spec.object_storage = [];
    const applied = await apply(t, doc);
    expect(applied.statusCode).toBe(200);
    const id = applied.json<{ application_id: number }>().application_id;
    const del = (path: string, headers = t.auth.platform) =>
      t.request({ method: 'DELETE', url: `/api/v1/applications/${id}/${path}`, headers });
    const view = async () =>
      (await t.request({ url: `/api/v1/applications/${id}`, headers: t.auth.platform })).json<View>().data;

    const other = authHeaders(
      await t.ctx.identity.createUser({ email: 'x@example.com', team: 'xteam', role: 'owner' }),
    ).platform;
    expect((await del('domains/removals.example.com', other)).statusCode).toBe(403);

    const removed = await del('domains/removals.example.com');
    expect(removed.statusCode).toBe(200);
    expect(removed.json()).toEqual({ data: { removed: 'domain', name: 'removals.example.com' } });
    expect((await del('secrets/APP_KEY')).statusCode).toBe(200);
    expect((await del('volumes/storage')).statusCode).toBe(200);
    expect((await del('secrets/APP_KEY')).statusCode).toBe(404);
    expect((await del('volumes/nope')).statusCode).toBe(404);

    const after = await view();
    expect(after.domains).toEqual([]);
    expect(after.secrets).toEqual([]);
    expect(after.volumes).toEqual([]);
    const audit = await t.ctx.db
      .selectFrom('audit_log')
      .select('action')
      .where('target', 'in', [`${id}/removals.example.com`, `${id}/APP_KEY`, `${id}/storage`])
      .execute();
    expect(audit.map((a) => a.action).sort()).toEqual(['domain.delete', 'secret.delete', 'volume.delete']);
    // The document still names them: applying it again creates them again, as a new document would.
    const again = await apply(t, doc);
    expect(again.statusCode).toBe(200);
    expect((await view()).secrets).toEqual([{ key: 'APP_KEY' }]);
  });
});
