// Deployments: fetch → build → release (init commands, once) → roll out, each step logged, under one
// hard deadline (BERTH_DEPLOYMENT_TIMEOUT). A deployment is a durable job (`deployment.run`), so a
// request survives a restart; a deployment that was running when Berth stopped is failed at the next
// start, never left `running`. A newer deployment cancels older ones: in the store at once, and the
// one in flight is aborted. One application deploys one at a time.
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { RuntimeSettings } from '../../config/index.js';
import {
  createDeploymentRepository,
  DEPLOYMENT_LOG_LINES,
  type NewDeployment,
} from '../../db/repositories/deployments.js';
import { createInfrastructureRepository } from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock } from '../../domain/clock.js';
import { RELEASES_KEPT, releaseName, type DeploymentStep } from '../../domain/deployments.js';
import type { AppRuntimeDriver, StepContext } from '../../drivers/runtime/driver.js';
import { sourceKey, type ArtifactStore } from '../../drivers/artifacts/types.js';
import { enqueue, handles } from '../jobs.js';
import type { WebhookEventName } from '../../domain/webhook-events.js';
import type { WebhookEmitter } from '../webhooks/index.js';
import type { SpecBuilder } from './spec.js';

type Db = Kysely<Database> | Transaction<Database>;

export interface DeploymentDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  runtime: Readonly<RuntimeSettings>;
  driver: () => AppRuntimeDriver;
  specs: SpecBuilder;
  /** Where uploaded source archives are kept (BERTH_ARTIFACT_STORE). */
  artifacts: () => Pick<ArtifactStore, 'exists'>;
  /** Polls the job runner at once (a deployment should not wait for the next poll). */
  wakeJobs: () => void;
  /**
   * Makes the application's services run with their document's settings (docs/services.md); a
   * deployment's release waits for it, and a restart of Berth starts them before the application.
   */
  services?: { ensureApplication(appId: number, log?: (line: string) => void): Promise<void> };
  /** Team webhooks' events (deployment.started, .succeeded, .failed). */
  events: WebhookEmitter;
  /** Each deployment that ran, as it ends: how, and how long it ran (metrics). */
  onFinished?: (outcome: 'success' | 'failed' | 'cancelled', seconds: number) => void;
}

/** A deployment's live log: lines as they are written, for streaming before they reach the store. */
export type LogListener = (line: { at: string; line: string }) => void;

class DeploymentAborted extends Error {}

export function createDeploymentService(deps: DeploymentDeps) {
  const { db, clock } = deps;
  const repo = createDeploymentRepository(db);
  /**
   * Deployments this process has run (or queued to run) before reconcile() ended: never an earlier
   * Berth's to settle.
   */
  const startedHere = new Set<number>();
  let reconciled = false;
  const infrastructure = createInfrastructureRepository(db);
  /** In-flight deployment per application, so a newer one can abort it. */
  const inFlight = new Map<number, { deploymentId: number; abort: AbortController }>();
  /** Per application: the end of the deployment running now, so the next waits for it. */
  const queues = new Map<number, Promise<void>>();
  const listeners = new Map<number, Set<LogListener>>();

  /** Buffers a deployment's lines and writes them in batches (a build can print thousands a second). */
  function deploymentLog(deploymentId: number) {
    let pending: Array<{ at: string; line: string }> = [];
    let written = 0;
    let dropped = 0;
    let flushing: Promise<void> = Promise.resolve();
    const flush = (): Promise<void> => {
      const batch = pending;
      pending = [];
      flushing = flushing
        .then(() => repo.appendLog(deploymentId, batch))
        .catch((error: unknown) => {
          deps.logger.warn({ err: error, deploymentId }, 'deployment log write failed');
        });
      return flushing;
    };
    const timer = setInterval(() => void flush(), 250);
    timer.unref();
    return {
      /** Stores what was written so far (before the deployment is marked finished). */
      flush: () => flush(),
      write(text: string) {
        for (const raw of text.split('\n')) {
          const line = raw.replace(/\r$/, '').slice(0, 4000);
          if (line === '') continue;
          // The first lines and the newest: the cut is said once, where it happens.
          if (written >= DEPLOYMENT_LOG_LINES) {
            dropped += 1;
            continue;
          }
          const entry = { at: iso(clock.now()), line };
          written += 1;
          pending.push(entry);
          for (const listener of listeners.get(deploymentId) ?? []) listener(entry);
        }
      },
      async close() {
        clearInterval(timer);
        if (dropped > 0) pending.push({ at: iso(clock.now()), line: `… ${dropped} more lines not kept` });
        await flush();
      },
    };
  }

  /** Tells the application's team webhooks what became of the deployment, as it is stored now. */
  async function announce(deploymentId: number, event: WebhookEventName): Promise<void> {
    // A deployment's outcome never depends on its announcement.
    let deployment: Awaited<ReturnType<typeof repo.find>>;
    let app: Awaited<ReturnType<typeof infrastructure.findApplication>>;
    try {
      deployment = await repo.find(deploymentId);
      app = deployment && (await infrastructure.findApplication(deployment.application_id));
    } catch (error) {
      deps.logger.warn({ err: error, deploymentId }, 'deployment event not announced');
      return;
    }
    if (!deployment || !app) return;
    await deps.events.notify({
      teamId: app.team_id,
      event,
      data: {
        application: { id: app.id, name: app.name },
        deployment: {
          id: deployment.id,
          status: deployment.status,
          reason: deployment.reason,
          branch: deployment.branch,
          commit_sha: deployment.commit_sha,
          error: deployment.error,
          created_at: deployment.created_at,
          finished_at: deployment.finished_at,
        },
      },
    });
  }

  async function setStep(id: number, step: DeploymentStep, log: (line: string) => void) {
    await repo.setStep(id, step, iso(clock.now()));
    log(`==> ${step}`);
  }

  /** The releases to keep: the live one and the newest successful ones. */
  async function prune(appId: number, live: string) {
    const keep = new Set([live, ...(await repo.recentReleases(appId, RELEASES_KEPT))]);
    await deps.driver().pruneReleases(appId, [...keep]);
  }

  async function run(deploymentId: number): Promise<void> {
    const deployment = await repo.find(deploymentId);
    if (!deployment) return;
    const at = () => iso(clock.now());
    if (deployment.status === 'running') {
      // Claimed again after its runner died: whatever it had started died with it.
      await repo.finish(deploymentId, 'failed', 'Interrupted: Berth stopped during the deployment', at());
      await announce(deploymentId, 'deployment.failed');
      return;
    }
    if (deployment.status !== 'pending') return;
    const appId = deployment.application_id;
    const now = clock.now();
    const deadline = new Date(now.getTime() + deps.runtime.deploymentTimeoutSeconds * 1000);
    if (!(await repo.start(deploymentId, iso(now), iso(deadline)))) return;

    const abort = new AbortController();
    inFlight.set(appId, { deploymentId, abort });
    const timeout = setTimeout(
      () => abort.abort(new DeploymentAborted(`timed out after ${deps.runtime.deploymentTimeoutSeconds} s`)),
      deadline.getTime() - now.getTime(),
    );
    const log = deploymentLog(deploymentId);
    const step: StepContext = { log: (line) => log.write(line), signal: abort.signal };
    let current = null as DeploymentStep | null;
    const enter = async (name: DeploymentStep) => {
      current = name;
      await setStep(deploymentId, name, step.log);
    };
    // Every line is stored before the status says the deployment ended: a reader that sees the end
    // has the whole log.
    const finish = async (status: 'success' | 'failed' | 'cancelled', error: string | null) => {
      await log.flush();
      await repo.finish(deploymentId, status, error, at());
      deps.onFinished?.(status, (clock.now().getTime() - now.getTime()) / 1000);
    };
    const checkAborted = () => {
      if (abort.signal.aborted) throw abort.signal.reason;
    };

    const app = await infrastructure.findApplication(appId);
    await announce(deploymentId, 'deployment.started');
    try {
      if (!app) throw new DeploymentAborted('the application no longer exists');
      const live = app.live_deployment_id;
      await repo.setApplicationStatus(appId, live === null ? 'starting' : 'deploying', null, at());
      const spec = await deps.specs.build(app);
      const driver = deps.driver();
      // Services start beside the build (which gets neither secrets nor services) and must run before
      // the release's init commands; their lines join the log then, not amid the build's.
      const serviceLines: string[] = [];
      const servicesReady = (
        deps.services?.ensureApplication(appId, (line) => serviceLines.push(line)) ?? Promise.resolve()
      ).then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      let release = deployment.release;
      if (release !== null) {
        // A rollback or skip_build reuses a built release.
        if (!(await driver.hasRelease(appId, release)))
          throw new Error(`release ${release} is no longer kept; deploy with a build instead`);
        step.log(`Reusing release ${release} (no build)`);
      } else {
        release = releaseName(deploymentId);
        // The uploaded archive, by its key in the artifact store (the driver fetches it from there).
        const uploadedKey = app.uploaded_source === null ? undefined : sourceKey(appId, app.uploaded_source);
        const uploaded = uploadedKey !== undefined && (await deps.artifacts().exists(uploadedKey));
        const source = deps.specs.source(
          app,
          uploaded ? uploadedKey : undefined,
          deployment.branch ?? undefined,
        );
        if (!source)
          // Said in the terms of each client: the CLI, the dashboard and the API.
          throw new Error(
            `Nothing to build: the application names no repository and no source archive was ${app.uploaded_source === null ? 'uploaded' : 'kept (upload it again)'}; send one with \`berth deploy ${app.name} --source DIR\`, the application page's Upload source, or POST /api/v1/applications/${appId}/source`,
          );
        await enter('fetch');
        await repo.update(deploymentId, { source: source.kind, release }, at());
        checkAborted();
        let building: Promise<void> = Promise.resolve();
        const built = await driver.build(spec, release, source, {
          ...step,
          building: () => {
            building = enter('build');
          },
        });
        await building;
        await repo.update(deploymentId, { branch: built.branch, commit_sha: built.commit }, at());
      }
      checkAborted();
      await enter('release');
      const servicesFailed = await servicesReady;
      for (const line of serviceLines) step.log(line);
      if (servicesFailed) throw servicesFailed;
      // Built again now that every service has its place and credentials: the environment holds them.
      const running = await deps.specs.build(app);
      await driver.release(running, release, step);
      checkAborted();
      await enter('rollout');
      await driver.rollout(running, release, step);
      // Past the switch, a cancel no longer undoes anything: the new release serves.
      step.log(`Deployment ${deploymentId} is live`);
      await finish('success', null);
      await repo.setApplicationStatus(appId, 'active', null, at(), { live_deployment_id: deploymentId });
      await announce(deploymentId, 'deployment.succeeded');
      await prune(appId, release).catch((error: unknown) =>
        deps.logger.warn({ err: error, appId }, 'pruning releases failed'),
      );
    } catch (error) {
      const reason: unknown = abort.signal.aborted ? abort.signal.reason : error;
      const cancelled = reason instanceof DeploymentAborted && reason.message.startsWith('cancelled');
      const message = `${current ? `${current}: ` : ''}${reason instanceof Error ? reason.message : String(reason)}`;
      step.log(`Deployment ${cancelled ? 'cancelled' : 'failed'}: ${message}`);
      await finish(cancelled ? 'cancelled' : 'failed', message);
      if (!cancelled) await announce(deploymentId, 'deployment.failed');
      if (app) {
        // The old release keeps serving; without one the application has failed (or waits for the next).
        const fresh = await infrastructure.findApplication(appId);
        if (fresh && fresh.status !== 'destroying') {
          const serving = fresh.live_deployment_id !== null && fresh.suspended === 0;
          await repo.setApplicationStatus(
            appId,
            serving ? 'active' : fresh.suspended ? 'stopped' : 'failed',
            serving || cancelled ? null : message,
            at(),
          );
        }
      }
    } finally {
      clearTimeout(timeout);
      if (inFlight.get(appId)?.deploymentId === deploymentId) inFlight.delete(appId);
      await log.close();
      listeners.delete(deploymentId);
    }
  }

  return {
    /**
     * Records a deployment and its job in the caller's transaction; the older pending or running
     * deployments of the application are cancelled. Call `started()` after the commit.
     */
    async request(trx: Db, values: NewDeployment): Promise<number> {
      const now = clock.now();
      const id = await createDeploymentRepository(trx).insert(values, iso(now));
      await enqueue(trx, 'deployment.run', { id }, { now, maxAttempts: 1 });
      return id;
    },

    /** After the request's commit: aborts the deployment in flight for the application, wakes the runner. */
    started(appId: number, deploymentId: number): void {
      const running = inFlight.get(appId);
      if (running && running.deploymentId !== deploymentId)
        running.abort.abort(new DeploymentAborted(`cancelled by deployment ${deploymentId}`));
      deps.wakeJobs();
    },

    /** Cancels what is in flight for an application (suspend, delete). */
    cancelInFlight(appId: number, why: string): void {
      inFlight.get(appId)?.abort.abort(new DeploymentAborted(`cancelled: ${why}`));
    },

    /** One deployment at a time per application, in request order. */
    run(deploymentId: number, appId: number): Promise<void> {
      if (!reconciled) startedHere.add(deploymentId);
      const previous = queues.get(appId) ?? Promise.resolve();
      const next = previous.then(() => run(deploymentId));
      const settled = next.catch(() => undefined);
      queues.set(appId, settled);
      void settled.then(() => {
        if (queues.get(appId) === settled) queues.delete(appId);
      });
      return next;
    },

    /** Lines of a deployment in flight as they are written; returns the unsubscribe. */
    follow(deploymentId: number, listener: LogListener): () => void {
      let set = listeners.get(deploymentId);
      if (!set) listeners.set(deploymentId, (set = new Set()));
      set.add(listener);
      return () => set.delete(listener);
    },

    /**
     * At start: what was running when Berth stopped is failed (its processes died with Berth), pending
     * deployments past their deadline too; then every application that should run is started again.
     */
    async reconcile(): Promise<void> {
      try {
        const now = clock.now();
        // The API and the job runner work beside this: what this Berth deploys meanwhile is not an
        // earlier Berth's to settle or start again (a deployment it runs is not "interrupted", an
        // application it has just rolled out is not started a second time).
        // `startedHere` too: the API and the runner may have made and started one before lastId() answers.
        const earlier = await repo.lastId();
        const mine = (id: number) => id > earlier || startedHere.has(id);
        for (const deployment of await repo.unfinished()) {
          if (mine(deployment.id)) continue;
          if (deployment.status === 'running') {
            await repo.finish(
              deployment.id,
              'failed',
              'Interrupted: Berth stopped during the deployment',
              iso(now),
            );
            await announce(deployment.id, 'deployment.failed');
          } else if (
            now.getTime() - new Date(deployment.created_at).getTime() >
            deps.runtime.deploymentTimeoutSeconds * 1000
          ) {
            await repo.finish(
              deployment.id,
              'failed',
              'Never started within the deployment timeout',
              iso(now),
            );
          }
        }
        await repo.failInterruptedCommands(iso(now));
        for (const { id, live_deployment_id } of await repo.runnable()) {
          if (live_deployment_id !== null && mine(live_deployment_id)) continue;
          const app = await infrastructure.findApplication(id);
          const live = live_deployment_id === null ? undefined : await repo.find(live_deployment_id);
          if (!app || !live?.release) continue;
          await repo.setApplicationStatus(id, 'starting', null, iso(clock.now()));
          try {
            await deps.services?.ensureApplication(id);
            await deps.driver().ensureRunning(await deps.specs.build(app), live.release);
            await repo.setApplicationStatus(id, 'active', null, iso(clock.now()));
            // A release an interrupted deployment built (or half built) is not kept.
            await prune(id, live.release);
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            deps.logger.warn({ err: error, appId: id }, 'application did not start again');
            await repo.setApplicationStatus(id, 'failed', message, iso(clock.now()));
          }
        }
        // What an earlier Berth left running and no application claimed above goes now.
        await deps.driver().releaseUnclaimed?.();
      } finally {
        reconciled = true;
        startedHere.clear();
      }
    },

    jobHandlers() {
      return handles('deployment.run', async ({ id }) => {
        const deployment = await repo.find(id);
        if (deployment) await this.run(id, deployment.application_id);
      });
    },
  };
}

export type DeploymentService = ReturnType<typeof createDeploymentService>;
