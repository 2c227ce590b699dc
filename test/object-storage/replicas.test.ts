// Two Berth replicas on one PostgreSQL store and one upstream serve the same objects (issue 29 item 1):
// B1 and B2 share the database and the secret key (so each checks the access keys the other made),
// both with BERTH_OBJECT_STORAGE_DRIVER=s3 on the same upstream bucket (a third Berth's, A's, S3
// endpoint), each serving its own S3 endpoint. What one writes, the other reads, completes or deletes.
import { createHash, randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/db/connect.js';
import type { ServedEndpoint } from '../../src/drivers/objectstorage/driver.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { createTestPostgresDatabase, DIALECTS } from '../helpers/store.js';
import { provisionStorage, refusal, s3Client } from './helpers.js';

const MiB = 1024 * 1024;
const md5 = (data: Buffer) => createHash('md5').update(data).digest('hex');
const pattern = (size: number, seed: number) => {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + (i >> 8) + seed) & 0xff;
  return out;
};

describe.runIf(DIALECTS.includes('postgres'))('two replicas on one PostgreSQL store and one upstream', () => {
  let a: TestApp;
  let upstreamEndpoint: ServedEndpoint;
  let upstream: S3Client;
  let b1: TestApp;
  let b2: TestApp;
  const endpoints: ServedEndpoint[] = [];
  let one: S3Client;
  let two: S3Client;
  let drop: () => Promise<void>;
  const Bucket = 'shared';

  const upstreamObjects = async () =>
    (
      (await upstream.send(new ListObjectsV2Command({ Bucket: 'berth-blobs', Prefix: 'objects/' })))
        .Contents ?? []
    ).map((c) => c.Key!);
  const read = async (client: S3Client, Key: string, Range?: string) => {
    const got = await client.send(new GetObjectCommand({ Bucket, Key, ...(Range ? { Range } : {}) }));
    return { body: Buffer.from(await got.Body!.transformToByteArray()), got };
  };

  beforeAll(async () => {
    a = await createTestApp('postgres', { team: 'upstream', env: { BERTH_OBJECT_STORAGE_DRIVER: 'local' } });
    upstreamEndpoint = await a.ctx.services.objectStorage.serveEndpoint();
    const keys = await provisionStorage(a.ctx, a.user.team_id, 'berth-blobs', [
      { username: 'berth', policies: ['admin'] },
    ]);
    upstream = s3Client(upstreamEndpoint.url, keys.berth!.id, keys.berth!.secret);
    const env = {
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: upstreamEndpoint.url,
      BERTH_S3_UPSTREAM_BUCKET: 'berth-blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: keys.berth!.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: keys.berth!.secret,
    };
    // One database, two stores (each replica its own pool), one secret key.
    const database = await createTestPostgresDatabase();
    drop = () => database.drop();
    const masterKey = randomBytes(32);
    b1 = await createTestApp('postgres', {
      env,
      masterKey,
      store: await openStore({ databaseUrl: database.url, poolSize: 5 }),
    });
    b2 = await createTestApp('postgres', {
      env,
      masterKey,
      store: await openStore({ databaseUrl: database.url, poolSize: 5, migrate: false }),
      email: 'second@example.com',
      team: 'second',
    });
    for (const b of [b1, b2]) endpoints.push(await b.ctx.services.objectStorage.serveEndpoint());
    // Provisioned through B1 only: B2 reads the storage, its bucket and its key from the shared store.
    const own = await provisionStorage(b1.ctx, b1.user.team_id, Bucket, [
      { username: 'admin', policies: ['admin'] },
    ]);
    one = s3Client(endpoints[0]!.url, own.admin!.id, own.admin!.secret);
    two = s3Client(endpoints[1]!.url, own.admin!.id, own.admin!.secret);
  });

  afterAll(async () => {
    one?.destroy();
    two?.destroy();
    upstream?.destroy();
    for (const endpoint of endpoints) await endpoint.close();
    await b2?.close();
    await b1?.close();
    await drop?.();
    await upstreamEndpoint?.close();
    await a?.close();
  });

  it('serves through B2 what was PUT through B1, whole and as a range', async () => {
    expect(endpoints[0]!.url).not.toBe(endpoints[1]!.url);
    const body = pattern(300_000, 1);
    const put = await one.send(new PutObjectCommand({ Bucket, Key: 'photo.jpg', Body: body }));
    const whole = await read(two, 'photo.jpg');
    expect(whole.body.equals(body)).toBe(true);
    expect(whole.got.ETag).toBe(put.ETag);
    const ranged = await read(two, 'photo.jpg', 'bytes=1000-1999');
    expect(ranged.got.$metadata.httpStatusCode).toBe(206);
    expect(ranged.body.equals(body.subarray(1000, 2000))).toBe(true);
  });

  it('completes on B2 a multipart upload started (and partly uploaded) on B1', async () => {
    const first = pattern(5 * MiB, 3);
    const second = pattern(MiB + 17, 4);
    const UploadId = (await one.send(new CreateMultipartUploadCommand({ Bucket, Key: 'video.mp4' })))
      .UploadId!;
    const part1 = await one.send(
      new UploadPartCommand({ Bucket, Key: 'video.mp4', UploadId, PartNumber: 1, Body: first }),
    );
    const part2 = await two.send(
      new UploadPartCommand({ Bucket, Key: 'video.mp4', UploadId, PartNumber: 2, Body: second }),
    );
    const done = await two.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: 'video.mp4',
        UploadId,
        MultipartUpload: {
          Parts: [
            { PartNumber: 1, ETag: part1.ETag! },
            { PartNumber: 2, ETag: part2.ETag! },
          ],
        },
      }),
    );
    expect(done.ETag).toMatch(/-2"$/);
    const back = await read(one, 'video.mp4');
    expect(md5(back.body)).toBe(md5(Buffer.concat([first, second])));
    // The parts' blobs went with the completion, whichever replica uploaded them.
    expect((await upstreamObjects()).filter((key) => key.startsWith('objects/parts/'))).toEqual([]);
  });

  it('has an object deleted through B2 gone through B1, and upstream', async () => {
    const before = await upstreamObjects();
    await two.send(new DeleteObjectCommand({ Bucket, Key: 'photo.jpg' }));
    expect((await refusal(read(one, 'photo.jpg'))).code).toBe('NoSuchKey');
    expect((await one.send(new ListObjectsV2Command({ Bucket }))).Contents?.map((c) => c.Key)).toEqual([
      'video.mp4',
    ]);
    expect(await upstreamObjects()).toHaveLength(before.length - 1);
  });
});
