// Authentication by route: each route names the one kind of credential it accepts, so a credential
// of another kind is simply unknown there (401). Then a per-credential rate limit.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { AppError } from '../../domain/errors.js';
import type { CredentialKind } from '../../db/schema/foundation.js';
import type { Principal } from '../../services/identity.js';

const CHALLENGE: Record<CredentialKind, string> = {
  api_token: 'Bearer realm="berth"',
  tools_key: 'ApiKey realm="berth-tools"',
  db_api: 'Basic realm="berth-dbapi"',
};

function unauthenticated(kind: CredentialKind, why: string): AppError {
  return new AppError('unauthenticated', why, {
    // UpCloud's code for a failed login (reference/upcloud/dbapi-notes.md §3).
    apiCode: 'AUTHENTICATION_FAILED',
    headers: { 'www-authenticate': CHALLENGE[kind] },
  });
}

/** What the Authorization header presents for a kind; throws 401 when it is missing or malformed. */
export function parseAuthorization(
  kind: CredentialKind,
  header: string | undefined,
): { id: string; secret?: string } {
  const value = header?.trim();
  if (!value) throw unauthenticated(kind, 'Unauthenticated.');
  if (kind === 'api_token') {
    const match = /^Bearer\s+(\S+)$/i.exec(value);
    if (!match?.[1]) throw unauthenticated(kind, 'Unauthenticated. Send Authorization: Bearer <API_TOKEN>.');
    return { id: match[1] };
  }
  if (kind === 'tools_key') {
    // The spec sends the raw key as the whole header; a Bearer prefix is tolerated.
    const key = value.replace(/^Bearer\s+/i, '');
    if (/\s/.test(key)) throw unauthenticated(kind, 'Unauthenticated. Send Authorization: <API_KEY>.');
    return { id: key };
  }
  const match = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(value);
  const decoded = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
  const colon = decoded.indexOf(':');
  if (colon <= 0) throw unauthenticated(kind, 'Authentication failed. Use HTTP basic authentication.');
  return { id: decoded.slice(0, colon), secret: decoded.slice(colon + 1) };
}

/** Fixed one-minute windows per credential; memory is bounded by pruning old windows. */
function createRateLimiter(perMinute: number) {
  const windows = new Map<number, { start: number; count: number }>();
  return (credentialId: number, now: number): number | undefined => {
    if (perMinute <= 0) return undefined;
    const start = now - (now % 60_000);
    let window = windows.get(credentialId);
    if (!window || window.start !== start) {
      if (windows.size > 100_000) windows.clear();
      window = { start, count: 0 };
      windows.set(credentialId, window);
    }
    window.count += 1;
    return window.count > perMinute ? Math.ceil((start + 60_000 - now) / 1000) : undefined;
  };
}

export function registerAuth(app: FastifyInstance, ctx: AppContext): void {
  const limit = createRateLimiter(ctx.config.rateLimitPerMinute);
  app.decorateRequest('principal', undefined);

  app.addHook('onRequest', async (request: FastifyRequest) => {
    const kind = request.routeOptions.config?.auth;
    if (kind === undefined || kind === 'none') return;
    const presented = parseAuthorization(kind, request.headers.authorization);
    const principal: Principal | undefined = await ctx.identity.authenticate(
      kind,
      presented.id,
      presented.secret,
    );
    if (!principal) throw unauthenticated(kind, 'Unauthenticated. The credential is unknown or revoked.');
    request.principal = principal;
    const retryAfter = limit(principal.credentialId, Date.now());
    if (retryAfter !== undefined) {
      throw new AppError('rate_limited', 'Too many requests. Slow down.', {
        retryAfter,
        apiCode: 'TOO_MANY_REQUESTS',
      });
    }
  });
}
