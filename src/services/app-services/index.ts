// An application's services and container services (docs/services.md): each one a private instance
// run by a service runner (src/drivers/services: the database types on the managed-database driver's
// engines, the others on their own), with its own generated, sealed credentials, provisioned by apply's
// job and before every deployment's release, supervised (a dead one is started again, and every one
// comes back when Berth starts), and removed with its data when the application is deleted. `worker`
// services are processes of the application itself: the runtime driver runs them, this file shows them. The connection environment it gives the application
// is built here from the store (domain/app-services.ts names it); the platform API's services routes
// call the use cases at the end.
import { createKeyedLock } from '../../domain/keyed-lock.js';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { Database } from '../../db/schema/index.js';
import type { ApplicationRow } from '../../db/repositories/infrastructure.js';
import {
  connectionFormats,
  DEFAULT_SERVICE_DATABASE,
  DEFAULT_SERVICE_MEMORY_MI,
  engineOfService,
  MASKED_VALUE,
  parseSizing,
  reachedAt,
  SERVICE_USER,
  serviceEnvironment,
  sizingName,
  UNAVAILABLE_SERVICE_TYPES,
  volumeGiB,
  workerInstanceName,
  type ServiceConnection,
  type ServiceSizing,
  type ServiceState,
} from '../../domain/app-services.js';
import { iso, type Clock, type IdGenerator } from '../../domain/clock.js';
import { memoryBytes } from '../../domain/deployments.js';
import { AppError } from '../../domain/errors.js';
import { redactPaths } from '../../domain/redact.js';
import type { InstanceStatus as RuntimeInstanceStatus } from '../../drivers/runtime/driver.js';
import type { ServiceRunner, ServiceRuntime, ServiceSpec } from '../../drivers/services/types.js';
import type { InfrastructureQueries } from '../infrastructure/queries.js';
import { handles, jobKey } from '../jobs.js';
import { auditChange } from '../audit.js';
import { deleteJobs } from '../../jobs/queue.js';
import {
  createAppServicesRepository,
  type ServiceInstanceRow,
  type ServiceRow,
  type ServiceSource,
  type UnitKey,
} from '../../db/repositories/app-services.js';

export interface AppServicesDeps {
  db: Kysely<Database>;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  secretBox: SecretBox;
  /**
   * Whether an instance whose runner keeps its files at `location` (ServiceRuntime.location; null: it
   * keeps none) is this Berth's to supervise and stop: another Berth on the same store keeps its own.
   * Absent: every instance is.
   */
  runsHere?: (location: string | null) => boolean;
  /**
   * The runner of each type: the database types on the managed-database driver, rabbitmq, sftp,
   * chrome-headless… (src/composition.ts picks them).
   */
  runners?: ServiceRunner[];
  /**
   * Where an application's volumes are on this host and the account its processes run as, for
   * runners that work on its files (sftp); undefined when the runtime keeps no files here.
   */
  appHost?: (
    appId: number,
    volumes: Array<{ name: string; mountPath: string; volumeSize: number }>,
  ) => Promise<Pick<ServiceSpec, 'volumes' | 'appUser'>>;
  /**
   * Lets the application's processes reach these ports of its services and says at which address
   * (the runtime's serviceAddress: the host end of its network); undefined or absent: where the
   * runner serves them.
   */
  serviceAddress?: (appId: number, ports: number[]) => Promise<string | undefined>;
  /** The runtime's instances of an application: a `worker` service is its `worker-<name>` process. */
  runtimeInstances?: (appId: number) => Promise<RuntimeInstanceStatus[]>;
  /**
   * The bytes under each of these directories (instances' files on this host) as last measured,
   * answered at once (absent until measured; the measuring runs in the background), for the metrics.
   */
  filesBytes?: (dirs: readonly string[]) => Map<string, number>;
  queries: Pick<InfrastructureQueries, 'requireApplication'>;
}

/** Where the runner serves the instance, kept beside its `extra` (one sealed JSON, no column of its own). */
const RUNNER_HOST = '@host';
/** Rows recorded before the runner's host was kept: every runner then served on loopback. */
const RECORDED_BEFORE_HOSTS = '127.0.0.1';

/**
 * What the store records of a service that runs. `extra` is sealed: a token-bearing path (chrome,
 * gotenberg) is a credential.
 */
function runningAt(runtime: ServiceRuntime, sizing: ServiceSizing, secretBox: SecretBox) {
  return {
    state: 'running' as const,
    state_reason: null,
    port: runtime.port,
    pid: runtime.pid,
    version: runtime.version,
    data_dir: runtime.location,
    applied_sizing: sizingName(sizing),
    extra: secretBox.encrypt(JSON.stringify({ ...runtime.extra, [RUNNER_HOST]: runtime.host })),
  };
}

const MiB = 1024 * 1024;
const keyOf = (row: { source: string; service_id: number }): UnitKey => ({
  source: row.source as ServiceSource,
  id: row.service_id,
});
/**
 * The type an instance runs (its runner's key): `engine` holds the managed-database engine for the
 * database types (`valkey` serves redis too) and the type itself for the others.
 */
const ENGINE_TYPES: Readonly<Record<string, string>> = { pg: 'postgresql', mysql: 'mysql', valkey: 'valkey' };
const typeOfInstance = (instance: ServiceInstanceRow): string =>
  ENGINE_TYPES[instance.engine] ?? instance.engine;
const unitKey = (service: ServiceRow): UnitKey => ({ source: service.source, id: service.id });
const lockKey = (key: UnitKey): string => `${key.source}:${key.id}`;

export interface ServiceView {
  id: number;
  name: string;
  /** `service` (spec.services) or `container` (spec.container_services). */
  kind: 'service' | 'container';
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
  const locks = createKeyedLock();
  let supervisor: { stop(): Promise<void>; tick(): Promise<void> } | undefined;
  let closing = false;

  const runners = new Map<string, ServiceRunner>();
  for (const runner of deps.runners ?? []) {
    for (const type of runner.types) runners.set(type, runner);
  }
  const runnerFor = (type: string): ServiceRunner | undefined => runners.get(type);
  /** Why a type does not run here, or undefined when it does (workers run in the runtime). */
  const unavailable = (type: string): string | undefined =>
    type === 'worker' || runners.has(type)
      ? undefined
      : (UNAVAILABLE_SERVICE_TYPES[type] ?? `type ${type} is not run by this Berth`);

  /** One operation per service at a time in this process (job, deployment, supervisor, restart). */
  function locked<T>(key: UnitKey, work: () => Promise<T>): Promise<T> {
    return locks.run(lockKey(key), work);
  }

  const parse = (json: string | null): Record<string, unknown> => {
    try {
      return json ? (JSON.parse(json) as Record<string, unknown>) : {};
    } catch {
      return {};
    }
  };
  const settingsOf = (service: ServiceRow): Record<string, unknown> => parse(service.settings);
  const databaseOf = (service: ServiceRow): string => {
    const database = settingsOf(service).database;
    return typeof database === 'string' ? database : DEFAULT_SERVICE_DATABASE;
  };
  const sizingOf = (service: ServiceRow): ServiceSizing => {
    const volume = volumeGiB(service.volume_size);
    return {
      memoryMiB: memoryBytes(service.memory, DEFAULT_SERVICE_MEMORY_MI) / MiB,
      ...(volume ? { volumeGiB: volume } : {}),
    };
  };

  async function specOf(
    service: ServiceRow,
    instance: ServiceInstanceRow,
    runner: ServiceRunner,
  ): Promise<ServiceSpec> {
    const secrets = secretsOf(service);
    const host =
      runner.usesVolumes && deps.appHost
        ? await deps.appHost(
            service.application_id,
            (await repo.volumesOf(service.application_id)).map((v) => ({
              name: v.name,
              mountPath: v.mount_path,
              volumeSize: v.volume_size,
            })),
          )
        : { volumes: [] };
    return {
      id: instance.uuid,
      type: service.type,
      applicationId: service.application_id,
      teamId: (await repo.teamOf(service.application_id)) ?? 0,
      name: service.name,
      version: service.version,
      ...sizingOf(service),
      ...(instance.port ? { port: instance.port } : {}),
      username: instance.username,
      password: deps.secretBox.decrypt(instance.password_encrypted),
      settings: settingsOf(service),
      secrets,
      ...host,
    };
  }

  /** The instance row of a service, made with fresh credentials the first time. */
  async function instanceFor(service: ServiceRow): Promise<ServiceInstanceRow> {
    const key = unitKey(service);
    const existing = await repo.findInstance(key);
    if (existing) return existing;
    const at = now();
    try {
      await repo.insertInstance({
        source: service.source,
        service_id: service.id,
        application_id: service.application_id,
        uuid: deps.ids.uuid(),
        engine: engineOfService(service.type) ?? service.type,
        state: 'provisioning',
        state_reason: null,
        port: null,
        pid: null,
        version: null,
        data_dir: null,
        applied_sizing: null,
        extra: null,
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
      const made = await repo.findInstance(key);
      if (made) return made;
      throw error;
    }
    return (await repo.findInstance(key)) as ServiceInstanceRow;
  }

  /** Makes one service's instance exist and run as the document says (a changed memory restarts it). */
  function ensureService(service: ServiceRow, runner: ServiceRunner): Promise<ServiceInstanceRow> {
    const key = unitKey(service);
    return locked(key, async () => {
      const instance = await instanceFor(service);
      try {
        const spec = await specOf(service, instance, runner);
        let runtime = await runner.provision(spec);
        // A changed sizing is applied by a restart (the database driver's provision does that itself).
        const sizing = sizingOf(service);
        if (
          !engineOfService(service.type) &&
          instance.applied_sizing &&
          instance.applied_sizing !== sizingName(sizing)
        )
          runtime = await runner.restart(spec);
        await repo.updateInstance(key, {
          ...runningAt(runtime, sizing, deps.secretBox),
          updated_at: now(),
        });
        log.info(
          { app: service.application_id, service: service.name, port: runtime.port },
          'service running',
        );
      } catch (error) {
        const reason = redactPaths(error instanceof Error ? error.message : String(error)).slice(0, 1000);
        await repo.updateInstance(key, { state: 'failed', state_reason: reason, updated_at: now() });
        log.warn({ app: service.application_id, service: service.name, err: error }, 'service failed');
        throw new Error(`service '${service.name}' (${service.type}) failed: ${reason}`, { cause: error });
      }
      return (await repo.findInstance(key)) as ServiceInstanceRow;
    });
  }

  /** The services of an application that a runner runs, with it. */
  async function runnableServices(
    appId: number,
  ): Promise<Array<{ service: ServiceRow; runner: ServiceRunner }>> {
    return (await repo.servicesOf(appId)).flatMap((service) => {
      const runner = runnerFor(service.type);
      return runner ? [{ service, runner }] : [];
    });
  }

  /** The secret settings of a service, opened: apply seals the one there is, sftp's `password`. */
  const secretsOf = (service: ServiceRow): Record<string, string> =>
    service.secret_settings === null ? {} : { password: deps.secretBox.decrypt(service.secret_settings) };

  /**
   * Who the application connects as: the generated account, except for an sftp service whose document
   * names its own `settings.username` and `password` (the login people use too).
   */
  function credentialsOf(service: ServiceRow, instance: ServiceInstanceRow) {
    // minio: the access key of its bucket (the S3 endpoint makes it; the runner hands it in `extra`).
    if (service.type === 'minio') {
      const extra = parse(instance.extra && deps.secretBox.decrypt(instance.extra));
      return {
        username: typeof extra.accessKeyId === 'string' ? extra.accessKeyId : '',
        password: typeof extra.secretKey === 'string' ? extra.secretKey : '',
      };
    }
    const username = settingsOf(service).username;
    const password = secretsOf(service).password;
    return {
      username: service.type === 'sftp' && typeof username === 'string' ? username : instance.username,
      password:
        service.type === 'sftp' && password ? password : deps.secretBox.decrypt(instance.password_encrypted),
    };
  }

  function connectionOf(service: ServiceRow, instance: ServiceInstanceRow): ServiceConnection | undefined {
    if (instance.port === null) return undefined;
    const { [RUNNER_HOST]: host, ...extra } = parse(
      instance.extra && deps.secretBox.decrypt(instance.extra),
    ) as Record<string, string>;
    return {
      name: service.name,
      type: service.type,
      host: host ?? RECORDED_BEFORE_HOSTS,
      port: instance.port,
      ...credentialsOf(service, instance),
      database:
        engineOfService(service.type) && service.type !== 'redis' && service.type !== 'valkey'
          ? databaseOf(service)
          : null,
      extra,
    };
  }

  const byKey = (instances: ServiceInstanceRow[]) => new Map(instances.map((i) => [lockKey(keyOf(i)), i]));

  /** Every service of the application that has a place to connect to. */
  async function connections(
    appId: number,
  ): Promise<Array<{ service: ServiceRow; connection: ServiceConnection }>> {
    const [services, instances] = await Promise.all([repo.servicesOf(appId), repo.instancesOf(appId)]);
    const found = byKey(instances);
    const all = services.flatMap((service) => {
      const instance = found.get(lockKey(unitKey(service)));
      const connection = instance && connectionOf(service, instance);
      return connection ? [{ service, connection }] : [];
    });
    // Admitted every time (also none: a removed service's port closes), where the application is.
    const host = await deps.serviceAddress?.(
      appId,
      all.map((c) => c.connection.port),
    );
    return host ? all.map((c) => ({ ...c, connection: reachedAt(c.connection, host) })) : all;
  }

  /** What the runtime runs of the application (its `worker` services' processes among them). */
  async function runtimeOf(appId: number): Promise<RuntimeInstanceStatus[]> {
    return (await deps.runtimeInstances?.(appId)) ?? [];
  }

  function workerView(service: ServiceRow, runtime: RuntimeInstanceStatus[]): Partial<ServiceView> {
    const instance = runtime.find((i) => i.name === workerInstanceName(service.name));
    if (!instance)
      return { status: 'provisioning', status_reason: 'starts with the next deployment of the application' };
    const state = instance.state;
    return {
      status: state === 'running' ? 'running' : state === 'crashed' ? 'failed' : 'restarting',
      status_reason:
        state === 'running'
          ? null
          : `${state}${instance.lastRestartReason ? `: ${instance.lastRestartReason}` : ''}`,
      engine_version: instance.release,
      restarts: instance.restarts,
      last_restart_reason: instance.lastRestartReason,
    };
  }

  /** The service as the API shows it; `host` as the application reaches it (default: where it runs). */
  function view(
    service: ServiceRow,
    instance: ServiceInstanceRow | undefined,
    runtime: RuntimeInstanceStatus[],
    host = instance && connectionOf(service, instance)?.host,
  ): ServiceView {
    const why = unavailable(service.type);
    const base: ServiceView = {
      id: service.id,
      name: service.name,
      kind: service.source,
      type: service.type,
      version: service.version,
      memory: service.memory,
      volume_size: service.volume_size,
      settings: settingsOf(service),
      command: service.command,
      status: why ? 'unavailable' : instance ? (instance.state as ServiceState) : 'provisioning',
      status_reason: why ?? instance?.state_reason ?? null,
      engine_version: instance?.version ?? null,
      host: instance?.port ? (host ?? null) : null,
      port: instance?.port ?? null,
      restarts: instance?.restarts ?? 0,
      last_restart_at: instance?.last_restart_at ?? null,
      last_restart_reason: instance?.last_restart_reason ?? null,
      created_at: service.created_at,
      updated_at:
        instance && instance.updated_at > service.updated_at ? instance.updated_at : service.updated_at,
    };
    return service.type === 'worker' ? { ...base, ...workerView(service, runtime) } : base;
  }

  /** The service `ref` (its id, or its name) of an application the caller may see; 404 otherwise. */
  async function serviceFor(
    userId: number,
    appId: number,
    ref: string,
  ): Promise<{ app: ApplicationRow; service: ServiceRow; instance: ServiceInstanceRow | undefined }> {
    const { row } = await deps.queries.requireApplication(userId, appId);
    const services = await repo.servicesOf(row.id);
    // Ids of services and container services overlap: a name is exact, an id picks a service first.
    const service = /^\d+$/.test(ref)
      ? services.find((s) => s.id === Number(ref))
      : services.find((s) => s.name === ref);
    if (!service) throw new AppError('not_found', `Service ${ref} not found on application ${row.id}`);
    return { app: row, service, instance: await repo.findInstance(unitKey(service)) };
  }

  /** A service a runner runs and that was provisioned: 409 until then, 422 for the other types. */
  function requireConnection(service: ServiceRow, instance: ServiceInstanceRow | undefined) {
    const runner = runnerFor(service.type);
    if (!runner) {
      throw new AppError(
        'validation',
        service.type === 'worker'
          ? `Service '${service.name}' is a worker: it has no connection; see the application's instances and logs`
          : `Service '${service.name}' (${service.type}) is unavailable: ${unavailable(service.type) ?? ''}`,
      );
    }
    const connection = instance && connectionOf(service, instance);
    if (!instance || !connection) {
      throw new AppError(
        'conflict',
        `Service '${service.name}' is still provisioning; try again once it runs`,
      );
    }
    return { instance, connection, runner };
  }

  async function supervise(
    instance: ServiceInstanceRow,
    backoff: Map<string, { until: number; delay: number }>,
  ) {
    const key = keyOf(instance);
    const wait = backoff.get(lockKey(key));
    if (wait && wait.until > Date.now()) return;
    if (deps.runsHere?.(instance.data_dir) === false) return; // another Berth's
    await locked(key, async () => {
      if (closing) return;
      const fresh = await repo.findInstance(key);
      const service =
        fresh &&
        (await repo.servicesOf(fresh.application_id)).find((s) => s.source === key.source && s.id === key.id);
      const runner = service && runnerFor(service.type);
      if (!fresh || !service || !runner || fresh.applied_sizing === null) return;
      const ref = { id: fresh.uuid, type: service.type };
      const status = await runner.status(ref);
      if (status.running) {
        if (status.pid !== fresh.pid) await repo.updateInstance(key, { pid: status.pid });
        return;
      }
      // pid null: Berth stopped it when it last stopped (or Berth's own process served it), so starting
      // it again is no incident.
      const died = fresh.pid !== null;
      const reason = died ? `process ${fresh.pid} exited` : 'started after Berth restarted';
      if (died) {
        await repo.updateInstance(key, {
          state: 'restarting',
          state_reason: `${reason}; restarting`,
          updated_at: now(),
        });
      }
      try {
        // The sizing it ran with: a changed one waits for the next deployment (docs/services.md).
        const spec = await specOf(service, fresh, runner);
        const applied = parseSizing(fresh.applied_sizing) ?? sizingOf(service);
        const { volumeGiB: _asked, ...rest } = spec;
        const runtime = await runner.start({ ...rest, ...applied });
        await repo.updateInstance(key, {
          ...runningAt(runtime, applied, deps.secretBox),
          ...(died
            ? { restarts: fresh.restarts + 1, last_restart_at: now(), last_restart_reason: reason }
            : {}),
          updated_at: now(),
        });
        backoff.delete(lockKey(key));
        if (died) log.warn({ app: fresh.application_id, service: service.name, reason }, 'service restarted');
      } catch (error) {
        const delay = Math.min(60_000, (wait?.delay ?? 1000) * 2);
        backoff.set(lockKey(key), { until: Date.now() + delay, delay });
        const message = redactPaths(error instanceof Error ? error.message : String(error));
        await repo.updateInstance(key, {
          state: 'failed',
          state_reason: `restart failed: ${message}`.slice(0, 1000),
          updated_at: now(),
        });
        log.error({ app: fresh.application_id, service: service.name, err: error }, 'service restart failed');
      }
    });
  }

  /**
   * Makes every service of the application that a runner runs run (idempotent; a changed memory is
   * applied by restarting it). Throws when one fails, naming it; the others still run. Types that do
   * not run here are said in the log, once each.
   */
  async function ensureApplication(appId: number, logLine: (line: string) => void = () => undefined) {
    const all = await repo.servicesOf(appId);
    for (const service of all) {
      const why = unavailable(service.type);
      if (why) logLine(`Service ${service.name} (${service.type}) is unavailable: ${why}`);
    }
    const wanted = await runnableServices(appId);
    const results = await Promise.allSettled(
      wanted.map(async ({ service, runner }) => {
        const instance = await ensureService(service, runner);
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

    /**
     * Where and as whom the application reaches each of its services: its connection environment and
     * its secrets' service references are made from these (the application's own secrets win).
     */
    async connections(appId: number): Promise<ServiceConnection[]> {
      return (await connections(appId)).map((c) => c.connection);
    },

    /**
     * Per instance uuid of the provisioned services, for the operator's metrics: the client connections
     * open now where its runner can tell, and the bytes of its files on this host (as last measured).
     */
    async usage(): Promise<Map<string, { connections?: number; filesBytes?: number }>> {
      const instances = await repo.provisioned();
      const usage = new Map<string, { connections?: number; filesBytes?: number }>(
        instances.map((i) => [i.uuid, {}]),
      );
      // One count per runner, over its instances' ports (a port it shares, it does not answer for).
      const byRunner = new Map<ServiceRunner, ServiceInstanceRow[]>();
      for (const instance of instances) {
        const runner = runnerFor(typeOfInstance(instance));
        if (!runner?.connections || instance.port === null) continue;
        byRunner.set(runner, [...(byRunner.get(runner) ?? []), instance]);
      }
      await Promise.all(
        [...byRunner].map(async ([runner, own]) => {
          const counts = await runner.connections!(own.map((i) => i.port as number));
          for (const instance of own) {
            const count = counts.get(instance.port as number);
            if (count !== undefined) usage.get(instance.uuid)!.connections = count;
          }
        }),
      );
      // Only this Berth's files: another Berth on the same store measures its own.
      const local = instances.filter(
        (i): i is ServiceInstanceRow & { data_dir: string } =>
          i.data_dir !== null && deps.runsHere?.(i.data_dir) !== false,
      );
      const sizes = deps.filesBytes?.(local.map((i) => i.data_dir)) ?? new Map<string, number>();
      for (const instance of local) {
        const bytes = sizes.get(instance.data_dir);
        if (bytes !== undefined) usage.get(instance.uuid)!.filesBytes = bytes;
      }
      return usage;
    },

    async list(userId: number, appId: number): Promise<ServiceView[]> {
      const { row } = await deps.queries.requireApplication(userId, appId);
      const [services, instances, reached, runtime] = await Promise.all([
        repo.servicesOf(row.id),
        repo.instancesOf(row.id),
        connections(row.id),
        runtimeOf(row.id),
      ]);
      const found = byKey(instances);
      const hostOf = new Map(reached.map((c) => [lockKey(unitKey(c.service)), c.connection.host]));
      return services.map((service) => {
        const key = lockKey(unitKey(service));
        return view(service, found.get(key), runtime, hostOf.get(key));
      });
    },

    /** What this one service injects into the application, values included (they are meant to be seen). */
    async serviceEnvironment(userId: number, appId: number, ref: string) {
      const { app, service, instance } = await serviceFor(userId, appId, ref);
      const { connection } = requireConnection(service, instance);
      const all = (await connections(app.id)).map((c) => c.connection);
      // As the application reaches it (its network's address).
      const reached = all.find((c) => c.name === connection.name) ?? connection;
      const env = serviceEnvironment(app.type, reached, all);
      return Object.entries(env).map(([key, value]) => ({ key, value }));
    },

    async connectionFormats(userId: number, appId: number, ref: string) {
      const { app, service, instance } = await serviceFor(userId, appId, ref);
      const { connection } = requireConnection(service, instance);
      const reached = (await connections(app.id)).find((c) => c.connection.name === connection.name);
      return connectionFormats(reached?.connection ?? connection);
    },

    /** Stops and starts the service (its data stays); resolves once it runs again. */
    async restart(userId: number, appId: number, ref: string): Promise<ServiceView> {
      const { app, service, instance } = await serviceFor(userId, appId, ref);
      const { instance: current, runner } = requireConnection(service, instance);
      const key = unitKey(service);
      await locked(key, async () => {
        const runtime = await runner.restart(await specOf(service, current, runner));
        // Recorded with what the restart changed: the server's new process (a restart that fails is not).
        await deps.db.transaction().execute(async (trx) => {
          await createAppServicesRepository(trx).updateInstance(key, {
            ...runningAt(runtime, sizingOf(service), deps.secretBox),
            updated_at: now(),
          });
          await auditChange(trx, {
            at: now(),
            action: 'service.restart',
            teamId: app.team_id,
            target: { kind: 'service', id: `${app.id}/${service.name}` },
            after: { type: service.type },
          });
        });
      });
      return view(service, await repo.findInstance(key), await runtimeOf(appId));
    },

    /** The newest lines of the service's own log, oldest first. */
    async logs(userId: number, appId: number, ref: string, tail: number): Promise<Array<{ line: string }>> {
      const { service, instance } = await serviceFor(userId, appId, ref);
      const { instance: current, runner } = requireConnection(service, instance);
      const lines = await runner.logs({ id: current.uuid, type: service.type }, tail);
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

    /**
     * A backup's dumps of every provisioned service whose runner makes them (the database types),
     * each into the directory `dirFor` gives its instance's uuid; a stopped one is started for it with
     * the sizing it ran with, and stopped again. One that cannot be dumped fails the whole.
     */
    async exportData(
      dirFor: (uuid: string) => string,
    ): Promise<{ exported: Array<{ uuid: string; files: string[] }> }> {
      const exported: Array<{ uuid: string; files: string[] }> = [];
      for (const instance of await repo.provisioned()) {
        if (deps.runsHere?.(instance.data_dir) === false) continue; // another Berth's
        const key = keyOf(instance);
        const service = (await repo.servicesOf(instance.application_id)).find(
          (s) => s.source === key.source && s.id === key.id,
        );
        const runner = service && runnerFor(service.type);
        if (!service || !runner?.exportData) continue;
        const files = await locked(key, async () => {
          const { volumeGiB: _asked, ...rest } = await specOf(service, instance, runner);
          const applied = parseSizing(instance.applied_sizing ?? '') ?? sizingOf(service);
          return runner.exportData!({ ...rest, ...applied }, dirFor(instance.uuid));
        });
        exported.push({ uuid: instance.uuid, files });
      }
      return { exported };
    },

    /**
     * A restore's load: provisions the service instance `uuid` as the restored store describes it
     * (its credentials, sizing and port), loads the dump in `dir` into it, and records where it runs.
     * Closing the context stops it; the next `berth serve` starts it.
     */
    async importData(uuid: string, dir: string): Promise<void> {
      const instance = (await repo.provisioned()).find((i) => i.uuid === uuid);
      const key = instance && keyOf(instance);
      const service =
        instance &&
        (await repo.servicesOf(instance.application_id)).find(
          (s) => s.source === key!.source && s.id === key!.id,
        );
      const runner = service && runnerFor(service.type);
      if (!instance || !key || !service || !runner)
        throw new Error(`the restored store has no service instance ${uuid}`);
      if (!runner.importData) throw new Error(`a ${service.type} service cannot load a backup here`);
      await locked(key, async () => {
        const spec = await specOf(service, instance, runner);
        const sizing = parseSizing(instance.applied_sizing ?? '') ?? sizingOf(service);
        await runner.provision(spec);
        await runner.importData!(spec, dir);
        // Loading may have restarted it: where it runs now.
        const runtime = await runner.start(spec);
        await repo.updateInstance(key, { ...runningAt(runtime, sizing, deps.secretBox), updated_at: now() });
      });
    },

    /** Removes every service instance of an application: its processes and files, then its rows. */
    async removeApplication(appId: number): Promise<void> {
      for (const instance of await repo.instancesOf(appId)) {
        const key = keyOf(instance);
        await locked(key, async () => {
          const type = typeOfInstance(instance);
          await runnerFor(type)?.delete({ id: instance.uuid, type });
          await repo.deleteInstance(key);
        });
      }
      await deleteJobs(deps.db, [jobKey('app_service.provision', { applicationId: appId })]);
    },

    /**
     * Keeps every provisioned service running: its first pass starts them after a restart of Berth,
     * later passes start a dead one again (with backoff on failure).
     */
    startSupervisor(options: { intervalMs?: number } = {}) {
      const intervalMs = options.intervalMs ?? 1000;
      const backoff = new Map<string, { until: number; delay: number }>();
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

    /**
     * Stops the supervisor and every service of this data dir (they come back at the next start);
     * with `keepRunning` (a restart of Berth) the services run on, and the next Berth finds them.
     */
    async close(options: { keepRunning?: boolean } = {}): Promise<void> {
      if (closing) return;
      closing = true;
      await supervisor?.stop();
      await locks.idle();
      if (options.keepRunning) return;
      const instances = await repo.provisioned().catch(() => []);
      await Promise.all(
        instances
          .filter((i) => deps.runsHere?.(i.data_dir) !== false)
          .map(async (instance) => {
            const type = typeOfInstance(instance);
            await runnerFor(type)?.stop({ id: instance.uuid, type });
            // pid null marks a deliberate stop: the next start is not counted as a crash.
            await repo.updateInstance(keyOf(instance), { pid: null, updated_at: now() });
          }),
      );
    },
  };
}

export type AppServicesService = ReturnType<typeof createAppServicesService>;
