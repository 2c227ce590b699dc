// The states table driven through apply, the writer that creates schedules: apply sets a date (warned),
// applies another date (warned again), omits the field (cleared), and a deletion removes everything the
// document created, after which the same document applies again to a new application.
import { stringify } from 'yaml';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { childRows, DAY, HOUR, MINUTE, startSmtpSink, type SmtpSink } from './helpers.js';

const START = '2026-04-01T00:00:00.000Z';
const at = (offsetMs: number) => new Date(new Date(START).getTime() + offsetMs).toISOString();

function document(scheduledDeletionAt?: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'blog', team: 'acme' },
    spec: {
      application: {
        name: 'blog',
        type: 'nodejs',
        settings: scheduledDeletionAt ? { scheduled_deletion_at: scheduledDeletionAt } : {},
      },
      domains: [{ domain: 'blog.example.com' }],
      secrets: [{ key: 'SESSION_SECRET', value: 'abc' }],
      volumes: [{ name: 'uploads', mount_path: '/data', volume_size: 5 }],
      container_services: [{ name: 'pdf', type: 'gotenberg', version: '8', memory: '1Gi' }],
    },
  });
}

describe.each(DIALECTS)('scheduled deletion through apply (%s)', (dialect) => {
  let sink: SmtpSink;
  let t: TestApp;
  const clock = createManualClock(START);

  const apply = async (scheduledDeletionAt?: string) => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?auto_deploy=false',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: document(scheduledDeletionAt),
    });
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json<{ application_id: number }>().application_id;
  };
  const runDue = () => t.ctx.services.jobs.runner().runDue();
  // Apply does not wake the sweep; the sweep looks again at least once a minute.
  const nextMinute = () => clock.advance(MINUTE);
  const timeLeft = () => sink.mails.map((m) => /, in (.+?)\./.exec(m.text)?.[1]);

  beforeEach(async () => {
    clock.set(START);
    sink = await startSmtpSink();
    t = await createTestApp(dialect, { clock, env: { BERTH_SMTP_URL: sink.url } });
    await t.ctx.services.scheduledDeletion.start();
  });
  afterEach(async () => {
    await t.close();
    await sink.close();
  });

  it('set → changed (warned again) → cleared by omission → set → deleted → the name is free', async () => {
    const id = await apply(at(3 * DAY));
    await runDue();
    expect(timeLeft()).toEqual(['3 days']);

    await apply(at(5 * DAY + MINUTE));
    await runDue();
    expect(sink.mails).toHaveLength(1);
    nextMinute();
    await runDue();
    expect(timeLeft()).toEqual(['3 days', '5 days']);

    await apply(); // the field omitted: the schedule is cleared
    clock.set(at(6 * DAY));
    await runDue();
    expect(sink.mails).toHaveLength(2);
    const kept = await t.ctx.db
      .selectFrom('applications')
      .select('scheduled_deletion_at')
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(kept.scheduled_deletion_at).toBeNull();

    expect(await apply(at(6 * DAY + 2 * HOUR + MINUTE))).toBe(id);
    nextMinute();
    await runDue();
    expect(timeLeft()).toEqual(['3 days', '5 days', '2 hours']);
    expect(await childRows(t.ctx.db, id)).toBeGreaterThanOrEqual(4);
    clock.set(at(6 * DAY + 2 * HOUR + MINUTE));
    await runDue();
    expect(await childRows(t.ctx.db, id)).toBe(0);
    const tombstone = await t.ctx.db
      .selectFrom('application_tombstones')
      .selectAll()
      .executeTakeFirstOrThrow();
    expect(tombstone).toMatchObject({
      id,
      name: 'blog',
      team_name: 'acme',
      deleted_at: at(6 * DAY + 2 * HOUR + MINUTE),
    });
    expect(JSON.parse(tombstone.details)).toMatchObject({
      domains: ['blog.example.com'],
      services: ['pdf'],
      volumes: ['uploads'],
      secrets: 1,
    });
    const read = await t.request({ url: `/api/v1/applications/${id}`, headers: t.auth.platform });
    expect(read.statusCode).toBe(404);

    // The same document creates a new application: name and domain were freed.
    const again = await apply();
    expect(again).not.toBe(id);
    // Two warnings, and the record of the deletion.
    expect(sink.mails).toHaveLength(4);
    expect(sink.mails.at(-1)?.subject).toMatch(/^Application "blog" \(team acme\) was deleted on /);
  });
});
