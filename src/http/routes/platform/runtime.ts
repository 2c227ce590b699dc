// Running applications over the platform API, with Ploi Cloud's paths and parameters: deploy,
// rollback, suspend, resume, status, instances, deployments and their logs, application logs (live
// as server-sent events with `follow=true`), one-off commands, source upload and download, delete.
// Each route parses, calls one use case of services/applications/runtime.ts and shapes the answer.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type, type Static, type TSchema } from 'typebox';
import type { RouteDeps } from '../../deps.js';
import { DEPLOYMENT_STATUSES, type DeploymentStatus } from '../../../domain/deployments.js';
import { validationError } from '../../../domain/errors.js';
import { SOURCE_UPLOAD_LIMIT_BYTES } from '../../../services/applications/runtime.js';
import { principalOf } from '../../types.js';
import { fileResponse } from '../../schemas/common.js';
import { platformErrors } from '../../schemas/errors.js';
import {
  CommandHistoryResponse,
  DeletedApplicationResponse,
  DeploymentLogResponse,
  DeploymentResponse,
  DeploymentsResponse,
  EventStream,
  ExecResponse,
  InstancesResponse,
  LogsResponse,
  StatusResponse,
  UploadDeployingResponse,
  UploadStoredResponse,
} from '../../schemas/runtime.js';

const IdParam = Type.Object({ id: Type.Integer({ minimum: 1 }) });
const DeploymentParam = Type.Object({
  id: Type.Integer({ minimum: 1 }),
  deployment: Type.Integer({ minimum: 1 }),
});
const DeployBody = Type.Object(
  {
    branch: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    skip_build: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
const RollbackBody = Type.Object(
  { deployment_id: Type.Optional(Type.Integer({ minimum: 1 })) },
  { additionalProperties: false },
);
const ExecBody = Type.Object(
  {
    command: Type.String({ minLength: 1, maxLength: 4096 }),
    /** Ploi names an instance; every one-off command here runs in a fresh sandbox of the live release. */
    instance: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
const DeploymentsQuery = Type.Object({
  per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  page: Type.Optional(Type.Integer({ minimum: 1 })),
  status: Type.Optional(Type.String()),
});
const LogsQuery = Type.Object({
  tail: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
  since: Type.Optional(Type.String({ maxLength: 40 })),
  follow: Type.Optional(Type.Boolean()),
});
const DeploymentLogsQuery = Type.Object({
  tail: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
  follow: Type.Optional(Type.Boolean()),
});
const PerPageQuery = Type.Object({ per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })) });
const UploadQuery = Type.Object({ deploy: Type.Optional(Type.Boolean()) });

const ARCHIVE_TYPES = [
  'application/gzip',
  'application/x-gzip',
  'application/zip',
  'application/octet-stream',
];

/** What the log routes answer with: JSON, or with follow=true server-sent events (EventSource asks for those). */
const EVENT_TYPES = ['application/json', 'text/event-stream'];

/** A JSON answer, or with follow=true a server-sent-events stream (not checked as JSON). */
const jsonOrEvents = (schema: TSchema & { description?: string }) => ({
  description: `${schema.description ?? 'The answer'}; with follow=true, server-sent events`,
  content: {
    'application/json': { schema },
    'text/event-stream': { schema: EventStream },
  },
});

const tags = ['applications'];
const security = [{ bearer: [] }];
/**
 * Reading status, deployments, logs and the source is any member's; whatever changes the application,
 * and one-off commands and their history (a command can print the environment, secrets included), are
 * owners' (docs/security.md, "Roles").
 */
const config = { auth: 'api_token' as const, role: 'member' as const };
const owner = { auth: 'api_token' as const, role: 'owner' as const };

/** `since`: an ISO 8601 time or a duration back from now (`30s`, `15m`, `2h`, `1d`). */
function parseSince(value: string | undefined, now: Date): Date | undefined {
  if (value === undefined) return undefined;
  const duration = /^(\d{1,6})([smhd])$/.exec(value);
  if (duration) {
    const unit = { s: 1, m: 60, h: 3600, d: 86400 }[duration[2] as 's' | 'm' | 'h' | 'd'];
    return new Date(now.getTime() - Number(duration[1]) * unit * 1000);
  }
  const time = new Date(value);
  if (Number.isNaN(time.getTime()))
    throw validationError(
      { since: ['since must be an ISO 8601 time or a duration such as 30s, 15m, 2h or 1d.'] },
      'since is invalid.',
    );
  return time;
}

/** Opens a server-sent-events stream; `send` writes one event, the returned promise ends with the client. */
/** `open` holds the streams open now: the server ends them when it closes (it would wait for ever). */
function eventStream(request: FastifyRequest, reply: FastifyReply, openStreams: Set<{ end(): void }>) {
  reply.hijack();
  const raw = reply.raw;
  raw.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
  // A comment at once: the headers go out now, not with the first line (which may be minutes away).
  raw.write(': open\n\n');
  const heartbeat = setInterval(() => raw.write(': keep-alive\n\n'), 15_000);
  heartbeat.unref();
  const closed = new Promise<void>((resolve) => request.raw.socket.once('close', () => resolve()));
  const stream = {
    send(event: string, data: unknown) {
      raw.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    },
    end() {
      clearInterval(heartbeat);
      openStreams.delete(stream);
      raw.end();
    },
    closed,
  };
  openStreams.add(stream);
  void closed.then(() => {
    clearInterval(heartbeat);
    openStreams.delete(stream);
  });
  return stream;
}

export function registerRuntimeRoutes(app: FastifyInstance, deps: RouteDeps): void {
  const service = () => deps.services.applications;
  const user = (request: FastifyRequest) => principalOf(request).userId;
  const openStreams = new Set<{ end(): void }>();
  app.addHook('preClose', (done) => {
    for (const stream of openStreams) stream.end();
    done();
  });

  app.delete<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id',
    {
      config: { ...owner, audit: 'application.delete' },
      schema: {
        tags,
        security,
        summary:
          'Delete an application now: processes, releases, volumes, domains, secrets and deployments (the cascade of scheduled deletion)',
        params: IdParam,
        response: { 202: DeletedApplicationResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request, reply) =>
      reply.code(202).send({ data: await service().deleteApplication(user(request), request.params.id) }),
  );

  app.post<{ Params: Static<typeof IdParam>; Body: Static<typeof DeployBody> }>(
    '/api/v1/applications/:id/deploy',
    {
      config: { ...owner, audit: 'application.deploy' },
      schema: {
        tags,
        security,
        summary:
          'Deploy: fetch, build, init, roll out with zero downtime (skip_build reuses the last good build)',
        params: IdParam,
        body: DeployBody,
        response: { 202: DeploymentResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const data = await service().deploy(user(request), request.params.id, {
        ...(body.branch ? { branch: body.branch } : {}),
        skipBuild: body.skip_build === true,
      });
      return reply.code(202).send({ data });
    },
  );

  app.post<{ Params: Static<typeof IdParam>; Body: Static<typeof RollbackBody> }>(
    '/api/v1/applications/:id/rollback',
    {
      config: { ...owner, audit: 'application.rollback' },
      schema: {
        tags,
        security,
        summary: 'Roll back to a kept release (deployment_id, or the one before the live one)',
        params: IdParam,
        body: RollbackBody,
        response: { 202: DeploymentResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const data = await service().rollback(user(request), request.params.id, request.body?.deployment_id);
      return reply.code(202).send({ data });
    },
  );

  for (const [action, summary] of [
    ['suspend', 'Suspend: stop every process; the domains answer 503 until resumed'],
    ['resume', 'Resume a suspended application on its live release'],
  ] as const) {
    app.post<{ Params: Static<typeof IdParam> }>(
      `/api/v1/applications/:id/${action}`,
      {
        config: { ...owner, audit: `application.${action}` },
        schema: {
          tags,
          security,
          summary,
          params: IdParam,
          response: { 200: StatusResponse, ...platformErrors(401, 403, 404, 422) },
        },
      },
      async (request) => ({ data: await service()[action](user(request), request.params.id) }),
    );
  }

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/status',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Status, replicas, health and the latest deployment',
        params: IdParam,
        response: { 200: StatusResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await service().status(user(request), request.params.id) }),
  );

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/instances',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Running instances (replicas, scheduler) and their restarts',
        params: IdParam,
        response: { 200: InstancesResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({ data: await service().instances(user(request), request.params.id) }),
  );

  app.get<{ Params: Static<typeof IdParam>; Querystring: Static<typeof DeploymentsQuery> }>(
    '/api/v1/applications/:id/deployments',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'Deployments, newest first (per_page, page, status)',
        params: IdParam,
        querystring: DeploymentsQuery,
        response: { 200: DeploymentsResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => {
      const { status } = request.query;
      if (status !== undefined && !DEPLOYMENT_STATUSES.includes(status as DeploymentStatus))
        throw validationError(
          { status: [`status must be one of ${DEPLOYMENT_STATUSES.join(', ')}.`] },
          'status is invalid.',
        );
      return service().deployments(user(request), request.params.id, {
        perPage: request.query.per_page ?? 15,
        page: request.query.page ?? 1,
        ...(status ? { status: status as DeploymentStatus } : {}),
      });
    },
  );

  app.get<{ Params: Static<typeof DeploymentParam> }>(
    '/api/v1/applications/:id/deployments/:deployment',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'One deployment: status, step, commit, duration, error',
        params: DeploymentParam,
        response: { 200: DeploymentResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await service().deployment(user(request), request.params.id, request.params.deployment),
    }),
  );

  app.get<{ Params: Static<typeof DeploymentParam>; Querystring: Static<typeof DeploymentLogsQuery> }>(
    '/api/v1/applications/:id/deployments/:deployment/logs',
    {
      config: { ...config, produces: EVENT_TYPES },
      schema: {
        tags,
        security,
        summary: "A deployment's log (follow=true streams it as server-sent events until it ends)",
        params: DeploymentParam,
        querystring: DeploymentLogsQuery,
        response: { 200: jsonOrEvents(DeploymentLogResponse), ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const { id, deployment } = request.params;
      if (!request.query.follow) {
        const tail = request.query.tail;
        return { data: await service().deploymentLogs(user(request), id, deployment, tail ? { tail } : {}) };
      }
      const follow = await service().followDeployment(user(request), id, deployment);
      const stream = eventStream(request, reply, openStreams);
      let lastId = 0;
      // Lines reach the store in batches; the store is read until the deployment has ended and its
      // last lines are written, so nothing is missed or sent twice.
      for (;;) {
        const lines = await follow.lines(lastId);
        for (const line of lines) stream.send('line', { at: line.at, line: line.line });
        if (lines.length > 0) lastId = lines[lines.length - 1]!.id;
        const current = await follow.reload();
        const ended = !current || (current.status !== 'pending' && current.status !== 'running');
        if (ended && (await follow.lines(lastId)).length === 0) {
          stream.send('end', { status: current?.status ?? 'gone' });
          break;
        }
        const done = await Promise.race([
          stream.closed.then(() => true),
          new Promise<false>((resolve) => setTimeout(() => resolve(false), 300).unref()),
        ]);
        if (done) return;
      }
      stream.end();
    },
  );

  app.get<{ Params: Static<typeof IdParam>; Querystring: Static<typeof LogsQuery> }>(
    '/api/v1/applications/:id/logs',
    {
      config: { ...config, produces: EVENT_TYPES },
      schema: {
        tags,
        security,
        summary: "Output of the application's processes (tail ≤ 1000, since; follow=true streams new lines)",
        params: IdParam,
        querystring: LogsQuery,
        response: { 200: jsonOrEvents(LogsResponse), ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request, reply) => {
      const since = parseSince(request.query.since, deps.clock.now());
      const lines = await service().logs(user(request), request.params.id, {
        tail: request.query.tail ?? 100,
        ...(since ? { since } : {}),
      });
      if (!request.query.follow) return { data: lines };
      const stream = eventStream(request, reply, openStreams);
      for (const line of lines) stream.send('line', line);
      const unsubscribe = await service().followLogs(user(request), request.params.id, (line) =>
        stream.send('line', line),
      );
      await stream.closed;
      unsubscribe();
    },
  );

  app.post<{ Params: Static<typeof IdParam>; Body: Static<typeof ExecBody> }>(
    '/api/v1/applications/:id/exec',
    {
      config: { ...owner, audit: 'application.exec' },
      schema: {
        tags,
        security,
        summary:
          'Run a one-off command in a fresh sandbox of the live release; output returned and kept in the history',
        params: IdParam,
        body: ExecBody,
        response: { 200: ExecResponse, ...platformErrors(401, 403, 404, 409, 422) },
      },
    },
    async (request) => ({
      data: await service().exec(user(request), request.params.id, request.body.command),
    }),
  );

  app.get<{ Params: Static<typeof IdParam>; Querystring: Static<typeof PerPageQuery> }>(
    '/api/v1/applications/:id/command-history',
    {
      config: owner,
      schema: {
        tags,
        security,
        summary: 'One-off commands run, newest first',
        params: IdParam,
        querystring: PerPageQuery,
        response: { 200: CommandHistoryResponse, ...platformErrors(401, 403, 404, 422) },
      },
    },
    async (request) => ({
      data: await service().commandHistory(user(request), request.params.id, request.query.per_page ?? 15),
    }),
  );

  app.get<{ Params: Static<typeof IdParam> }>(
    '/api/v1/applications/:id/source/download',
    {
      config,
      schema: {
        tags,
        security,
        summary: 'The source of the live release, as a tar.gz',
        params: IdParam,
        response: {
          200: fileResponse(['application/gzip'], 'The source archive (tar.gz)'),
          ...platformErrors(401, 403, 404, 422),
        },
      },
    },
    async (request, reply) => {
      const source = await service().sourceDownload(user(request), request.params.id);
      return reply
        .type('application/gzip')
        .header(
          'content-disposition',
          `attachment; filename="application-${request.params.id}-source.tar.gz"`,
        )
        .send(source);
    },
  );

  // The archive arrives as the raw body and is streamed to disk, then read through (format, every entry,
  // the limits) before it is kept: an archive the build could not unpack is a 422 naming the problem.
  void app.register((scope, _options, registered) => {
    scope.addContentTypeParser(ARCHIVE_TYPES, (_request, payload, done) => done(null, payload));
    scope.post<{ Params: Static<typeof IdParam>; Querystring: Static<typeof UploadQuery> }>(
      '/api/v1/applications/:id/source',
      {
        config: {
          ...owner,
          audit: 'application.upload_source',
          // The archive is the raw body, streamed to disk by the route: documented, never validated.
          documentedBody: {
            description: 'The source archive (tar.gz or zip), as the raw body',
            content: Object.fromEntries(
              ARCHIVE_TYPES.map((type) => [type, { schema: Type.String({ format: 'binary' }) }]),
            ),
          },
        },
        bodyLimit: SOURCE_UPLOAD_LIMIT_BYTES,
        schema: {
          tags,
          security,
          summary:
            'Upload the source as a tar.gz or zip (body, ≤ 100 MB) and deploy it (deploy=false only stores it)',
          params: IdParam,
          querystring: UploadQuery,
          response: {
            200: UploadStoredResponse,
            202: UploadDeployingResponse,
            ...platformErrors(401, 403, 404, 409, 413, 422),
          },
        },
      },
      async (request, reply) => {
        const data = await service().uploadSource(
          user(request),
          request.params.id,
          request.body as NodeJS.ReadableStream as import('node:stream').Readable,
          { deploy: request.query.deploy !== false },
        );
        return reply.code(data.deployment ? 202 : 200).send({ data });
      },
    );
    registered();
  });
}
