// Two Berth processes on one PostgreSQL: every warning is sent once and every deletion runs once, even
// when both sweep and delete at the same moment (the compare-and-set UPDATEs decide, not timing).
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createContext, type AppContext } from '../../src/context.js';
import { createManualClock } from '../../src/domain/clock.js';
import { testConfig } from '../helpers/app.js';
import { createTestPostgresDatabase } from '../helpers/store.js';
import { DAY, HOUR, insertApplication, startSmtpSink, type SmtpSink } from './helpers.js';

const START = '2026-05-01T00:00:00.000Z';
const APPS = 8;
/** The applications' distinct deletion times: four applications are due at each. */
const TIMES = 2;

describe('scheduled deletion with two runners on one PostgreSQL', () => {
  let database: { url: string; drop(): Promise<void> };
  let sink: SmtpSink;
  const clock = createManualClock(START);
  const contexts: AppContext[] = [];

  beforeAll(async () => {
    database = await createTestPostgresDatabase();
    sink = await startSmtpSink();
    const masterKey = randomBytes(32);
    // One after the other: the first migrates, the second finds the schema in place.
    for (let i = 0; i < 2; i++) {
      const config = testConfig({ BERTH_DATABASE_URL: database.url, BERTH_SMTP_URL: sink.url });
      contexts.push(await createContext(config, { clock, masterKey, logger: pino({ level: 'silent' }) }));
    }
  });
  afterAll(async () => {
    for (const ctx of contexts) await ctx.close();
    await sink.close();
    await database.drop();
  });

  it('sends each warning once and deletes each application once', async () => {
    const [a, b] = contexts as [AppContext, AppContext];
    const owner = await a.identity.createUser({ email: 'owner@example.com', team: 'acme' });
    await a.identity.createUser({ email: 'second@example.com', team: 'acme', role: 'owner' });
    const start = new Date(START).getTime();
    const apps: Array<{ id: number; name: string; when: number }> = [];
    for (let i = 0; i < APPS; i++) {
      const when = start + 8 * DAY + (i % TIMES) * 5 * HOUR;
      const name = `app-${i}`;
      const id = await insertApplication(a.db, {
        teamId: owner.team_id,
        name,
        scheduledDeletionAt: new Date(when).toISOString(),
      });
      apps.push({ id, name, when });
    }
    await a.services.scheduledDeletion.start();
    await b.services.scheduledDeletion.start();
    const services = [a.services.scheduledDeletion, b.services.scheduledDeletion];
    const runners = [a.services.jobs.runner(), b.services.jobs.runner()];

    const moments = [...new Set(apps.flatMap((app) => [app.when - 7 * DAY, app.when - DAY, app.when]))].sort(
      (x, y) => x - y,
    );
    const outcomes: string[] = [];
    for (const moment of moments) {
      clock.set(new Date(moment));
      const due = apps.filter((app) => app.when === moment);
      const results = await Promise.all([
        services[0]!.sweep(),
        services[1]!.sweep(),
        ...due.flatMap((app) => services.map((s) => s.deleteDue(app.id, new Date(app.when).toISOString()))),
        runners[0]!.runDue(),
        runners[1]!.runDue(),
      ]);
      outcomes.push(...results.filter((r): r is 'deleted' | 'skipped' => typeof r === 'string'));
      await Promise.all(runners.map((r) => r.runDue()));
    }

    // The direct calls race the runners' deletion jobs: either may do a deletion, never both (the
    // tombstones and audit rows below are one per application).
    expect(outcomes.filter((o) => o === 'deleted').length).toBeLessThanOrEqual(APPS);
    for (const app of apps) {
      for (const recipient of ['owner@example.com', 'second@example.com']) {
        const mails = sink.to(recipient).filter((m) => m.subject.startsWith(`Application "${app.name}"`));
        expect(
          mails.map((m) => /, in (.+?)\./.exec(m.text)?.[1] ?? / was deleted /.exec(m.subject)?.[0]),
          `${app.name} → ${recipient}`,
        ).toEqual(['7 days', '1 day', ' was deleted ']);
      }
    }
    expect(sink.mails).toHaveLength(APPS * 2 * 3);
    expect(await a.db.selectFrom('applications').select('id').execute()).toHaveLength(0);
    expect(await a.db.selectFrom('application_tombstones').select('id').execute()).toHaveLength(APPS);
    const deletions = await a.db
      .selectFrom('audit_log')
      .select('target')
      .where('action', '=', 'application.deleted')
      .execute();
    expect(deletions.map((d) => d.target).sort()).toEqual(apps.map((app) => `application:${app.id}`).sort());
    const outbox = await a.db.selectFrom('notifications').select(['state', 'attempts']).execute();
    expect(outbox).toHaveLength(APPS * 2 * 3);
    expect(outbox.every((n) => n.state === 'sent' && n.attempts === 1)).toBe(true);
  });
});
