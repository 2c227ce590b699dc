// The composition root: every long-lived service of a context is built here, once, with the driver
// its family's config names (Config.drivers). Routes, jobs and the lifecycle reach them as
// `ctx.services`; nothing else keeps a service of its own. Services are made on first use, so a
// process that never converts a PDF never starts Chromium, and each one that is made is stopped with
// the context.
import type { AppContext } from './context.js';
import { createLocalDatabaseDriver } from './drivers/databases/local/index.js';
import type { ManagedDatabaseDriver } from './drivers/databases/types.js';
import { createSmtpMailer, defaultSender, type Mailer } from './drivers/mail/index.js';
import type { ObjectStorageDriver } from './drivers/objectstorage/driver.js';
import { createLocalObjectStorageDriver, s3EndpointUrl } from './drivers/objectstorage/local/index.js';
import { createDbOperationRequests, type DbOperationRequests } from './services/db-operations/requests.js';
import {
  createManagedDatabaseService,
  type ManagedDatabaseService,
} from './services/managed-databases/index.js';
import type { ApplicationCleanup } from './services/scheduled-deletion/index.js';
import { createScheduleService, type ScheduleService } from './services/scheduled-deletion/schedules.js';
import {
  createToolsService,
  DEFAULT_TOOLS_OPTIONS,
  type ToolsOptions,
  type ToolsService,
} from './services/tools/index.js';

export interface Services {
  readonly managedDatabases: ManagedDatabaseService;
  readonly tools: ToolsService;
  /** The SMTP mailer; undefined without BERTH_SMTP_URL (mail stays in the outbox). */
  readonly mailer: Mailer | undefined;
  readonly objectStorage: ObjectStorageDriver;
  /** Where the S3 endpoint of this process really listens (BERTH_S3_PORT may be 0). */
  readonly s3Endpoint: { port: number | undefined };
  /** Work to do before any application of this context is deleted (a runtime's processes…). */
  readonly applicationCleanups: ApplicationCleanup[];
  /** Applications' deletion schedules over the platform API. */
  readonly schedules: ScheduleService;
  /** The /1.3 operations' requests (tasks, migrations, upgrade, maintenance, clones). */
  readonly dbOperations: DbOperationRequests;
}

/** What tests and tools may choose instead of the configured defaults. */
export interface ServiceOverrides {
  managedDatabaseDriver?: ManagedDatabaseDriver;
  tools?: Partial<ToolsOptions>;
}

/** A value made on first use, then kept. */
function once<T>(make: () => T): () => T {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
}

export function createServices(ctx: AppContext, overrides: ServiceOverrides = {}): Services {
  const { config } = ctx;
  const s3Endpoint: { port: number | undefined } = { port: undefined };

  const managedDatabaseDriver = (): ManagedDatabaseDriver => {
    if (overrides.managedDatabaseDriver) return overrides.managedDatabaseDriver;
    switch (config.drivers.managedDatabases) {
      case 'local':
        return createLocalDatabaseDriver({ dataDir: config.dataDir });
    }
  };
  const objectStorageDriver = (): ObjectStorageDriver => {
    switch (config.drivers.objectStorage) {
      case 'local':
        return createLocalObjectStorageDriver({
          db: ctx.db,
          clock: ctx.clock,
          secretBox: ctx.secretBox,
          endpoint: () => s3EndpointUrl(config, s3Endpoint.port),
          dataDir: config.dataDir,
        });
    }
  };

  const managedDatabases = once(() => {
    const service = createManagedDatabaseService(ctx, managedDatabaseDriver());
    ctx.onClose(() => service.close());
    return service;
  });
  const tools = once(() => {
    const service = createToolsService(ctx, { ...DEFAULT_TOOLS_OPTIONS, ...overrides.tools });
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
  const objectStorage = once(objectStorageDriver);
  const applicationCleanups: ApplicationCleanup[] = [];
  const dbOperations = once(() => createDbOperationRequests(ctx));
  const schedules = once(() =>
    createScheduleService({ db: ctx.db, clock: ctx.clock, identity: ctx.identity }),
  );

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
    get dbOperations() {
      return dbOperations();
    },
    s3Endpoint,
    applicationCleanups,
  };
}
