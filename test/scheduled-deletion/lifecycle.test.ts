// Scheduled deletion driven through a manual clock: warnings (7 days, 1 day, nearest-only), date
// changes, cancellation, deletion, and a Berth that was down over the deletion time. Mails are read
// from a real SMTP server on loopback; the store is checked after each step.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { appLayout } from '../../src/drivers/runtime/local/layout.js';
import { startBackground } from '../../src/lifecycle.js';
import {
  deleteJobKey,
  type DeletingApplication,
  SWEEP_JOB,
  SWEEP_JOB_KEY,
} from '../../src/services/scheduled-deletion/index.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { waitFor } from '../helpers/processes.js';
import { DIALECTS } from '../helpers/store.js';
import { childRows, DAY, HOUR, insertApplication, MINUTE, startSmtpSink, type SmtpSink } from './helpers.js';

interface ScheduleBody {
  data: {
    state: string;
    scheduled_deletion_at: string | null;
    warnings: { seven_days: { status: string } | null; one_day: { status: string } | null };
  };
}

const START = '2026-03-01T00:00:00.000Z';
const OWNER = 'owner@example.com';
const CO_OWNER = 'second@example.com';
const MEMBER = 'member@example.com';

describe.each(DIALECTS)('scheduled deletion lifecycle (%s)', (dialect) => {
  let sink: SmtpSink;
  let t: TestApp;
  let clock: ReturnType<typeof createManualClock>;
  let teamId: number;

  const at = (offsetMs: number) => new Date(new Date(START).getTime() + offsetMs).toISOString();
  const runDue = () => t.ctx.services.jobs.runner().runDue();
  const patch = (id: number, value: string | null, method: 'PATCH' | 'PUT' = 'PATCH') =>
    t.request({
      method,
      url: `/api/v1/applications/${id}`,
      headers: t.auth.platform,
      payload: { scheduled_deletion_at: value },
    });
  const app = (id: number) =>
    t.ctx.db.selectFrom('applications').selectAll().where('id', '=', id).executeTakeFirst();
  const subjects = (recipient: string) => sink.to(recipient).map((m) => m.subject);

  beforeEach(async () => {
    sink = await startSmtpSink();
    clock = createManualClock(START);
    t = await createTestApp(dialect, { clock, env: { BERTH_SMTP_URL: sink.url } });
    teamId = t.user.team_id;
    await t.ctx.identity.createUser({ email: CO_OWNER, team: 'acme', role: 'owner' });
    await t.ctx.identity.createUser({ email: MEMBER, team: 'acme', role: 'member' });
    await t.ctx.services.scheduledDeletion.start();
  });
  afterEach(async () => {
    await t.close();
    await sink.close();
  });

  it('no schedule → scheduled → date changed (warned again) → cancelled', async () => {
    const id = await insertApplication(t.ctx.db, { teamId, name: 'web' });
    await runDue();
    expect(sink.mails).toHaveLength(0);

    const first = at(19 * DAY + 12 * HOUR);
    const set = await patch(id, '2026-03-20T14:00:00+02:00');
    expect(set.statusCode).toBe(200);
    expect(set.json<ScheduleBody>().data).toMatchObject({
      id,
      state: 'scheduled',
      scheduled_deletion_at: first,
      warnings: {
        seven_days: { due_at: at(12 * DAY + 12 * HOUR), status: 'pending' },
        one_day: { due_at: at(18 * DAY + 12 * HOUR), status: 'pending' },
      },
    });
    await runDue();
    expect(sink.mails).toHaveLength(0);

    // One minute early: nothing; on the minute: the 7-day warning to each owner, not to the member.
    clock.set(at(12 * DAY + 12 * HOUR - MINUTE));
    await runDue();
    expect(sink.mails).toHaveLength(0);
    clock.set(at(12 * DAY + 12 * HOUR));
    await runDue();
    expect(
      sink.mails
        .map((m) => m.to)
        .flat()
        .sort(),
    ).toEqual([OWNER, CO_OWNER].sort());
    expect(sink.to(MEMBER)).toHaveLength(0);
    const mail = sink.to(OWNER)[0]!;
    expect(mail.from).toBe('no-reply@berth.local');
    expect(mail.subject).toBe('Application "web" (team acme) will be deleted on 2026-03-20 12:00 UTC');
    expect(mail.text).toContain(`Deletion time: 2026-03-20 12:00 UTC (${first}), in 7 days.`);
    expect(mail.text).toContain('domains (they become free for others): web.example.com');
    expect(mail.text).toContain('services and their databases and files: mysql');
    expect(mail.text).toContain('volumes and their files: storage');
    expect(mail.text).toContain(`curl -X PATCH http://127.0.0.1:8080/api/v1/applications/${id}`);
    expect(mail.text).toContain(`-d '{"scheduled_deletion_at": null}'`);
    expect((await app(id))?.deletion_warning_7d_for).toBe(first);

    // Running again sends nothing more for the same date.
    await runDue();
    expect(sink.mails).toHaveLength(2);

    // A new date with 4.5 days left: its 7-day warning is due at once and goes out again.
    const second = at(12 * DAY + 12 * HOUR + 4 * DAY + 12 * HOUR);
    sink.clear();
    const changed = await patch(id, second, 'PUT');
    expect(changed.statusCode).toBe(200);
    expect(changed.json<ScheduleBody>().data.warnings.seven_days?.status).toBe('pending');
    await runDue();
    expect(subjects(OWNER)).toEqual([
      'Application "web" (team acme) will be deleted on 2026-03-18 00:00 UTC',
    ]);
    expect(sink.to(CO_OWNER)).toHaveLength(1);
    expect(sink.to(OWNER)[0]!.text).toContain('in 4 days.');
    expect(await app(id)).toMatchObject({
      scheduled_deletion_at: second,
      deletion_warning_7d_for: second,
      deletion_warning_1d_for: null,
    });

    // The dashboard's cancel; the dates pass and nothing happens.
    sink.clear();
    const cancelled = await t.request({
      method: 'POST',
      url: `/api/v1/applications/${id}/scheduled-deletion/cancel`,
      headers: t.auth.platform,
    });
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json<ScheduleBody>().data).toMatchObject({
      state: 'no_schedule',
      scheduled_deletion_at: null,
    });
    clock.set(at(30 * DAY));
    await runDue();
    expect(sink.mails).toHaveLength(0);
    expect(await app(id)).toMatchObject({ name: 'web', scheduled_deletion_at: null });
    expect(await childRows(t.ctx.db, id)).toBe(5);
    const audit = await t.ctx.db
      .selectFrom('audit_log')
      .select(['action', 'after_state'])
      .where('target_kind', '=', 'application')
      .where('target', '=', String(id))
      .where('action', 'in', ['scheduled_deletion.update', 'scheduled_deletion.cancel'])
      .orderBy('id')
      .execute();
    expect(audit.map((a) => [a.action, a.after_state])).toEqual([
      ['scheduled_deletion.update', expect.stringMatching(/^\{"scheduled_deletion_at":"\d{4}-/) as unknown],
      ['scheduled_deletion.update', expect.stringMatching(/^\{"scheduled_deletion_at":"\d{4}-/) as unknown],
      ['scheduled_deletion.cancel', '{"scheduled_deletion_at":null}'],
    ]);
    const outbox = await t.ctx.db.selectFrom('notifications').select(['state', 'kind']).execute();
    expect(outbox).toHaveLength(4);
    expect(outbox.every((n) => n.state === 'sent' && n.kind === 'deletion_warning_7d')).toBe(true);
  });

  it('scheduled → 7-day mail → 1-day mail → deleted, each on its minute', async () => {
    const id = await insertApplication(t.ctx.db, { teamId, name: 'shop', domains: ['shop.example.com'] });
    const when = at(10 * DAY);
    expect((await patch(id, when)).statusCode).toBe(200);
    await runDue();
    // The sweep sleeps until the next moment or a minute, whichever is first.
    const sweep = await t.ctx.db
      .selectFrom('jobs')
      .select(['run_at', 'state'])
      .where('key', '=', SWEEP_JOB_KEY)
      .executeTakeFirstOrThrow();
    expect(sweep).toEqual({ run_at: at(MINUTE), state: 'queued' });
    clock.set(at(3 * DAY - MINUTE));
    expect((await t.ctx.services.scheduledDeletion.sweep()).runAgainAt.toISOString()).toBe(at(3 * DAY));

    const steps: Array<[number, string[]]> = [
      [3 * DAY - MINUTE, []],
      [3 * DAY, ['7 days']],
      [9 * DAY - MINUTE, ['7 days']],
      [9 * DAY, ['7 days', '1 day']],
      [10 * DAY - MINUTE, ['7 days', '1 day']],
    ];
    for (const [offset, expected] of steps) {
      clock.set(at(offset));
      await runDue();
      expect(
        sink.to(OWNER).map((m) => /, in (\d+ days?)\./.exec(m.text)?.[1]),
        `at ${at(offset)}`,
      ).toEqual(expected);
      expect(await app(id)).toBeDefined();
    }
    expect(sink.to(CO_OWNER)).toHaveLength(2);

    // Files of the application (where the runtime keeps them: its volumes, releases) go with it, by the
    // runtime's removal before the rows go; a neighbour's stay.
    const files = (appId: number) => appLayout(t.ctx.config.dataDir, appId).root;
    fs.mkdirSync(appLayout(t.ctx.config.dataDir, id).volume('storage'), { recursive: true });
    fs.writeFileSync(path.join(appLayout(t.ctx.config.dataDir, id).volume('storage'), 'upload.txt'), 'data');
    fs.mkdirSync(files(id + 1000), { recursive: true });

    clock.set(when);
    await runDue();
    expect(await app(id)).toBeUndefined();
    expect(fs.existsSync(files(id))).toBe(false);
    expect(fs.existsSync(files(id + 1000))).toBe(true);
    expect(await childRows(t.ctx.db, id)).toBe(0);
    const tombstone = await t.ctx.db
      .selectFrom('application_tombstones')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(tombstone).toMatchObject({
      name: 'shop',
      team_id: teamId,
      team_name: 'acme',
      scheduled_deletion_at: when,
      deleted_at: when,
    });
    expect(JSON.parse(tombstone.details)).toMatchObject({ domains: ['shop.example.com'], secrets: 1 });
    const audit = await t.ctx.db
      .selectFrom('audit_log')
      .selectAll()
      .where('action', '=', 'application.deleted')
      .execute();
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ target: `application:${id}`, team_id: teamId, at: when });

    // The application answers 404; its name and domain are free again.
    const gone = await t.request({
      url: `/api/v1/applications/${id}/scheduled-deletion`,
      headers: t.auth.platform,
    });
    expect(gone.statusCode).toBe(404);
    expect((await patch(id, null)).statusCode).toBe(404);
    const again = await insertApplication(t.ctx.db, { teamId, name: 'shop', domains: ['shop.example.com'] });
    expect(again).not.toBe(id);
    // Two warnings and the record of the deletion, to each of the two owners.
    expect(sink.mails).toHaveLength(6);
    expect(sink.mails.filter((m) => m.subject.includes('" (team acme) was deleted on '))).toHaveLength(2);
  });

  it('set 2 days ahead: only the 7-day warning at once, the 1-day one at its moment', async () => {
    const id = await insertApplication(t.ctx.db, { teamId, name: 'api' });
    const when = at(2 * DAY);
    await patch(id, when);
    await runDue();
    expect(sink.to(OWNER).map((m) => /, in (.+?)\./.exec(m.text)?.[1])).toEqual(['2 days']);
    expect(await app(id)).toMatchObject({ deletion_warning_7d_for: when, deletion_warning_1d_for: null });
    const notes = await t.ctx.db.selectFrom('notifications').select('kind').execute();
    expect(notes.map((n) => n.kind)).toEqual(['deletion_warning_7d', 'deletion_warning_7d']);

    clock.set(at(DAY - MINUTE));
    await runDue();
    expect(sink.to(OWNER)).toHaveLength(1);
    clock.set(at(DAY));
    await runDue();
    expect(sink.to(OWNER).map((m) => /, in (.+?)\./.exec(m.text)?.[1])).toEqual(['2 days', '1 day']);
    expect(sink.mails).toHaveLength(4);
    expect(await app(id)).toMatchObject({ deletion_warning_1d_for: when });
  });

  it('set 3 hours ahead: only the 1-day warning at once, then the deletion', async () => {
    const id = await insertApplication(t.ctx.db, { teamId, name: 'cron' });
    const when = at(3 * HOUR);
    await patch(id, when);
    await runDue();
    expect(sink.to(OWNER).map((m) => /, in (.+?)\./.exec(m.text)?.[1])).toEqual(['3 hours']);
    expect(sink.mails).toHaveLength(2);
    // The 7-day warning is marked as superseded, so it is never sent late.
    expect(await app(id)).toMatchObject({ deletion_warning_7d_for: when, deletion_warning_1d_for: when });
    const kinds = await t.ctx.db.selectFrom('notifications').select('kind').execute();
    expect(kinds.every((k) => k.kind === 'deletion_warning_1d')).toBe(true);

    clock.set(at(3 * HOUR));
    await runDue();
    expect(await app(id)).toBeUndefined();
    expect(sink.mails.filter((m) => m.subject.includes(' will be deleted on '))).toHaveLength(2);
    expect(sink.mails.filter((m) => m.subject.includes(' was deleted on '))).toHaveLength(2);
  });

  it('down over the deletion time: deletes on start and sends no late warning', async () => {
    // Written by another writer (apply) while the sweep was asleep: no wake-up from our routes.
    const warned = await insertApplication(t.ctx.db, {
      teamId,
      name: 'warned',
      scheduledDeletionAt: at(10 * DAY),
    });
    clock.set(at(3 * DAY));
    await runDue();
    expect(sink.mails).toHaveLength(2); // the 7-day warning of `warned`
    const unseen = await insertApplication(t.ctx.db, {
      teamId,
      name: 'unseen',
      scheduledDeletionAt: at(5 * DAY),
    });

    // Berth is down from day 3 to day 11: both deletion times and the 1-day moments pass unseen.
    clock.set(at(11 * DAY));
    const background = await startBackground(t.ctx, { pollMs: 20 });
    try {
      await waitFor(async () =>
        (await app(warned)) === undefined && (await app(unseen)) === undefined ? true : undefined,
      );
      // The records of the deletions are sent by the background work too, after the deletions.
      await waitFor(() =>
        Promise.resolve(
          sink.mails.filter((m) => m.subject.includes(' was deleted on ')).length >= 4 ? true : undefined,
        ),
      );
    } finally {
      await background.stop();
    }
    // No late warning; each deletion is recorded to both owners.
    expect(sink.mails.filter((m) => m.subject.includes(' will be deleted on '))).toHaveLength(2);
    expect(sink.mails.filter((m) => m.subject.includes(' was deleted on '))).toHaveLength(4);
    const tombstones = await t.ctx.db
      .selectFrom('application_tombstones')
      .select(['name', 'scheduled_deletion_at', 'deleted_at'])
      .orderBy('name')
      .execute();
    expect(tombstones).toEqual([
      { name: 'unseen', scheduled_deletion_at: at(5 * DAY), deleted_at: at(11 * DAY) },
      { name: 'warned', scheduled_deletion_at: at(10 * DAY), deleted_at: at(11 * DAY) },
    ]);
    const kinds = await t.ctx.db.selectFrom('notifications').select('kind').execute();
    expect(kinds.filter((n) => n.kind !== 'application_deleted')).toHaveLength(2);
  });

  it("waits for a runtime's cleanup: a failing one holds the deletion back and is retried", async () => {
    const calls: DeletingApplication[] = [];
    t.ctx.services.applicationCleanups.push((deleting) => {
      calls.push(deleting);
      return calls.length === 1 ? Promise.reject(new Error('processes still running')) : Promise.resolve();
    });
    const id = await insertApplication(t.ctx.db, { teamId, name: 'svc', scheduledDeletionAt: at(2 * HOUR) });
    clock.set(at(2 * HOUR));
    await runDue();
    expect(calls).toEqual([{ id, name: 'svc', teamId }]);
    expect(await app(id)).toBeDefined();
    const job = await t.ctx.db
      .selectFrom('jobs')
      .select(['state', 'run_at', 'last_error'])
      .where('key', '=', deleteJobKey(id, at(2 * HOUR)))
      .executeTakeFirstOrThrow();
    expect(job).toEqual({
      state: 'queued',
      run_at: at(2 * HOUR + 1000),
      last_error: 'processes still running',
    });

    clock.set(at(2 * HOUR + 1000));
    await runDue();
    expect(calls).toHaveLength(2);
    expect(await app(id)).toBeUndefined();
    expect(await t.ctx.db.selectFrom('application_tombstones').select('id').execute()).toEqual([{ id }]);
  });

  it('does not lose a wake-up that arrives while the sweep runs', async () => {
    await runDue();
    const sweep = () =>
      t.ctx.db
        .selectFrom('jobs')
        .select(['id', 'run_at'])
        .where('key', '=', SWEEP_JOB_KEY)
        .executeTakeFirstOrThrow();
    const { id } = await sweep();
    const handler = t.ctx.services.scheduledDeletion.jobHandlers()[SWEEP_JOB]!;
    const job = { id, type: SWEEP_JOB, key: SWEEP_JOB_KEY, payload: {}, attempts: 1, maxAttempts: 10 };
    const signal = new AbortController().signal;
    expect(await handler(job, { signal })).toEqual({ runAgainAt: new Date(at(MINUTE)) });
    await t.ctx.db.updateTable('jobs').set({ rerun: 1 }).where('id', '=', id).execute();
    expect(await handler(job, { signal })).toEqual({ runAgainAt: new Date(START) });
  });

  it('picks up a schedule written by another writer within a minute', async () => {
    await runDue();
    const id = await insertApplication(t.ctx.db, { teamId, name: 'late', scheduledDeletionAt: at(2 * HOUR) });
    await runDue();
    expect(sink.mails).toHaveLength(0); // the sweep sleeps until its next minute
    clock.set(at(MINUTE));
    await runDue();
    expect(sink.to(OWNER)).toHaveLength(1);
    expect(await app(id)).toMatchObject({ deletion_warning_1d_for: at(2 * HOUR) });
  });
});
