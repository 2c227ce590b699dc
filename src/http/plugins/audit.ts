// The audit log's HTTP side (issue 31, item 2; docs/architecture.md, "Audit log"). Every route that can
// change something (POST, PUT, PATCH, DELETE) declares `config.audit`: the action its service records,
// or `{ none: why }`. A route that does not is refused at registration, so a new route cannot forget.
// The handler of an audited route runs with the caller as the AuditContext (src/services/audit.ts); the
// service records the entry inside its own transaction. Before answering 2xx the hook checks that
// exactly that one action was recorded (or that the service found nothing to change): a mismatch is logged, and with `strict` (the test suite) it is a
// 500, so a route whose service does not record fails its test.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { withAudit, type AuditContext, type AuditTally } from '../../services/audit.js';

const CHANGE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** The actions of the change routes, `METHOD url` → action or why none (for the tests and the docs). */
export type AuditedRoutes = Map<string, string | { none: string }>;

function contextOf(request: FastifyRequest): AuditContext {
  const principal = request.principal;
  const credential = !principal
    ? 'none'
    : principal.sessionId !== undefined
      ? `session:${principal.sessionId}`
      : `${principal.kind}:${principal.credentialId}`;
  return { ...(principal ? { userId: principal.userId } : {}), credential, address: request.ip };
}

export function registerAuditLog(
  app: FastifyInstance,
  options: { strict?: boolean; routes?: AuditedRoutes } = {},
): void {
  app.decorateRequest('auditRecorded', undefined);

  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat().filter((method) => CHANGE_METHODS.has(method));
    if (methods.length === 0) return;
    const audit = route.config?.audit;
    if (audit === undefined) {
      throw new Error(
        `route ${methods.join(',')} ${route.url} changes things but declares no audit action (config.audit: '<resource>.<verb>', or { none: why }; docs/architecture.md, "Audit log")`,
      );
    }
    for (const method of methods) options.routes?.set(`${method} ${route.url}`, audit);
    if (typeof audit !== 'string') return;
    const handler = route.handler as (this: FastifyInstance, ...args: unknown[]) => unknown;
    const audited = function (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const recorded: AuditTally = { actions: [], unchanged: false };
      request.auditRecorded = recorded;
      return withAudit(
        contextOf(request),
        () => Promise.resolve(handler.call(this, request, reply)),
        recorded,
      );
    };
    route.handler = audited;
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const action = request.routeOptions.config?.audit;
    const recorded = request.auditRecorded;
    if (typeof action !== 'string' || recorded === undefined || reply.statusCode >= 300) return payload;
    const { actions, unchanged } = recorded;
    if (actions.length === 1 && actions[0] === action) return payload;
    if (actions.length === 0 && unchanged) return payload;
    const problem = `${request.method} ${request.routeOptions.url ?? ''} declares audit action ${action} but recorded [${actions.join(', ')}]`;
    request.log.error({ action, recorded: actions }, problem);
    if (options.strict) throw new Error(problem);
    return payload;
  });
}
