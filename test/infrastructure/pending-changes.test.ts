// The panel's action for a zone change of an object storage that apply reported as needing action:
// carried out once, refused (409) without a pending change, and only for the storage's own team.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, fullDocument } from './helpers.js';

type Changes = { structured_changes: { object_storage: unknown } };

describe.each(DIALECTS)('object storage: apply-pending-change (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  const action = (headers: Record<string, string>, team: string | number = t.user.team_id) =>
    t.request({
      method: 'POST',
      url: `/api/v1/teams/${team}/object-storage/files/apply-pending-change`,
      headers,
    });

  it('carries out a pending zone change once, and only for the team that owns the storage', async () => {
    const doc = fullDocument(t.user.team_id);
    expect((await apply(t, doc)).statusCode).toBe(200);
    expect((await action(t.auth.platform)).statusCode).toBe(409);

    const moved = structuredClone(doc) as { spec: { object_storage: Array<{ zone: string }> } };
    moved.spec.object_storage[0]!.zone = 'us-1';
    const planned = await apply(t, moved);
    expect(planned.json<Changes>().structured_changes.object_storage).toEqual([
      { action: 'needs_action', name: 'files' },
    ]);
    const view = await t.request({
      url: `/api/v1/teams/${t.user.team_id}/object-storage/files`,
      headers: t.auth.platform,
    });
    expect(view.json<{ data: unknown }>().data).toMatchObject({
      zone: 'europe-1',
      pending_changes: { zone: 'us-1' },
    });

    const other = authHeaders(
      await t.ctx.identity.createUser({ email: 'eve@example.com', team: 'eve', role: 'owner' }),
    ).platform;
    expect((await action(other)).statusCode).toBe(403);

    const done = await action(t.auth.platform);
    expect(done.statusCode).toBe(200);
    expect(done.json<{ data: unknown }>().data).toMatchObject({
      name: 'files',
      zone: 'us-1',
      pending_changes: null,
    });
    const audit = await t.ctx.db
      .selectFrom('audit_log')
      .select(['before_state', 'after_state'])
      .where('action', '=', 'object_storage.apply_pending_change')
      .execute();
    expect(audit.map((a) => [a.before_state, a.after_state])).toEqual([
      ['{"zone":"europe-1"}', '{"zone":"us-1"}'],
    ]);
    // Carried out once; the document now matches the storage.
    expect((await action(t.auth.platform)).statusCode).toBe(409);
    expect((await apply(t, moved)).json<Changes>().structured_changes.object_storage).toEqual([
      { action: 'unchanged', name: 'files' },
    ]);
  });
});
