// The outbox: a relay that is down makes a message wait and retry with backoff; without SMTP the
// messages stay unsent until a start with SMTP configured sends the ones that still hold and drops
// warnings about a schedule that has changed since.
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createContext } from '../../src/context.js';
import { createManualClock } from '../../src/domain/clock.js';
import { sendJobKey } from '../../src/services/notifications/index.js';
import { createTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/processes.js';
import { DIALECTS } from '../helpers/store.js';
import { HOUR, insertApplication, startSmtpSink, type SmtpSink } from './helpers.js';

const START = '2026-09-01T00:00:00.000Z';
const at = (offsetMs: number) => new Date(new Date(START).getTime() + offsetMs).toISOString();

describe.each(DIALECTS)('notification outbox (%s)', (dialect) => {
  let t: TestApp | undefined;
  let sink: SmtpSink | undefined;
  afterEach(async () => {
    await t?.close();
    await sink?.close();
    t = undefined;
    sink = undefined;
  });

  it('retries with backoff while the relay is down, then delivers once', async () => {
    const clock = createManualClock(START);
    const port = await freePort(); // nothing listens here yet
    t = await createTestApp(dialect, {
      clock,
      env: {
        BERTH_SMTP_URL: `smtp://127.0.0.1:${port}/?from=${encodeURIComponent('Ops <ops@example.com>')}`,
      },
    });
    await insertApplication(t.ctx.db, {
      teamId: t.user.team_id,
      name: 'web',
      scheduledDeletionAt: at(5 * HOUR),
    });
    await t.ctx.services.scheduledDeletion.start();
    await t.ctx.services.jobs.runner().runDue();

    const note = await t.ctx.db.selectFrom('notifications').selectAll().executeTakeFirstOrThrow();
    expect(note).toMatchObject({ state: 'unsent', attempts: 1, sent_at: null });
    expect(note.last_error).toMatch(/ECONNREFUSED|connect/i);
    const job = await t.ctx.db
      .selectFrom('jobs')
      .select(['state', 'run_at', 'attempts'])
      .where('key', '=', sendJobKey(note.id))
      .executeTakeFirstOrThrow();
    expect(job).toEqual({ state: 'queued', run_at: at(1000), attempts: 1 });

    sink = await startSmtpSink(port);
    await t.ctx.services.jobs.runner().runDue(); // the backoff has not passed: nothing is tried
    expect(sink.mails).toHaveLength(0);
    clock.set(at(1000));
    await t.ctx.services.jobs.runner().runDue();
    expect(sink.mails.map((m) => m.to)).toEqual([['owner@example.com']]);
    expect(sink.mails[0]?.from).toBe('ops@example.com');
    expect(await t.ctx.db.selectFrom('notifications').selectAll().executeTakeFirstOrThrow()).toMatchObject({
      state: 'sent',
      attempts: 2,
      last_error: null,
      sent_at: at(1000),
    });
    await t.ctx.services.jobs.runner().runDue();
    expect(sink.mails).toHaveLength(1);
  });

  it('keeps messages unsent without SMTP; a start with SMTP sends those that still hold', async () => {
    const clock = createManualClock(START);
    t = await createTestApp(dialect, { clock });
    const keep = await insertApplication(t.ctx.db, {
      teamId: t.user.team_id,
      name: 'keep',
      scheduledDeletionAt: at(5 * HOUR),
    });
    const moved = await insertApplication(t.ctx.db, {
      teamId: t.user.team_id,
      name: 'moved',
      scheduledDeletionAt: at(6 * HOUR),
    });
    await t.ctx.services.scheduledDeletion.start();
    await t.ctx.services.jobs.runner().runDue();
    let outbox = await t.ctx.db.selectFrom('notifications').select(['application_id', 'state']).execute();
    expect(outbox.map((n) => n.state)).toEqual(['unsent', 'unsent']);

    // `moved` gets a new date far away: its warning no longer holds.
    await t.ctx.db
      .updateTable('applications')
      .set({ scheduled_deletion_at: at(30 * 24 * HOUR) })
      .where('id', '=', moved)
      .execute();

    // Berth starts again, now with SMTP, on the same store.
    sink = await startSmtpSink();
    const restarted = await createContext(testConfig({ BERTH_SMTP_URL: sink.url }), {
      store: t.ctx.store,
      clock,
      masterKey: randomBytes(32),
      logger: pino({ level: 'silent' }),
    });
    try {
      clock.set(at(HOUR));
      await restarted.services.scheduledDeletion.start();
      await restarted.services.jobs.runner().runDue();
    } finally {
      await restarted.services.mailer?.close(); // not restarted.close(): the store belongs to `t`
    }
    expect(sink.mails.map((m) => m.subject)).toEqual([
      `Application "keep" (team acme) will be deleted on 2026-09-01 05:00 UTC`,
    ]);
    outbox = await t.ctx.db
      .selectFrom('notifications')
      .select(['application_id', 'state'])
      .orderBy('id')
      .execute();
    expect(outbox).toEqual([
      { application_id: keep, state: 'sent' },
      { application_id: moved, state: 'cancelled' },
    ]);
  });

  it('records the deletion for the owners; a warning that never went out for lack of SMTP says so', async () => {
    const clock = createManualClock(START);
    t = await createTestApp(dialect, { clock });
    await insertApplication(t.ctx.db, {
      teamId: t.user.team_id,
      name: 'gone',
      scheduledDeletionAt: at(5 * HOUR),
    });
    await t.ctx.services.scheduledDeletion.start();
    await t.ctx.services.jobs.runner().runDue();
    clock.set(at(5 * HOUR));
    await t.ctx.services.jobs.runner().runDue();
    expect(await t.ctx.db.selectFrom('applications').select('id').execute()).toEqual([]);

    const res = await t.request({
      method: 'GET',
      url: `/api/v1/teams/${t.user.team_id}/notifications`,
      headers: t.auth.platform,
    });
    expect(res.statusCode).toBe(200);
    const outbox = res.json<{
      data: Array<{ kind: string; state: string; subject: string; last_error: string | null }>;
    }>().data;
    expect(outbox.map((n) => [n.kind, n.state])).toEqual([
      ['application_deleted', 'unsent'],
      ['deletion_warning_1d', 'not_sent'],
    ]);
    expect(outbox[0]?.subject).toBe('Application "gone" (team acme) was deleted on 2026-09-01 05:00 UTC');
    expect(outbox[1]?.last_error).toContain('no mail server is configured (BERTH_SMTP_URL)');
    expect(outbox.every((n) => n.state !== 'cancelled')).toBe(true);
  });

  it('e-mails the record of a deletion when SMTP is configured', async () => {
    const clock = createManualClock(START);
    sink = await startSmtpSink();
    t = await createTestApp(dialect, { clock, env: { BERTH_SMTP_URL: sink.url } });
    await insertApplication(t.ctx.db, {
      teamId: t.user.team_id,
      name: 'gone',
      scheduledDeletionAt: at(HOUR),
    });
    await t.ctx.services.scheduledDeletion.start();
    await t.ctx.services.jobs.runner().runDue();
    clock.set(at(HOUR));
    await t.ctx.services.jobs.runner().runDue();
    await t.ctx.services.jobs.runner().runDue();
    expect(sink.mails.map((m) => m.subject)).toEqual([
      'Application "gone" (team acme) will be deleted on 2026-09-01 01:00 UTC',
      'Application "gone" (team acme) was deleted on 2026-09-01 01:00 UTC',
    ]);
  });
});
