// The mail outbox. Every message is a row first (recipient, subject, body, state, attempts) written in
// the transaction of the state change that caused it; a job per message then sends it over SMTP and
// retries with backoff. Without SMTP configured, messages stay `unsent` and visible through the API.
import type { Insertable, Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import { iso, type Clock } from '../../domain/clock.js';
import type { Database } from '../../db/schema/index.js';
import type {
  NotificationKind,
  NotificationState,
  NotificationsTable,
} from '../../db/schema/scheduled-deletion.js';
import { createNotificationRepository, type NotificationRow } from '../../db/repositories/notifications.js';
import type { Mailer } from '../../drivers/mail/types.js';
import { enqueue, jobKey, type JobType } from '../jobs.js';
import type { JobHandler, RunningJob } from '../../jobs/runner.js';

type Db = Kysely<Database> | Transaction<Database>;

export const NOTIFICATION_SEND_JOB = 'notifications.send' satisfies JobType;
export const sendJobKey = (id: number): string => jobKey('notifications.send', { id });

/** A message to queue: the row's own columns; state, attempts and times are the queue's. */
export type NewNotification = Pick<
  Insertable<NotificationsTable>,
  'team_id' | 'application_id' | 'kind' | 'dedupe_key' | 'recipient' | 'subject' | 'body' | 'scheduled_for'
> & { application_id: number | null; scheduled_for: string | null };

export interface NotificationView {
  id: number;
  kind: NotificationKind;
  application_id: number | null;
  recipient: string;
  subject: string;
  body: string;
  state: NotificationState;
  attempts: number;
  last_error: string | null;
  scheduled_for: string | null;
  created_at: string;
  sent_at: string | null;
}

/** Says whether a queued message still means something (a warning about a schedule that changed does not). */
export type RelevanceCheck = (db: Db, row: NotificationRow, now: Date) => Promise<boolean>;

/**
 * Writes the messages and their send jobs inside the caller's transaction, so that a warning marker and
 * its mail commit together or not at all.
 */
export async function queueNotifications(trx: Db, messages: NewNotification[], now: Date): Promise<number[]> {
  const at = iso(now);
  const ids: number[] = [];
  for (const message of messages) {
    const id = await createNotificationRepository(trx).insert({
      ...message,
      state: 'unsent',
      attempts: 0,
      created_at: at,
      updated_at: at,
    });
    await enqueue(trx, 'notifications.send', { id }, { now });
    ids.push(id);
  }
  return ids;
}

export async function listTeamNotifications(
  db: Db,
  teamId: number,
  options: { limit: number; beforeId?: number | undefined },
): Promise<NotificationView[]> {
  return createNotificationRepository(db).listForTeam(teamId, options.limit, options.beforeId);
}

/** The outbox as the platform API reads it (src/composition.ts builds it). */
export function createNotificationService(deps: { db: Kysely<Database> }) {
  return {
    /** A team's messages, newest first, `limit` at most, before the id `beforeId` when given. */
    listForTeam: (teamId: number, options: { limit: number; beforeId?: number | undefined }) =>
      listTeamNotifications(deps.db, teamId, options),
  };
}

export type NotificationService = ReturnType<typeof createNotificationService>;

export interface NotificationSenderDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** Undefined when no SMTP is configured: messages then stay unsent. */
  mailer: Mailer | undefined;
  relevance?: Partial<Record<NotificationKind, RelevanceCheck>>;
}

/** The handler of `notifications.send`: one message, re-read before acting, sent at most once per success. */
export function createNotificationSendHandler(deps: NotificationSenderDeps): JobHandler {
  const { db, clock, logger, mailer } = deps;
  return async (job: RunningJob) => {
    const id = (job.payload as { id?: unknown }).id;
    if (typeof id !== 'number') return;
    const outbox = createNotificationRepository(db);
    const row = await outbox.find(id);
    if (!row || row.state !== 'unsent') return;
    const now = clock.now();
    const check = deps.relevance?.[row.kind];
    if (check && !(await check(db, row, now))) {
      await outbox.cancelUnsent(id, iso(now));
      return;
    }
    // No SMTP: the message stays unsent and visible; a start with SMTP configured sends it then.
    if (!mailer) return;
    try {
      await mailer.send({ to: row.recipient, subject: row.subject, text: row.body });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      const last = job.attempts >= job.maxAttempts;
      await outbox.recordFailure(id, message.slice(0, 2000), last, iso(clock.now()));
      if (last) logger.error({ notification: id }, 'giving up on a notification');
      throw error; // the runner retries with backoff
    }
    await outbox.markSent(id, iso(clock.now()));
  };
}

/** Queues a send job for every unsent message (after a start with SMTP configured). */
export async function requeueUnsent(db: Kysely<Database>, now: Date, limit = 10_000): Promise<number> {
  const ids = await createNotificationRepository(db).unsentIds(limit);
  for (const id of ids) {
    await enqueue(db, 'notifications.send', { id }, { now });
  }
  return ids.length;
}
