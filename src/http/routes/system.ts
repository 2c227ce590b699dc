// Probes and the generated API description. The only routes without authentication.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../context.js';
import { pingStore } from '../../db/connect.js';
import { AppError } from '../../domain/errors.js';

export function registerSystemRoutes(app: FastifyInstance, ctx: AppContext): void {
  app.get('/healthz', { config: { auth: 'none' }, schema: { hide: true } }, () => ({ status: 'ok' }));

  app.get('/readyz', { config: { auth: 'none' }, schema: { hide: true } }, async () => {
    if (!(await pingStore(ctx.store))) throw new AppError('internal', 'Store is not reachable');
    return { status: 'ready' };
  });

  app.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, () => app.swagger());
}
