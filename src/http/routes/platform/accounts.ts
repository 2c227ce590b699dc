// Signing in and out (password or one-time link), the caller's browser sessions and password, and the
// team changes owners make. A sign-in answers with a session cookie (HttpOnly) and the CSRF token its
// writes must carry; API tokens keep working beside it. See docs/api/accounts.md.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import { AppError } from '../../../domain/errors.js';
import { csrfTokenOf, SESSION_DAYS, type SignedIn } from '../../../services/accounts.js';
import { clearedSessionCookie, readCookie, SESSION_COOKIE, sessionCookie } from '../../cookies.js';
import { Data, NoContent, OneOf } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import { Member, Session, SessionResponse, SignedInResponse, TeamCreated } from '../../schemas/accounts.js';
import { auditUnchanged } from '../../../services/audit.js';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';

const tags = ['accounts'];
const security: Array<Record<string, string[]>> = [{ bearer: [] }, { session: [] }];
const Role = OneOf(['owner', 'member']);

const Email = Type.String({ minLength: 3, maxLength: 320 });
const SignInBody = Type.Object(
  { email: Email, password: Type.String({ minLength: 1, maxLength: 1000 }) },
  { additionalProperties: false },
);
const LinkRequestBody = Type.Object({ email: Email }, { additionalProperties: false });
const LinkBody = Type.Object(
  { token: Type.String({ minLength: 20, maxLength: 200 }) },
  { additionalProperties: false },
);
const PasswordBody = Type.Object(
  {
    password: Type.String({ minLength: 1, maxLength: 1000 }),
    current_password: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 })),
  },
  { additionalProperties: false },
);
const TeamBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 100 }) },
  { additionalProperties: false },
);
const InviteBody = Type.Object({ email: Email, role: Type.Optional(Role) }, { additionalProperties: false });
const RoleBody = Type.Object({ role: Role }, { additionalProperties: false });
const TeamParam = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const MemberParams = Type.Object({
  team: Type.String({ minLength: 1, maxLength: 100 }),
  user: Type.Integer({ minimum: 1 }),
});
const IdParam = Type.Object({ id: Type.Integer({ minimum: 1 }) });

const Accepted = Data(Type.Object({ message: Type.String() }), 'Accepted');

export function registerAccountRoutes(
  app: FastifyInstance,
  deps: RouteDeps,
  options: {
    /** BERTH_PUBLIC_URL is https: cookies are Secure even behind a TLS-terminating proxy. */ secureCookies: boolean;
  },
): void {
  const accounts = () => deps.services.accounts;
  const { secureCookies } = options;
  const open = { auth: 'none' as const };
  // The caller's own sessions, password and teams; leaving, or removing oneself, is anyone's.
  const signedIn = { auth: 'api_token' as const, role: 'member' as const };
  const ownerOfTeam = { auth: 'api_token' as const, role: 'owner' as const };

  const clientOf = (request: FastifyRequest) => ({
    address: request.ip,
    userAgent: String(request.headers['user-agent'] ?? ''),
  });

  /** A sign-in posted from another site's page (login CSRF) is refused. */
  function refuseForeignOrigin(request: FastifyRequest): void {
    const origin = request.headers.origin;
    if (origin === undefined || origin === 'null') return;
    let host: string | undefined;
    try {
      host = new URL(origin).host;
    } catch {
      host = undefined;
    }
    if (host !== request.headers.host)
      throw new AppError(
        'forbidden',
        'Sign in from Berth’s own pages: this request came from another origin.',
      );
  }

  /** Cookies are Secure behind an https public URL (TLS ended by a proxy) or on a TLS request. */
  const secure = (request: FastifyRequest) => secureCookies || request.protocol === 'https';

  function answerSignedIn(request: FastifyRequest, reply: FastifyReply, signed: SignedIn) {
    reply.header(
      'set-cookie',
      sessionCookie(signed.token, { secure: secure(request), maxAgeSeconds: SESSION_DAYS * 86_400 }),
    );
    reply.header('cache-control', 'no-store');
    return {
      data: {
        user: signed.user,
        session: { ...signed.session, current: true },
        csrf_token: signed.csrfToken,
      },
    };
  }

  app.post<{ Body: Static<typeof SignInBody> }>(
    '/api/v1/auth/sign-in',
    {
      config: { ...open, audit: 'session.create' },
      schema: {
        tags,
        summary: 'Sign in with e-mail and password: sets the session cookie',
        body: SignInBody,
        response: { 200: SignedInResponse, ...platformErrors(401, 403, 422) },
      },
    },
    async (request, reply) => {
      refuseForeignOrigin(request);
      const signed = await accounts().signInWithPassword(request.body, clientOf(request));
      return answerSignedIn(request, reply, signed);
    },
  );

  app.post<{ Body: Static<typeof LinkRequestBody> }>(
    '/api/v1/auth/sign-in-links',
    {
      config: { ...open, audit: 'sign_in_link.create' },
      schema: {
        tags,
        summary: 'Mail a one-time sign-in link (the same answer whether or not the address is known)',
        body: LinkRequestBody,
        response: { 202: Accepted, ...platformErrors(403, 422) },
      },
    },
    async (request, reply) => {
      refuseForeignOrigin(request);
      await accounts().requestSignInLink(request.body.email);
      reply.code(202);
      return { data: { message: 'If this address belongs to an account, a sign-in link is on its way.' } };
    },
  );

  app.post<{ Body: Static<typeof LinkBody> }>(
    '/api/v1/auth/sign-in-links/consume',
    {
      config: { ...open, audit: 'session.create' },
      schema: {
        tags,
        summary: 'Sign in with the token of a sign-in link (once): sets the session cookie',
        body: LinkBody,
        response: { 200: SignedInResponse, ...platformErrors(401, 403, 422) },
      },
    },
    async (request, reply) => {
      refuseForeignOrigin(request);
      const signed = await accounts().signInWithLink(request.body.token, clientOf(request));
      return answerSignedIn(request, reply, signed);
    },
  );

  app.get(
    '/api/v1/auth/session',
    {
      // Signed out is an answer, not an error: the dashboard asks on every first load (issue 26, item 7).
      config: { ...signedIn, signedOut: 'answer' },
      schema: {
        tags,
        security,
        summary: 'The browser session this call was made with, and its CSRF token (null when signed out)',
        response: { 200: SessionResponse, ...platformErrors(401, 404) },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      if (!request.principal) {
        // A cookie whose session ended is dropped, so the browser stops presenting it.
        if (readCookie(request.headers.cookie, SESSION_COOKIE) !== undefined)
          reply.header('set-cookie', clearedSessionCookie(secure(request)));
        return { data: null };
      }
      const { userId, sessionId } = principalOf(request);
      const token = readCookie(request.headers.cookie, SESSION_COOKIE);
      const session = (await accounts().listSessions(userId)).find((s) => s.id === sessionId);
      if (sessionId === undefined || !token || !session)
        throw new AppError('not_found', 'No browser session: this call was made with an API token.');
      const user = await deps.identity.findUser(userId);
      return {
        data: {
          user: { id: userId, email: user?.email ?? '' },
          session: { ...session, current: true },
          csrf_token: csrfTokenOf(token),
        },
      };
    },
  );

  app.post(
    '/api/v1/auth/sign-out',
    {
      config: { ...signedIn, audit: 'session.delete' },
      schema: {
        tags,
        security,
        summary: 'End the browser session this call was made with (and clear its cookie)',
        response: { 204: NoContent, ...platformErrors(401, 403) },
      },
    },
    async (request, reply) => {
      const { userId, sessionId } = principalOf(request);
      // A token holder has no session to end: nothing changes, nothing is recorded.
      if (sessionId !== undefined) await accounts().revokeSession(userId, sessionId);
      else auditUnchanged();
      reply.header('set-cookie', clearedSessionCookie(secure(request)));
      reply.code(204);
    },
  );

  app.get(
    '/api/v1/user/sessions',
    {
      config: signedIn,
      schema: {
        tags,
        security,
        summary: 'Your browser sessions that have not ended',
        response: { 200: Data(Type.Array(Session), 'Live sessions'), ...platformErrors(401) },
      },
    },
    async (request) => {
      const { userId, sessionId } = principalOf(request);
      const rows = await accounts().listSessions(userId);
      return {
        data: rows.map(({ user_id: _user, revoked_at: _revoked, ...row }) => ({
          ...row,
          current: row.id === sessionId,
        })),
      };
    },
  );

  app.delete<{ Params: Static<typeof IdParam> }>(
    '/api/v1/user/sessions/:id',
    {
      config: { ...signedIn, audit: 'session.delete' },
      schema: {
        tags,
        security,
        summary: 'End one of your browser sessions at once',
        params: IdParam,
        response: { 204: NoContent, ...platformErrors(401, 403, 404) },
      },
    },
    async (request, reply) => {
      await accounts().revokeSession(principalOf(request).userId, request.params.id);
      reply.code(204);
    },
  );

  app.put<{ Body: Static<typeof PasswordBody> }>(
    '/api/v1/user/password',
    {
      config: { ...signedIn, audit: 'password.update' },
      schema: {
        tags,
        security,
        summary: 'Set your password (give the current one if you have one); your other sessions end',
        body: PasswordBody,
        response: { 204: NoContent, ...platformErrors(401, 403, 422) },
      },
    },
    async (request, reply) => {
      const { userId, sessionId } = principalOf(request);
      await accounts().setPassword(
        userId,
        { password: request.body.password, currentPassword: request.body.current_password },
        sessionId,
      );
      reply.code(204);
    },
  );

  app.post<{ Body: Static<typeof TeamBody> }>(
    '/api/v1/teams',
    {
      config: { ...signedIn, audit: 'team.create' },
      schema: {
        tags,
        security,
        summary: 'Create a team; you are its owner',
        body: TeamBody,
        response: { 201: TeamCreated, ...platformErrors(401, 403, 422) },
      },
    },
    async (request, reply) => {
      const team = await accounts().createTeam(principalOf(request).userId, request.body.name);
      reply.code(201);
      return { data: team };
    },
  );

  app.post<{ Params: Static<typeof TeamParam>; Body: Static<typeof InviteBody> }>(
    '/api/v1/teams/:team/members',
    {
      config: { ...ownerOfTeam, audit: 'member.create' },
      schema: {
        tags,
        security,
        summary: 'Add a member by e-mail (owners only); they are mailed a sign-in link',
        params: TeamParam,
        body: InviteBody,
        response: { 201: Data(Member, 'The new member'), ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const member = await accounts().invite(principalOf(request).userId, request.params.team, {
        email: request.body.email,
        role: request.body.role ?? 'member',
      });
      reply.code(201);
      return { data: member };
    },
  );

  app.patch<{ Params: Static<typeof MemberParams>; Body: Static<typeof RoleBody> }>(
    '/api/v1/teams/:team/members/:user',
    {
      config: { ...ownerOfTeam, audit: 'member.update' },
      schema: {
        tags,
        security,
        summary: "Change a member's role (owners only; a team keeps at least one owner)",
        params: MemberParams,
        body: RoleBody,
        response: { 200: Data(Member, 'The member'), ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await accounts().setRole(
        principalOf(request).userId,
        request.params.team,
        request.params.user,
        request.body.role,
      ),
    }),
  );

  app.delete<{ Params: Static<typeof MemberParams> }>(
    '/api/v1/teams/:team/members/:user',
    {
      // A member may remove only themselves: removeMember checks the owner role for anyone else.
      config: { ...signedIn, audit: 'member.delete' },
      schema: {
        tags,
        security,
        summary: 'Remove a member (owners), or yourself (leave); a team keeps at least one owner',
        params: MemberParams,
        response: { 204: NoContent, ...platformErrors(401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      await accounts().removeMember(principalOf(request).userId, request.params.team, request.params.user);
      reply.code(204);
    },
  );

  app.post<{ Params: Static<typeof TeamParam> }>(
    '/api/v1/teams/:team/leave',
    {
      config: { ...signedIn, audit: 'member.delete' },
      schema: {
        tags,
        security,
        summary: 'Leave a team (its last owner cannot)',
        params: TeamParam,
        response: { 204: NoContent, ...platformErrors(401, 403, 404, 409) },
      },
    },
    async (request, reply) => {
      const { userId } = principalOf(request);
      await accounts().removeMember(userId, request.params.team, userId);
      reply.code(204);
    },
  );
}
