// POST /api/v1/infrastructure/apply, GET /api/v1/teams/{team}/export-yaml and the document's JSON
// Schema for editors. The YAML body arrives as text (app.ts's content-type parser); the service
// parses and validates it so that every problem is reported in one answer.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { infrastructureJsonSchema } from '../../../domain/infrastructure/json-schema.js';
import { principalOf } from '../../types.js';
import { textResponse } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import { ApplyResponse, JsonDocument, YamlDocument } from '../../schemas/infrastructure.js';

/** docs/api/apply.md, "Limits". */
export const APPLY_BODY_LIMIT_BYTES = 2 * 1024 * 1024;

export const YAML_PRODUCES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/plain'];

/** Body types apply reads as YAML text (app.ts's parser; text/plain is Fastify's own). */
const YAML_BODY_TYPES = ['application/yaml', 'application/x-yaml', 'text/yaml', 'text/x-yaml', 'text/plain'];

/**
 * The body as OpenAPI shows it (and /docs sends it): a string for each YAML type, anything for JSON.
 * Fastify validates a body by its content type against these; a string and an untyped schema accept
 * whatever the parsers give, so the route's own parsing and 400/422 answers are unchanged.
 */
const ApplyBody = {
  content: {
    ...Object.fromEntries(YAML_BODY_TYPES.map((type) => [type, { schema: YamlDocument }])),
    'application/json': { schema: JsonDocument },
  },
};

const Flag = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')]);
const ApplyQuery = Type.Object({ dry_run: Type.Optional(Flag), auto_deploy: Type.Optional(Flag) });
const TeamRef = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });

const flag = (value: string | undefined, fallback: boolean): boolean =>
  value === undefined ? fallback : value === 'true' || value === '1';

const tags = ['infrastructure'];
const security = [{ bearer: [] }];

export function registerInfrastructureRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const applyService = deps.services.apply;
  const schemaDocument = JSON.stringify(infrastructureJsonSchema(), null, 2);

  app.post<{ Querystring: Static<typeof ApplyQuery> }>(
    '/api/v1/infrastructure/apply',
    {
      // Owners only, dry runs too: a dry run compares the document's secret values with the stored
      // ones (`unchanged` for a right guess), which members may not read. The team is the document's:
      // the service checks the role once it has read it.
      config: { auth: 'api_token', role: 'owner', teamIn: 'body', audit: 'infrastructure.apply' },
      // The largest document within the list limits; parsing more would hold up other requests.
      bodyLimit: APPLY_BODY_LIMIT_BYTES,
      schema: {
        tags,
        security,
        summary: 'Apply an Infrastructure YAML document (create-or-update, all or nothing)',
        description:
          'Body: the YAML document (Content-Type application/yaml; JSON is accepted too). See docs/api/apply.md.',
        querystring: ApplyQuery,
        body: ApplyBody,
        response: { 200: ApplyResponse, ...platformErrors(400, 401, 403, 404, 409, 413, 422) },
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
      config: { auth: 'api_token', role: 'member', produces: YAML_PRODUCES },
      schema: {
        tags,
        security,
        summary: "Export the team's managed databases and object storage as one YAML document",
        params: TeamRef,
        response: {
          200: textResponse(YAML_PRODUCES, 'The Infrastructure document'),
          ...platformErrors(401, 403, 404, 422),
        },
      },
    },
    async (request, reply) => {
      const yaml = await deps.services.resources.exportTeam(principalOf(request).userId, request.params.team);
      return reply.type('application/yaml; charset=utf-8').send(yaml);
    },
  );

  // Editors fetch the schema without a token (a YAML language server has none to send).
  app.get(
    '/schemas/infrastructure.json',
    {
      config: { auth: 'none', produces: ['application/schema+json', 'application/json'] },
      schema: {
        tags,
        summary: 'JSON Schema of the Infrastructure document, for editors (open)',
        response: {
          200: {
            description: 'The JSON Schema',
            content: { 'application/schema+json': { schema: Type.Object({}) } },
          },
          ...platformErrors(),
        },
      },
    },
    (_request, reply) => reply.type('application/schema+json; charset=utf-8').send(schemaDocument),
  );
}
