// An application's services over the platform API, with Ploi Cloud's paths: the list with each
// service's state, one service's injected environment and connection strings, restart, its server's
// log, and every injected name (masked). `{service}` is the service's id, or its name. Each route
// parses, calls one use case of services/app-services and shapes the answer.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { platformErrors } from '../../schemas/errors.js';
import {
  AppServiceResponse,
  AppServicesResponse,
  ConnectionFormatsResponse,
  InjectedSecretsResponse,
  ServiceEnvironmentResponse,
  ServiceLogsResponse,
} from '../../schemas/app-services.js';

const IdParam = Type.Object({ id: Type.Integer({ minimum: 1 }) });
const ServiceParam = Type.Object({
  id: Type.Integer({ minimum: 1 }),
  service: Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$' }),
});
const LogsQuery = Type.Object({ tail: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })) });

const tags = ['applications'];
const security = [{ bearer: [] }];
// The services, their state, masked names and server logs are any member's to read; values
// (credentials) and restarts are owners'.
const config = { auth: 'api_token' as const, role: 'member' as const };
const owner = { auth: 'api_token' as const, role: 'owner' as const };

export function registerAppServiceRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const service = () => deps.services.appServices;
  const user = (request: FastifyRequest) => principalOf(request).userId;

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/services',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The application's services and the state of each (provisioning, running, failed…)",
        params: IdParam,
        response: { 200: AppServicesResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await service().list(user(request), request.params.id) }),
  );

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/secrets/injected',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The names the application's services inject into its environment (values masked)",
        params: IdParam,
        response: { 200: InjectedSecretsResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await service().injected(user(request), request.params.id) }),
  );

  app.get<{ Params: Static<typeof ServiceParam> }>(
    '/api/v1/applications/:id/services/:service/environment',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: 'What one service injects into the application, with the values (its credentials)',
        params: ServiceParam,
        response: { 200: ServiceEnvironmentResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await service().serviceEnvironment(user(request), request.params.id, request.params.service),
    }),
  );

  app.get<{ Params: Static<typeof ServiceParam> }>(
    '/api/v1/applications/:id/services/:service/connection-formats',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: 'Connection strings for a service: URL, JDBC, command-line client',
        params: ServiceParam,
        response: { 200: ConnectionFormatsResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await service().connectionFormats(user(request), request.params.id, request.params.service),
    }),
  );

  app.post<{ Params: Static<typeof ServiceParam> }>(
    '/api/v1/applications/:id/services/:service/restart',
    {
      config: { ...owner, audit: 'service.restart' },
      schema: {
        tags,
        security,
        summary: "Restart a service's server (its data stays); answers once it runs again",
        params: ServiceParam,
        response: { 200: AppServiceResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await service().restart(user(request), request.params.id, request.params.service),
    }),
  );

  app.get<{ Params: Static<typeof ServiceParam>; Querystring: Static<typeof LogsQuery> }>(
    '/api/v1/applications/:id/services/:service/logs',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The newest lines of a service's server log (tail, default 100)",
        params: ServiceParam,
        querystring: LogsQuery,
        response: { 200: ServiceLogsResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await service().logs(
        user(request),
        request.params.id,
        request.params.service,
        request.query.tail ?? 100,
      ),
    }),
  );
}
