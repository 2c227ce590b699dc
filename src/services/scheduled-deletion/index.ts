// Scheduled deletion of applications: a recurring sweep over the schedule index sends the 7-day and
// 1-day warnings and queues one deletion job per due application. Every action is a compare-and-set
// against the current `scheduled_deletion_at`, so any number of runners on one database act once, and
// a schedule changed by any writer (apply, PATCH, dashboard) makes its warnings due again.
import { enqueue, handles, jobKey, type JobType } from '../jobs.js';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { Mailer } from '../../drivers/mail/types.js';
import { iso, type Clock } from '../../domain/clock.js';
import { recordAudit } from '../../db/repositories/audit.js';
import { createIdentityRepository } from '../../db/repositories/identity.js';
import { createNotificationRepository } from '../../db/repositories/notifications.js';
import {
  createScheduledDeletionRepository,
  type ScheduledApplication,
} from '../../db/repositories/scheduled-deletion.js';
import type { Database } from '../../db/schema/index.js';
import { enqueueJob, jobExists, rerunRequested } from '../../jobs/queue.js';
import type { JobHandler, JobResult } from '../../jobs/runner.js';
import {
  createNotificationSendHandler,
  NOTIFICATION_SEND_JOB,
  queueNotifications,
  requeueUnsent,
  type RelevanceCheck,
} from '../notifications/index.js';
import type { WebhookEmitter } from '../webhooks/index.js';
import { deletedMessage, warningMessage, type ApplicationInventory } from './message.js';
import { dueWarning, MINUTE_MS, ONE_DAY_MS, SEVEN_DAYS_MS, type WarningKind } from './policy.js';

type Db = Kysely<Database> | Transaction<Database>;

export const SWEEP_JOB = 'scheduled_deletion.sweep' satisfies JobType;
export const SWEEP_JOB_KEY = SWEEP_JOB;
export const deleteJobKey = (applicationId: number, scheduledFor: string): string =>
  jobKey('scheduled_deletion.delete', { applicationId, scheduledFor });

/** Longest gap between sweeps: picks up schedules written by apply, which does not wake the sweep. */
export const SWEEP_INTERVAL_MS = MINUTE_MS;
const SWEEP_MAX_ATTEMPTS = 1_000_000;
/** Rows handled per query; a full batch makes the sweep run again at once. */
const BATCH = 500;

export interface SweepResult {
  runAgainAt: Date;
  warningsSent: number;
  deletionsQueued: number;
}

export type DeletionOutcome = 'deleted' | 'skipped';

const NO_MAIL_SERVER =
  'not sent: no mail server is configured (BERTH_SMTP_URL), and the application was deleted before one was';

export interface ScheduledDeletionDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  publicUrl: string;
  /** What other features stop or remove before an application is deleted (see onApplicationDeletion). */
  cleanups?: () => readonly ApplicationCleanup[];
  /** Whether a mail server is configured: without one, a warning still waiting at the deletion was never sent. */
  mailConfigured?: boolean;
  /** Team webhooks' events (deletion.warning, application.deleted), written in the same transactions. */
  events: WebhookEmitter;
}

export interface DeletingApplication {
  id: number;
  name: string;
  teamId: number;
}

/**
 * Work another feature must do before an application is deleted: stop what a runtime started for it,
 * drop its services' databases. Runs before the deletion's transaction, so it must be idempotent; a
 * throw fails the deletion job, which the runner retries with backoff, and nothing is deleted meanwhile.
 */
export type ApplicationCleanup = (app: DeletingApplication) => Promise<void>;

export function createScheduledDeletionService(deps: ScheduledDeletionDeps) {
  const { db, clock, logger } = deps;

  async function inventory(trx: Db, appId: number): Promise<ApplicationInventory | undefined> {
    const app = await createScheduledDeletionRepository(trx).contents(appId);
    if (!app) return undefined;
    return {
      id: app.id,
      name: app.name,
      teamId: app.team_id,
      teamName: app.team_name,
      scheduledAt: app.scheduled_deletion_at,
      domains: app.domains,
      services: app.services,
      volumes: app.volumes,
      secrets: app.secrets,
      deployments: app.deployments,
    };
  }

  const ownersOf = (trx: Db, teamId: number) => createIdentityRepository(trx).teamOwners(teamId);

  /**
   * Marks the warning as handled for this exact schedule and writes its mails, in one transaction.
   * The UPDATE's WHERE is the compare-and-set: only the runner that flips the marker sends.
   */
  async function warn(candidate: ScheduledApplication, kind: WarningKind, now: Date): Promise<boolean> {
    const t = candidate.scheduled_deletion_at;
    return db.transaction().execute(async (trx) => {
      const flipped = await createScheduledDeletionRepository(trx).markWarned(candidate.id, t, kind);
      if (!flipped) return false;
      const app = await inventory(trx, candidate.id);
      if (!app) return false;
      const teamId = app.teamId;
      const owners = await ownersOf(trx, teamId);
      if (owners.length === 0)
        logger.warn({ application: app.id }, 'deletion warning: the team has no owner');
      const { subject, body } = warningMessage(app, now, deps.publicUrl);
      await queueNotifications(
        trx,
        owners.map((owner) => ({
          team_id: teamId,
          application_id: app.id,
          kind: kind === '7d' ? 'deletion_warning_7d' : 'deletion_warning_1d',
          dedupe_key: `deletion_warning_${kind}:${app.id}:${t}:${owner.id}`,
          recipient: owner.email,
          subject,
          body,
          scheduled_for: t,
        })),
        now,
      );
      await deps.events.emit(trx, {
        teamId,
        event: 'deletion.warning',
        data: {
          application: { id: app.id, name: app.name },
          scheduled_deletion_at: t,
          warning: kind,
        },
      });
      return true;
    });
  }

  return {
    /** One pass: queue due deletions, send due warnings, and say when the next pass is needed. */
    async sweep(): Promise<SweepResult> {
      const now = clock.now();
      const nowIso = iso(now);
      const dayIso = iso(new Date(now.getTime() + ONE_DAY_MS));
      const weekIso = iso(new Date(now.getTime() + SEVEN_DAYS_MS));

      const schedules = createScheduledDeletionRepository(db);
      const due = await schedules.due(nowIso, BATCH);
      let deletionsQueued = 0;
      for (const app of due) {
        const scheduledFor = app.scheduled_deletion_at;
        // Once per (application, time): a failing deletion keeps its own backoff and is not reset here.
        if (await jobExists(db, deleteJobKey(app.id, scheduledFor))) continue;
        await enqueue(db, 'scheduled_deletion.delete', { applicationId: app.id, scheduledFor }, { now });
        deletionsQueued += 1;
      }

      const in1d = await schedules.pendingWarnings('1d', nowIso, dayIso, BATCH);
      const in7d = await schedules.pendingWarnings('7d', nowIso, weekIso, BATCH);
      const candidates = new Map<number, ScheduledApplication>();
      for (const c of [...in1d, ...in7d]) candidates.set(c.id, c);
      let warningsSent = 0;
      for (const candidate of candidates.values()) {
        const kind = dueWarning(new Date(candidate.scheduled_deletion_at), now);
        if (kind && (await warn(candidate, kind, now))) warningsSent += 1;
      }

      const moments = [now.getTime() + SWEEP_INTERVAL_MS];
      const nextDeletion = await schedules.nextSchedule(nowIso);
      if (nextDeletion) moments.push(new Date(nextDeletion).getTime());
      const next1d = await schedules.nextSchedule(dayIso, '1d');
      if (next1d) moments.push(new Date(next1d).getTime() - ONE_DAY_MS);
      const next7d = await schedules.nextSchedule(weekIso, '7d');
      if (next7d) moments.push(new Date(next7d).getTime() - SEVEN_DAYS_MS);
      const full = due.length === BATCH || in1d.length === BATCH || in7d.length === BATCH;
      return {
        runAgainAt: full ? now : new Date(Math.min(...moments)),
        warningsSent,
        deletionsQueued,
      };
    },

    /**
     * Deletes the application if it is still scheduled for exactly `scheduledFor` and that time has come.
     * What runs for it and its files (releases, volumes, services' data) go first, through the cleanups
     * (the runtime driver's and the services' remove); its rows (domains, secrets, volumes, services,
     * deployments) go with it by cascade; the tombstone, the audit record and the row's removal commit
     * together.
     */
    async deleteDue(applicationId: number, scheduledFor: string): Promise<DeletionOutcome> {
      const now = clock.now();
      const nowIso = iso(now);
      const pending = await createScheduledDeletionRepository(db).findDue(
        applicationId,
        scheduledFor,
        nowIso,
      );
      if (!pending) return 'skipped';
      // Outside the transaction: stopping processes can take seconds, and SQLite has one writer.
      for (const cleanup of deps.cleanups?.() ?? []) {
        await cleanup({ id: pending.id, name: pending.name, teamId: pending.team_id });
      }
      const outcome = await db.transaction().execute(async (trx): Promise<DeletionOutcome> => {
        // The claim: a compare-and-set that also takes the row lock on PostgreSQL, so a second runner
        // waits here and then finds the row gone or changed. Everything below reads a stable row.
        const schedules = createScheduledDeletionRepository(trx);
        if (!(await schedules.claimDue(applicationId, scheduledFor, nowIso))) return 'skipped';
        const app = await inventory(trx, applicationId);
        if (!app) return 'skipped';
        await schedules.deleteApplication(applicationId);
        const details = {
          domains: app.domains,
          services: app.services,
          volumes: app.volumes,
          secrets: app.secrets,
          deployments: app.deployments,
        };
        await schedules.insertTombstone({
          id: app.id,
          name: app.name,
          team_id: app.teamId,
          team_name: app.teamName,
          scheduled_deletion_at: scheduledFor,
          deleted_at: nowIso,
          details: JSON.stringify(details),
        });
        await recordAudit(trx, {
          at: nowIso,
          userId: null,
          teamId: app.teamId,
          action: 'application.deleted',
          target: `application:${app.id}`,
          details: {
            reason: 'scheduled_deletion',
            name: app.name,
            scheduled_deletion_at: scheduledFor,
            ...details,
          },
        });
        // Warnings still waiting would now be wrong: the deletion has happened. Without a mail server
        // they were never sent, and the outbox says so rather than that they were dropped.
        await createNotificationRepository(trx).closeUnsentOfApplication(
          applicationId,
          nowIso,
          deps.mailConfigured === false ? NO_MAIL_SERVER : undefined,
        );
        // The deletion itself is recorded for the owners, in the outbox and by e-mail.
        const { subject, body } = deletedMessage(app, now);
        await queueNotifications(
          trx,
          (await ownersOf(trx, app.teamId)).map((owner) => ({
            team_id: app.teamId,
            application_id: app.id,
            kind: 'application_deleted' as const,
            dedupe_key: `application_deleted:${app.id}:${owner.id}`,
            recipient: owner.email,
            subject,
            body,
            scheduled_for: null,
          })),
          now,
        );
        await deps.events.emit(trx, {
          teamId: app.teamId,
          event: 'application.deleted',
          data: {
            application: { id: app.id, name: app.name },
            deleted_at: nowIso,
            scheduled_for: scheduledFor,
          },
        });
        return 'deleted';
      });
      if (outcome === 'deleted') {
        logger.info({ application: applicationId, scheduledFor }, 'application deleted as scheduled');
      }
      return outcome;
    },
  };
}

export type ScheduledDeletionService = ReturnType<typeof createScheduledDeletionService>;

/** A warning is only worth sending while its schedule still holds and the deletion is still ahead. */
export const deletionWarningStillRelevant: RelevanceCheck = async (db, row, now) => {
  if (row.application_id === null || row.scheduled_for === null) return false;
  if (row.scheduled_for <= iso(now)) return false;
  return (await createScheduledDeletionRepository(db).scheduleOf(row.application_id)) === row.scheduled_for;
};

/** Queues the sweep to run now (after a schedule change, and at start). */
export async function wakeSweep(db: Db, now: Date): Promise<void> {
  // A recurring job must not die of a passing outage (the store restarting): it keeps retrying with the
  // runner's capped backoff instead of being marked dead after the usual ten attempts.
  await enqueueJob(
    db,
    { type: SWEEP_JOB, key: SWEEP_JOB_KEY, runAt: now, maxAttempts: SWEEP_MAX_ATTEMPTS },
    now,
  );
}

export interface ScheduledDeletionFeatureDeps extends ScheduledDeletionDeps {
  /** The SMTP mailer, made on first use; undefined without BERTH_SMTP_URL (mail stays in the outbox). */
  mailer: () => Mailer | undefined;
}

/**
 * The feature as the composition root builds it: the service (sweep, deleteDue), its job handlers
 * (including the outbox's sender) and its start.
 */
export function createScheduledDeletion(deps: ScheduledDeletionFeatureDeps) {
  const { db, clock, logger } = deps;
  const service = createScheduledDeletionService(deps);
  return {
    ...service,
    /** The job handlers of this feature, including the outbox's sender. */
    jobHandlers(): Record<string, JobHandler> {
      return {
        [SWEEP_JOB]: async (job): Promise<JobResult> => {
          const { runAgainAt } = await service.sweep();
          // A wake-up that arrived while this pass ran (a schedule changed meanwhile) sets `rerun`; the
          // runner would let runAgainAt override it, so honour it here: run again at once.
          return { runAgainAt: (await rerunRequested(db, job.id)) ? clock.now() : runAgainAt };
        },
        ...handles('scheduled_deletion.delete', async ({ applicationId, scheduledFor }) => {
          await service.deleteDue(applicationId, scheduledFor);
        }),
        [NOTIFICATION_SEND_JOB]: createNotificationSendHandler({
          db,
          clock,
          logger,
          mailer: deps.mailer(),
          relevance: {
            deletion_warning_7d: deletionWarningStillRelevant,
            deletion_warning_1d: deletionWarningStillRelevant,
          },
        }),
      };
    },
    /**
     * At start: make sure the recurring sweep exists and runs now (it deletes what fell due while Berth
     * was down), and hand messages that waited for SMTP to the sender.
     */
    async start(): Promise<void> {
      const now = clock.now();
      await wakeSweep(db, now);
      if (deps.mailer()) await requeueUnsent(db, now);
    },
  };
}

export type ScheduledDeletion = ReturnType<typeof createScheduledDeletion>;
