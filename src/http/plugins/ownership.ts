// Authorization before body validation (issue 11, item 14): a route whose path names a resource
// (`/1.3/database/:uuid`, `/api/v1/teams/:team/…`) checks that the caller may see it in preValidation,
// before the body schema runs, so another team's resource answers 404/403 whatever the body holds
// and a caller learns nothing about the body rules of what is not theirs. The handlers keep their
// own check (they need the row anyway); this hook only makes the order structural for every route.
// The look-ups themselves are src/services/ownership.ts.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { OwnershipChecks } from '../../services/ownership.js';

/** The /1.3 operations as the platform API serves them (src/http/routes/dbapi/operations.ts). */
const DATABASE_OPERATION =
  /^\/api\/v1\/managed-databases\/:uuid\/(tasks|migration|migration-status|upgrade|maintenance|clone)(\/|$)/;

export function registerOwnershipCheck(app: FastifyInstance, deps: { ownership: OwnershipChecks }): void {
  const { ownership } = deps;
  app.addHook('preValidation', async (request: FastifyRequest) => {
    const principal = request.principal;
    if (!principal) return;
    const params = (request.params ?? {}) as Record<string, unknown>;
    const kind = request.routeOptions.config?.auth;
    if (
      typeof params.uuid === 'string' &&
      (kind === 'db_api' || (kind === 'api_token' && DATABASE_OPERATION.test(request.routeOptions.url ?? '')))
    ) {
      await ownership.database(principal.userId, params.uuid);
    } else if (
      kind === 'api_token' &&
      typeof params.id === 'string' &&
      request.routeOptions.url?.startsWith('/api/v1/applications/:id')
    ) {
      await ownership.application(principal.userId, params.id);
    } else if (kind === 'api_token' && typeof params.team === 'string') {
      await ownership.team(principal.userId, params.team);
    }
  });
}
