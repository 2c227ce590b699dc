// Route-level settings every route declares, and what authentication leaves on the request.
import type { CredentialKind } from '../db/schema/foundation.js';
import type { AuditTally } from '../services/audit.js';
import type { Principal } from '../services/identity.js';

export type RouteAuth = CredentialKind | 'none';

/**
 * The least role a route needs in the team its request names (docs/security.md, "Roles"): `owner` for
 * what changes or deletes resources or shows secret values, `member` for reading. On a route that names
 * no team (the caller's own account, tools) `member` means any authenticated caller.
 */
export type RouteRole = 'owner' | 'member';

/**
 * What a change route (POST, PUT, PATCH, DELETE) writes to the audit log (src/http/plugins/audit.ts,
 * docs/architecture.md "Audit log"): the action `<resource>.<verb>` its service records once, in the
 * transaction of the change; or `{ none }` saying why the route changes nothing to record.
 */
export type RouteAudit = `${string}.${string}` | { none: string };

export interface DocumentedBody {
  description?: string;
  content: Record<string, { schema: unknown }>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Which credential the route accepts; every route must say, 'none' only for probes and docs. */
    auth?: RouteAuth;
    /**
     * The role the route needs; every authenticated route must say (src/http/plugins/ownership.ts
     * refuses to register one that does not). The ownership hook enforces it from the path.
     */
    role?: RouteRole;
    /**
     * An owner route whose team is not in its path but in its body (apply: the document names it): its
     * service checks the role with requireRole (src/domain/roles.ts) once it has read the team.
     */
    teamIn?: 'body';
    /**
     * The route also answers a caller who is signed out (no Authorization header, and no session cookie
     * or one whose session ended) with no principal: the dashboard's session probe, whose first load
     * must not fail. A presented Authorization header is checked as everywhere.
     */
    signedOut?: 'answer';
    /** Every change route must say (src/http/plugins/audit.ts refuses to register one that does not). */
    audit?: RouteAudit;
    /** Media types the route can answer with (406 when Accept allows none). Default: application/json. */
    produces?: string[];
    /**
     * A request body shown in the OpenAPI document only, never validated: for a body the route reads
     * itself (multipart uploads), which as `schema.body` Fastify would validate. `{content: {<type>: {schema}}}`.
     */
    documentedBody?: DocumentedBody;
  }
  interface FastifyRequest {
    principal: Principal | undefined;
    /** The audit actions this request's handler recorded (src/http/plugins/audit.ts). */
    auditRecorded: AuditTally | undefined;
  }
}

/** The authenticated principal of a route that requires one. */
export function principalOf(request: { principal: Principal | undefined }): Principal {
  if (!request.principal) throw new Error('route without authentication asked for a principal');
  return request.principal;
}
