// Authorization before body validation (issue 11, item 14): a route whose path names a resource
// (`/1.3/database/:uuid`, `/api/v1/teams/:team/…`) checks that the caller may see it in preValidation,
// before the body schema runs, so another team's resource answers 404/403 whatever the body holds
// and a caller learns nothing about the body rules of what is not theirs. The handlers keep their
// own check (they need the row anyway); this hook only makes the order structural for every route.
// The look-ups themselves are src/services/ownership.ts.
//
// Roles (issue 24, item 3): every authenticated route declares `config.role`, and this hook refuses a
// member on an `owner` route of the team its path names, before the body is read. A route that does
// not declare its role, or needs the owner role without a team in its path (nor `teamIn: 'body'`,
// whose service checks), is refused at registration: a new route cannot forget.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { requireRole } from '../../domain/roles.js';
import type { OwnershipChecks } from '../../services/ownership.js';
import type { RouteAuth } from '../types.js';

type PathTeam = { kind: 'database' | 'application'; param: 'uuid' | 'id' } | { kind: 'team'; param: 'team' };

/** Where a route's path names the team of what it acts on, if it does. */
export function pathTeamOf(url: string, auth: RouteAuth | undefined): PathTeam | undefined {
  if (auth === 'db_api' && url.startsWith('/1.3/database/:uuid')) return { kind: 'database', param: 'uuid' };
  if (auth !== 'api_token') return undefined;
  if (url.startsWith('/api/v1/managed-databases/:uuid')) return { kind: 'database', param: 'uuid' };
  if (url.startsWith('/api/v1/applications/:id')) return { kind: 'application', param: 'id' };
  if (url.startsWith('/api/v1/teams/:team')) return { kind: 'team', param: 'team' };
  return undefined;
}

export function registerOwnershipCheck(app: FastifyInstance, deps: { ownership: OwnershipChecks }): void {
  const { ownership } = deps;

  app.addHook('onRoute', (route) => {
    const config = route.config ?? {};
    if (config.auth === undefined || config.auth === 'none') return;
    const name = `route ${[route.method].flat().join(',')} ${route.url}`;
    if (config.role !== 'owner' && config.role !== 'member') {
      throw new Error(
        `${name} does not declare the role it needs (config.role: 'owner' or 'member'; docs/security.md, "Roles")`,
      );
    }
    if (config.role === 'owner' && !pathTeamOf(route.url, config.auth) && config.teamIn !== 'body') {
      throw new Error(`${name} needs the owner role but its path names no team (declare teamIn: 'body')`);
    }
  });

  app.addHook('preValidation', async (request: FastifyRequest) => {
    const principal = request.principal;
    if (!principal) return;
    const { auth, role } = request.routeOptions.config ?? {};
    const url = request.routeOptions.url ?? '';
    const where = pathTeamOf(url, auth);
    const value = ((request.params ?? {}) as Record<string, unknown>)[where?.param ?? ''];
    if (!where || typeof value !== 'string') return;
    const membership =
      where.kind === 'database'
        ? await ownership.database(principal.userId, value)
        : where.kind === 'application'
          ? await ownership.application(principal.userId, value)
          : await ownership.team(principal.userId, value);
    requireRole(
      membership,
      role ?? 'owner',
      `${request.method} ${url}`,
      auth === 'db_api' ? { apiCode: 'ACCOUNT_FORBIDDEN' } : {},
    );
  });
}
