// Team webhooks (issue 31, item 4): a team's owners register endpoints for events; each event is written
// as one delivery per matching endpoint, in the transaction of the change that caused it where there is
// one, and sent by a durable job (`webhook.deliver`) that the job runner retries with its exponential
// backoff. Every attempt is recorded with its answer. Bodies are signed with the endpoint's secret
// (sealed at rest, shown once): `X-Berth-Signature: t=<unix time>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
// Endpoints are reached through the tools' private-address rule (the transport, checked at registration
// and again, with DNS resolved, at every send).
import { createHmac } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../crypto/secret-box.js';
import { createWebhookRepository, type WebhookRow } from '../../db/repositories/webhooks.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock, type IdGenerator } from '../../domain/clock.js';
import { AppError, FieldErrorCollector, fieldError } from '../../domain/errors.js';
import { WEBHOOK_EVENTS, type WebhookEventName } from '../../domain/webhook-events.js';
import type { JobHandler, RunningJob } from '../../jobs/runner.js';
import { auditChange } from '../audit.js';
import type { IdentityService } from '../identity.js';
import { enqueue, handles } from '../jobs.js';

type Db = Kysely<Database> | Transaction<Database>;

/** Something that happened to a team's resource, as its webhooks receive it in `data`. */
export interface WebhookEvent {
  teamId: number;
  event: WebhookEventName;
  data: Record<string, unknown>;
}

/** Attempts of one delivery (the runner's backoff: 1 s, 2 s, 4 s … capped at 5 min; about 20 min in all). */
export const WEBHOOK_DELIVERY_ATTEMPTS = 12;
/** Endpoints per team. */
export const WEBHOOKS_PER_TEAM = 20;
const URL_MAX = 2000;
/** Deliveries are kept this long (attempts with them). */
const DELIVERY_RETENTION_MS = 30 * 24 * 3600 * 1000;
/** What of an endpoint's answer is kept with its attempt. */
const EXCERPT_CHARS = 1000;

/**
 * How deliveries leave Berth (src/drivers/net/webhooks.ts): under the tools' private-address rule, with
 * the address resolved and checked at each send, a time limit and a cap on the answer read.
 */
export interface WebhookTransport {
  /** Why the URL may not receive deliveries (a private address, a name that does not resolve), or undefined. */
  refusal(url: URL): Promise<string | undefined>;
  post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: Buffer }>;
}

/** The one way features announce an event (src/composition.ts builds it; services receive it). */
export interface WebhookEmitter {
  /** Writes the deliveries in `db` (the caller's transaction, when it passes one): they commit with the change. */
  emit(db: Db, event: WebhookEvent): Promise<void>;
  /** The same on its own, after the change: a failure is logged, never thrown at the caller. */
  notify(event: WebhookEvent): Promise<void>;
}

export function signatureOf(secret: string, timestamp: number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

export function createWebhookEmitter(deps: {
  db: Kysely<Database>;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  wakeJobs: () => void;
}): WebhookEmitter {
  async function write(trx: Db, event: WebhookEvent): Promise<void> {
    const repo = createWebhookRepository(trx);
    const hooks = await repo.listForTeam(event.teamId);
    const now = deps.clock.now();
    const at = iso(now);
    await repo.pruneDeliveries(
      hooks.map((h) => h.id),
      iso(new Date(now.getTime() - DELIVERY_RETENTION_MS)),
    );
    const wanted = hooks.filter((h) => {
      const events = JSON.parse(h.events) as string[];
      return events.includes('*') || events.includes(event.event);
    });
    if (wanted.length === 0) return;
    const eventId = deps.ids.uuid();
    // One body for every endpoint and attempt: what was signed is what is stored and sent.
    const body = JSON.stringify({ id: eventId, event: event.event, created_at: at, data: event.data });
    for (const hook of wanted) {
      const id = await repo.insertDelivery({
        webhook_id: hook.id,
        uuid: deps.ids.uuid(),
        event_id: eventId,
        event: event.event,
        body,
        state: 'pending',
        attempts: 0,
        created_at: at,
        updated_at: at,
      });
      await enqueue(trx, 'webhook.deliver', { id }, { now, maxAttempts: WEBHOOK_DELIVERY_ATTEMPTS });
    }
  }

  const emitter: WebhookEmitter = {
    async emit(db, event) {
      if (db.isTransaction) await write(db, event);
      else await db.transaction().execute((trx) => write(trx, event));
      deps.wakeJobs();
    },
    async notify(event) {
      try {
        await emitter.emit(deps.db, event);
      } catch (error) {
        deps.logger.warn(
          { err: error, event: event.event, team: event.teamId },
          'webhook event not recorded',
        );
      }
    },
  };
  return emitter;
}

export interface WebhookServiceDeps {
  db: Kysely<Database>;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  secretBox: SecretBox;
  identity: Pick<IdentityService, 'requireTeam'>;
  transport: () => WebhookTransport;
}

function webhookView(row: WebhookRow) {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events) as string[],
    created_at: row.created_at,
  };
}

const statusOk = (status: number | null) => status !== null && status >= 200 && status < 300;

export function createWebhookService(deps: WebhookServiceDeps) {
  const { db, clock } = deps;
  const repo = createWebhookRepository(db);

  async function requireWebhook(userId: number, teamRef: string, idText: string) {
    const team = await deps.identity.requireTeam(userId, teamRef);
    const row = /^[1-9]\d{0,15}$/.test(idText) ? await repo.find(team.id, Number(idText)) : undefined;
    if (!row) throw new AppError('not_found', `Webhook ${idText} not found in team ${team.name}`);
    return row;
  }

  /** The URL and events as given, or one 422 naming every field that is wrong. */
  function checkInput(body: { url: string; events: string[] }): URL {
    const problems = new FieldErrorCollector();
    let url: URL | undefined;
    try {
      url = new URL(body.url);
    } catch {
      problems.add('url', 'The url must be an absolute http:// or https:// URL.');
    }
    if (url && url.protocol !== 'http:' && url.protocol !== 'https:')
      problems.add('url', `The url must use http or https, not ${url.protocol.replace(/:$/, '')}.`);
    if (url && (url.username !== '' || url.password !== ''))
      problems.add('url', 'The url must not hold a user name or password.');
    if (body.url.length > URL_MAX) problems.add('url', `The url must have at most ${URL_MAX} characters.`);
    const accepted = [...WEBHOOK_EVENTS, '*'];
    body.events.forEach((event, i) => {
      if (!accepted.includes(event))
        problems.add(
          `events.${i}`,
          `Unknown event '${event.slice(0, 100)}'; accepted: ${accepted.join(', ')}.`,
        );
    });
    if (body.events.length === 0)
      problems.add('events', `Name at least one event; accepted: ${accepted.join(', ')}.`);
    problems.throwIfAny();
    return url!;
  }

  async function deliver(deliveryId: number, job: RunningJob): Promise<void> {
    const delivery = await repo.findDelivery(deliveryId);
    if (!delivery || delivery.state !== 'pending') return;
    const hook = await repo.findById(delivery.webhook_id);
    if (!hook) return;
    const timestamp = Math.floor(clock.now().getTime() / 1000);
    const secret = deps.secretBox.decrypt(hook.secret_encrypted);
    const headers = {
      'content-type': 'application/json',
      'user-agent': 'Berth-Webhooks/1',
      'x-berth-event': delivery.event,
      'x-berth-delivery': delivery.uuid,
      'x-berth-signature': `t=${timestamp},v1=${signatureOf(secret, timestamp, delivery.body)}`,
    };
    const started = performance.now();
    let status: number | null = null;
    let excerpt: string | null = null;
    let error: string | null = null;
    try {
      const answer = await deps.transport().post(hook.url, headers, delivery.body);
      status = answer.status;
      excerpt = answer.body.toString('utf8').slice(0, EXCERPT_CHARS);
      if (!statusOk(status)) error = `The endpoint answered ${status}`;
    } catch (failure) {
      // Our own words (a refused address, a timeout, a refused connection): never the secret, never the body.
      error = (failure instanceof Error ? failure.message : String(failure)).slice(0, EXCERPT_CHARS);
    }
    const delivered = statusOk(status);
    const last = job.attempts >= job.maxAttempts;
    await repo.recordAttempt(
      deliveryId,
      {
        attempt: job.attempts,
        status_code: status,
        error,
        response_excerpt: excerpt,
        duration_ms: Math.round(performance.now() - started),
        at: iso(clock.now()),
      },
      delivered ? 'delivered' : last ? 'failed' : 'pending',
    );
    // A throw hands the delivery back to the runner, which retries it after its backoff.
    if (!delivered) throw new Error(`webhook delivery ${delivery.uuid}: ${error ?? 'failed'}`);
  }

  return {
    async create(userId: number, teamRef: string, body: { url: string; events: string[] }) {
      const team = await deps.identity.requireTeam(userId, teamRef);
      const url = checkInput(body);
      // The tools' rule, at registration: a private address is refused now, not at the first event.
      const refusal = await deps.transport().refusal(url);
      if (refusal !== undefined)
        throw fieldError('url', `Webhooks cannot be sent to ${url.host}: ${refusal}.`);
      if ((await repo.count(team.id)) >= WEBHOOKS_PER_TEAM)
        throw new AppError('conflict', `Team ${team.name} already has ${WEBHOOKS_PER_TEAM} webhooks`);
      const secret = `whsec_${deps.ids.token(32)}`;
      const events = [...new Set(body.events)];
      const at = iso(clock.now());
      const id = await db.transaction().execute(async (trx) => {
        const made = await createWebhookRepository(trx).insert({
          team_id: team.id,
          url: url.href,
          events: JSON.stringify(events),
          secret_encrypted: deps.secretBox.encrypt(secret),
          created_by: userId,
          created_at: at,
        });
        await auditChange(trx, {
          at,
          action: 'webhook.create',
          teamId: team.id,
          target: { kind: 'webhook', id: made },
          after: { url: url.href, events },
        });
        return made;
      });
      // The only answer that carries the secret.
      return { ...webhookView((await repo.findById(id))!), secret };
    },

    async list(userId: number, teamRef: string) {
      const team = await deps.identity.requireTeam(userId, teamRef);
      return (await repo.listForTeam(team.id)).map(webhookView);
    },

    async get(userId: number, teamRef: string, idText: string) {
      return webhookView(await requireWebhook(userId, teamRef, idText));
    },

    async remove(userId: number, teamRef: string, idText: string) {
      const row = await requireWebhook(userId, teamRef, idText);
      // Its deliveries, attempts go with it (cascade); a queued delivery job then finds nothing to send.
      await db.transaction().execute(async (trx) => {
        await createWebhookRepository(trx).remove(row.team_id, row.id);
        await auditChange(trx, {
          at: clock.now(),
          action: 'webhook.delete',
          teamId: row.team_id,
          target: { kind: 'webhook', id: row.id },
          before: { url: row.url, events: JSON.parse(row.events) as unknown },
        });
      });
    },

    /** The webhook's deliveries, newest first, each with its attempts and their answers. */
    async deliveries(userId: number, teamRef: string, idText: string, limit: number) {
      const row = await requireWebhook(userId, teamRef, idText);
      const deliveries = await repo.deliveries(row.id, limit);
      const attempts = await repo.attemptsOf(deliveries.map((d) => d.id));
      return deliveries.map((d) => ({
        id: d.uuid,
        event_id: d.event_id,
        event: d.event,
        state: d.state,
        created_at: d.created_at,
        attempts: attempts
          .filter((a) => a.delivery_id === d.id)
          .map((a) => ({
            attempt: a.attempt,
            status_code: a.status_code,
            error: a.error,
            response: a.response_excerpt,
            duration_ms: a.duration_ms,
            at: a.at,
          })),
      }));
    },

    handlers(): Record<string, JobHandler> {
      return handles('webhook.deliver', ({ id }, job) => deliver(id, job));
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;
