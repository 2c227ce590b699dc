// One message per problem, naming what is accepted: choices, body types, the body limit, and paths
// that match no route because of a space or a trailing slash.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { applyManagedDatabase } from '../managed-databases/helpers.js';

describe('error messages that say what is accepted', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('sqlite', { env: { BERTH_BODY_LIMIT_BYTES: '4096' } });
  });
  afterAll(() => t.close());

  it('a value outside a fixed set gets one message listing the accepted values, on every API', async () => {
    const apply = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?dry_run=yes',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: 'a: 1',
    });
    expect(apply.statusCode).toBe(422);
    expect(apply.json()).toEqual({
      message: 'The given data was invalid.',
      errors: { dry_run: ["The dry_run field must be one of: 'true', 'false', '1', '0'."] },
    });
    const shot = await t.request({
      method: 'POST',
      url: '/api/v1/tools/screenshot/html',
      headers: t.auth.tools,
      payload: { html: '<p>x</p>', format: 'gif' },
    });
    expect(shot.json<{ errors: unknown }>().errors).toEqual({
      format: ["The format field must be one of: 'png', 'jpeg'."],
    });
    // A database of the caller's team: ownership is checked before the body (docs/security.md).
    const uuid = await applyManagedDatabase(t.ctx, t.user.team_id, {
      name: 'messages',
      type: 'pg',
      plan: '1x1xCPU-2GB-25GB',
    });
    const task = await t.request({
      method: 'POST',
      url: `/1.3/database/${uuid}/tasks`,
      headers: t.auth.dbApi,
      payload: { operation: 'nope' },
    });
    expect(task.statusCode).toBe(400);
    expect(task.json<{ error_message: string }>().error_message).toBe(
      "The operation field must be one of: 'migration_check', 'upgrade_check'.",
    );
  });

  it('415 names the body types, 413 the limit', async () => {
    const xml = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: { ...t.auth.platform, 'content-type': 'application/xml' },
      payload: '<a/>',
    });
    expect(xml.statusCode).toBe(415);
    expect(xml.json<{ message: string }>().message).toMatch(
      /^Unsupported content type 'application\/xml'\. Send one of: application\/json, .*multipart\/form-data\.$/,
    );
    const big = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens',
      headers: { ...t.auth.platform, 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(5000) }),
    });
    expect(big.statusCode).toBe(413);
    expect(big.json()).toEqual({ message: 'Request body is too large: the limit is 4096 bytes (4 KiB).' });
  });

  it('a credential of another API says which API it belongs to', async () => {
    const tools = await t.request({
      url: '/api/v1/user',
      headers: { authorization: `Bearer ${t.auth.tools.authorization!}` },
    });
    expect(tools.statusCode).toBe(401);
    expect(tools.json<{ message: string }>().message).toContain(
      'This is a tools API key, for the tools API (/api/v1/tools, Authorization: <key>); this route takes an API token',
    );
    const token = await t.request({
      url: '/api/v1/tools/balance',
      headers: { authorization: t.auth.platform.authorization!.replace('Bearer ', '') },
    });
    expect(token.json<{ message: string }>().message).toContain('This is an API token, for the platform API');
  });

  it('a path with a space is told so; a trailing slash is a 404, with a hint only where it helps', async () => {
    const space = await t.request({ url: '/he%20alth' });
    expect(space.statusCode).toBe(404);
    expect(space.json()).toEqual({ message: 'Route GET /he alth not found: the path contains a space.' });
    // `…/tasks/` matches no GET route: 404, not a 405 claiming GET is unsupported.
    const tasks = await t.request({
      url: '/1.3/database/00000000-0000-4000-8000-000000000000/tasks/',
      headers: t.auth.dbApi,
    });
    expect(tasks.statusCode).toBe(404);
    expect(tasks.json<{ error_code: string }>().error_code).toBe('NOT_FOUND');
    const slash = await t.request({
      method: 'POST',
      url: '/api/v1/user/tokens//',
      headers: t.auth.platform,
    });
    expect(slash.statusCode).toBe(404);
    expect(slash.json<{ message: string }>().message).toContain('try it without the trailing slash');
  });
});
