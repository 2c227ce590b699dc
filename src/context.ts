// Everything a running Berth needs, built once from a Config. main.ts and the tests both use it.
import { secureDataDir } from './config/data-dir.js';
import path from 'node:path';
import type { Kysely } from 'kysely';
import { pino, type Logger } from 'pino';
import { prettyDestination } from './log-format.js';
import type { Config } from './config/index.js';
import { randomIds, systemClock, type Clock, type IdGenerator } from './domain/clock.js';
import { openStore, type Store } from './db/connect.js';
import type { Database } from './db/schema/index.js';
import { createSettingsRepository, type SettingsRepository } from './db/repositories/settings.js';
import { createIdentityService, type IdentityService } from './services/identity.js';
import { createMaintenanceSwitch, type MaintenanceSwitch } from './services/maintenance.js';
import { createServices, type CloseOptions, type ServiceOverrides, type Services } from './composition.js';
import { createSecretBox, loadOrCreateMasterKey, type SecretBox } from './crypto/secret-box.js';

export interface AppContext {
  readonly config: Config;
  readonly store: Store;
  readonly db: Kysely<Database>;
  readonly clock: Clock;
  readonly ids: IdGenerator;
  readonly logger: Logger;
  readonly secretBox: SecretBox;
  readonly settings: SettingsRepository;
  readonly identity: IdentityService;
  readonly maintenance: MaintenanceSwitch;
  /** The long-lived services and drivers, built once by src/composition.ts. */
  readonly services: Services;
  /** Registers a stop for something a feature started (engines, servers); run in reverse order by close(). */
  onClose(stop: (options: CloseOptions) => Promise<void>): void;
  /** Stops what the context started, the store last. Idempotent. */
  close(options?: CloseOptions): Promise<void>;
}

// Declared with the composition root, whose services' stops take it.
export type { CloseOptions };

export interface ContextOverrides {
  store?: Store;
  clock?: Clock;
  ids?: IdGenerator;
  logger?: Logger;
  masterKey?: Buffer;
  services?: ServiceOverrides;
}

export function createLogger(config: Config, stdoutIsTerminal = process.stdout.isTTY === true): Logger {
  const options = {
    level: config.logLevel,
    // Credentials never reach the log, whatever a caller passes in.
    redact: {
      paths: ['req.headers.authorization', 'headers.authorization', '*.password', '*.token', '*.secret'],
      censor: '[redacted]',
    },
  };
  // Readable lines for a person at a terminal; JSON lines for a pipe, a file or a log collector.
  const pretty = (config.logFormat ?? (stdoutIsTerminal ? 'pretty' : 'json')) === 'pretty';
  return pretty ? pino(options, prettyDestination()) : pino(options);
}

export async function createContext(config: Config, overrides: ContextOverrides = {}): Promise<AppContext> {
  // Before the store and the key are opened: a new SQLite file takes its directory's reach from the start.
  const modeChanges = secureDataDir(config.dataDir);
  const store =
    overrides.store ??
    (await openStore({
      databaseUrl: config.databaseUrl,
      sqlitePath: path.join(config.dataDir, 'berth.sqlite'),
    }));
  const clock = overrides.clock ?? systemClock;
  const ids = overrides.ids ?? randomIds;
  const logger = overrides.logger ?? createLogger(config);
  // One line for what a person must know (modes someone left open), the detail of each file at debug.
  if (modeChanges.length > 0)
    logger.warn(
      { paths: modeChanges.map((change) => change.path) },
      `data dir: permissions tightened on ${modeChanges.length} ${modeChanges.length === 1 ? 'entry' : 'entries'} (group and others had access)`,
    );
  for (const change of modeChanges) logger.debug(change, 'data dir: permissions tightened');
  // The store's files, created just now with the process umask: the owner's alone too (routine, so debug).
  for (const change of secureDataDir(config.dataDir)) logger.debug(change, 'data dir: new file restricted');
  const secretBox = createSecretBox(
    overrides.masterKey ?? loadOrCreateMasterKey(config.dataDir, config.secretKey),
  );
  const settings = createSettingsRepository(store.db);
  let closed: Promise<void> | undefined;
  const closers: Array<(options: CloseOptions) => Promise<void>> = [];
  const ctx: { -readonly [K in keyof AppContext]: AppContext[K] } = {
    config,
    store,
    db: store.db,
    clock,
    ids,
    logger,
    secretBox,
    settings,
    identity: createIdentityService({ db: store.db, clock, ids }),
    maintenance: createMaintenanceSwitch({ settings, db: store.db, clock }),
    onClose(stop) {
      closers.push(stop);
    },
    close(options = {}) {
      closed ??= (async () => {
        for (const stop of closers.reverse()) {
          await stop(options).catch((error: unknown) => logger.error({ err: error }, 'stop failed'));
        }
        await store.close();
      })();
      return closed;
    },
    services: undefined as unknown as Services, // set just below: the services need the context
  };
  ctx.services = createServices(ctx, overrides.services);
  return ctx;
}
