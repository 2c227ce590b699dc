// An application's services that run on the managed-database engines (postgresql, mysql, redis,
// valkey; docs/services.md): each one a private instance made by the managed-database driver, with its
// own generated, sealed credentials, provisioned by apply's job and before every deployment's release,
// supervised (a dead server is started again, and every one comes back when Berth starts), and removed
// with its data when the application is deleted. The connection environment it gives the application
// is built here from the store (domain/app-services.ts names it); the platform API's services routes
// call the use cases at the end.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Database } from '../../db/schema/index.js';
import type { ApplicationRow } from '../../db/repositories/infrastructure.js';
import {
  connectionEnvironment,
  connectionFormats,
  DEFAULT_SERVICE_DATABASE,
  DEFAULT_SERVICE_MEMORY_MI,
  engineOfService,
  MASKED_VALUE,
  SERVICE_USER,
  serviceEnvironment,
  type ServiceConnection,
  type ServiceEngine,
  type ServiceState,
} from '../../domain/app-services.js';
import type { ApplicationType } from '../../domain/applications.js';
import { iso, type Clock, type IdGenerator } from '../../domain/clock.js';
import { memoryBytes } from '../../domain/deployments.js';
import { AppError } from '../../domain/errors.js';
import type { ServiceType } from '../../domain/infrastructure/document.js';
import { redactPaths } from '../../drivers/databases/operations/redact.js';
import type { InstanceRuntime, InstanceSpec, ManagedDatabaseDriver } from '../../drivers/databases/types.js';
import type { InfrastructureQueries } from '../infrastructure/queries.js';
import { handles, jobKey } from '../jobs.js';
import { isUnder } from '../managed-databases/supervisor.js';
import { createAppServicesRepository, type ServiceInstanceRow, type ServiceRow } from './repository.js';

export interface AppServicesDeps {
  db: Kysely<Database>;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  secretBox: SecretBox;
  /** BERTH_DATA_DIR: the instances under it are this process's to supervise and stop. */
  dataDir: string;
  /** The managed-database driver (made when first used: the same one managed databases use). */
  driver: () => ManagedDatabaseDriver;
  queries: Pick<InfrastructureQueries, 'requireApplication'>;
}

/** What the store records of a service whose server runs. */
function runningAt(runtime: InstanceRuntime) {
  return {
    state: 'running' as const,
    state_reason: null,
    port: runtime.port,
    pid: runtime.pid,
    version: runtime.version,
  };
}

/** The driver's name for what a service is: its sizing, not a plan (InstanceSpec.limits). */
const SERVICE_PLAN = 'service';
const MiB = 1024 * 1024;

export interface ServiceView {
  id: number;
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  settings: Record<string, unknown>;
  command: string | null;
  status: ServiceState;
  status_reason: string | null;
  engine_version: string | null;
  host: string | null;
  port: number | null;
  restarts: number;
  last_restart_at: string | null;
  last_restart_reason: string | null;
  created_at: string;
  updated_at: string;
}

export function createAppServicesService(deps: AppServicesDeps) {
  const repo = createAppServicesRepository(deps.db);
  const log = deps.logger.child({ component: 'app-services' });
  const now = () => iso(deps.clock.now());
  const locks = new Map<number, Promise<unknown>>();
  let supervisor: { stop(): Promise<void>; tick(): Promise<void> } | undefined;
  let closing = false;

  /** One operation per service at a time in this process (job, deployment, supervisor, restart). */
  function locked<T>(serviceId: number, work: () => Promise<T>): Promise<T> {
    const previous = locks.get(serviceId) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    locks.set(serviceId, settled);
    void settled.then(() => {
      if (locks.get(serviceId) === settled) locks.delete(serviceId);
    });
    return next;
  }

  const settingsOf = (service: ServiceRow): Record<string, unknown> => {
    try {
      return JSON.parse(service.settings) as Record<string, unknown>;
    } catch {
      return {};
    }
  };
  const databaseOf = (service: ServiceRow): string => {
    const database = settingsOf(service).database;
    return typeof database === 'string' ? database : DEFAULT_SERVICE_DATABASE;
  };

  function specOf(service: ServiceRow, instance: ServiceInstanceRow): InstanceSpec {
    const engine = instance.engine as ServiceEngine;
    const extensions = settingsOf(service).extensions;
    return {
      id: instance.uuid,
      engine,
      plan: SERVICE_PLAN,
      limits: { memoryMiB: memoryBytes(service.memory, DEFAULT_SERVICE_MEMORY_MI) / MiB },
      ...(instance.port ? { port: instance.port } : {}),
      adminUser: instance.username,
      adminPassword: deps.secretBox.decrypt(instance.password_encrypted),
      users: [],
      databases:
        engine === 'valkey'
          ? []
          : [
              {
                name: databaseOf(service),
                ...(engine === 'pg' && Array.isArray(extensions) && extensions.length > 0
                  ? { extensions: extensions.map(String) }
                  : {}),
              },
            ],
    };
  }

  /** The instance row of a service, made with fresh credentials the first time. */
  async function instanceFor(service: ServiceRow, engine: ServiceEngine): Promise<ServiceInstanceRow> {
    const existing = await repo.findInstance(service.id);
    if (existing) return existing;
    const at = now();
    try {
      await repo.insertInstance({
        service_id: service.id,
        application_id: service.application_id,
        uuid: deps.ids.uuid(),
        engine,
        state: 'provisioning',
        state_reason: null,
        port: null,
        pid: null,
        version: null,
        data_dir: null,
        applied_sizing: null,
        username: SERVICE_USER,
        password_encrypted: deps.secretBox.encrypt(deps.ids.token(24)),
        restarts: 0,
        last_restart_at: null,
        last_restart_reason: null,
        created_at: at,
        updated_at: at,
      });
    } catch (error) {
      // Another Berth process on the same store made it first: use that one.
      const made = await repo.findInstance(service.id);
      if (made) return made;
      throw error;
    }
    return (await repo.findInstance(service.id)) as ServiceInstanceRow;
  }

  /** Makes one service's instance exist, run with the document's sizing, and hold its database. */
  function ensureService(service: ServiceRow, engine: ServiceEngine): Promise<ServiceInstanceRow> {
    return locked(service.id, async () => {
      const instance = await instanceFor(service, engine);
      try {
        const runtime = await deps.driver().provision(specOf(service, instance));
        await repo.updateInstance(service.id, {
          ...runningAt(runtime),
          data_dir: runtime.location,
          applied_sizing: runtime.plan,
          updated_at: now(),
        });
        log.info(
          { app: service.application_id, service: service.name, port: runtime.port },
          'service running',
        );
      } catch (error) {
        const reason = redactPaths(error instanceof Error ? error.message : String(error)).slice(0, 1000);
        await repo.updateInstance(service.id, { state: 'failed', state_reason: reason, updated_at: now() });
        log.warn({ app: service.application_id, service: service.name, err: error }, 'service failed');
        throw new Error(`service '${service.name}' (${service.type}) failed: ${reason}`, { cause: error });
      }
      return (await repo.findInstance(service.id)) as ServiceInstanceRow;
    });
  }

  /** The services of an application that run on a database engine, with their engine. */
  async function engineServices(
    appId: number,
  ): Promise<Array<{ service: ServiceRow; engine: ServiceEngine }>> {
    return (await repo.servicesOf(appId)).flatMap((service) => {
      const engine = engineOfService(service.type);
      return engine ? [{ service, engine }] : [];
    });
  }

  function connectionOf(service: ServiceRow, instance: ServiceInstanceRow): ServiceConnection | undefined {
    if (instance.port === null) return undefined;
    const engine = instance.engine as ServiceEngine;
    return {
      name: service.name,
      type: service.type as ServiceType,
      host: '127.0.0.1',
      port: instance.port,
      username: instance.username,
      password: deps.secretBox.decrypt(instance.password_encrypted),
      database: engine === 'valkey' ? null : databaseOf(service),
    };
  }

  /** Every service of the application that has a place to connect to. */
  async function connections(
    appId: number,
  ): Promise<Array<{ service: ServiceRow; connection: ServiceConnection }>> {
    const [services, instances] = await Promise.all([repo.servicesOf(appId), repo.instancesOf(appId)]);
    const byService = new Map(instances.map((i) => [i.service_id, i]));
    return services.flatMap((service) => {
      const instance = byService.get(service.id);
      const connection = instance && connectionOf(service, instance);
      return connection ? [{ service, connection }] : [];
    });
  }

  function stateOf(
    service: ServiceRow,
    instance: ServiceInstanceRow | undefined,
  ): {
    status: ServiceState;
    reason: string | null;
  } {
    if (!engineOfService(service.type)) {
      return { status: 'unavailable', reason: `type ${service.type} is not run by this Berth yet` };
    }
    if (!instance) return { status: 'provisioning', reason: null };
    return { status: instance.state as ServiceState, reason: instance.state_reason };
  }

  function view(service: ServiceRow, instance: ServiceInstanceRow | undefined): ServiceView {
    const { status, reason } = stateOf(service, instance);
    return {
      id: service.id,
      name: service.name,
      type: service.type,
      version: service.version,
      memory: service.memory,
      volume_size: service.volume_size,
      settings: settingsOf(service),
      command: service.command,
      status,
      status_reason: reason,
      engine_version: instance?.version ?? null,
      host: instance?.port ? '127.0.0.1' : null,
      port: instance?.port ?? null,
      restarts: instance?.restarts ?? 0,
      last_restart_at: instance?.last_restart_at ?? null,
      last_restart_reason: instance?.last_restart_reason ?? null,
      created_at: service.created_at,
      updated_at:
        instance && instance.updated_at > service.updated_at ? instance.updated_at : service.updated_at,
    };
  }

  /** The service `ref` (its id, or its name) of an application the caller may see; 404 otherwise. */
  async function serviceFor(
    userId: number,
    appId: number,
    ref: string,
  ): Promise<{ app: ApplicationRow; service: ServiceRow; instance: ServiceInstanceRow | undefined }> {
    const { row } = await deps.queries.requireApplication(userId, appId);
    const services = await repo.servicesOf(row.id);
    const service = /^\d+$/.test(ref)
      ? services.find((s) => s.id === Number(ref))
      : services.find((s) => s.name === ref);
    if (!service) throw new AppError('not_found', `Service ${ref} not found on application ${row.id}`);
    return { app: row, service, instance: await repo.findInstance(service.id) };
  }

  /** A service that runs on an engine and was provisioned: 409 until then, 422 for the other types. */
  function requireConnection(service: ServiceRow, instance: ServiceInstanceRow | undefined) {
    if (!engineOfService(service.type)) {
      throw new AppError(
        'validation',
        `Service '${service.name}' (${service.type}) is not run by this Berth yet`,
      );
    }
    const connection = instance && connectionOf(service, instance);
    if (!instance || !connection) {
      throw new AppError(
        'conflict',
        `Service '${service.name}' is still provisioning; try again once it runs`,
      );
    }
    return { instance, connection };
  }

  async function supervise(
    instance: ServiceInstanceRow,
    backoff: Map<number, { until: number; delay: number }>,
  ) {
    const wait = backoff.get(instance.service_id);
    if (wait && wait.until > Date.now()) return;
    if (instance.data_dir && !isUnder(instance.data_dir, deps.dataDir)) return; // another Berth's
    await locked(instance.service_id, async () => {
      if (closing) return;
      const fresh = await repo.findInstance(instance.service_id);
      const service =
        fresh && (await repo.servicesOf(fresh.application_id)).find((s) => s.id === fresh.service_id);
      if (!fresh || !service || fresh.applied_sizing === null) return;
      const engine = fresh.engine as ServiceEngine;
      const status = await deps.driver().status({ id: fresh.uuid, engine });
      if (status.running) {
        if (status.pid !== fresh.pid) await repo.updateInstance(fresh.service_id, { pid: status.pid });
        return;
      }
      // pid null: Berth stopped it when it last stopped, so starting it again is no incident.
      const died = fresh.pid !== null;
      const reason = died ? `process ${fresh.pid} exited` : 'started after Berth restarted';
      if (died) {
        await repo.updateInstance(fresh.service_id, {
          state: 'restarting',
          state_reason: `${reason}; restarting`,
          updated_at: now(),
        });
      }
      try {
        // The sizing it ran with: a changed memory waits for the next deployment (docs/services.md).
        const spec = specOf(service, fresh);
        const runtime = await deps.driver().start(spec);
        await repo.updateInstance(fresh.service_id, {
          ...runningAt(runtime),
          ...(died
            ? { restarts: fresh.restarts + 1, last_restart_at: now(), last_restart_reason: reason }
            : {}),
          updated_at: now(),
        });
        backoff.delete(fresh.service_id);
        if (died) log.warn({ app: fresh.application_id, service: service.name, reason }, 'service restarted');
      } catch (error) {
        const delay = Math.min(60_000, (wait?.delay ?? 1000) * 2);
        backoff.set(fresh.service_id, { until: Date.now() + delay, delay });
        const message = redactPaths(error instanceof Error ? error.message : String(error));
        await repo.updateInstance(fresh.service_id, {
          state: 'failed',
          state_reason: `restart failed: ${message}`.slice(0, 1000),
          updated_at: now(),
        });
        log.error({ app: fresh.application_id, service: service.name, err: error }, 'service restart failed');
      }
    });
  }

  /**
   * Makes every engine-backed service of the application run (idempotent; a changed memory is applied
   * by restarting its server). Throws when one fails, naming it; the others still run.
   */
  async function ensureApplication(appId: number, logLine: (line: string) => void = () => undefined) {
    const wanted = await engineServices(appId);
    const results = await Promise.allSettled(
      wanted.map(async ({ service, engine }) => {
        const instance = await ensureService(service, engine);
        logLine(`Service ${service.name} (${service.type} ${instance.version ?? '?'}) is running`);
      }),
    );
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as Error] : []));
    if (failed.length > 0) throw new Error(failed.map((e) => e.message).join('; '));
  }

  return {
    handlers: () =>
      handles('app_service.provision', async ({ applicationId }) => {
        await ensureApplication(applicationId);
      }),

    ensureApplication,

    /** The connection environment the application's processes get (its own secrets win over it). */
    async environment(appId: number, appType: ApplicationType): Promise<Record<string, string>> {
      return connectionEnvironment(
        appType,
        (await connections(appId)).map((c) => c.connection),
      );
    },

    async list(userId: number, appId: number): Promise<ServiceView[]> {
      const { row } = await deps.queries.requireApplication(userId, appId);
      const [services, instances] = await Promise.all([repo.servicesOf(row.id), repo.instancesOf(row.id)]);
      const byService = new Map(instances.map((i) => [i.service_id, i]));
      return services.map((service) => view(service, byService.get(service.id)));
    },

    /** What this one service injects into the application, values included (they are meant to be seen). */
    async serviceEnvironment(userId: number, appId: number, ref: string) {
      const { app, service, instance } = await serviceFor(userId, appId, ref);
      const { connection } = requireConnection(service, instance);
      const all = (await connections(app.id)).map((c) => c.connection);
      const env = serviceEnvironment(app.type, connection, all);
      return Object.entries(env).map(([key, value]) => ({ key, value }));
    },

    async connectionFormats(userId: number, appId: number, ref: string) {
      const { service, instance } = await serviceFor(userId, appId, ref);
      return connectionFormats(requireConnection(service, instance).connection);
    },

    /** Stops and starts the service's server (its data stays); resolves once it runs again. */
    async restart(userId: number, appId: number, ref: string): Promise<ServiceView> {
      const { service, instance } = await serviceFor(userId, appId, ref);
      const { instance: current } = requireConnection(service, instance);
      await locked(service.id, async () => {
        const runtime = await deps.driver().restart(specOf(service, current));
        await repo.updateInstance(service.id, {
          ...runningAt(runtime),
          applied_sizing: runtime.plan,
          updated_at: now(),
        });
      });
      return view(service, await repo.findInstance(service.id));
    },

    /** The newest lines of the service's server log (its own log file), oldest first. */
    async logs(userId: number, appId: number, ref: string, tail: number): Promise<Array<{ line: string }>> {
      const { service, instance } = await serviceFor(userId, appId, ref);
      const { instance: current } = requireConnection(service, instance);
      const driver = deps.driver();
      if (!driver.logs) return [];
      const lines = await driver.logs({ id: current.uuid, engine: current.engine as ServiceEngine }, tail);
      return lines.map((line) => ({ line: redactPaths(line) }));
    },

    /**
     * The names the services inject, values masked; `overridden` when a secret of the same key wins.
     */
    async injected(userId: number, appId: number) {
      const { row } = await deps.queries.requireApplication(userId, appId);
      const [all, secretKeys] = await Promise.all([connections(row.id), repo.secretKeys(row.id)]);
      const own = new Set(secretKeys);
      return all.flatMap(({ service, connection }) =>
        Object.keys(
          serviceEnvironment(
            row.type,
            connection,
            all.map((c) => c.connection),
          ),
        ).map((key) => ({ key, value: MASKED_VALUE, service: service.name, overridden: own.has(key) })),
      );
    },

    /** Removes every service instance of an application: its processes and files, then its rows. */
    async removeApplication(appId: number): Promise<void> {
      const instances = await repo.instancesOf(appId);
      for (const instance of instances) {
        await locked(instance.service_id, async () => {
          await deps.driver().delete({ id: instance.uuid, engine: instance.engine as ServiceEngine });
          await repo.deleteInstance(instance.service_id);
        });
      }
      await deps.db
        .deleteFrom('jobs')
        .where('key', '=', jobKey('app_service.provision', { applicationId: appId }))
        .execute();
    },

    /**
     * Keeps every provisioned service running: its first pass starts them after a restart of Berth,
     * later passes start a dead server again (with backoff on failure).
     */
    startSupervisor(options: { intervalMs?: number } = {}) {
      const intervalMs = options.intervalMs ?? 1000;
      const backoff = new Map<number, { until: number; delay: number }>();
      let timer: NodeJS.Timeout | undefined;
      let stopped = false;
      let passing: Promise<void> | undefined;
      const tick = (): Promise<void> => {
        passing ??= repo
          .provisioned()
          .then((instances) =>
            Promise.all(
              instances.map((instance) =>
                supervise(instance, backoff).catch((error: unknown) =>
                  log.error({ service: instance.service_id, err: error }, 'supervising failed'),
                ),
              ),
            ),
          )
          .then(() => undefined)
          .finally(() => {
            passing = undefined;
          });
        return passing;
      };
      const schedule = () => {
        if (stopped) return;
        timer = setTimeout(() => void tick().finally(schedule), intervalMs);
        timer.unref?.();
      };
      supervisor = {
        tick,
        async stop() {
          stopped = true;
          if (timer) clearTimeout(timer);
          await passing;
        },
      };
      void tick().finally(schedule);
      return supervisor;
    },

    /** Stops the supervisor and every service server of this data dir (they come back at the next start). */
    async close(): Promise<void> {
      if (closing) return;
      closing = true;
      await supervisor?.stop();
      await Promise.all([...locks.values()]);
      const instances = await repo.provisioned().catch(() => []);
      await Promise.all(
        instances
          .filter((i) => i.data_dir !== null && isUnder(i.data_dir, deps.dataDir))
          .map(async (instance) => {
            await deps.driver().stop({ id: instance.uuid, engine: instance.engine as ServiceEngine });
            // pid null marks a deliberate stop: the next start is not counted as a crash.
            await repo.updateInstance(instance.service_id, { pid: null, updated_at: now() });
          }),
      );
    },
  };
}

export type AppServicesService = ReturnType<typeof createAppServicesService>;
