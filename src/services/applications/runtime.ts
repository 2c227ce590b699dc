// The platform API's use cases on running applications, as Ploi Cloud has them: deploy, rollback,
// suspend, resume, status, instances, deployments and their logs, application logs, one-off commands,
// source upload and download, and deleting an application. Every call checks that the caller belongs
// to the application's team (404 when it does not exist, 403 when it is not theirs) before anything.
import type { Readable } from 'node:stream';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import { createDeploymentRepository, type DeploymentRecord } from '../../db/repositories/deployments.js';
import { createInfrastructureRepository, type ApplicationRow } from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { DeploymentStatus } from '../../domain/deployments.js';
import { AppError, validationError } from '../../domain/errors.js';
import type { AppRuntimeDriver, LogLine } from '../../drivers/runtime/driver.js';
import {
  ArtifactTooLargeError,
  sourceKey,
  type ArtifactInfo,
  type ArtifactStore,
} from '../../drivers/artifacts/types.js';
import { auditChange } from '../audit.js';
import type { InfrastructureQueries } from '../infrastructure/queries.js';
import { enqueue } from '../jobs.js';
import type { WebhookEmitter } from '../webhooks/index.js';
import type { DeploymentService } from './deployments.js';
import type { SpecBuilder } from './spec.js';
import { deploymentView } from './views.js';

export interface RuntimeServiceDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** Where uploaded source archives are kept (BERTH_ARTIFACT_STORE). */
  artifacts: () => ArtifactStore;
  queries: Pick<InfrastructureQueries, 'requireApplication'>;
  deployments: DeploymentService;
  specs: SpecBuilder;
  driver: () => AppRuntimeDriver;
  wakeJobs: () => void;
  /** Team webhooks' events (application.suspended). */
  events: WebhookEmitter;
}

/** Largest uploaded source archive (Ploi: 100 MB). */
export const SOURCE_UPLOAD_LIMIT_BYTES = 100 * 1024 * 1024;
const COMMAND_LIMIT = 4096;

export function createRuntimeService(deps: RuntimeServiceDeps) {
  const { db, clock } = deps;
  const repo = createDeploymentRepository(db);
  const now = () => iso(clock.now());

  async function app(userId: number, appId: number): Promise<ApplicationRow> {
    return (await deps.queries.requireApplication(userId, appId)).row;
  }

  /** Records `action` on application `row` in `trx` (the change's own transaction). */
  const audited = (trx: Transaction<Database>, row: ApplicationRow, action: string, after?: unknown) =>
    auditChange(trx, {
      at: clock.now(),
      action,
      teamId: row.team_id,
      target: { kind: 'application', id: row.id },
      before: { name: row.name, status: row.status, suspended: row.suspended === 1 },
      ...(after !== undefined ? { after } : {}),
    });

  async function requestDeployment(
    row: ApplicationRow,
    values: Omit<Parameters<DeploymentService['request']>[1], 'applicationId'>,
    action: string,
    alsoInTransaction?: (trx: Transaction<Database>) => Promise<void>,
  ) {
    if (row.status === 'destroying') throw new AppError('conflict', `Application ${row.id} is being deleted`);
    const id = await db.transaction().execute(async (trx) => {
      await alsoInTransaction?.(trx);
      if (row.suspended) {
        await createDeploymentRepository(trx).unsuspend(row.id);
      }
      const deployment = await deps.deployments.request(trx, { applicationId: row.id, ...values });
      const { requestedBy: _by, ...asked } = values;
      await audited(trx, row, action, { deployment_id: deployment, ...asked });
      return deployment;
    });
    deps.deployments.started(row.id, id);
    return deploymentView((await repo.find(id))!);
  }

  async function deploymentOf(row: ApplicationRow, deploymentId: number): Promise<DeploymentRecord> {
    const deployment = await repo.find(deploymentId);
    if (!deployment || deployment.application_id !== row.id)
      throw new AppError('not_found', `Deployment ${deploymentId} not found`);
    return deployment;
  }

  return {
    async deploy(userId: number, appId: number, options: { branch?: string; skipBuild?: boolean }) {
      const row = await app(userId, appId);
      let release: string | null = null;
      if (options.skipBuild) {
        const last = await repo.lastSuccessfulBuild(row.id);
        if (!last?.release || !(await deps.driver().hasRelease(row.id, last.release)))
          throw validationError(
            { skip_build: ['There is no successful build to reuse; deploy without skip_build first.'] },
            'There is no successful build to reuse.',
          );
        release = last.release;
      }
      return requestDeployment(
        row,
        {
          reason: 'deploy',
          requestedBy: userId,
          skipBuild: options.skipBuild === true,
          release,
          ...(options.branch ? { branch: options.branch } : {}),
        },
        'application.deploy',
      );
    },

    /**
     * A push to the application's branch, its signature checked by the caller (push.ts): the same
     * deployment as POST …/deploy with no branch (the application's own, never one from the request).
     */
    async deployPushed(appId: number, reason: string) {
      const row = await createInfrastructureRepository(db).findApplication(appId);
      if (!row) throw new AppError('not_found', `Application ${appId} not found`);
      return requestDeployment(row, { reason, requestedBy: null }, 'application.deploy');
    },

    async rollback(userId: number, appId: number, deploymentId: number | undefined) {
      const row = await app(userId, appId);
      let target: DeploymentRecord | undefined;
      if (deploymentId !== undefined) {
        target = await deploymentOf(row, deploymentId);
      } else {
        // The newest successful release before the live one.
        const successes = await repo.list(row.id, { limit: 20, status: 'success' });
        const live = successes.find((d) => d.id === row.live_deployment_id);
        target = successes.find((d) => d.release !== live?.release && d.release !== null);
      }
      if (!target || target.status !== 'success' || !target.release)
        throw validationError(
          { deployment_id: ['Only a successful deployment can be rolled back to.'] },
          'Only a successful deployment can be rolled back to.',
        );
      if (!(await deps.driver().hasRelease(row.id, target.release)))
        throw validationError(
          { deployment_id: [`The release of deployment ${target.id} is no longer kept (the last 3 are).`] },
          `The release of deployment ${target.id} is no longer kept.`,
        );
      return requestDeployment(
        row,
        {
          reason: 'rollback',
          requestedBy: userId,
          rollbackOf: target.id,
          release: target.release,
          branch: target.branch,
          commit: target.commit_sha,
        },
        'application.rollback',
      );
    },

    async suspend(userId: number, appId: number) {
      const row = await app(userId, appId);
      deps.deployments.cancelInFlight(row.id, 'the application was suspended');
      await db.transaction().execute(async (trx) => {
        await createDeploymentRepository(trx).setApplicationStatus(row.id, 'stopping', null, now(), {
          suspended: 1,
        });
        await audited(trx, row, 'application.suspend', { suspended: true });
      });
      await deps.driver().stop(row.id);
      await repo.setApplicationStatus(row.id, 'stopped', 'suspended', now());
      await deps.events.notify({
        teamId: row.team_id,
        event: 'application.suspended',
        data: { application: { id: row.id, name: row.name } },
      });
      return this.status(userId, appId);
    },

    async resume(userId: number, appId: number) {
      const row = await app(userId, appId);
      const live = row.live_deployment_id === null ? undefined : await repo.find(row.live_deployment_id);
      await db.transaction().execute(async (trx) => {
        await createDeploymentRepository(trx).setApplicationStatus(row.id, 'starting', null, now(), {
          suspended: 0,
        });
        await audited(trx, row, 'application.resume', { suspended: false });
      });
      if (!live?.release) {
        await repo.setApplicationStatus(row.id, 'stopped', 'never deployed', now());
        return this.status(userId, appId);
      }
      try {
        await deps.driver().ensureRunning(await deps.specs.build(row), live.release);
        await repo.setApplicationStatus(row.id, 'active', null, now());
      } catch (error) {
        await repo.setApplicationStatus(row.id, 'failed', (error as Error).message, now());
      }
      return this.status(userId, appId);
    },

    async status(userId: number, appId: number) {
      const row = await app(userId, appId);
      const fresh = (await deps.queries.requireApplication(userId, row.id)).row;
      const runtime = await deps.driver().status(row.id);
      const enabled = fresh.health_check_enabled !== 0;
      const serving = runtime.instances.filter((i) => i.name !== 'scheduler');
      const healthy = serving.filter((i) => i.state === 'running').length;
      const latest = (await repo.list(row.id, { limit: 1 }))[0];
      return {
        id: row.id,
        name: row.name,
        status: fresh.status,
        status_reason: fresh.status_reason,
        suspended: fresh.suspended === 1,
        live_deployment_id: fresh.live_deployment_id,
        release: runtime.release,
        replicas: { desired: fresh.replicas ?? 1, running: healthy, total: serving.length },
        health_check: {
          enabled,
          // With checks disabled the application cannot be monitored (spec, States rule 3).
          status: !enabled
            ? 'not monitored'
            : serving.length === 0
              ? 'unknown'
              : serving.every((i) => i.healthy === true)
                ? 'healthy'
                : 'unhealthy',
        },
        hostnames: await deps.specs.hostnames(fresh),
        default_hostname: deps.specs.defaultHostname(fresh),
        latest_deployment: latest ? deploymentView(latest) : null,
        recent_events: await repo.events(row.id, 10),
      };
    },

    async instances(userId: number, appId: number) {
      const row = await app(userId, appId);
      return (await deps.driver().status(row.id)).instances.map((i) => ({
        name: i.name,
        release: i.release,
        state: i.state,
        pid: i.pid,
        port: i.port,
        started_at: i.startedAt,
        restarts: i.restarts,
        last_restart_reason: i.lastRestartReason,
        healthy: i.healthy,
        memory_limit_bytes: i.memoryLimitBytes,
      }));
    },

    async deployments(
      userId: number,
      appId: number,
      options: { perPage: number; page: number; status?: DeploymentStatus },
    ) {
      const row = await app(userId, appId);
      const [rows, total] = await Promise.all([
        repo.list(row.id, {
          limit: options.perPage,
          offset: (options.page - 1) * options.perPage,
          ...(options.status ? { status: options.status } : {}),
        }),
        repo.count(row.id, options.status),
      ]);
      return {
        data: rows.map(deploymentView),
        meta: {
          current_page: options.page,
          per_page: options.perPage,
          total,
          last_page: Math.max(1, Math.ceil(total / options.perPage)),
        },
      };
    },

    async deployment(userId: number, appId: number, deploymentId: number) {
      return deploymentView(await deploymentOf(await app(userId, appId), deploymentId));
    },

    async deploymentLogs(userId: number, appId: number, deploymentId: number, options: { tail?: number }) {
      const deployment = await deploymentOf(await app(userId, appId), deploymentId);
      const lines = await repo.logs(deployment.id);
      return (options.tail ? lines.slice(-options.tail) : lines).map((l) => ({ at: l.at, line: l.line }));
    },

    /** For a live stream: the lines so far, whether more can come, and a subscription to them. */
    async followDeployment(userId: number, appId: number, deploymentId: number) {
      const deployment = await deploymentOf(await app(userId, appId), deploymentId);
      return {
        finished: deployment.status !== 'pending' && deployment.status !== 'running',
        subscribe: (listener: (line: { at: string; line: string }) => void) =>
          deps.deployments.follow(deployment.id, listener),
        reload: () => repo.find(deployment.id),
        lines: (afterId: number) => repo.logs(deployment.id, afterId),
      };
    },

    async logs(userId: number, appId: number, options: { tail: number; since?: Date }): Promise<LogLine[]> {
      const row = await app(userId, appId);
      return deps.driver().logs(row.id, options);
    },

    async followLogs(userId: number, appId: number, listener: (line: LogLine) => void) {
      const row = await app(userId, appId);
      return deps.driver().followLogs(row.id, listener);
    },

    async exec(userId: number, appId: number, command: string) {
      const row = await app(userId, appId);
      if (command.trim() === '' || command.length > COMMAND_LIMIT)
        throw validationError(
          { command: [`The command must be 1 to ${COMMAND_LIMIT} characters.`] },
          'The command is invalid.',
        );
      const live = row.live_deployment_id === null ? undefined : await repo.find(row.live_deployment_id);
      if (!live?.release)
        throw new AppError(
          'conflict',
          `Application ${row.id} has no live release to run a command in; deploy it first`,
        );
      // The command is recorded as the history keeps it (owners read both).
      const id = await db.transaction().execute(async (trx) => {
        const started = await createDeploymentRepository(trx).startCommand(row.id, userId, command, now());
        await audited(trx, row, 'application.exec', { command_id: started, command });
        return started;
      });
      try {
        const result = await deps.driver().exec(await deps.specs.build(row), live.release, command, {
          log: () => undefined,
          signal: AbortSignal.timeout(10 * 60_000),
        });
        await repo.finishCommand(
          id,
          { status: 'finished', exitCode: result.exitCode, output: result.output },
          now(),
        );
        return {
          id,
          command,
          exit_code: result.exitCode,
          output: result.output,
          truncated: result.truncated,
        };
      } catch (error) {
        await repo.finishCommand(
          id,
          { status: 'failed', exitCode: null, output: (error as Error).message },
          now(),
        );
        throw error;
      }
    },

    async commandHistory(userId: number, appId: number, perPage: number) {
      const row = await app(userId, appId);
      return (await repo.commands(row.id, perPage)).map((c) => ({
        id: c.id,
        command: c.command,
        status: c.status,
        exit_code: c.exit_code,
        output: c.output,
        user_id: c.user_id,
        started_at: c.started_at,
        finished_at: c.finished_at,
      }));
    },

    /**
     * Stores an uploaded archive in the artifact store (one per application, checked before it is
     * kept) and deploys it unless asked not to.
     */
    async uploadSource(userId: number, appId: number, body: Readable, options: { deploy: boolean }) {
      const row = await app(userId, appId);
      const store = deps.artifacts();
      const name = `${Date.now().toString(36)}.archive`;
      const key = sourceKey(row.id, name);
      let stored: ArtifactInfo;
      try {
        // Whole or not at all: a body cut short or over the cap leaves nothing in the store.
        stored = await store.put(key, body, { maxBytes: SOURCE_UPLOAD_LIMIT_BYTES });
      } catch (error) {
        if (error instanceof ArtifactTooLargeError)
          throw new AppError(
            'payload_too_large',
            `The source archive is larger than ${SOURCE_UPLOAD_LIMIT_BYTES} bytes`,
          );
        throw error;
      }
      try {
        // Read through before it is kept: an archive the build could not unpack is a 422 now, not a
        // 202 and a failed deployment later; nothing of it is stored.
        const problem = await deps.driver().checkSourceArchive(key);
        if (problem !== undefined)
          throw validationError({ body: [problem] }, `The source archive cannot be used: ${problem}`);
      } catch (error) {
        await store.remove(key);
        throw error;
      }
      const size = stored.size;
      const previous = row.uploaded_source;
      const keep = (trx: Transaction<Database>) =>
        createDeploymentRepository(trx).setUploadedSource(row.id, name, now());
      // The source and the deployment it asks for are one change, recorded once.
      const deployment = options.deploy
        ? await requestDeployment(
            { ...row, uploaded_source: name },
            { reason: 'source upload', requestedBy: userId },
            'application.upload_source',
            keep,
          )
        : null;
      if (!options.deploy) {
        await db.transaction().execute(async (trx) => {
          await keep(trx);
          await audited(trx, row, 'application.upload_source', { size, deploy: false });
        });
      }
      if (previous) await store.remove(sourceKey(row.id, previous));
      return { size, uploaded_at: now(), deployment };
    },

    async sourceDownload(userId: number, appId: number): Promise<Readable> {
      const row = await app(userId, appId);
      const live = row.live_deployment_id === null ? undefined : await repo.find(row.live_deployment_id);
      const source = live?.release ? await deps.driver().sourceArchive(row.id, live.release) : undefined;
      if (!source) throw new AppError('not_found', `Application ${row.id} has no deployed source`);
      return source;
    },

    /**
     * Deletes the application now, through scheduled deletion's own job (the same cascade, tombstone,
     * audit and notice): the schedule is set to this moment and the job is queued at once.
     */
    async deleteApplication(userId: number, appId: number) {
      const row = await app(userId, appId);
      const at = now();
      deps.deployments.cancelInFlight(row.id, 'the application is being deleted');
      await db.transaction().execute(async (trx) => {
        await createDeploymentRepository(trx).deleteNow(row.id, at);
        await audited(trx, row, 'application.delete', { status: 'destroying' });
        await enqueue(
          trx,
          'scheduled_deletion.delete',
          { applicationId: row.id, scheduledFor: at },
          { now: clock.now() },
        );
      });
      deps.wakeJobs();
      return { id: row.id, name: row.name, status: 'destroying' as const };
    },
  };
}

export type RuntimeService = ReturnType<typeof createRuntimeService>;
