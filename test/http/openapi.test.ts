// The OpenAPI document describes every answer: each operation has a summary and a documented success;
// apply, office conversion and merge have request bodies /docs can send. Response schemas never change
// what is sent, and the test suite's response check holds the routes to them.
import fs from 'node:fs';
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { Type } from 'typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { AppError } from '../../src/domain/errors.js';
import { createContext, type AppContext } from '../../src/context.js';
import { platformErrors } from '../../src/http/schemas/errors.js';
import { createTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { listenOnSocket, type RequestOverSocket } from '../helpers/http.js';
import { openTestStore } from '../helpers/store.js';

interface MediaObject {
  schema?: Record<string, unknown>;
}
interface Operation {
  summary?: string;
  tags?: string[];
  requestBody?: { content: Record<string, MediaObject> };
  responses: Record<string, { description: string; content?: Record<string, MediaObject> }>;
}
interface OpenApi {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

describe('OpenAPI document', () => {
  let t: TestApp;
  let doc: OpenApi;
  beforeAll(async () => {
    t = await createTestApp('sqlite');
    const res = await t.request({ url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    doc = res.json<OpenApi>();
  });
  afterAll(() => t.close());

  const operations = () =>
    Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item)
        .filter(([method]) => METHODS.includes(method))
        .map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, operation })),
    );

  it('lists every route but the docs UI', () => {
    const documented = new Set(operations().map((o) => o.name));
    const routes = t.app.routeTable.filter((r) => r.method !== 'HEAD' && !r.url.startsWith('/docs'));
    expect(routes.length).toBeGreaterThan(50);
    for (const { method, url } of routes) {
      // A wildcard (the dashboard's paths) is documented as {*}.
      expect(documented).toContain(`${method} ${url.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{*}')}`);
    }
  });

  it('gives every operation a summary, tags and a documented success', () => {
    const problems: string[] = [];
    for (const { name, operation } of operations()) {
      if (!operation.summary?.trim()) problems.push(`${name}: no summary`);
      if (!operation.tags?.length) problems.push(`${name}: no tags`);
      const successes = Object.entries(operation.responses).filter(([code]) => /^2(\d\d|XX)$/.test(code));
      const described = successes.filter(
        ([code, response]) =>
          code === '204' ||
          (response.content !== undefined &&
            Object.keys(response.content).length > 0 &&
            Object.values(response.content).every((media) => media.schema !== undefined)),
      );
      if (described.length === 0) problems.push(`${name}: no 2xx response with a schema or content type`);
      if (operation.responses.default === undefined) problems.push(`${name}: no default (error) response`);
    }
    expect(problems).toEqual([]);
  });

  it('documents the error answers a route can give', () => {
    const user = doc.paths['/api/v1/teams/{team}']!.get!;
    expect(Object.keys(user.responses)).toEqual(expect.arrayContaining(['200', '401', '403', '404', '422']));
    expect(user.responses['422']!.content!['application/json']!.schema).toMatchObject({
      properties: { message: { type: 'string' }, errors: { type: 'object' } },
    });
    const dbApi = doc.paths['/1.3/database/{uuid}']!.get!;
    expect(dbApi.responses['404']!.content!['application/json']!.schema).toMatchObject({
      properties: { error_code: { type: 'string' }, error_message: { type: 'string' } },
    });
  });

  it('takes apply as YAML text (or JSON) that /docs can send', () => {
    const body = doc.paths['/api/v1/infrastructure/apply']!.post!.requestBody!;
    for (const type of ['application/yaml', 'application/x-yaml', 'text/yaml']) {
      expect(body.content[type]?.schema).toMatchObject({ type: 'string' });
    }
    expect(Object.keys(body.content)).toContain('application/json');
    expect(Object.keys(body.content)[0]).toBe('application/yaml');
  });

  it('takes office conversion and merge as multipart uploads with file fields', () => {
    const office = doc.paths['/api/v1/tools/pdf/convert/office']!.post!;
    expect(Object.keys(office.requestBody!.content)).toEqual(['multipart/form-data']);
    expect(office.requestBody!.content['multipart/form-data']!.schema).toMatchObject({
      type: 'object',
      properties: { file: { type: 'string', format: 'binary' } },
      required: ['file'],
    });
    const merge = doc.paths['/api/v1/tools/pdf/merge']!.post!;
    expect(merge.requestBody!.content['multipart/form-data']!.schema).toMatchObject({
      type: 'object',
      properties: { files: { type: 'array', items: { type: 'string', format: 'binary' } } },
    });
    // The file answers are documented by their content type.
    expect(Object.keys(office.responses['200']!.content!)).toEqual(['application/pdf']);
  });

  it('still reads uploads and YAML as before: the documented bodies are not validated', async () => {
    // Without a file the route's own 422 answers, not a body schema.
    const office = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/office',
      headers: { ...t.auth.tools, 'content-type': 'multipart/form-data; boundary=x' },
      payload: '--x\r\nContent-Disposition: form-data; name="other"\r\n\r\nvalue\r\n--x--\r\n',
    });
    expect(office.statusCode).toBe(422);
    expect(office.json()).toMatchObject({ errors: { file: ['The file field is required.'] } });
    const apply = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?dry_run=true',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: '- a list\n- not a document\n',
    });
    expect(apply.statusCode).toBe(400);
    const json = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?dry_run=true',
      headers: t.auth.platform,
      payload: [1, 2],
    });
    expect(json.statusCode).toBe(400);
    expect(json.json()).toMatchObject({ success: false });
  });
});

describe('response schemas', () => {
  let ctx: AppContext;
  let dataDir: string;
  const apps: FastifyInstance[] = [];

  const Documented = Type.Object({ id: Type.Integer(), name: Type.String() });

  /** An app with two extra routes: one true to its schema plus an unlisted field, one that is not. */
  async function appWith(checkResponses: boolean): Promise<RequestOverSocket> {
    const app = await buildApp(ctx, { checkResponses });
    const schema = { response: { 200: Documented, ...platformErrors(404) } };
    app.get('/test/extra', { config: { auth: 'none' }, schema }, () => ({
      id: 1,
      name: 'x',
      unlisted: { kept: true },
    }));
    app.get('/test/wrong', { config: { auth: 'none' }, schema }, () => ({ id: '1', name: 2 }));
    app.get('/test/missing', { config: { auth: 'none' }, schema }, () => {
      throw new AppError('not_found', 'Nothing here');
    });
    app.get('/test/file', { config: { auth: 'none' }, schema }, (_request, reply) =>
      reply.type('application/pdf').send(Buffer.from('%PDF-1.7')),
    );
    apps.push(app);
    return (await listenOnSocket(app)).request;
  }

  beforeAll(async () => {
    const config = testConfig();
    dataDir = config.dataDir;
    ctx = await createContext(config, {
      store: await openTestStore('sqlite'),
      logger: pino({ level: 'silent' }),
      masterKey: randomBytes(32),
    });
  });
  afterAll(async () => {
    for (const app of apps) await app.close();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('never drops or coerces what a schema does not list', async () => {
    for (const check of [false, true]) {
      const request = await appWith(check);
      const res = await request({ url: '/test/extra' });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ id: 1, name: 'x', unlisted: { kept: true } });
    }
  });

  it('without the check, sends a mismatching answer as it is', async () => {
    const request = await appWith(false);
    const res = await request({ url: '/test/wrong' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ id: '1', name: 2 });
  });

  it('with the check, turns a mismatching answer into a 500 naming the route, status and problems', async () => {
    const request = await appWith(true);
    const res = await request({ url: '/test/wrong' });
    expect(res.statusCode).toBe(500);
    const { message } = res.json<{ message: string }>();
    expect(message).toContain('GET /test/wrong');
    expect(message).toContain('200');
    expect(message).toContain('/id must be integer');
    expect(message).toContain('/name must be string');
    // An error answer true to its schema passes; a file is not read as JSON.
    const missing = await request({ url: '/test/missing' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toEqual({ message: 'Nothing here' });
    const file = await request({ url: '/test/file' });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('application/pdf');
  });
});
