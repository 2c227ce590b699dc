// The generated API description lists the infrastructure routes (it is never hand-written).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe('OpenAPI document', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('sqlite');
  });
  afterAll(() => t.close());

  it('describes apply, the exports and the read endpoints', async () => {
    const res = await t.request({ url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const paths = Object.keys(res.json<{ paths: Record<string, unknown> }>().paths);
    for (const path of [
      '/api/v1/infrastructure/apply',
      '/api/v1/teams/{team}/export-yaml',
      '/api/v1/applications',
      '/api/v1/applications/{id}',
      '/api/v1/applications/{id}/deployments',
      '/api/v1/applications/{id}/export-yaml',
      '/api/v1/teams/{team}/managed-databases',
      '/api/v1/teams/{team}/object-storage',
    ]) {
      expect(paths).toContain(path);
    }
  });

  it('declares resource_changes in the apply answer, beside the spec fields', async () => {
    const res = await t.request({ url: '/openapi.json' });
    const document = res.json<{
      paths: Record<
        string,
        {
          post: {
            responses: Record<
              string,
              { content: Record<string, { schema: { properties: Record<string, unknown> } }> }
            >;
          };
        }
      >;
    }>();
    const answer = document.paths['/api/v1/infrastructure/apply']!.post.responses['200']!;
    const properties = Object.values(answer.content)[0]!.schema.properties;
    expect(Object.keys(properties)).toEqual(
      expect.arrayContaining(['changes', 'structured_changes', 'resource_changes', 'deployment_id']),
    );
    expect(JSON.stringify(properties.resource_changes)).toContain('"pending"');
  });
});
