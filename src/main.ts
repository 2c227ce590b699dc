// Process entry: config → store → app → background work → listen; drain on SIGTERM/SIGINT.
import fs from 'node:fs';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import type { Config } from './config/index.js';
import { createContext, type AppContext, type CloseOptions } from './context.js';
import {
  clearServing,
  explainListenError,
  markServing,
  startBackground,
  type Background,
} from './lifecycle.js';

export interface RunningServer {
  ctx: AppContext;
  app: FastifyInstance;
  url: string;
  /** `keepRunning`: what serves applications stays up for the next Berth (CloseOptions). */
  stop(options?: CloseOptions): Promise<void>;
}

/** On an empty store: team `default` with an owner whose credentials go to <data dir>/bootstrap.json. */
export async function bootstrapIfEmpty(ctx: AppContext): Promise<string | undefined> {
  if ((await ctx.identity.countUsers()) > 0) return undefined;
  const created = await ctx.identity.createUser({
    email: 'admin@berth.local',
    team: 'default',
    role: 'owner',
  });
  const file = path.join(ctx.config.dataDir, 'bootstrap.json');
  fs.mkdirSync(ctx.config.dataDir, { recursive: true });
  fs.writeFileSync(file, JSON.stringify(created, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(file, 0o600);
  return file;
}

export async function startServer(
  config: Config,
  options: {
    /**
     * Called with the server once it serves, before it says it is ready: `berth serve` installs its
     * signal handlers here, so a SIGTERM sent on reading the ready line stops it cleanly (not the
     * default action that kills it).
     */
    onStarted?: (server: RunningServer) => void;
  } = {},
): Promise<RunningServer> {
  const ctx = await createContext(config);
  const bootstrapFile = await bootstrapIfEmpty(ctx);
  if (bootstrapFile)
    ctx.logger.info({ file: bootstrapFile }, 'created team "default" and its owner; credentials written');
  const app = await buildApp(ctx);
  let url: string;
  let background: Background;
  try {
    url = await app.listen({ port: config.port, host: config.host }).catch((error: unknown) => {
      throw explainListenError(error, 'the API', 'port', config.port);
    });
    markServing(config.dataDir);
    background = await startBackground(ctx);
  } catch (error) {
    clearServing(config.dataDir);
    await app.close();
    // What an earlier Berth left serving (adopted by now, or not yet) stays up: this one never served.
    await ctx.close({ keepRunning: true });
    throw error;
  }
  let stopping: Promise<void> | undefined;
  const server: RunningServer = {
    ctx,
    app,
    url,
    stop(stopOptions = {}) {
      stopping ??= (async () => {
        await app.close(); // stops accepting, drains requests in flight
        await background.stop(stopOptions); // waits for jobs in flight
        await ctx.close(stopOptions);
        clearServing(config.dataDir);
      })();
      return stopping;
    },
  };
  options.onStarted?.(server);
  const endpoints = {
    api: url,
    s3: background.endpoints.s3,
    apps: background.endpoints.apps,
    ...(background.endpoints.appsTls ? { appsTls: background.endpoints.appsTls } : {}),
    ...(background.endpoints.metrics ? { metrics: background.endpoints.metrics } : {}),
    docs: `${url}/docs`,
    openapi: `${url}/openapi.json`,
  };
  ctx.logger.info(
    endpoints,
    `Berth is ready: API ${url}, S3 ${endpoints.s3}, applications ${endpoints.apps}${
      endpoints.appsTls ? ` and ${endpoints.appsTls}` : ''
    }${endpoints.metrics ? `, metrics ${endpoints.metrics}` : ''}, API reference ${endpoints.docs}`,
  );

  return server;
}

export function stopOnSignals(server: RunningServer): void {
  const onSignal = (signal: NodeJS.Signals) => {
    // A restart of Berth (an upgrade) leaves the applications serving: the next Berth adopts them.
    // `berth admin stop-all` stops them, Berth being down.
    server.ctx.logger.info({ signal }, 'stopping; applications, services and the edge keep running');
    server.stop({ keepRunning: true }).then(
      () => process.exit(0),
      (error: unknown) => {
        server.ctx.logger.error({ err: error }, 'unclean stop');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
}
