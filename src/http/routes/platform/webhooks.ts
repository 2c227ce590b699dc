// Team webhooks (owners: register, list, read, delete, and each webhook's deliveries) and push to deploy
// (an application's git webhook URL and secret for owners; the forges' push events, authenticated by
// their signature alone). The use cases are in services/webhooks/ and services/applications/push.ts.
import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import { auditUnchanged } from '../../../services/audit.js';
import { PUSH_BODY_LIMIT_BYTES } from '../../../services/applications/push.js';
import { WEBHOOK_EVENTS } from '../../../domain/webhook-events.js';
import type { RouteDeps } from '../../deps.js';
import { principalOf } from '../../types.js';
import { NoContent } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import {
  CreatedWebhookResponse,
  GitWebhookResponse,
  PushAnswerResponse,
  WebhookDeliveriesResponse,
  WebhookResponse,
  WebhooksResponse,
} from '../../schemas/webhooks.js';

const TeamParam = Type.Object({ team: Type.String({ minLength: 1, maxLength: 100 }) });
const HookParam = Type.Object({
  team: Type.String({ minLength: 1, maxLength: 100 }),
  id: Type.String({ maxLength: 40 }),
});
const AppParam = Type.Object({ id: Type.String({ maxLength: 40 }) });
const CreateBody = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2000,
      description: 'An http:// or https:// URL on a public address',
    }),
    events: Type.Array(Type.String({ maxLength: 100 }), {
      minItems: 1,
      maxItems: WEBHOOK_EVENTS.length + 1,
      description: `Any of ${WEBHOOK_EVENTS.join(', ')}, or "*" for all`,
    }),
  },
  { additionalProperties: false },
);
const DeliveriesQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
});
const tags = ['webhooks'];
const security = [{ bearer: [] }];

export function registerWebhookRoutes(app: FastifyInstance, deps: RouteDeps): void {
  // Endpoints and their deliveries show where a team's events go: owners only, reading too.
  const owner = { auth: 'api_token' as const, role: 'owner' as const };
  const webhooks = () => deps.services.webhooks;
  const push = () => deps.services.pushToDeploy;

  app.post<{ Params: Static<typeof TeamParam>; Body: Static<typeof CreateBody> }>(
    '/api/v1/teams/:team/webhooks',
    {
      config: { ...owner, audit: 'webhook.create' },
      schema: {
        tags,
        security,
        summary: 'Register a webhook; the answer carries its signing secret, shown this once',
        params: TeamParam,
        body: CreateBody,
        response: { 201: CreatedWebhookResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const data = await webhooks().create(principalOf(request).userId, request.params.team, request.body);
      reply.code(201);
      return { data };
    },
  );

  app.get<{ Params: Static<typeof TeamParam> }>(
    '/api/v1/teams/:team/webhooks',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: "The team's webhooks (without their secrets)",
        params: TeamParam,
        response: { 200: WebhooksResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await webhooks().list(principalOf(request).userId, request.params.team) }),
  );

  app.get<{ Params: Static<typeof HookParam> }>(
    '/api/v1/teams/:team/webhooks/:id',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: 'One webhook (without its secret)',
        params: HookParam,
        response: { 200: WebhookResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await webhooks().get(principalOf(request).userId, request.params.team, request.params.id),
    }),
  );

  app.delete<{ Params: Static<typeof HookParam> }>(
    '/api/v1/teams/:team/webhooks/:id',
    {
      config: { ...owner, audit: 'webhook.delete' },
      schema: {
        tags,
        security,
        summary: 'Delete a webhook and its deliveries (nothing more is sent to it)',
        params: HookParam,
        response: { 204: NoContent, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      await webhooks().remove(principalOf(request).userId, request.params.team, request.params.id);
      reply.code(204);
    },
  );

  app.get<{ Params: Static<typeof HookParam>; Querystring: Static<typeof DeliveriesQuery> }>(
    '/api/v1/teams/:team/webhooks/:id/deliveries',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: "The webhook's recent deliveries, newest first, with each attempt's answer",
        params: HookParam,
        querystring: DeliveriesQuery,
        response: { 200: WebhookDeliveriesResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await webhooks().deliveries(
        principalOf(request).userId,
        request.params.team,
        request.params.id,
        request.query.limit ?? 20,
      ),
    }),
  );

  app.get<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/git-webhook',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: 'Push to deploy: the URL and secret to give the forge (the secret is made on first read)',
        params: AppParam,
        response: { 200: GitWebhookResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await push().view(principalOf(request).userId, Number(request.params.id)),
    }),
  );

  app.post<{ Params: Static<typeof AppParam> }>(
    '/api/v1/applications/:id/git-webhook/rotate',
    {
      config: { ...owner, audit: 'git_webhook.rotate' },
      schema: {
        tags,
        security,
        summary: 'Push to deploy: a new secret (the old one stops working at once)',
        params: AppParam,
        response: { 200: GitWebhookResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await push().view(principalOf(request).userId, Number(request.params.id), { rotate: true }),
    }),
  );

  // The forges' requests: the signature covers the exact bytes, so this scope keeps the body as sent.
  void app.register((scope, _options, done) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: PUSH_BODY_LIMIT_BYTES },
      (_r, body, next) => next(null, body),
    );
    scope.post<{ Params: Static<typeof AppParam> }>(
      '/api/v1/applications/:id/git-webhook',
      {
        // No Berth credential: the application's git webhook secret signs the request (401 otherwise).
        config: {
          auth: 'none',
          // A push to the application's branch deploys it; anything else (ignored, ping) records nothing.
          audit: 'application.deploy',
          documentedBody: {
            description: 'A GitHub, GitLab or Gitea push (or ping) event, as the forge sends it',
            content: { 'application/json': { schema: { type: 'object' } } },
          },
        },
        bodyLimit: PUSH_BODY_LIMIT_BYTES,
        schema: {
          tags,
          summary:
            'Push to deploy: a forge’s push event, signed (X-Hub-Signature-256, X-Gitlab-Token or X-Gitea-Signature)',
          params: AppParam,
          response: {
            200: PushAnswerResponse,
            202: PushAnswerResponse,
            ...platformErrors(400, 401, 413),
          },
        },
      },
      async (request, reply) => {
        const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const answer = await push().receive(request.params.id, request.headers, body);
        if (answer.status === 'deploying') reply.code(202);
        else auditUnchanged();
        return answer;
      },
    );
    done();
  });
}
