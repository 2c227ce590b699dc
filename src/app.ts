// buildApp: a Fastify instance that never listens. main.ts listens; tests use inject().
import { fileURLToPath } from 'node:url';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AppContext } from './context.js';
import { pingStore } from './db/connect.js';
import type { RouteDeps } from './http/deps.js';
import { registerAuth } from './http/plugins/auth.js';
import { registerErrorHandler } from './http/plugins/errors.js';
import { registerProtocol } from './http/plugins/protocol.js';
import { registerInputGuard } from './http/plugins/input.js';
import { registerMetrics } from './http/plugins/metrics.js';
import { registerOwnershipCheck } from './http/plugins/ownership.js';
import { registerAuditLog, type AuditedRoutes } from './http/plugins/audit.js';
import { registerAuditLogRoutes } from './http/routes/platform/audit-log.js';
import { registerResponseCheck } from './http/plugins/response-check.js';
import { registerIdentityRoutes } from './http/routes/platform/identity.js';
import { registerAccountRoutes } from './http/routes/platform/accounts.js';
import { registerApplicationRoutes } from './http/routes/platform/applications.js';
import { registerRuntimeRoutes } from './http/routes/platform/runtime.js';
import { registerAppServiceRoutes } from './http/routes/platform/app-services.js';
import { registerInfrastructureRoutes } from './http/routes/platform/infrastructure.js';
import { registerTeamResourceRoutes } from './http/routes/platform/team-resources.js';
import { registerScheduledDeletionRoutes } from './http/routes/platform/scheduled-deletion.js';
import { registerWebhookRoutes } from './http/routes/platform/webhooks.js';
import { registerObjectStorageRoutes } from './http/routes/platform/object-storage.js';
import { registerSystemRoutes } from './http/routes/system.js';
import { registerArtifactRoutes } from './http/routes/artifacts.js';
import { registerToolsRoutes } from './http/routes/tools.js';
import { registerManagedDatabaseApiRoutes } from './http/routes/dbapi/databases.js';
import { registerDbOperationRoutes } from './http/routes/dbapi/operations.js';
import { registerManagedDatabasePanelRoutes } from './http/routes/platform/managed-databases.js';
import { registerPanelRoutes } from './http/routes/panel.js';
import './http/types.js';

const YAML_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml'];

export interface BuildOptions {
  /**
   * Validate every JSON answer against the route's documented response schema and answer 500 on a
   * mismatch (src/http/plugins/response-check.ts). For the test suite; off in production.
   */
  checkResponses?: boolean;
  /** Where the built dashboard is (index.html and assets/); default: dist/web of this package. */
  panelDir?: string;
  /** Filled with every change route's audit action (for the tests that exercise them all). */
  auditedRoutes?: AuditedRoutes;
}

/** dist/web beside src/ and dist/ alike: both are one level under the package root. */
const DEFAULT_PANEL_DIR = fileURLToPath(new URL('../dist/web/', import.meta.url));

export async function buildApp(ctx: AppContext, options: BuildOptions = {}): Promise<FastifyInstance> {
  const logger: FastifyBaseLogger = ctx.logger;
  const app = Fastify({
    loggerInstance: logger,
    bodyLimit: ctx.config.bodyLimitBytes,
    genReqId: () => ctx.ids.uuid(),
    // request.ip (the throttles' key, sessions' address) and request.protocol come from
    // X-Forwarded-For/-Proto only when the peer is one of the operator's proxies (issue 24, item 2).
    trustProxy: ctx.config.trustedProxies.length > 0 ? [...ctx.config.trustedProxies] : false,
    requestIdHeader: false,
    // Per-request lines only at debug: at info a busy server would log every call.
    logController: new LogController({
      disableRequestLogging: ctx.config.logLevel !== 'debug' && ctx.config.logLevel !== 'trace',
    }),
    ajv: {
      customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: true },
    },
    routerOptions: { ignoreTrailingSlash: true },
  });

  // Response schemas document the answers (OpenAPI); they must never change what is sent. Fastify would
  // compile them with fast-json-stringify, which silently drops every property a schema does not list
  // and coerces values to the listed types. So answers are serialised as they are, schema or not; the
  // test suite checks them against the schemas instead (checkResponses).
  app.setSerializerCompiler(() => (data) => JSON.stringify(data));

  // YAML documents arrive as text; the route that takes them parses and validates them itself.
  app.addContentTypeParser(YAML_TYPES, { parseAs: 'string' }, (_request, body, done) => done(null, body));

  await app.register(swagger, {
    // A body a route reads itself (multipart uploads) is documented through config.documentedBody:
    // as schema.body Fastify would validate it, and multipart bodies are not parsed into request.body.
    transform: ({ schema, url, route }) => {
      const documentedBody = route.config?.documentedBody;
      return documentedBody ? { schema: { ...schema, body: documentedBody }, url } : { schema, url };
    },
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Berth API',
        version: '1',
        description: 'Platform API (/api/v1), tools API (/api/v1/tools) and managed-database API (/1.3).',
      },
      servers: [{ url: ctx.config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'Platform API token' },
          toolsKey: { type: 'apiKey', in: 'header', name: 'Authorization', description: 'Raw tools API key' },
          basic: { type: 'http', scheme: 'basic', description: 'Managed-database API credentials' },
          session: {
            type: 'apiKey',
            in: 'cookie',
            name: 'berth_session',
            description: 'Browser session from POST /api/v1/auth/sign-in; writes also send X-CSRF-Token',
          },
        },
      },
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  registerErrorHandler(app);
  if (ctx.services.metrics) registerMetrics(app, ctx.services.metrics);
  if (options.checkResponses) registerResponseCheck(app);
  registerProtocol(app, { maintenance: ctx.maintenance });
  registerAuth(app, {
    identity: ctx.identity,
    sessions: ctx.services.accounts,
    rateLimitPerMinute: ctx.config.rateLimitPerMinute,
  });
  registerInputGuard(app);
  registerOwnershipCheck(app, { ownership: ctx.services.ownership });
  // With checkResponses (the test suite), a change route that does not record its action answers 500.
  registerAuditLog(app, {
    ...(options.checkResponses ? { strict: true } : {}),
    ...(options.auditedRoutes ? { routes: options.auditedRoutes } : {}),
  });

  // What every route receives: the services and the few things beside them (src/http/deps.ts).
  const deps: RouteDeps = {
    services: ctx.services,
    identity: ctx.identity,
    clock: ctx.clock,
    ping: () => pingStore(ctx.store),
  };
  registerSystemRoutes(app, deps);
  registerArtifactRoutes(app, deps);
  registerIdentityRoutes(app, deps);
  // URL's protocol, not the text: HTTPS://… is https too.
  registerAccountRoutes(app, deps, { secureCookies: new URL(ctx.config.publicUrl).protocol === 'https:' });
  registerToolsRoutes(app, deps);
  registerManagedDatabaseApiRoutes(app, deps);
  registerDbOperationRoutes(app, deps);
  registerManagedDatabasePanelRoutes(app, deps);
  registerObjectStorageRoutes(app, deps);
  registerInfrastructureRoutes(app, deps);
  registerApplicationRoutes(app, deps);
  registerRuntimeRoutes(app, deps);
  registerAppServiceRoutes(app, deps);
  registerTeamResourceRoutes(app, deps);
  registerScheduledDeletionRoutes(app, deps);
  registerWebhookRoutes(app, deps);
  registerAuditLogRoutes(app, deps);
  registerPanelRoutes(app, { dir: options.panelDir ?? DEFAULT_PANEL_DIR });

  return app;
}
