// The caller, their teams and their credentials, as Ploi Cloud has them (/api/v1/user, /teams).
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import type { CredentialKind } from '../../../db/schema/foundation.js';
import type { CredentialRow } from '../../../db/repositories/identity.js';
import { principalOf } from '../../types.js';
import { NoContent } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import {
  CredentialsResponse,
  IssuedCredentialResponse,
  Pong,
  TeamResponse,
  TeamsResponse,
  UserResponse,
} from '../../schemas/platform.js';

const TeamRef = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const IdParam = Type.Object({ id: Type.Integer({ minimum: 1 }) });
const NewCredential = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })) },
  { additionalProperties: false },
);

const tags = ['identity'];
const security = [{ bearer: [] }];

function credentialView(row: CredentialRow) {
  return {
    id: row.id,
    name: row.name,
    hint: row.hint,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    revoked_at: row.revoked_at,
  };
}

/** Credential collections a user manages over the platform API; each kind has its own path. */
const CREDENTIAL_PATHS: Array<{ path: string; kind: CredentialKind; what: string }> = [
  { path: '/api/v1/user/tokens', kind: 'api_token', what: 'platform API tokens' },
  { path: '/api/v1/user/tools-keys', kind: 'tools_key', what: 'tools API keys' },
  {
    path: '/api/v1/user/database-credentials',
    kind: 'db_api',
    what: 'managed-database API credentials',
  },
];

export function registerIdentityRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // The caller's own account and credentials, and reading their teams: any member.
  const config = { auth: 'api_token' as const, role: 'member' as const };

  // The cheapest authenticated call: lets a client check its token (and is the benchmark's no-op route).
  app.get(
    '/api/v1/ping',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Check a token: {pong: true}',
        response: { 200: Pong, ...platformErrors(401) },
      },
    },
    () => ({ pong: true }),
  );

  app.get(
    '/api/v1/user',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'The caller and their teams (with role)',
        response: { 200: UserResponse, ...platformErrors(401) },
      },
    },
    async (request) => {
      const { userId } = principalOf(request);
      const user = await deps.identity.findUser(userId);
      const teams = await deps.identity.teamsOfUser(userId);
      return { data: { id: userId, email: user?.email, created_at: user?.created_at, teams } };
    },
  );

  app.get(
    '/api/v1/teams',
    {
      config,
      schema: {
        tags,
        security,
        summary: "The caller's teams",
        response: { 200: TeamsResponse, ...platformErrors(401) },
      },
    },
    async (request) => {
      return { data: await deps.identity.teamsOfUser(principalOf(request).userId) };
    },
  );

  app.get<{ Params: Static<typeof TeamRef> }>(
    '/api/v1/teams/:team',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'One team (by id or name) with its members',
        params: TeamRef,
        response: { 200: TeamResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const team = await deps.identity.requireTeam(principalOf(request).userId, request.params.team);
      const members = await deps.identity.teamMembers(team.id);
      return { data: { ...team, members } };
    },
  );

  for (const { path, kind, what } of CREDENTIAL_PATHS) {
    app.get(
      path,
      {
        config,
        schema: {
          tags,
          security,
          summary: `List your ${what} (never the secrets)`,
          response: { 200: CredentialsResponse, ...platformErrors(401) },
        },
      },
      async (request) => {
        const rows = await deps.identity.listCredentials(principalOf(request).userId, kind);
        return { data: rows.map(credentialView) };
      },
    );

    app.post<{ Body: Static<typeof NewCredential> }>(
      path,
      {
        config: { ...config, audit: 'credential.create' },
        schema: {
          tags,
          security,
          summary: `Create one of your ${what} ({name?}); the secret is shown this once`,
          body: NewCredential,
          response: { 201: IssuedCredentialResponse, ...platformErrors(400, 401, 404, 413, 422) },
        },
        // A POST without a body asks for a credential with the default name.
        preValidation: (request, _reply, done) => {
          request.body ??= {};
          done();
        },
      },
      async (request, reply) => {
        const issued = await deps.identity.issueCredential(
          principalOf(request).userId,
          kind,
          request.body.name,
        );
        // The secret is shown this once; only its hash is stored.
        return reply.code(201).send({ data: issued });
      },
    );

    app.delete<{ Params: Static<typeof IdParam> }>(
      `${path}/:id`,
      {
        config: { ...config, audit: 'credential.delete' },
        schema: {
          tags,
          security,
          summary: `Revoke one of your ${what} (404 when not yours or already revoked)`,
          params: IdParam,
          response: { 204: NoContent, ...platformErrors(401, 404, 422) },
        },
      },
      async (request, reply) => {
        await deps.identity.revokeCredential(principalOf(request).userId, request.params.id, kind);
        return reply.code(204).send();
      },
    );
  }
}
