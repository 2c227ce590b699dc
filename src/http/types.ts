// Route-level settings every route declares, and what authentication leaves on the request.
import type { CredentialKind } from '../db/schema/foundation.js';
import type { Principal } from '../services/identity.js';

export type RouteAuth = CredentialKind | 'none';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Which credential the route accepts; every route must say, 'none' only for probes and docs. */
    auth?: RouteAuth;
    /** Media types the route can answer with (406 when Accept allows none). Default: application/json. */
    produces?: string[];
  }
  interface FastifyRequest {
    principal: Principal | undefined;
  }
}

/** The authenticated principal of a route that requires one. */
export function principalOf(request: { principal: Principal | undefined }): Principal {
  if (!request.principal) throw new Error('route without authentication asked for a principal');
  return request.principal;
}
