// A bucket of the document may give its canned ACL next to its name (issue 30 item 5):
// `buckets: [logs, {name: assets, acl: public-read}]`. Apply records it, provisioning carries it out,
// export writes each bucket back as it was written, and owners switch a bucket's access from the
// dashboard (PUT …/buckets/:bucket/acl), which export then shows the same way.
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { load } from 'js-yaml';
import { LOOKUP_TTL_MS, type S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { s3Client } from '../object-storage/helpers.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { yaml } from './helpers.js';

describe.each(DIALECTS)('bucket ACLs in the document (%s)', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
  });
  afterAll(async () => {
    await s3?.close();
    await t?.close();
  });

  const doc = (buckets: unknown[]) => ({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'files', team: t.user.team_id },
    spec: {
      object_storage: [
        { name: 'files', zone: 'europe-1', buckets, users: [{ username: 'admin', policies: ['admin'] }] },
      ],
    },
  });
  const apply = (body: unknown) =>
    t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: yaml(body),
    });
  const exportedBuckets = async () => {
    const res = await t.request({
      url: `/api/v1/teams/${t.user.team_id}/export-yaml`,
      headers: t.auth.platform,
    });
    expect(res.statusCode, res.body).toBe(200);
    const exported = load(res.body) as { spec: { object_storage: Array<{ buckets: unknown[] }> } };
    return exported.spec.object_storage[0]!.buckets;
  };
  const setAcl = (headers: Record<string, string>, bucket: string, acl: unknown) =>
    t.request({
      method: 'PUT',
      url: `/api/v1/teams/${t.user.team_id}/object-storage/files/buckets/${bucket}/acl`,
      headers,
      payload: { acl },
    });
  /** An object in each bucket, and whether anyone (no credential at all) may read it. */
  const putEverywhere = async (buckets: string[]) => {
    const admin = (await view()).users.find((u) => u.username === 'admin')!;
    const client = s3Client(s3.url, admin.access_key_id, admin.secret_key!);
    for (const Bucket of buckets)
      await client.send(new PutObjectCommand({ Bucket, Key: 'hello.txt', Body: 'hello' }));
    client.destroy();
  };
  const anonymousRead = async (bucket: string) => (await fetch(`${s3.url}/${bucket}/hello.txt`)).status;
  const view = async () =>
    (
      await t.request({
        url: `/api/v1/teams/${t.user.team_id}/object-storage/files`,
        headers: t.auth.platform,
      })
    ).json<{
      data: {
        buckets: string[];
        bucket_acls: Record<string, string>;
        public_buckets: string[];
        users: Array<{ username: string; access_key_id: string; secret_key: string | null }>;
      };
    }>().data;

  it('refuses an ACL it does not offer, naming the field and the accepted values', async () => {
    const res = await apply(
      doc(['logs', { name: 'assets', acl: 'public-read-write' }, { name: 'x1', mode: 1 }]),
    );
    expect(res.statusCode).toBe(422);
    const errors = res.json<{ errors: Record<string, string[]> }>().errors;
    expect(errors['spec.object_storage.files.buckets.1.acl']?.[0]).toMatch(/one of private, public-read/);
    expect(Object.keys(errors)).toContain('spec.object_storage.files.buckets.2.mode');
  });

  it('applies buckets with and without an ACL and exports each as it was written', async () => {
    const written = ['logs', { name: 'assets', acl: 'public-read' }, { name: 'vault', acl: 'private' }];
    expect((await apply(doc(written))).statusCode).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    expect(await exportedBuckets()).toEqual(written);
    expect(await view()).toMatchObject({
      buckets: ['assets', 'logs', 'vault'],
      bucket_acls: { assets: 'public-read', vault: 'private' },
      public_buckets: ['assets'],
    });
    // Public: anyone reads its objects (no credential); the others answer 403 to that.
    await putEverywhere(['assets', 'logs', 'vault']);
    expect(await anonymousRead('assets')).toBe(200);
    expect(await anonymousRead('logs')).toBe(403);
    expect(await anonymousRead('vault')).toBe(403);
    // Applying the export again changes nothing.
    const again = await apply(doc(await exportedBuckets()));
    expect(again.statusCode, again.body).toBe(200);
    expect(
      again.json<{ structured_changes: { object_storage: unknown[] } }>().structured_changes.object_storage,
    ).toEqual([{ action: 'unchanged', name: 'files' }]);
  });

  it('lets owners, and only them, switch a bucket’s access; export then writes it with its ACL', async () => {
    const member = await t.ctx.identity.createUser({ email: 'm@example.com', team: 'acme', role: 'member' });
    expect((await setAcl(authHeaders(member).platform, 'logs', 'public-read')).statusCode).toBe(403);
    expect((await setAcl(t.auth.platform, 'logs', 'public-read-write')).statusCode).toBe(422);
    expect((await setAcl(t.auth.platform, 'no-such-bucket', 'public-read')).statusCode).toBe(404);

    const res = await setAcl(t.auth.platform, 'logs', 'public-read');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<{ data: { public_buckets: string[] } }>().data.public_buckets.sort()).toEqual([
      'assets',
      'logs',
    ]);
    expect(await exportedBuckets()).toEqual([
      { name: 'logs', acl: 'public-read' },
      { name: 'assets', acl: 'public-read' },
      { name: 'vault', acl: 'private' },
    ]);
    // Carried out at once (and by its job, again); past the endpoint's look-up cache anyone reads logs' objects.
    await t.ctx.services.jobs.runner().runDue();
    await new Promise((r) => setTimeout(r, LOOKUP_TTL_MS + 100));
    expect(await anonymousRead('logs')).toBe(200);
    expect((await view()).public_buckets).toEqual(['assets', 'logs']);
    // And back to private.
    expect((await setAcl(t.auth.platform, 'assets', 'private')).statusCode).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    await new Promise((r) => setTimeout(r, LOOKUP_TTL_MS + 100));
    expect(await anonymousRead('assets')).toBe(403);

    // A document that names a bucket alone no longer sets its ACL; one it stops listing keeps its own.
    expect((await apply(doc(['assets']))).statusCode).toBe(200);
    expect(await exportedBuckets()).toEqual([
      { name: 'logs', acl: 'public-read' },
      'assets',
      { name: 'vault', acl: 'private' },
    ]);
  });
});
