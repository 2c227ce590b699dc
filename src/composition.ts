// The composition root: every long-lived service of a context is built here, once, from the narrow
// dependencies it names (its `…Deps` type) and with the driver its family's config names
// (Config.drivers). No service receives the context. Routes receive `RouteDeps` (src/http/deps.ts,
// built in src/app.ts), the job runner `services.jobs.handlers()`, and the lifecycle starts and stops
// through `ctx.services`; nothing else keeps a service of its own. Services are made on first use, so
// a process that never converts a PDF never starts Chromium, and each one that is made is stopped
// with the context.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from './config/index.js';
import type { Clock, IdGenerator } from './domain/clock.js';
import type { Store } from './db/connect.js';
import type { Database } from './db/schema/index.js';
import type { SecretBox } from './crypto/secret-box.js';
import type { IdentityService } from './services/identity.js';
import { createLocalDatabaseDriver, isLocalDatabaseDriver } from './drivers/databases/local/index.js';
import { createLocalDatabaseOperations } from './drivers/databases/local/operations.js';
import { AppError } from './domain/errors.js';
import { createUpCloudDatabaseDriver } from './drivers/databases/upcloud/index.js';
import type { DatabaseOperationsDriver, ManagedDatabaseDriver } from './drivers/databases/types.js';
import { createTreeSizeCache } from './drivers/os/disk-usage.js';
import { createSmtpMailer, defaultSender, type Mailer } from './drivers/mail/index.js';
import type { ObjectStorageDriver } from './drivers/objectstorage/driver.js';
import { createLocalObjectStorageDriver } from './drivers/objectstorage/local/index.js';
import { lazyBlobStore } from './drivers/objectstorage/local/blobs.js';
import { createAccountsService, type AccountsService } from './services/accounts.js';
import type { PasswordCost } from './crypto/passwords.js';
import { createApplyService, type ApplyService } from './services/infrastructure/apply.js';
import {
  createDbOperationRequests,
  type DbOperationRequests,
  type DbOperationRequestsDeps,
} from './services/db-operations/requests.js';
import { dbOperationJobHandlers } from './services/db-operations/index.js';
import {
  createManagedDatabaseService,
  type ManagedDatabaseService,
} from './services/managed-databases/index.js';
import {
  createScheduledDeletion,
  type ApplicationCleanup,
  type ScheduledDeletion,
} from './services/scheduled-deletion/index.js';
import {
  createObjectStorageService,
  endpointsView,
  type ObjectStorageService,
} from './services/object-storage/index.js';
import { createNotificationService, type NotificationService } from './services/notifications/index.js';
import { createOwnershipChecks, type OwnershipChecks } from './services/ownership.js';
import { createRemovals } from './services/infrastructure/removals.js';
import { createAuditService, type AuditService } from './services/audit.js';
import { createBackgroundWork } from './jobs/index.js';
import { createMetrics, type Metrics } from './services/metrics/index.js';
import type { JobHandler, JobRunner } from './jobs/runner.js';
import type { AppRuntimeDriver } from './drivers/runtime/driver.js';
import { createLocalRuntimeDriver } from './drivers/runtime/local/index.js';
import { appLayout } from './drivers/runtime/local/layout.js';
import { DEFAULT_NODE_MAJOR } from './drivers/runtime/local/node-runtime.js';
import { createKubernetesRuntimeDriver } from './drivers/runtime/kubernetes/index.js';
import { createKubernetesServiceRunner } from './drivers/services/kubernetes/index.js';
import { lazyKubeClient } from './drivers/kubernetes/lazy.js';
import { createAddressGuard } from './drivers/net/guard.js';
import { createWebhookTransport } from './drivers/net/webhooks.js';
import {
  createWebhookEmitter,
  createWebhookService,
  type WebhookEmitter,
  type WebhookService,
} from './services/webhooks/index.js';
import { createPushToDeploy, type PushToDeploy } from './services/applications/push.js';
import { createDeploymentRepository } from './db/repositories/deployments.js';
import { iso } from './domain/clock.js';
import { createDeploymentService, type DeploymentService } from './services/applications/deployments.js';
import { createRuntimeService, type RuntimeService } from './services/applications/runtime.js';
import type { ArtifactStore } from './drivers/artifacts/types.js';
import { createLocalArtifactStore } from './drivers/artifacts/local.js';
import { lazyS3ArtifactStore } from './drivers/artifacts/s3-url.js';
import { createSpecBuilder } from './services/applications/spec.js';
import { createChromeRunner } from './drivers/services/chrome.js';
import { createDatabaseServiceRunner } from './drivers/services/databases.js';
import { createGotenbergRunner } from './drivers/services/gotenberg/index.js';
import { createRabbitmqRunner } from './drivers/services/rabbitmq/index.js';
import { createMinioRunner } from './services/app-services/minio.js';
import { createSftpRunner } from './drivers/services/sftp.js';
import type { ServiceRunner } from './drivers/services/types.js';
import { createAppServicesService, type AppServicesService } from './services/app-services/index.js';
import { isUnder } from './services/managed-databases/supervisor.js';
import {
  createInfrastructureQueries,
  type InfrastructureQueries,
} from './services/infrastructure/queries.js';
import { createScheduleService, type ScheduleService } from './services/scheduled-deletion/schedules.js';
import {
  createToolsService,
  DEFAULT_TOOLS_QUEUES,
  type ToolsQueueOptions,
  type ToolsService,
} from './services/tools/index.js';
import type { ToolsEngines } from './drivers/tools/types.js';
import {
  createLocalToolsEngines,
  DEFAULT_LOCAL_TOOLS_OPTIONS,
  type LocalToolsOptions,
} from './drivers/tools/local/index.js';

export interface Services {
  readonly managedDatabases: ManagedDatabaseService;
  readonly tools: ToolsService;
  /** The SMTP mailer; undefined without BERTH_SMTP_URL (mail stays in the outbox). */
  readonly mailer: Mailer | undefined;
  /** Object storages: provisioning, the endpoint, the owner's view, deletion (with their driver). */
  readonly objectStorage: ObjectStorageService;
  /** Apply and dry run of the Infrastructure document. */
  readonly apply: ApplyService;
  /** Work to do before any application of this context is deleted (a runtime's processes…). */
  readonly applicationCleanups: ApplicationCleanup[];
  /** Applications' deletion schedules over the platform API. */
  readonly schedules: ScheduleService;
  /** The /1.3 operations' requests (tasks, migrations, upgrade, maintenance, clones). */
  readonly dbOperations: DbOperationRequests;
  /** What runs applications (BERTH_RUNTIME_DRIVER). */
  readonly runtime: AppRuntimeDriver;
  /** Uploaded sources, and the short-lived URLs other hosts fetch them by (BERTH_ARTIFACT_STORE). */
  readonly artifacts: ArtifactStore;
  /** Deployments: requested by apply and the API, run as jobs, reconciled at start. */
  readonly deployments: DeploymentService;
  /** The platform API's use cases on running applications. */
  readonly applications: RuntimeService;
  /** Applications' services and container services: provisioning, supervision, environment. */
  readonly appServices: AppServicesService;
  /** What runs each service type: the database types on the managed-database driver, and the others. */
  readonly serviceRunners: ServiceRunner[];
  /** People signing in: passwords, sessions, sign-in links; team membership changes. */
  readonly accounts: AccountsService;
  /** What a team has, as the platform API reads it: applications, resources, YAML exports. */
  readonly resources: InfrastructureQueries;
  /** Removing one domain, secret or volume of an application. */
  readonly removals: ReturnType<typeof createRemovals>;
  /** The mail outbox as the platform API lists it. */
  readonly notifications: NotificationService;
  /** Scheduled deletion of applications: the sweep, its jobs and its start. */
  readonly scheduledDeletion: ScheduledDeletion;
  /** Who may see what a path names, before the body is validated (the ownership plugin). */
  readonly ownership: OwnershipChecks;
  /** Team webhooks: endpoints, their deliveries (sent by jobs) and the events features emit. */
  readonly webhooks: WebhookService;
  /** Push to deploy: applications' git webhook secrets and the forges' push events. */
  readonly pushToDeploy: PushToDeploy;
  /** The audit log's readers and its retention prune (the writes are each service's). */
  readonly audit: AuditService;
  readonly jobs: Jobs;
  /** The Prometheus series (docs/operations.md); undefined without BERTH_METRICS_ADDR: nothing is counted. */
  readonly metrics: Metrics | undefined;
}

/** The job registry: every feature's handlers, and the runner that runs them. */
export interface Jobs {
  /** Every job type and its handler, collected from the services (a new map on each call). */
  handlers(): Record<string, JobHandler>;
  /** A runner over every handler (the lifecycle starts one; tests run due jobs with it). */
  runner(options?: { pollMs?: number }): JobRunner;
  /** Polls the job runner at once; the lifecycle sets it when the runner starts. */
  wake(): void;
}

/** The tools' settings tests and benchmarks may choose: the local engines' and the service's queues. */
export type ToolsOptions = LocalToolsOptions & ToolsQueueOptions;

/** What tests and tools may choose instead of the configured defaults. */
export interface ServiceOverrides {
  managedDatabaseDriver?: ManagedDatabaseDriver;
  runtimeDriver?: AppRuntimeDriver;
  objectStorageDriver?: ObjectStorageDriver;
  artifactStore?: ArtifactStore;
  /** What runs the service types that are not databases (the database types stay on the managed-database driver). */
  serviceRunners?: ServiceRunner[];
  /** The tools' engines instead of BERTH_TOOLS_DRIVER's (closed with the context all the same). */
  toolsEngines?: ToolsEngines;
  tools?: Partial<ToolsOptions>;
  /** Failed sign-ins per address a minute (tests: each is a 32 MiB scrypt hash). */
  signInFailuresPerAddress?: number;
  /** scrypt cost of new password hashes (tests: the production cost spends ~0.3 s per hash). */
  passwordCost?: PasswordCost;
}

/**
 * What the composition root takes of a context: src/context.ts hands itself in. Named here rather
 * than imported, so the context depends on the composition and not the other way round (no cycle).
 */
export interface CompositionContext {
  readonly config: Config;
  readonly store: Pick<Store, 'dialect'>;
  readonly db: Kysely<Database>;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly logger: Logger;
  readonly secretBox: SecretBox;
  readonly identity: IdentityService;
  onClose(stop: (options: CloseOptions) => Promise<void>): void;
}

export interface CloseOptions {
  /**
   * Berth restarts (`berth serve` stopped by a signal): what serves the applications (replicas, the
   * edge, services, managed databases) stays up for the next Berth to adopt. Without it everything
   * Berth started stops (tests, `berth admin stop-all`).
   */
  keepRunning?: boolean;
}

/** A value made on first use, then kept. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

export function createServices(ctx: CompositionContext, overrides: ServiceOverrides = {}): Services {
  const { config } = ctx;
  // The one way features announce events to team webhooks (deliveries are jobs: the runner is woken).
  const webhookEvents: WebhookEmitter = createWebhookEmitter({
    db: ctx.db,
    clock: ctx.clock,
    ids: ctx.ids,
    logger: ctx.logger,
    wakeJobs: () => jobs.wake(),
  });

  // Made at once when metrics are served, so that every hook below counts from the start.
  const metrics: Metrics | undefined = config.metricsAddr
    ? createMetrics({
        db: ctx.db,
        clock: ctx.clock,
        logger: ctx.logger,
        runtime: () => runtimeDriver(),
        databaseConnections: (ports) => managedDatabaseDriver().connections?.(ports),
        serviceUsage: () => appServices().usage(),
      })
    : undefined;

  // One driver for managed databases and applications' services: their per-instance locks and
  // engine templates are shared.
  const managedDatabaseDriver = once((): ManagedDatabaseDriver => {
    if (overrides.managedDatabaseDriver) return overrides.managedDatabaseDriver;
    switch (config.drivers.managedDatabases) {
      case 'local':
        return createLocalDatabaseDriver({ dataDir: config.dataDir });
      case 'upcloud':
        // loadConfig fills config.upcloud whenever this driver is chosen.
        return createUpCloudDatabaseDriver(config.upcloud!);
    }
  });
  // Applications' private database services stay on this host when managed databases are a
  // provider's: they are sized by the application's memory, not by a provider's plan.
  const serviceDatabaseDriver = once((): ManagedDatabaseDriver => {
    const driver = managedDatabaseDriver();
    return driver.remote ? createLocalDatabaseDriver({ dataDir: config.dataDir }) : driver;
  });
  const objectStorageDriver = (): ObjectStorageDriver => {
    if (overrides.objectStorageDriver) return overrides.objectStorageDriver;
    switch (config.drivers.objectStorage) {
      case 'local':
      // s3: Berth's own endpoint still, with the bytes in the upstream bucket (loadConfig checked it is set).
      case 's3':
        return createLocalObjectStorageDriver({
          db: ctx.db,
          dialect: ctx.store.dialect,
          clock: ctx.clock,
          secretBox: ctx.secretBox,
          logger: ctx.logger,
          config,
          ...(metrics ? { onRequest: (request) => metrics.s3Request(request) } : {}),
          ...(config.drivers.objectStorage === 's3'
            ? {
                blobs: lazyBlobStore('s3', async () => {
                  const { upstreamBlobStore } =
                    await import('./drivers/objectstorage/local/upstream-blobs.js');
                  return upstreamBlobStore(config.s3Upstream!, config.dataDir, ctx.logger);
                }),
              }
            : {}),
        });
    }
  };

  /** The local runtime: what runs applications here, and what builds them for a remote one. */
  const localRuntime = once((): AppRuntimeDriver => {
    const { runtime } = config;
    const events = createDeploymentRepository(ctx.db);
    const driver = createLocalRuntimeDriver({
      dataDir: config.dataDir,
      // The store is made when a build or check first reads from it.
      artifacts: { localFile: (key) => artifacts().localFile(key) },
      runtimesDir: runtime.runtimesDir,
      edge: {
        host: config.host,
        port: runtime.edgePort,
        tlsPort: runtime.edgeTlsPort,
        proxy: runtime.edgeProxy,
      },
      guard: createAddressGuard({ allow: runtime.sourcesAllowPrivate }),
      allowFileUrls: runtime.sourcesAllowFileUrls,
      deploymentTimeoutMs: runtime.deploymentTimeoutSeconds * 1000,
      drainMs: runtime.drainSeconds * 1000,
      appLimits: { pidsMax: runtime.appPidsMax, cpuCores: runtime.appCpuCores },
      build: { registry: runtime.buildRegistry, env: runtime.buildEnv },
      network: runtime.appNetwork,
      // What applications may reach on the host besides their services and the edge.
      publicPorts: [config.port, config.s3Port],
      onEvent: (event) => {
        ctx.logger.info(
          { app: event.appId, instance: event.instance },
          `application ${event.kind}: ${event.message}`,
        );
        events
          .recordEvent(event.appId, event, iso(ctx.clock.now()))
          .catch((error: unknown) => ctx.logger.warn({ err: error }, 'runtime event not recorded'));
      },
      log: ctx.logger,
    });
    ctx.onClose((options) => driver.close(options));
    return driver;
  });
  /** The kubernetes driver's cluster, connected on first use (docs/runtime.md, Kubernetes). */
  const kubeClient = once(() =>
    lazyKubeClient(config.kubernetes.kubeconfig ? { kubeconfig: config.kubernetes.kubeconfig } : {}),
  );
  const runtimeDriver = once((): AppRuntimeDriver => {
    if (overrides.runtimeDriver) return overrides.runtimeDriver;
    const { runtime, kubernetes } = config;
    switch (config.drivers.runtime) {
      case 'local':
        return localRuntime();
      case 'kubernetes': {
        const driver = createKubernetesRuntimeDriver({
          client: kubeClient(),
          // Builds run here, in the local runtime's sandbox; their releases go to the cluster as archives.
          builder: localRuntime(),
          releaseDir: (appId, release) => appLayout(config.dataDir, appId).release(release),
          artifacts: artifacts(),
          render: {
            namespacePrefix: kubernetes.namespacePrefix,
            ...(kubernetes.ingressClass ? { ingressClass: kubernetes.ingressClass } : {}),
            ...(kubernetes.storageClass ? { storageClass: kubernetes.storageClass } : {}),
            images: kubernetes.images,
            defaultNodeMajor: String(DEFAULT_NODE_MAJOR),
            deploymentTimeoutSeconds: runtime.deploymentTimeoutSeconds,
            ingressNamespace: kubernetes.ingressNamespace,
            // One application never holds more than its whole team may.
            quota: {
              memoryBytes: config.quotas.memoryMiB * 1024 * 1024,
              ...(runtime.appCpuCores !== undefined ? { cpuCores: runtime.appCpuCores } : {}),
            },
          },
          deploymentTimeoutMs: runtime.deploymentTimeoutSeconds * 1000,
          log: ctx.logger,
        });
        ctx.onClose(() => driver.close());
        return driver;
      }
    }
  });
  const artifacts = once((): ArtifactStore => {
    if (overrides.artifactStore) return overrides.artifactStore;
    switch (config.drivers.artifacts) {
      case 'local':
        return createLocalArtifactStore({
          dataDir: config.dataDir,
          publicUrl: config.publicUrl,
          clock: ctx.clock,
          // Derived from the secret key: every Berth on the same key signs and checks alike.
          signingKey: Buffer.from(ctx.secretBox.keyedHash('berth:artifact-urls'), 'hex'),
          onLegacyMoved: (count) =>
            ctx.logger.info(`moved ${count} uploaded source archive(s) from uploads/ to the artifact store`),
        });
      case 's3': {
        // In the upstream bucket (loadConfig checked it is set); the SDK is loaded on first use.
        const settings = config.s3Upstream!;
        return lazyS3ArtifactStore(settings, ctx.clock, async () => {
          const { createS3ArtifactStore } = await import('./drivers/artifacts/s3.js');
          return createS3ArtifactStore({ settings, dataDir: config.dataDir, clock: ctx.clock });
        });
      }
    }
  });
  const resources = once(() =>
    createInfrastructureQueries({
      db: ctx.db,
      identity: ctx.identity,
      secretBox: ctx.secretBox,
      storageEndpoints: (uuid) => endpointsView(objectStorage().driver, uuid),
    }),
  );
  /** What runs each service type (docs/services.md). */
  const serviceRunners = once((): ServiceRunner[] => [
    // postgresql, mysql, redis, valkey: private instances of the managed-database driver's engines.
    createDatabaseServiceRunner(serviceDatabaseDriver),
    ...(overrides.serviceRunners ?? otherServiceRunners()),
  ]);
  /** The service types that are not databases, on the service driver (BERTH_SERVICE_DRIVER). */
  const otherServiceRunners = (): ServiceRunner[] => {
    // On Kubernetes every type it runs is a StatefulSet in the application's namespace, the database
    // types too (listed later, it takes them from the managed-database adapter).
    if (config.drivers.runtime === 'kubernetes')
      return [
        createKubernetesServiceRunner({
          client: kubeClient(),
          namespacePrefix: config.kubernetes.namespacePrefix,
          ...(config.kubernetes.storageClass ? { storageClass: config.kubernetes.storageClass } : {}),
          readyTimeoutMs: config.runtime.deploymentTimeoutSeconds * 1000,
        }),
      ];
    switch (config.drivers.services) {
      case 'local':
        return localServiceRunners();
    }
  };
  const localServiceRunners = (): ServiceRunner[] => [
    createSftpRunner({ dataDir: config.dataDir, logger: ctx.logger }),
    createChromeRunner({ dataDir: config.dataDir, logger: ctx.logger }),
    createRabbitmqRunner({ dataDir: config.dataDir, logger: ctx.logger }),
    // The tools' warm engines, made when a gotenberg service first needs them.
    createGotenbergRunner({
      renderPdf: (source, settings) => tools().renderPdf(source, settings),
      office: (bytes, extension, options) => tools().office(bytes, extension, options),
      merge: (files) => tools().merge(files),
      markdownToHtml: (markdown, template) => tools().markdownToHtml(markdown, template),
      get guard() {
        return tools().guard;
      },
      health: () => tools().health(),
    }),
    // A private bucket on Berth's own S3 endpoint, on the object storage service (made when first used).
    createMinioRunner({
      db: ctx.db,
      clock: ctx.clock,
      logger: ctx.logger,
      objectStorage: () => objectStorage(),
    }),
  ];
  // Services' data dirs, walked in the background at most once a minute for the metrics.
  const serviceFiles = once(() => createTreeSizeCache({ now: () => ctx.clock.now().getTime() }));
  const appServices = once(() => {
    const service = createAppServicesService({
      db: ctx.db,
      clock: ctx.clock,
      ids: ctx.ids,
      logger: ctx.logger,
      secretBox: ctx.secretBox,
      // The runners keep their instances' files under BERTH_DATA_DIR: one elsewhere is another Berth's.
      runsHere: (location) => location === null || isUnder(location, config.dataDir),
      runners: serviceRunners(),
      appHost: (appId, volumes) => {
        const driver = runtimeDriver();
        return driver.hostFiles ? driver.hostFiles(appId, volumes) : Promise.resolve({ volumes: [] });
      },
      serviceAddress: (appId, ports) =>
        runtimeDriver().serviceAddress?.(appId, ports) ?? Promise.resolve(undefined),
      runtimeInstances: async (appId) => (await runtimeDriver().status(appId)).instances,
      filesBytes: (dirs) => serviceFiles().read(dirs),
      queries: resources(),
    });
    ctx.onClose((options) => service.close(options));
    return service;
  });
  const specs = once(() =>
    createSpecBuilder({
      db: ctx.db,
      secretBox: ctx.secretBox,
      runtime: config.runtime,
      serviceConnections: (appId) => appServices().connections(appId),
    }),
  );
  const deployments = once(() =>
    createDeploymentService({
      db: ctx.db,
      clock: ctx.clock,
      logger: ctx.logger,
      runtime: config.runtime,
      driver: runtimeDriver,
      specs: specs(),
      artifacts,
      wakeJobs: () => jobs.wake(),
      services: { ensureApplication: (appId, log) => appServices().ensureApplication(appId, log) },
      events: webhookEvents,
      ...(metrics ? { onFinished: (outcome, seconds) => metrics.deploymentFinished(outcome, seconds) } : {}),
    }),
  );
  const applications = once(() =>
    createRuntimeService({
      db: ctx.db,
      clock: ctx.clock,
      logger: ctx.logger,
      artifacts,
      queries: resources(),
      deployments: deployments(),
      specs: specs(),
      driver: runtimeDriver,
      wakeJobs: () => jobs.wake(),
      events: webhookEvents,
    }),
  );

  const managedDatabases = once(() => {
    const service = createManagedDatabaseService({
      db: ctx.db,
      clock: ctx.clock,
      ids: ctx.ids,
      logger: ctx.logger,
      secretBox: ctx.secretBox,
      identity: ctx.identity,
      driver: managedDatabaseDriver(),
    });
    ctx.onClose((options) => service.close(options));
    return service;
  });
  const toolsEngines = (): ToolsEngines => {
    if (overrides.toolsEngines) return overrides.toolsEngines;
    switch (config.drivers.tools) {
      case 'local':
        return createLocalToolsEngines(
          { guard: createAddressGuard({ allow: config.toolsAllowPrivate }) },
          { ...DEFAULT_LOCAL_TOOLS_OPTIONS, ...overrides.tools },
        );
    }
  };
  const tools = once(() => {
    const service = createToolsService(
      {
        db: ctx.db,
        clock: ctx.clock,
        logger: ctx.logger,
        engines: toolsEngines(),
        monthlyCredits: config.toolsMonthlyCredits,
        ...(metrics ? { onCharged: (operation, outcome) => metrics.toolsCharged(operation, outcome) } : {}),
      },
      { ...DEFAULT_TOOLS_QUEUES, ...overrides.tools },
    );
    ctx.onClose(() => service.close());
    return service;
  });
  const mailer = once(() => {
    const made = config.smtpUrl
      ? createSmtpMailer({ url: config.smtpUrl, defaultFrom: defaultSender(config.publicUrl) })
      : undefined;
    if (made) ctx.onClose(() => made.close());
    return made;
  });
  const objectStorage = once(() => {
    const service = createObjectStorageService({
      db: ctx.db,
      clock: ctx.clock,
      driver: objectStorageDriver(),
      listen: { host: config.host, port: config.s3Port },
    });
    // The endpoint a minio service started (where Berth's start did not serve it) stops with Berth.
    ctx.onClose(() => service.close());
    return service;
  });
  // What runs for an application stops and goes before its rows do.
  const applicationCleanups: ApplicationCleanup[] = [
    async (app) => {
      deployments().cancelInFlight(app.id, 'the application is being deleted');
      await runtimeDriver().stop(app.id);
      // Its services' servers and data go with it (their rows go with the application's), before the
      // runtime removes the application's OS account, which an sftp server runs as.
      await appServices().removeApplication(app.id);
      await runtimeDriver().remove(app.id);
      await artifacts().removeApplication(app.id);
    },
  ];
  // The /1.3 operations go with the managed-database driver: the local one's run on this host.
  const databaseOperations = once((): DatabaseOperationsDriver => {
    const databases = managedDatabaseDriver();
    if (!isLocalDatabaseDriver(databases)) {
      // A refusal the caller can read (400), not a fault: docs/drivers.md lists what each driver does.
      throw new AppError(
        'bad_request',
        `not supported by the ${databases.name} driver: the /1.3 operations (tasks, migration, upgrade, maintenance, clone)`,
        { apiCode: 'INVALID_REQUEST' },
      );
    }
    return createLocalDatabaseOperations({
      databases,
      guard: createAddressGuard({ allow: config.toolsAllowPrivate }),
    });
  });
  // The /1.3 operations' requests and jobs. The managed-database service is reached when used, not when
  // these are made (it stops instances at close), hence the getters (which a spread would call).
  const dbOperationsDeps: DbOperationRequestsDeps = {
    db: ctx.db,
    clock: ctx.clock,
    ids: ctx.ids,
    logger: ctx.logger,
    secretBox: ctx.secretBox,
    identity: ctx.identity,
    events: webhookEvents,
    get managedDatabases() {
      return managedDatabases();
    },
    get operations() {
      return databaseOperations();
    },
  };
  const dbOperations = once(() => createDbOperationRequests(dbOperationsDeps));
  const apply = once(() =>
    createApplyService({
      db: ctx.db,
      dialect: ctx.store.dialect,
      clock: ctx.clock,
      ids: ctx.ids,
      secretBox: ctx.secretBox,
      identity: ctx.identity,
      quotas: config.quotas,
      deployments: deployments(),
      runtimeCapabilities: () => runtimeDriver().capabilities(),
      runsServiceType: (type) => serviceRunners().some((runner) => runner.types.includes(type)),
      serviceCapabilities: () => serviceDatabaseDriver().capabilities?.(),
      charsetProblems: (engine, database) =>
        managedDatabaseDriver().charsetProblems?.(engine, database) ?? [],
      // What the object-storage driver would refuse is refused by apply, in the same 422; so is a
      // repository URL fetch would refuse (file:// only when the operator allows it).
      validationHooks: {
        objectStorageEntry: (entry) => objectStorage().driver.problems(entry),
        allowFileRepositoryUrls: config.runtime.sourcesAllowFileUrls,
      },
    }),
  );
  const accounts = once(() =>
    createAccountsService({
      db: ctx.db,
      clock: ctx.clock,
      logger: ctx.logger,
      secretBox: ctx.secretBox,
      identity: ctx.identity,
      mailer,
      publicUrl: config.publicUrl,
      ...(overrides.signInFailuresPerAddress
        ? { signInFailuresPerAddress: overrides.signInFailuresPerAddress }
        : {}),
      ...(overrides.passwordCost ? { passwordCost: overrides.passwordCost } : {}),
    }),
  );
  const schedules = once(() =>
    createScheduleService({ db: ctx.db, clock: ctx.clock, identity: ctx.identity }),
  );
  const removals = once(() => createRemovals({ db: ctx.db, clock: ctx.clock, queries: resources() }));
  const notifications = once(() => createNotificationService({ db: ctx.db }));
  const scheduledDeletion = once(() =>
    createScheduledDeletion({
      db: ctx.db,
      clock: ctx.clock,
      logger: ctx.logger,
      publicUrl: config.publicUrl,
      cleanups: () => applicationCleanups,
      mailConfigured: config.smtpUrl !== undefined,
      mailer,
      events: webhookEvents,
    }),
  );
  const ownership = once(() => createOwnershipChecks({ db: ctx.db, identity: ctx.identity }));
  const webhooks = once(() =>
    createWebhookService({
      db: ctx.db,
      clock: ctx.clock,
      ids: ctx.ids,
      logger: ctx.logger,
      secretBox: ctx.secretBox,
      identity: ctx.identity,
      // The tools' rule: endpoints on private addresses only where BERTH_TOOLS_ALLOW_PRIVATE allows them.
      transport: once(() => createWebhookTransport(createAddressGuard({ allow: config.toolsAllowPrivate }))),
    }),
  );
  const pushToDeploy = once(() =>
    createPushToDeploy({
      db: ctx.db,
      secretBox: ctx.secretBox,
      ids: ctx.ids,
      publicUrl: config.publicUrl,
      queries: resources(),
      applications: () => applications(),
    }),
  );
  const audit = once(() =>
    createAuditService({
      db: ctx.db,
      clock: ctx.clock,
      identity: ctx.identity,
      retentionDays: config.auditRetentionDays,
    }),
  );

  const jobs: Jobs = {
    // Features add theirs here.
    handlers: () => ({
      ...objectStorage().jobHandlers(),
      ...scheduledDeletion().jobHandlers(),
      ...managedDatabases().handlers(),
      ...dbOperationJobHandlers(dbOperationsDeps),
      ...deployments().jobHandlers(),
      ...appServices().handlers(),
      ...webhooks().handlers(),
      ...audit().jobHandlers(),
    }),
    runner: (options = {}) =>
      createBackgroundWork(
        {
          db: ctx.db,
          dialect: ctx.store.dialect,
          clock: ctx.clock,
          ids: ctx.ids,
          logger: ctx.logger,
          handlers: jobs.handlers(),
          ...(metrics
            ? { onJobFinished: (type, outcome, seconds) => metrics.jobFinished(type, outcome, seconds) }
            : {}),
        },
        options,
      ),
    wake: () => undefined,
  };

  return {
    get managedDatabases() {
      return managedDatabases();
    },
    get tools() {
      return tools();
    },
    get mailer() {
      return mailer();
    },
    get objectStorage() {
      return objectStorage();
    },
    get schedules() {
      return schedules();
    },
    get apply() {
      return apply();
    },
    get dbOperations() {
      return dbOperations();
    },
    get runtime() {
      return runtimeDriver();
    },
    get artifacts() {
      return artifacts();
    },
    get deployments() {
      return deployments();
    },
    get applications() {
      return applications();
    },
    get appServices() {
      return appServices();
    },
    get serviceRunners() {
      return serviceRunners();
    },
    get accounts() {
      return accounts();
    },
    get resources() {
      return resources();
    },
    get removals() {
      return removals();
    },
    get notifications() {
      return notifications();
    },
    get scheduledDeletion() {
      return scheduledDeletion();
    },
    get ownership() {
      return ownership();
    },
    get webhooks() {
      return webhooks();
    },
    get pushToDeploy() {
      return pushToDeploy();
    },
    get audit() {
      return audit();
    },
    jobs,
    metrics,
    applicationCleanups,
  };
}
