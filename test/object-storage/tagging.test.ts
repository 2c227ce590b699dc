// Object tags with the real AWS SDK: the tagging API, x-amz-tagging on PUT, copy and multipart
// create, x-amz-tagging-count on GET/HEAD, overwrites clearing tags, and S3's limits.
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectTaggingCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { provisionStorage, refusal, s3Client } from './helpers.js';

describe.each(DIALECTS)('object tagging on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  let reader: S3Client;
  const Bucket = 'tagged';

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    const keys = await provisionStorage(t.ctx, t.user.team_id, Bucket, [
      { username: 'admin', policies: ['admin'] },
      { username: 'reader', policies: ['read'] },
    ]);
    client = s3Client(s3.url, keys.admin!.id, keys.admin!.secret);
    reader = s3Client(s3.url, keys.reader!.id, keys.reader!.secret);
  });

  afterAll(async () => {
    client?.destroy();
    reader?.destroy();
    await s3?.close();
    await t?.close();
  });

  const tagsOf = async (Key: string) =>
    (await client.send(new GetObjectTaggingCommand({ Bucket, Key }))).TagSet?.map((x) => [x.Key, x.Value]);

  it('sets tags on PUT, counts them on GET/HEAD, replaces and deletes them, and an overwrite clears them', async () => {
    await client.send(
      new PutObjectCommand({ Bucket, Key: 'a', Body: 'a', Tagging: 'project=berth&stage=dev%20one' }),
    );
    expect(await tagsOf('a')).toEqual([
      ['project', 'berth'],
      ['stage', 'dev one'],
    ]);
    expect((await client.send(new HeadObjectCommand({ Bucket, Key: 'a' }))).$metadata.httpStatusCode).toBe(
      200,
    );
    const got = await client.send(new GetObjectCommand({ Bucket, Key: 'a' }));
    expect(got.TagCount).toBe(2);
    await got.Body!.transformToString();

    await client.send(
      new PutObjectTaggingCommand({ Bucket, Key: 'a', Tagging: { TagSet: [{ Key: 'only', Value: 'one' }] } }),
    );
    expect(await tagsOf('a')).toEqual([['only', 'one']]);
    expect((await client.send(new HeadObjectCommand({ Bucket, Key: 'a' }))).TagCount).toBe(1);
    await client.send(new DeleteObjectTaggingCommand({ Bucket, Key: 'a' }));
    expect(await tagsOf('a')).toEqual([]);
    expect((await client.send(new HeadObjectCommand({ Bucket, Key: 'a' }))).TagCount).toBeUndefined();

    await client.send(
      new PutObjectTaggingCommand({ Bucket, Key: 'a', Tagging: { TagSet: [{ Key: 'k', Value: 'v' }] } }),
    );
    await client.send(new PutObjectCommand({ Bucket, Key: 'a', Body: 'again' }));
    expect(await tagsOf('a')).toEqual([]);
  });

  it('copies tags (or replaces them) and gives a completed multipart upload the tags it was created with', async () => {
    await client.send(new PutObjectCommand({ Bucket, Key: 'src', Body: 's', Tagging: 'a=1' }));
    await client.send(new CopyObjectCommand({ Bucket, Key: 'copy', CopySource: `${Bucket}/src` }));
    expect(await tagsOf('copy')).toEqual([['a', '1']]);
    await client.send(
      new CopyObjectCommand({
        Bucket,
        Key: 'copy2',
        CopySource: `${Bucket}/src`,
        TaggingDirective: 'REPLACE',
        Tagging: 'b=2',
      }),
    );
    expect(await tagsOf('copy2')).toEqual([['b', '2']]);

    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket, Key: 'mp', Tagging: 'm=p' }),
    );
    const part = await client.send(
      new UploadPartCommand({ Bucket, Key: 'mp', UploadId, PartNumber: 1, Body: 'x' }),
    );
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: 'mp',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
      }),
    );
    expect(await tagsOf('mp')).toEqual([['m', 'p']]);
  });

  it("enforces S3's limits and the tagging permissions", async () => {
    await client.send(new PutObjectCommand({ Bucket, Key: 'l', Body: 'l' }));
    const put = (TagSet: Array<{ Key: string; Value: string }>) =>
      refusal(client.send(new PutObjectTaggingCommand({ Bucket, Key: 'l', Tagging: { TagSet } })));
    const eleven = Array.from({ length: 11 }, (_, i) => ({ Key: `k${i}`, Value: 'v' }));
    expect(await put(eleven)).toEqual({ code: 'InvalidTag', status: 400 });
    expect(await put([{ Key: 'k'.repeat(129), Value: 'v' }])).toEqual({ code: 'InvalidTag', status: 400 });
    expect(await put([{ Key: 'k', Value: 'v'.repeat(257) }])).toEqual({ code: 'InvalidTag', status: 400 });
    expect(await put([{ Key: 'aws:x', Value: 'v' }])).toEqual({ code: 'InvalidTag', status: 400 });
    expect(
      await put([
        { Key: 'd', Value: '1' },
        { Key: 'd', Value: '2' },
      ]),
    ).toEqual({ code: 'InvalidTag', status: 400 });
    // Exactly at the limits is fine.
    const most = eleven.slice(0, 10).map((x) => ({ Key: x.Key.padEnd(128, 'x'), Value: 'v'.repeat(256) }));
    await client.send(new PutObjectTaggingCommand({ Bucket, Key: 'l', Tagging: { TagSet: most } }));
    expect(await tagsOf('l')).toHaveLength(10);
    expect(
      await refusal(
        client.send(new PutObjectCommand({ Bucket, Key: 'h', Body: 'h', Tagging: 'bad<tag>=1' })),
      ),
    ).toEqual({ code: 'InvalidTag', status: 400 });
    expect(
      await refusal(
        client.send(new PutObjectTaggingCommand({ Bucket, Key: 'none', Tagging: { TagSet: [] } })),
      ),
    ).toEqual({ code: 'NoSuchKey', status: 404 });
    expect(
      await refusal(reader.send(new PutObjectTaggingCommand({ Bucket, Key: 'l', Tagging: { TagSet: [] } }))),
    ).toEqual({ code: 'AccessDenied', status: 403 });
  });
});
