// The caller, their teams and their credentials, as Ploi Cloud has them (/api/v1/user, /teams).
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../../../context.js';
import type { CredentialKind } from '../../../db/schema/foundation.js';
import type { CredentialRow } from '../../../db/repositories/identity.js';
import { principalOf } from '../../types.js';

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
const CREDENTIAL_PATHS: Array<{ path: string; kind: CredentialKind }> = [
  { path: '/api/v1/user/tokens', kind: 'api_token' },
  { path: '/api/v1/user/tools-keys', kind: 'tools_key' },
  { path: '/api/v1/user/database-credentials', kind: 'db_api' },
];

export function registerIdentityRoutes(app: FastifyInstance, ctx: AppContext): void {
  const config = { auth: 'api_token' as const };

  // The cheapest authenticated call: lets a client check its token (and is the benchmark's no-op route).
  app.get('/api/v1/ping', { config, schema: { tags, security } }, () => ({ pong: true }));

  app.get('/api/v1/user', { config, schema: { tags, security } }, async (request) => {
    const { userId } = principalOf(request);
    const user = await ctx.identity.findUser(userId);
    const teams = await ctx.identity.teamsOfUser(userId);
    return { data: { id: userId, email: user?.email, created_at: user?.created_at, teams } };
  });

  app.get('/api/v1/teams', { config, schema: { tags, security } }, async (request) => {
    return { data: await ctx.identity.teamsOfUser(principalOf(request).userId) };
  });

  app.get<{ Params: Static<typeof TeamRef> }>(
    '/api/v1/teams/:team',
    { config, schema: { tags, security, params: TeamRef } },
    async (request) => {
      const team = await ctx.identity.requireTeam(principalOf(request).userId, request.params.team);
      const members = await ctx.identity.teamMembers(team.id);
      return { data: { ...team, members } };
    },
  );

  for (const { path, kind } of CREDENTIAL_PATHS) {
    app.get(path, { config, schema: { tags, security } }, async (request) => {
      const rows = await ctx.identity.listCredentials(principalOf(request).userId, kind);
      return { data: rows.map(credentialView) };
    });

    app.post<{ Body: Static<typeof NewCredential> }>(
      path,
      {
        config,
        schema: { tags, security, body: NewCredential },
        // A POST without a body asks for a credential with the default name.
        preValidation: (request, _reply, done) => {
          request.body ??= {};
          done();
        },
      },
      async (request, reply) => {
        const issued = await ctx.identity.issueCredential(
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
      { config, schema: { tags, security, params: IdParam } },
      async (request, reply) => {
        await ctx.identity.revokeCredential(principalOf(request).userId, request.params.id, kind);
        return reply.code(204).send();
      },
    );
  }
}
