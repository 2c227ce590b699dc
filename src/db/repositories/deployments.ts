// The SQL of running applications: deployments and their log, an application's run state, one-off
// commands and runtime events (src/services/applications/).
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { ApplicationStatus, DeploymentStatus, DeploymentStep } from '../../domain/deployments.js';
import type { Database } from '../schema/index.js';
import type { DeploymentsTable } from '../schema/infrastructure.js';

type Db = Kysely<Database> | Transaction<Database>;

export type DeploymentRecord = Selectable<DeploymentsTable>;

/** Lines kept per deployment log: a build that prints more keeps its first and newest lines. */
export const DEPLOYMENT_LOG_LINES = 5000;

export interface NewDeployment {
  applicationId: number;
  reason: string;
  branch?: string | null;
  commit?: string | null;
  skipBuild?: boolean;
  rollbackOf?: number | null;
  release?: string | null;
  requestedBy?: number | null;
}

export function createDeploymentRepository(db: Db) {
  return {
    /** Inserts a pending deployment and cancels the older pending or running ones of the application. */
    async insert(values: NewDeployment, at: string): Promise<number> {
      await db
        .updateTable('deployments')
        .set({
          status: 'cancelled',
          error: 'Superseded by a newer deployment',
          finished_at: at,
          updated_at: at,
        })
        .where('application_id', '=', values.applicationId)
        .where('status', 'in', ['pending', 'running'])
        .execute();
      const row = await db
        .insertInto('deployments')
        .values({
          application_id: values.applicationId,
          status: 'pending',
          reason: values.reason,
          branch: values.branch ?? null,
          commit_sha: values.commit ?? null,
          skip_build: values.skipBuild ? 1 : 0,
          rollback_of: values.rollbackOf ?? null,
          release: values.release ?? null,
          requested_by: values.requestedBy ?? null,
          created_at: at,
          updated_at: at,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    find: (id: number) => db.selectFrom('deployments').selectAll().where('id', '=', id).executeTakeFirst(),

    list: (applicationId: number, options: { limit: number; offset?: number; status?: DeploymentStatus }) => {
      let query = db.selectFrom('deployments').selectAll().where('application_id', '=', applicationId);
      if (options.status) query = query.where('status', '=', options.status);
      return query
        .orderBy('id', 'desc')
        .limit(options.limit)
        .offset(options.offset ?? 0)
        .execute();
    },

    async count(applicationId: number, status?: DeploymentStatus): Promise<number> {
      let query = db
        .selectFrom('deployments')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('application_id', '=', applicationId);
      if (status) query = query.where('status', '=', status);
      return Number((await query.executeTakeFirstOrThrow()).n);
    },

    /** The newest successful deployment with a release, other than `exceptId` (skip_build, rollback). */
    lastSuccessfulBuild: (applicationId: number) =>
      db
        .selectFrom('deployments')
        .selectAll()
        .where('application_id', '=', applicationId)
        .where('status', '=', 'success')
        .where('release', 'is not', null)
        .orderBy('id', 'desc')
        .executeTakeFirst(),

    /** Releases of the newest successful deployments, newest first (the ones kept for rollback). */
    async recentReleases(applicationId: number, limit: number): Promise<string[]> {
      const rows = await db
        .selectFrom('deployments')
        .select('release')
        .distinct()
        .where('application_id', '=', applicationId)
        .where('status', '=', 'success')
        .where('release', 'is not', null)
        .orderBy('release', 'desc')
        .execute();
      // Release names are `d<id>`: newest first by number, not by text.
      return rows
        .map((r) => r.release as string)
        .sort((a, b) => Number(b.slice(1)) - Number(a.slice(1)))
        .slice(0, limit);
    },

    /** Moves a pending deployment to running; false when it is no longer pending (cancelled). */
    async start(id: number, at: string, deadline: string): Promise<boolean> {
      const result = await db
        .updateTable('deployments')
        .set({ status: 'running', started_at: at, deadline_at: deadline, updated_at: at })
        .where('id', '=', id)
        .where('status', '=', 'pending')
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },

    async update(
      id: number,
      values: Partial<Pick<DeploymentRecord, 'step' | 'source' | 'branch' | 'commit_sha' | 'release'>>,
      at: string,
    ): Promise<void> {
      await db
        .updateTable('deployments')
        .set({ ...values, updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    /** Ends a deployment that is still pending or running; false when it had already ended. */
    async finish(
      id: number,
      status: Extract<DeploymentStatus, 'success' | 'failed' | 'cancelled'>,
      error: string | null,
      at: string,
    ): Promise<boolean> {
      const result = await db
        .updateTable('deployments')
        .set({ status, error, finished_at: at, updated_at: at })
        .where('id', '=', id)
        .where('status', 'in', ['pending', 'running'])
        .executeTakeFirst();
      return Number(result.numUpdatedRows) === 1;
    },

    /** The newest deployment's id (0 when there is none). */
    async lastId(): Promise<number> {
      const row = await db
        .selectFrom('deployments')
        .select((eb) => eb.fn.max('id').as('id'))
        .executeTakeFirst();
      return Number(row?.id ?? 0);
    },

    /** Deployments that were running when Berth stopped, or whose deadline passed. */
    unfinished: () =>
      db.selectFrom('deployments').selectAll().where('status', 'in', ['pending', 'running']).execute(),

    async appendLog(deploymentId: number, lines: Array<{ at: string; line: string }>): Promise<void> {
      if (lines.length === 0) return;
      await db
        .insertInto('deployment_logs')
        .values(lines.map((l) => ({ deployment_id: deploymentId, at: l.at, line: l.line })))
        .execute();
    },

    logLineCount: async (deploymentId: number): Promise<number> =>
      Number(
        (
          await db
            .selectFrom('deployment_logs')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('deployment_id', '=', deploymentId)
            .executeTakeFirstOrThrow()
        ).n,
      ),

    logs: (deploymentId: number, afterId = 0, limit = DEPLOYMENT_LOG_LINES) =>
      db
        .selectFrom('deployment_logs')
        .select(['id', 'at', 'line'])
        .where('deployment_id', '=', deploymentId)
        .where('id', '>', afterId)
        .orderBy('id')
        .limit(limit)
        .execute(),

    async setApplicationStatus(
      applicationId: number,
      status: ApplicationStatus,
      reason: string | null,
      at: string,
      extra: { live_deployment_id?: number; suspended?: number } = {},
    ): Promise<void> {
      await db
        .updateTable('applications')
        .set({ status, status_reason: reason, ...extra, updated_at: at })
        .where('id', '=', applicationId)
        .execute();
    },

    /** Lifts a suspension (nothing else of the row changes: a deployment follows). */
    unsuspend: async (applicationId: number) => {
      await db.updateTable('applications').set({ suspended: 0 }).where('id', '=', applicationId).execute();
    },

    /** Schedules the application's deletion for `at` (now) and marks it `destroying`. */
    deleteNow: async (applicationId: number, at: string) => {
      await db
        .updateTable('applications')
        .set({ scheduled_deletion_at: at, status: 'destroying', status_reason: null, updated_at: at })
        .where('id', '=', applicationId)
        .execute();
    },

    setUploadedSource: async (applicationId: number, file: string, at: string) => {
      await db
        .updateTable('applications')
        .set({ uploaded_source: file, uploaded_source_at: at })
        .where('id', '=', applicationId)
        .execute();
    },

    /** Applications that should run: deployed once, not suspended, not being deleted. */
    runnable: () =>
      db
        .selectFrom('applications')
        .select(['id', 'live_deployment_id'])
        .where('live_deployment_id', 'is not', null)
        .where('suspended', '=', 0)
        .where('status', '!=', 'destroying')
        .execute(),

    async recordEvent(
      applicationId: number,
      event: { kind: string; instance: string; message: string },
      at: string,
    ): Promise<void> {
      await db
        .insertInto('runtime_events')
        .values({
          application_id: applicationId,
          at,
          kind: event.kind,
          instance: event.instance,
          message: event.message,
        })
        .execute();
    },

    events: (applicationId: number, limit: number) =>
      db
        .selectFrom('runtime_events')
        .select(['id', 'at', 'kind', 'instance', 'message'])
        .where('application_id', '=', applicationId)
        .orderBy('id', 'desc')
        .limit(limit)
        .execute(),

    async startCommand(applicationId: number, userId: number, command: string, at: string): Promise<number> {
      const row = await db
        .insertInto('command_history')
        .values({
          application_id: applicationId,
          user_id: userId,
          command,
          status: 'running',
          exit_code: null,
          output: '',
          started_at: at,
          finished_at: null,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    async finishCommand(
      id: number,
      values: { status: 'finished' | 'failed'; exitCode: number | null; output: string },
      at: string,
    ): Promise<void> {
      await db
        .updateTable('command_history')
        .set({ status: values.status, exit_code: values.exitCode, output: values.output, finished_at: at })
        .where('id', '=', id)
        .execute();
    },

    commands: (applicationId: number, limit: number) =>
      db
        .selectFrom('command_history')
        .selectAll()
        .where('application_id', '=', applicationId)
        .orderBy('id', 'desc')
        .limit(limit)
        .execute(),

    /** An application's secrets, sealed: only the runtime spec opens them. */
    sealedSecrets: (applicationId: number) =>
      db
        .selectFrom('secrets')
        .select(['key', 'value_encrypted'])
        .where('application_id', '=', applicationId)
        .orderBy('id')
        .execute(),

    /** The steps a deployment went through are its log; a `step` column says where it is now. */
    setStep: (id: number, step: DeploymentStep, at: string) =>
      db.updateTable('deployments').set({ step, updated_at: at }).where('id', '=', id).execute(),

    /** Commands left `running` by a Berth that stopped: they were killed with it. */
    async failInterruptedCommands(at: string): Promise<void> {
      await sql`UPDATE command_history SET status = 'failed', finished_at = ${at}
        WHERE status = 'running'`.execute(db);
    },
  };
}

export type DeploymentRepository = ReturnType<typeof createDeploymentRepository>;
