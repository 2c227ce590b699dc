// POST /api/v1/infrastructure/apply, GET /api/v1/teams/{team}/export-yaml and the document's JSON
// Schema for editors. The YAML body arrives as text (app.ts's content-type parser); the service
// parses and validates it so that every problem is reported in one answer.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../../../context.js';
import { infrastructureJsonSchema } from '../../../domain/infrastructure/json-schema.js';
import { createInfrastructureQueries } from '../../../services/infrastructure/queries.js';
import { principalOf } from '../../types.js';

/** docs/api/apply.md, "Limits". */
export const APPLY_BODY_LIMIT_BYTES = 2 * 1024 * 1024;

export const YAML_PRODUCES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/plain'];

const Flag = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]);
const ApplyQuery = Type.Object({ dry_run: Type.Optional(Flag), auto_deploy: Type.Optional(Flag) });
const TeamRef = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });

const Action = Type.Union(
  [Type.Literal('created'), Type.Literal('updated'), Type.Literal('unchanged'), Type.Literal('needs_action')],
  { description: '`needs_action`: a plan or zone change that is not applied and waits for the panel' },
);
const Named = Type.Object({ action: Action, name: Type.String() });
const Typed = Type.Object({ action: Action, name: Type.String(), type: Type.String() });
/** The spec's "Apply response body" (structured_changes also lists volumes and container services). */
const ApplyResponse = Type.Object({
  success: Type.Boolean(),
  application_id: Type.Union([Type.Integer(), Type.Null()]),
  application_name: Type.String(),
  team: Type.String(),
  dry_run: Type.Boolean(),
  changes: Type.Array(Type.String()),
  structured_changes: Type.Object({
    application: Type.Union([Named, Type.Null()]),
    domains: Type.Array(Type.Object({ action: Action, domain: Type.String() })),
    secrets: Type.Array(Type.Object({ action: Action, key: Type.String() })),
    volumes: Type.Array(Named),
    services: Type.Array(Typed),
    container_services: Type.Array(Typed),
    managed_databases: Type.Array(Typed),
    object_storage: Type.Array(Named),
  }),
  errors: Type.Array(Type.String()),
  needs_deployment: Type.Boolean(),
  auto_deploy_enabled: Type.Boolean(),
  deployment_id: Type.Union([Type.Integer(), Type.Null()]),
});

const flag = (value: string | undefined, fallback: boolean): boolean =>
  value === undefined ? fallback : value === 'true' || value === '1';

const tags = ['infrastructure'];
const security = [{ bearer: [] }];

export function registerInfrastructureRoutes(app: FastifyInstance, ctx: AppContext): void {
  const applyService = ctx.services.apply;
  const queries = createInfrastructureQueries({ db: ctx.db, identity: ctx.identity });
  const schemaDocument = JSON.stringify(infrastructureJsonSchema(), null, 2);

  app.post<{ Querystring: Static<typeof ApplyQuery> }>(
    '/api/v1/infrastructure/apply',
    {
      config: { auth: 'api_token' },
      // The largest document within the list limits; parsing more would hold up other requests.
      bodyLimit: APPLY_BODY_LIMIT_BYTES,
      schema: {
        tags,
        security,
        summary: 'Apply an Infrastructure YAML document (create-or-update, all or nothing)',
        description:
          'Body: the YAML document (Content-Type application/yaml; JSON is accepted too). See docs/api/apply.md.',
        querystring: ApplyQuery,
        response: { 200: ApplyResponse },
      },
    },
    async (request) => {
      const options = {
        dryRun: flag(request.query.dry_run, false),
        autoDeploy: flag(request.query.auto_deploy, true),
      };
      return applyService.apply(principalOf(request).userId, request.body, options);
    },
  );

  app.get<{ Params: Static<typeof TeamRef> }>(
    '/api/v1/teams/:team/export-yaml',
    {
      config: { auth: 'api_token', produces: YAML_PRODUCES },
      schema: {
        tags,
        security,
        summary: "Export the team's managed databases and object storage as one YAML document",
        params: TeamRef,
      },
    },
    async (request, reply) => {
      const yaml = await queries.exportTeam(principalOf(request).userId, request.params.team);
      return reply.type('application/yaml; charset=utf-8').send(yaml);
    },
  );

  // Editors fetch the schema without a token (a YAML language server has none to send).
  app.get(
    '/schemas/infrastructure.json',
    {
      config: { auth: 'none', produces: ['application/schema+json', 'application/json'] },
      schema: { hide: true },
    },
    (_request, reply) => reply.type('application/schema+json; charset=utf-8').send(schemaDocument),
  );
}
