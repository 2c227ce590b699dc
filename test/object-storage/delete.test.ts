// Deleting an object storage (team owners): its buckets, objects, uploads and keys go, rows and files;
// its key then opens nothing. Apply never deletes one.
import { CreateMultipartUploadCommand, GetObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOOKUP_TTL_MS, type S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage, refusal, storedBlobs } from './helpers.js';

describe.each(DIALECTS)('deleting an object storage on %s', (dialect) => {
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

  it('removes buckets, objects, uploads and keys with their files, for owners only', async () => {
    const Bucket = 'doomed-bucket';
    const client = await adminStorage(t.ctx, t.user.team_id, s3.url, Bucket);
    await client.send(new PutObjectCommand({ Bucket, Key: 'a.txt', Body: 'hello' }));
    await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'big.bin' }));
    expect((await storedBlobs(t.ctx, 'data')).length).toBeGreaterThan(0);

    const member = await t.ctx.identity.createUser({ email: 'm@example.com', team: 'acme', role: 'member' });
    const del = (headers: Record<string, string>) =>
      t.request({
        method: 'DELETE',
        url: `/api/v1/teams/${t.user.team_id}/object-storage/main`,
        headers,
      });
    expect((await del(authHeaders(member).platform)).statusCode).toBe(403);
    const removed = await del(t.auth.platform);
    expect(removed.statusCode).toBe(200);
    expect(removed.json()).toMatchObject({ data: { name: 'main', deleted: true } });
    expect((await del(t.auth.platform)).statusCode).toBe(404);

    for (const table of [
      'object_storages',
      's3_buckets',
      's3_objects',
      's3_uploads',
      's3_access_keys',
    ] as const) {
      expect(await t.ctx.db.selectFrom(table).select('id').execute(), table).toEqual([]);
    }
    expect(await storedBlobs(t.ctx, 'data')).toEqual([]);
    // Past the look-up cache, the storage's key opens nothing.
    await new Promise((r) => setTimeout(r, LOOKUP_TTL_MS + 100));
    expect(await refusal(client.send(new GetObjectCommand({ Bucket, Key: 'a.txt' })))).toMatchObject({
      code: 'InvalidAccessKeyId',
    });
  });
});
