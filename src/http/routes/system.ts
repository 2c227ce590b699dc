// Probes and the generated API description. The only routes without authentication.
import type { FastifyInstance } from 'fastify';
import type { RouteDeps } from '../deps.js';
import { AppError } from '../../domain/errors.js';
import { platformErrors } from '../schemas/errors.js';
import { Health, OpenApiDocument, Ready } from '../schemas/platform.js';

const tags = ['system'];

export function registerSystemRoutes(app: FastifyInstance, deps: Pick<RouteDeps, 'ping'>): void {
  app.get(
    '/healthz',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'Liveness: the process is up (open, also in maintenance)',
        response: { 200: Health, ...platformErrors() },
      },
    },
    () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'Readiness: the store answers (open, also in maintenance); 500 when it does not',
        response: { 200: Ready, ...platformErrors() },
      },
    },
    async () => {
      if (!(await deps.ping())) throw new AppError('internal', 'Store is not reachable');
      return { status: 'ready' };
    },
  );

  app.get(
    '/openapi.json',
    {
      config: { auth: 'none' },
      schema: {
        tags,
        summary: 'This OpenAPI 3.1 document (/docs renders it)',
        response: { 200: OpenApiDocument, ...platformErrors() },
      },
    },
    () => app.swagger(),
  );
}
