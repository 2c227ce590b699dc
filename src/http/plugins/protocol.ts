// The spec's status table on every API: 405 with Allow, 406 from Accept, 503 in maintenance,
// a request id on every answer, and every route declaring its authentication.
import type { FastifyInstance } from 'fastify';
import FindMyWay, { type HTTPMethod } from 'find-my-way';
import { AppError } from '../../domain/errors.js';
import type { MaintenanceSwitch } from '../../services/maintenance.js';
import type { RouteAuth, RouteRole } from '../types.js';
import { sendError } from './errors.js';

const ALWAYS_OPEN = new Set(['/healthz', '/readyz']);
const METHODS: HTTPMethod[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** True when the Accept header allows one of the types the route produces. */
export function accepts(acceptHeader: string | undefined, produces: readonly string[]): boolean {
  if (!acceptHeader || acceptHeader.trim() === '') return true;
  const ranges = acceptHeader.split(',').map((part) => {
    const [range = '', ...params] = part.trim().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    return { range: range.trim().toLowerCase(), q: q ? Number(q.slice(2)) : 1 };
  });
  return produces.some((type) => {
    const [major] = type.split('/');
    return ranges.some(
      ({ range, q }) => q > 0 && (range === '*/*' || range === type || range === `${major ?? ''}/*`),
    );
  });
}

export interface RouteEntry {
  method: string;
  url: string;
  auth: RouteAuth;
  /** The role it needs in the team the request names (src/http/plugins/ownership.ts). */
  role: RouteRole | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route with its declared authentication and role (for the 401 and role sweeps in tests, and docs). */
    routeTable: RouteEntry[];
  }
}

export function registerProtocol(
  app: FastifyInstance,
  deps: { maintenance: Pick<MaintenanceSwitch, 'isOn'> },
): void {
  const routes = FindMyWay();
  const routeTable: RouteEntry[] = [];
  app.decorate('routeTable', routeTable);

  app.addHook('onRoute', (route) => {
    route.config ??= {};
    if (route.url.startsWith('/docs')) route.config.auth ??= 'none';
    if (route.config.auth === undefined) {
      throw new Error(`route ${String(route.method)} ${route.url} does not declare its authentication`);
    }
    for (const method of [route.method].flat()) {
      routeTable.push({ method, url: route.url, auth: route.config.auth, role: route.config.role });
      if (method === 'HEAD' && route.url.includes('*')) continue;
      try {
        routes.on(method as HTTPMethod, route.url, () => undefined);
      } catch {
        // The same path registered twice (HEAD from GET): nothing to add.
      }
    }
  });

  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
    const path = request.url.split('?')[0] ?? '';
    if (!ALWAYS_OPEN.has(path) && (await deps.maintenance.isOn())) {
      throw new AppError('maintenance', 'Berth is down for maintenance. Please retry shortly.', {
        retryAfter: 60,
      });
    }
    const produces = request.routeOptions.config?.produces ?? ['application/json'];
    if (request.routeOptions.url !== undefined && !accepts(request.headers.accept, produces)) {
      throw new AppError('not_acceptable', `This resource can only answer with ${produces.join(', ')}`);
    }
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? '';
    const allowed = METHODS.filter((method) => routes.find(method, path) !== null);
    // A method the path does allow means the router refused the path itself (an empty segment of
    // `…/tasks/`): that is a 404, not a 405 that names the very method that was sent.
    if (allowed.length > 0 && !allowed.includes(request.method as HTTPMethod)) {
      return sendError(
        request,
        reply,
        new AppError(
          'method_not_allowed',
          `The ${request.method} method is not supported for this route. Supported methods: ${allowed.join(', ')}.`,
          {
            headers: { allow: allowed.join(', ') },
          },
        ),
      );
    }
    const withoutSlash = path.length > 1 && path.endsWith('/') ? path.replace(/\/+$/, '') : undefined;
    const slashHint =
      withoutSlash !== undefined && routes.find(request.method as HTTPMethod, withoutSlash) !== null;
    return sendError(
      request,
      reply,
      new AppError('not_found', notFoundMessage(request.method, path, slashHint)),
    );
  });
}

/** Names what is odd about a path that matches no route: a space or a trailing slash. */
function notFoundMessage(method: string, path: string, slashHint: boolean): string {
  let decoded = path;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    // malformed escapes: shown as sent
  }
  const hints: string[] = [];
  if (/\s/.test(decoded)) hints.push('the path contains a space');
  if (slashHint) hints.push('try it without the trailing slash');
  return `Route ${method} ${decoded} not found${hints.length > 0 ? `: ${hints.join('; ')}` : ''}.`;
}
