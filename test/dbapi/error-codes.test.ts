// Every error code of the /1.3 API: docs/api/dbapi.md's table is exactly the codes the sources can answer,
// and each code is asserted by some test. The codes that need no running engine are produced here (the
// engine ones are in test/dbapi/*.test.ts and test/db-operations/*.test.ts).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const TASK_JOB = 'db_operation.task';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { applyManagedDatabase } from '../managed-databases/helpers.js';

const read = (file: string): string => fs.readFileSync(path.resolve(file), 'utf8');
const filesUnder = (dir: string): string[] =>
  fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => path.join(dir, f));

/** The rows of the "Error codes" tables: code → its status cell, or `warning` for the task warnings. */
function documentedCodes(): Map<string, string> {
  const doc = read('docs/api/dbapi.md');
  const section = doc.slice(doc.indexOf('## Error codes'), doc.indexOf('## How it works'));
  const split = section.indexOf('Codes a task can carry that are warnings');
  const rows = (text: string) => [...text.matchAll(/^\| `([A-Z_]+)` \| ([^|]+) \|/gm)];
  return new Map([
    ...rows(section.slice(0, split)).map((m) => [m[1] ?? '', (m[2] ?? '').trim()] as const),
    ...rows(section.slice(split)).map((m) => [m[1] ?? '', 'warning'] as const),
  ]);
}

/**
 * The codes the /1.3 sources can answer: the engine's OperationErrorCode union, every explicit apiCode of
 * the routes, the auth and error plugins' codes for the statuses /1.3 produces without one, and the task
 * result codes that are not OperationErrors.
 */
function sourceCodes(): Set<string> {
  const codes = new Set<string>();
  const union = /export type OperationErrorCode =([^;]+);/.exec(read('src/drivers/databases/types.ts'));
  for (const m of (union?.[1] ?? '').matchAll(/'([A-Z_]+)'/g)) codes.add(m[1] ?? '');
  const withApiCodes = [
    ...filesUnder('src/http/routes/dbapi'),
    'src/http/plugins/auth.ts',
    'src/services/db-operations/index.ts',
    'src/services/db-operations/requests.ts',
  ];
  for (const file of withApiCodes) {
    for (const m of read(file).matchAll(/apiCode: '([A-Z_]+)'/g)) codes.add(m[1] ?? '');
  }
  for (const file of [
    ...filesUnder('src/drivers/databases/operations'),
    'src/services/db-operations/index.ts',
  ]) {
    for (const m of read(file).matchAll(/\bcode: '([A-Z_]+)'/g)) codes.add(m[1] ?? '');
  }
  // Statuses /1.3 answers without an explicit code: framework errors (parse, size, media type, routing,
  // Accept, maintenance) and unexpected failures. 403, 409, 422 and 502 always carry a code on /1.3.
  const defaults = read('src/http/plugins/errors.ts');
  for (const status of [400, 401, 404, 405, 406, 413, 415, 429, 500, 503]) {
    const m = new RegExp(`${status}: '([A-Z_]+)'`).exec(defaults);
    if (m?.[1]) codes.add(m[1]);
  }
  return codes;
}

describe('the /1.3 error code table', () => {
  it('lists every code the sources answer, and nothing else', () => {
    const documented = [...documentedCodes().keys()].sort();
    expect(documented).toEqual([...sourceCodes()].sort());
  });

  it('gives each code one HTTP status, marked (task) when tasks or statuses carry it too', () => {
    for (const [code, status] of documentedCodes()) {
      expect(status, code).toMatch(/^(\d{3}( \(task\))?|warning)$/);
    }
  });

  it('has every code asserted by some test', () => {
    const tests = filesUnder('test')
      .filter((f) => !f.endsWith('error-codes.test.ts'))
      .map(read)
      .concat(read('test/dbapi/error-codes.test.ts'));
    const unasserted = [...documentedCodes().keys()].filter(
      (code) => !tests.some((t) => t.includes(`'${code}'`)),
    );
    expect(unasserted).toEqual([]);
  });
});

describe.each(DIALECTS)('/1.3 error codes without a running engine on %s', (dialect) => {
  let t: TestApp;
  const uuid: Record<'pg' | 'mysql' | 'valkey', string> = { pg: '', mysql: '', valkey: '' };
  const call = (method: string, url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    t.request({
      method: method,
      url,
      headers: { ...t.auth.dbApi, ...headers },
      ...(payload === undefined ? {} : { payload: payload as string }),
    });

  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_BODY_LIMIT_BYTES: '2048' } });
    // Rows as apply leaves them: pending, their provisioning never run here.
    for (const type of ['pg', 'mysql', 'valkey'] as const) {
      uuid[type] = await applyManagedDatabase(t.ctx, t.user.team_id, {
        name: `db-${type}`,
        type,
        plan: type === 'valkey' ? '1x1xCPU-2GB' : '1x1xCPU-2GB-25GB',
      });
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  it('401 AUTHENTICATION_FAILED without or with wrong credentials', async () => {
    const none = await t.request({ method: 'GET', url: '/1.3/database' });
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({
      error_code: 'AUTHENTICATION_FAILED',
      error: { error_code: 'AUTHENTICATION_FAILED' },
    });
    const wrong = await call('GET', '/1.3/database', undefined, {
      authorization: `Basic ${Buffer.from(`${t.user.db_api_username}:nope`).toString('base64')}`,
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json()).toMatchObject({ error_code: 'AUTHENTICATION_FAILED' });
  });

  it('404 NOT_FOUND, 405 METHOD_NOT_ALLOWED and 406 NOT_ACCEPTABLE from the routing', async () => {
    const missing = await call('GET', '/1.3/nothing-here');
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error_code: 'NOT_FOUND' });
    const wrongMethod = await call('PUT', `/1.3/database/${uuid.pg}/tasks`);
    expect(wrongMethod.statusCode).toBe(405);
    expect(wrongMethod.headers.allow).toContain('POST');
    expect(wrongMethod.json()).toMatchObject({ error_code: 'METHOD_NOT_ALLOWED' });
    const html = await call('GET', '/1.3/database', undefined, { accept: 'text/html' });
    expect(html.statusCode).toBe(406);
    expect(html.json()).toMatchObject({ error_code: 'NOT_ACCEPTABLE' });
  });

  it('400 INVALID_REQUEST, 413 REQUEST_TOO_LARGE and 415 UNSUPPORTED_MEDIA_TYPE for bodies', async () => {
    const json = { 'content-type': 'application/json' };
    const broken = await call('POST', `/1.3/database/${uuid.pg}/tasks`, '{"operation":', json);
    expect(broken.statusCode).toBe(400);
    expect(broken.json()).toMatchObject({ error_code: 'INVALID_REQUEST' });
    const large = await call(
      'POST',
      `/1.3/database/${uuid.pg}/tasks`,
      JSON.stringify({ operation: 'upgrade_check', target_version: 'x'.repeat(4096) }),
      json,
    );
    expect(large.statusCode).toBe(413);
    expect(large.json()).toMatchObject({ error_code: 'REQUEST_TOO_LARGE' });
    const text = await call('POST', `/1.3/database/${uuid.pg}/tasks`, '<operation/>', {
      'content-type': 'application/xml',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json()).toMatchObject({ error_code: 'UNSUPPORTED_MEDIA_TYPE' });
  });

  it('503 SERVICE_UNAVAILABLE with Retry-After while Berth is in maintenance', async () => {
    await t.ctx.maintenance.set(true);
    try {
      const response = await call('GET', '/1.3/database');
      expect(response.statusCode).toBe(503);
      expect(response.headers['retry-after']).toBeDefined();
      expect(response.json()).toMatchObject({ error_code: 'SERVICE_UNAVAILABLE' });
    } finally {
      await t.ctx.maintenance.set(false);
    }
    expect((await call('GET', '/1.3/database')).statusCode).toBe(200);
  });

  it('400 OPERATION_NOT_SUPPORTED for Valkey, and for an upgrade check on MariaDB', async () => {
    const valkey = await call('POST', `/1.3/database/${uuid.valkey}/tasks`, {
      operation: 'migration_check',
      migration_check: { source_service_uri: 'postgres://u:p@127.0.0.1:5432/db' },
    });
    expect(valkey.statusCode).toBe(400);
    expect(valkey.json()).toMatchObject({ error_code: 'OPERATION_NOT_SUPPORTED' });
    const status = await call('GET', `/1.3/database/${uuid.valkey}/migration-status`);
    expect(status.json()).toMatchObject({ error_code: 'OPERATION_NOT_SUPPORTED' });
    const mysql = await call('POST', `/1.3/database/${uuid.mysql}/tasks`, {
      operation: 'upgrade_check',
      target_version: '11',
    });
    expect(mysql.statusCode).toBe(400);
    expect(mysql.json()).toMatchObject({ error_code: 'OPERATION_NOT_SUPPORTED' });
  });

  it('400 REPLICATION_NOT_POSSIBLE for a replication migration into MariaDB', async () => {
    const response = await call('POST', `/1.3/database/${uuid.mysql}/migration`, {
      source_service_uri: 'mysql://u:p@127.0.0.1:3306/db',
      method: 'replication',
    });
    expect(response.statusCode).toBe(400);
    expect(response.json()).toMatchObject({ error_code: 'REPLICATION_NOT_POSSIBLE' });
  });

  it('409 SERVICE_NOT_RUNNING for a migration into a database that is not running yet', async () => {
    const response = await call('POST', `/1.3/database/${uuid.pg}/migration`, {
      source_service_uri: 'postgres://u:p@127.0.0.1:5432/db',
      ssl: false,
    });
    expect(response.statusCode).toBe(409);
    expect(response.json()).toMatchObject({ error_code: 'SERVICE_NOT_RUNNING' });
    // Nothing was started, so there is nothing to stop either.
    const stop = await call('DELETE', `/1.3/database/${uuid.pg}/migration`);
    expect(stop.statusCode).toBe(409);
    expect(stop.json()).toMatchObject({ error_code: 'NO_MIGRATION' });
  });

  it('INTERNAL_ERROR in a task that failed unexpectedly (its database has no instance), nothing more', async () => {
    const created = await call('POST', `/1.3/database/${uuid.pg}/tasks`, {
      operation: 'migration_check',
      migration_check: { source_service_uri: 'postgres://u:secret-pw@127.0.0.1:5432/db' },
    });
    expect(created.statusCode).toBe(201);
    const id = created.json<{ id: string }>().id;
    // Only the task job: the provisioning job of the row stays unrun.
    const handler = t.ctx.services.jobs.handlers()[TASK_JOB];
    await handler?.(
      { id: 0, type: TASK_JOB, key: id, payload: { id }, attempts: 1, maxAttempts: 1 },
      { signal: new AbortController().signal },
    );
    const task = await call('GET', `/1.3/database/${uuid.pg}/tasks/${id}`);
    expect(task.json()).toMatchObject({
      success: false,
      result: 'The check failed unexpectedly',
      result_codes: [{ code: 'INTERNAL_ERROR' }],
    });
  });

  it('429 TOO_MANY_REQUESTS past the per-credential rate limit', async () => {
    const limited = await createTestApp(dialect, { env: { BERTH_RATE_LIMIT_PER_MINUTE: '1' } });
    try {
      const headers = authHeaders(limited.user).dbApi;
      let response = await limited.request({ method: 'GET', url: '/1.3/database', headers });
      // A minute boundary between two requests resets the window: a third one is then over the limit.
      for (let i = 0; i < 3 && response.statusCode !== 429; i++) {
        response = await limited.request({ method: 'GET', url: '/1.3/database', headers });
      }
      expect(response.statusCode).toBe(429);
      expect(response.headers['retry-after']).toBeDefined();
      expect(response.json()).toMatchObject({ error_code: 'TOO_MANY_REQUESTS' });
    } finally {
      await limited.close();
    }
  });
});
