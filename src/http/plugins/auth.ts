// Authentication by route: each route names the one kind of credential it accepts, so a credential
// of another kind is simply unknown there (401). Platform routes also take a browser session
// (cookie), whose writes must carry its CSRF token. Then a per-credential rate limit.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../domain/errors.js';
import { createSlidingCounts, createWindows } from '../../domain/rate-windows.js';
import type { CredentialKind } from '../../db/schema/foundation.js';
import type { AccountsService } from '../../services/accounts.js';
import type { IdentityService, Principal } from '../../services/identity.js';
import { readCookie, SESSION_COOKIE } from '../cookies.js';

/** Methods a cross-site page could make a browser send with its cookie, and that change things. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

const CHALLENGE: Record<CredentialKind, string> = {
  api_token: 'Bearer realm="berth"',
  tools_key: 'ApiKey realm="berth-tools"',
  db_api: 'Basic realm="berth-dbapi"',
};

function unauthenticated(kind: CredentialKind, why: string): AppError {
  return new AppError('unauthenticated', why, {
    // UpCloud's code for a failed login (test/fixtures/upcloud/dbapi-notes.md §3).
    apiCode: 'AUTHENTICATION_FAILED',
    headers: { 'www-authenticate': CHALLENGE[kind] },
  });
}

/**
 * A credential of another API, told apart by its prefix alone (no look-up, so this says nothing about
 * whether it is valid): the answer names the API it belongs to and how this one is called.
 */
function wrongKindHint(kind: CredentialKind, presented: string): string {
  const belongs: CredentialKind | undefined = presented.startsWith('berth_pat_')
    ? 'api_token'
    : presented.startsWith('berth_tk_')
      ? 'tools_key'
      : undefined;
  if (belongs === undefined || belongs === kind) return '';
  const names: Record<CredentialKind, string> = {
    api_token: 'an API token, for the platform API (/api/v1, Authorization: Bearer <token>)',
    tools_key: 'a tools API key, for the tools API (/api/v1/tools, Authorization: <key>)',
    db_api: 'managed-database API credentials (/1.3, HTTP basic)',
  };
  return ` This is ${names[belongs]}; this route takes ${names[kind]}.`;
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

function createRateLimiter(perMinute: number) {
  const windows = createWindows();
  return (key: string | number, now: number): number | undefined => {
    if (perMinute <= 0) return undefined;
    windows.add(key, now);
    return windows.full(key, perMinute + 1, now);
  };
}

/**
 * Failed authentications per minute (issue 11, item 12): per client address, and per credential name
 * (the /1.3 username) so that guessing one account's password from many addresses is slowed too.
 * Past either limit a failing attempt is answered 429 (with Retry-After) instead of 401 until its
 * oldest failure of the last minute is a minute old. A valid credential is always served (issue 24,
 * item 2): behind a reverse proxy every user shares the proxy's address unless BERTH_TRUSTED_PROXIES
 * names it, and one client's bad tokens must never lock the others out.
 */
export const AUTH_FAILURES_PER_ADDRESS = 30;
export const AUTH_FAILURES_PER_NAME = 10;

function rateLimited(retryAfter: number, message: string): AppError {
  return new AppError('rate_limited', message, { retryAfter, apiCode: 'TOO_MANY_REQUESTS' });
}

export function registerAuth(
  app: FastifyInstance,
  deps: {
    identity: Pick<IdentityService, 'authenticate'>;
    /** Browser sessions (cookie) and their CSRF tokens. */
    sessions: Pick<AccountsService, 'authenticateSession' | 'checkCsrf'>;
    /** BERTH_RATE_LIMIT_PER_MINUTE. */
    rateLimitPerMinute: number;
  },
): void {
  const limit = createRateLimiter(deps.rateLimitPerMinute);
  app.decorateRequest('principal', undefined);

  // Counted over the last 60 s, not per clock minute: a burst across a minute boundary would otherwise
  // get twice the limit (and the throttle test failed whenever its burst straddled one).
  const failures = createSlidingCounts();

  /**
   * A failed attempt: 429 when one of its keys is already past its limit (not counted again, so the
   * block ends a minute after the burst), else counted under each key and answered `refusal`.
   */
  function failed(keys: Array<[string, number, string]>, now: number, refusal: AppError): AppError {
    for (const [key, max, message] of keys) {
      const retryAfter = failures.full(key, max, now);
      if (retryAfter !== undefined) return rateLimited(retryAfter, message);
    }
    for (const [key] of keys) failures.add(key, now);
    return refusal;
  }

  app.addHook('onRequest', async (request: FastifyRequest) => {
    const kind = request.routeOptions.config?.auth;
    if (kind === undefined || kind === 'none') return;
    const now = Date.now();
    const address: [string, number, string] = [
      `address:${request.ip}`,
      AUTH_FAILURES_PER_ADDRESS,
      'Too many failed authentications from this address. Retry later.',
    ];
    const sessionToken =
      kind === 'api_token' && request.headers.authorization === undefined
        ? readCookie(request.headers.cookie, SESSION_COOKIE)
        : undefined;
    const signedOutAnswered =
      request.routeOptions.config?.signedOut === 'answer' && request.headers.authorization === undefined;
    if (signedOutAnswered && sessionToken === undefined) return;
    if (sessionToken !== undefined) {
      const session = await deps.sessions.authenticateSession(sessionToken);
      if (!session) {
        const refusal = failed(
          [address],
          now,
          unauthenticated(kind, 'Unauthenticated. Your session has ended: sign in again.'),
        );
        // Still counted, so a cookie guesser meets the throttle here as on any other route.
        if (signedOutAnswered && refusal.code === 'unauthenticated') return;
        throw refusal;
      }
      if (
        !SAFE_METHODS.has(request.method) &&
        !deps.sessions.checkCsrf(sessionToken, request.headers['x-csrf-token'] as string | undefined)
      ) {
        throw new AppError(
          'forbidden',
          'A change made with a session cookie needs the X-CSRF-Token header (csrf_token from the sign-in answer or GET /api/v1/auth/session).',
        );
      }
      request.principal = { userId: session.userId, credentialId: 0, kind, sessionId: session.sessionId };
      const retryAfter = limit(`session:${session.sessionId}`, now);
      if (retryAfter !== undefined) throw rateLimited(retryAfter, 'Too many requests. Slow down.');
      return;
    }
    let presented: { id: string; secret?: string };
    try {
      presented = parseAuthorization(kind, request.headers.authorization);
    } catch (error) {
      throw error instanceof AppError ? failed([address], now, error) : error;
    }
    const principal: Principal | undefined = await deps.identity.authenticate(
      kind,
      presented.id,
      presented.secret,
    );
    if (!principal) {
      // Never the secret: the kind, the address and, for /1.3, the username.
      request.log.warn(
        { kind, ip: request.ip, ...(presented.secret !== undefined ? { username: presented.id } : {}) },
        'authentication failed',
      );
      // Only the /1.3 username is a name; a token or key is itself the secret and never a key here.
      const keys: Array<[string, number, string]> =
        presented.secret !== undefined
          ? [
              [
                `name:${kind}:${presented.id}`,
                AUTH_FAILURES_PER_NAME,
                'Too many failed authentications for this user. Retry later.',
              ],
              address,
            ]
          : [address];
      throw failed(
        keys,
        now,
        unauthenticated(
          kind,
          `Unauthenticated. The credential is unknown or revoked.${wrongKindHint(kind, presented.id)}`,
        ),
      );
    }
    request.principal = principal;
    const retryAfter = limit(principal.credentialId, now);
    if (retryAfter !== undefined) throw rateLimited(retryAfter, 'Too many requests. Slow down.');
  });
}
