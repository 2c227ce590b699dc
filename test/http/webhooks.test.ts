/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment,
   @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Issue 31, item 4: team webhooks. An owner registers an endpoint and gets its signing secret once
// (stored sealed, never listed); an event (an application suspended) arrives at an HTTP sink signed with
// that secret; a 500 is retried through the job queue after its backoff and both attempts are listed
// with their answers; an endpoint on a private address is refused at registration with a 422 naming
// `url` unless the operator allows it (BERTH_TOOLS_ALLOW_PRIVATE, the tools' rule); members get 403.
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/domain/clock.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.js';
import { apply } from '../infrastructure/helpers.js';

const document = (name: string) => ({
  apiVersion: 'v1',
  kind: 'Infrastructure',
  metadata: { name, team: 'acme' },
  spec: { application: { name, type: 'nodejs' } },
});

describe.each(DIALECTS)('team webhooks (%s)', (dialect) => {
  let t: TestApp;
  let sink: WebhookSink;
  let appId: number;
  const clock = createManualClock('2030-05-01T10:00:00Z');
  const hooks = '/api/v1/teams/acme/webhooks';

  const call = (method: string, url: string, payload?: unknown, headers = t.auth.platform) =>
    t.request({ method, url, headers, ...(payload !== undefined ? { payload } : {}) });
  const runJobs = () => t.ctx.services.jobs.runner().runDue();

  beforeAll(async () => {
    sink = await startWebhookSink();
    // The sink is on loopback: allowed here as the tools tests allow their sites.
    t = await createTestApp(dialect, { clock, env: { BERTH_TOOLS_ALLOW_PRIVATE: '127.0.0.1' } });
    const applied = await apply(t, document('shop'));
    expect(applied.statusCode, applied.body).toBe(200);
    appId = applied.json().application_id;
  }, 60_000);
  afterAll(async () => {
    await t.close();
    await sink.close();
  });

  it('answers the signing secret once, stores it sealed, and never lists it', async () => {
    const created = await call('POST', hooks, { url: `${sink.url}?once`, events: ['deployment.failed'] });
    expect(created.statusCode, created.body).toBe(201);
    const { data } = created.json();
    expect(data).toMatchObject({ url: `${sink.url}?once`, events: ['deployment.failed'] });
    expect(data.secret).toMatch(/^whsec_[A-Za-z0-9_-]{40,}$/);

    const list = await call('GET', hooks);
    expect(list.statusCode).toBe(200);
    expect(list.json().data.find((h: { id: number }) => h.id === data.id)).toEqual({
      id: data.id,
      url: data.url,
      events: ['deployment.failed'],
      created_at: data.created_at,
    });
    const one = await call('GET', `${hooks}/${data.id}`);
    expect(one.json().data).not.toHaveProperty('secret');
    expect(list.body + one.body).not.toContain(data.secret);

    const rows = await t.ctx.db.selectFrom('webhooks').selectAll().where('id', '=', data.id).execute();
    expect(JSON.stringify(rows)).not.toContain(data.secret);
    expect(t.ctx.secretBox.decrypt(rows[0]!.secret_encrypted)).toBe(data.secret);

    expect((await call('DELETE', `${hooks}/${data.id}`)).statusCode).toBe(204);
    expect((await call('GET', `${hooks}/${data.id}`)).statusCode).toBe(404);
  });

  it('delivers a signed event, retries it after a 500 and records both attempts', async () => {
    const created = await call('POST', hooks, { url: sink.url, events: ['application.suspended'] });
    expect(created.statusCode, created.body).toBe(201);
    const { id, secret } = created.json().data;
    // A webhook for other events hears nothing of this one.
    const other = await call('POST', hooks, { url: `${sink.url}?other`, events: ['deployment.succeeded'] });
    expect(other.statusCode).toBe(201);

    sink.answer(500, 200);
    const suspended = await call('POST', `/api/v1/applications/${appId}/suspend`);
    expect(suspended.statusCode, suspended.body).toBe(200);
    await runJobs();
    expect(sink.received).toHaveLength(1);

    let deliveries = (await call('GET', `${hooks}/${id}/deliveries`)).json().data;
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ event: 'application.suspended', state: 'pending' });
    expect(deliveries[0].attempts).toEqual([
      expect.objectContaining({ attempt: 1, status_code: 500, error: 'The endpoint answered 500' }),
    ]);

    // Not before its backoff (the runner's first: 1 s); then again, answered 200.
    await runJobs();
    expect(sink.received).toHaveLength(1);
    clock.advance(2000);
    await runJobs();
    expect(sink.received).toHaveLength(2);

    deliveries = (await call('GET', `${hooks}/${id}/deliveries`)).json().data;
    expect(deliveries[0].state).toBe('delivered');
    expect(
      deliveries[0].attempts.map((a: { attempt: number; status_code: number }) => [a.attempt, a.status_code]),
    ).toEqual([
      [1, 500],
      [2, 200],
    ]);
    expect(deliveries[0].attempts[1]).toMatchObject({ error: null, response: 'thanks' });

    for (const request of sink.received) {
      expect(request.method).toBe('POST');
      expect(request.url).toBe('/hooks');
      expect(request.headers['content-type']).toBe('application/json');
      expect(request.headers['x-berth-event']).toBe('application.suspended');
      expect(request.headers['x-berth-delivery']).toBe(deliveries[0].id);
      // The signature verifies with the secret from registration, over "<t>.<body>".
      const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(request.headers['x-berth-signature']));
      expect(match).not.toBeNull();
      const expected = createHmac('sha256', secret).update(`${match![1]}.${request.body}`).digest('hex');
      expect(match![2]).toBe(expected);
      const body = JSON.parse(request.body);
      expect(body).toEqual({
        id: deliveries[0].event_id,
        event: 'application.suspended',
        created_at: expect.any(String),
        data: { application: { id: appId, name: 'shop' } },
      });
    }
    // Each attempt is signed at its own time.
    const times = sink.received.map((r) => /^t=(\d+)/.exec(String(r.headers['x-berth-signature']))![1]);
    expect(Number(times[1]) - Number(times[0])).toBe(2);
    expect(sink.received.some((r) => r.url.includes('other'))).toBe(false);
  });

  it("sends a scheduled deletion's warning and the deletion itself to a webhook of every event", async () => {
    const applied = await apply(t, document('doomed'), '?auto_deploy=false');
    expect(applied.statusCode, applied.body).toBe(200);
    const doomedId: number = applied.json().application_id;
    const created = await call('POST', hooks, { url: `${sink.url}?all`, events: ['*'] });
    expect(created.statusCode).toBe(201);
    const heard = () =>
      sink.received
        .filter((r) => r.url.endsWith('?all'))
        .map((r) => ({ event: r.headers['x-berth-event'], data: JSON.parse(r.body).data }));

    // Two days ahead: the 7-day warning is due at once.
    const at = new Date(clock.now().getTime() + 2 * 24 * 3600 * 1000).toISOString();
    const scheduled = await call('PATCH', `/api/v1/applications/${doomedId}`, { scheduled_deletion_at: at });
    expect(scheduled.statusCode, scheduled.body).toBe(200);
    await runJobs();
    expect(heard()).toEqual([
      {
        event: 'deletion.warning',
        data: { application: { id: doomedId, name: 'doomed' }, scheduled_deletion_at: at, warning: '7d' },
      },
    ]);

    const deleted = await call('DELETE', `/api/v1/applications/${doomedId}`);
    expect(deleted.statusCode, deleted.body).toBe(202);
    await runJobs();
    expect(heard()[1]).toEqual({
      event: 'application.deleted',
      data: {
        application: { id: doomedId, name: 'doomed' },
        deleted_at: clock.now().toISOString(),
        scheduled_for: clock.now().toISOString(),
      },
    });
    expect(heard()).toHaveLength(2);
  });

  it('refuses unknown events and non-HTTP URLs with 422 naming the field', async () => {
    const answer = await call('POST', hooks, {
      url: 'ftp://example.com/x',
      events: ['deployment.done', '*'],
    });
    expect(answer.statusCode).toBe(422);
    expect(Object.keys(answer.json().errors).sort()).toEqual(['events.0', 'url']);
    expect(answer.json().errors['events.0'][0]).toContain('accepted: deployment.started');
    expect(answer.json().errors.url[0]).toContain('http or https');
  });

  it('lets only owners see or change webhooks', async () => {
    const member = await t.ctx.identity.createUser({
      email: 'member@example.com',
      team: 'acme',
      role: 'member',
    });
    const headers = authHeaders(member).platform;
    expect((await call('GET', hooks, undefined, headers)).statusCode).toBe(403);
    const refused = await call('POST', hooks, { url: sink.url, events: ['*'] }, headers);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().message).toMatch(/needs the owner role in team acme/);
  });
});

describe.each(DIALECTS)('team webhooks under the private-address rule (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  it('refuses loopback, private and metadata addresses at registration with 422 naming url', async () => {
    for (const url of [
      'http://127.0.0.1:9/hooks',
      'http://localhost/hooks',
      'http://10.1.2.3/hooks',
      'http://169.254.169.254/latest/meta-data',
      'http://[::ffff:127.0.0.1]/hooks',
    ]) {
      const answer = await t.request({
        method: 'POST',
        url: '/api/v1/teams/acme/webhooks',
        headers: t.auth.platform,
        payload: { url, events: ['*'] },
      });
      expect(answer.statusCode, url).toBe(422);
      expect(Object.keys(answer.json().errors), url).toEqual(['url']);
      expect(answer.json().errors.url[0], url).toMatch(/^Webhooks cannot be sent to .*: .* address\.$/);
    }
    expect(await t.ctx.db.selectFrom('webhooks').selectAll().execute()).toEqual([]);
  });
});
