// S3 behaviour that Ceph's s3-tests found missing in the documented areas, each with the real SDK.
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketTaggingCommand,
  GetBucketTaggingCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectVersionsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  PutBucketTaggingCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage, outcome as refusal } from './helpers.js';

const bytes = (data: string | ArrayBuffer | ArrayBufferView) =>
  typeof data === 'string'
    ? data
    : ArrayBuffer.isView(data)
      ? Buffer.from(data.buffer, data.byteOffset, data.byteLength)
      : Buffer.from(data);

/** The hash the request signer needs, from node:crypto. */
class NodeSha256 {
  private readonly hash: Hash | Hmac;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(secret));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.hash.update(bytes(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
}

describe.each(DIALECTS)('S3 compatibility on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  const Bucket = 'compat';

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    client = await adminStorage(t.ctx, t.user.team_id, s3.url, Bucket);
  });

  afterAll(async () => {
    client?.destroy();
    await s3?.close();
    await t?.close();
  });

  it('completes an upload again with 200, as S3 does for a retried complete', async () => {
    const Key = 'parts';
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    const { ETag } = await client.send(
      new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: 'only part' }),
    );
    const complete = new CompleteMultipartUploadCommand({
      Bucket,
      Key,
      UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag }] },
    });
    const first = await client.send(complete);
    const again = await client.send(complete);
    expect(again.ETag).toBe(first.ETag);
    const other = new CompleteMultipartUploadCommand({
      Bucket,
      Key,
      UploadId,
      MultipartUpload: { Parts: [{ PartNumber: 1, ETag: '"00000000000000000000000000000000"' }] },
    });
    expect(await refusal(client.send(other))).toBe('404 NoSuchUpload');
  });

  it('applies copy-source preconditions and If-Unmodified-Since', async () => {
    const put = await client.send(new PutObjectCommand({ Bucket, Key: 'src', Body: 'source' }));
    const copy = (extra: object) =>
      refusal(
        client.send(new CopyObjectCommand({ Bucket, Key: 'dst', CopySource: `${Bucket}/src`, ...extra })),
      );
    const past = new Date(Date.now() - 86_400_000);
    const future = new Date(Date.now() + 86_400_000);
    expect(await copy({ CopySourceIfMatch: '"0123"' })).toBe('412 PreconditionFailed');
    expect(await copy({ CopySourceIfNoneMatch: put.ETag })).toBe('412 PreconditionFailed');
    expect(await copy({ CopySourceIfUnmodifiedSince: past })).toBe('412 PreconditionFailed');
    expect(await copy({ CopySourceIfModifiedSince: future })).toBe('412 PreconditionFailed');
    expect(await refusal(client.send(new HeadObjectCommand({ Bucket, Key: 'dst' })))).toBe('404 NotFound');
    expect(await copy({ CopySourceIfMatch: put.ETag })).toBe('accepted');
    expect(
      await refusal(client.send(new GetObjectCommand({ Bucket, Key: 'src', IfUnmodifiedSince: past }))),
    ).toBe('412 PreconditionFailed');
  });

  it('serves partNumber 1 of an object written whole and refuses other parts', async () => {
    await client.send(new PutObjectCommand({ Bucket, Key: 'single', Body: 'body' }));
    const got = await client.send(new GetObjectCommand({ Bucket, Key: 'single', PartNumber: 1 }));
    expect(await got.Body!.transformToString()).toBe('body');
    expect(await refusal(client.send(new GetObjectCommand({ Bucket, Key: 'single', PartNumber: 2 })))).toBe(
      '400 InvalidPart',
    );
    expect(got.PartsCount).toBeUndefined(); // S3 counts parts only of objects uploaded in parts
  });

  it('lists as S3 does: owners, empty tokens, V1 prefixes, bucket pages and null versions', async () => {
    await client.send(new PutObjectCommand({ Bucket, Key: 'a b/c', Body: '1' }));
    const v2 = await client.send(
      new ListObjectsV2Command({ Bucket, FetchOwner: true, ContinuationToken: '', Prefix: 'a b/' }),
    );
    expect(v2.Contents?.map((c) => [c.Key, c.Owner?.ID !== undefined])).toEqual([['a b/c', true]]);
    expect(v2.ContinuationToken).toBe(''); // echoed, even empty
    const v1 = await client.send(new ListObjectsCommand({ Bucket, Prefix: 'a b/', EncodingType: 'url' }));
    expect(v1.Contents?.[0]?.Owner?.ID).toBeDefined();
    expect(v1.Prefix).toBe('a b/');
    const versions = await client.send(new ListObjectVersionsCommand({ Bucket, Prefix: 'a b/' }));
    expect(versions.Versions?.map((v) => [v.Key, v.VersionId, v.IsLatest])).toEqual([
      ['a b/c', 'null', true],
    ]);
    await client.send(new PutObjectCommand({ Bucket, Key: 'x', Body: '1' }));
    const page = await client.send(new ListBucketsCommand({ MaxBuckets: 1 }));
    expect(page.Buckets?.map((b) => b.Name)).toEqual([Bucket]);
  });

  it('answers an out-of-range X-Amz-Expires as S3 does: 403', async () => {
    const url = await getSignedUrl(client, new GetObjectCommand({ Bucket, Key: 'x' }), { expiresIn: 60 });
    const zero = await fetch(url.replace(/X-Amz-Expires=\d+/, 'X-Amz-Expires=0'));
    expect(zero.status).toBe(403);
  });

  it('keeps non-ASCII metadata whether it arrives as UTF-8 (botocore) or latin1 bytes (Node)', async () => {
    // botocore sends the UTF-8 bytes of the value and signs them; Node sends a string's characters as
    // latin1 bytes, so the string that goes out as those bytes is their latin1 reading.
    const asUtf8Bytes = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
    const { hostname, port } = new URL(s3.url);
    const signer = new SignatureV4({
      credentials: await client.config.credentials(),
      region: 'us-east-1',
      service: 's3',
      sha256: NodeSha256,
    });
    const signed = await signer.sign({
      method: 'PUT',
      protocol: 'http:',
      hostname,
      port: Number(port),
      path: `/${Bucket}/meta`,
      query: {},
      headers: {
        host: `${hostname}:${port}`,
        'x-amz-content-sha256': 'UNSIGNED-PAYLOAD',
        'x-amz-meta-utf8': asUtf8Bytes('Hello Worldé'),
        'x-amz-meta-euro': asUtf8Bytes('5 €'),
      },
    });
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const request = http.request(
        { host: hostname, port, method: 'PUT', path: `/${Bucket}/meta`, headers: signed.headers },
        (res) => {
          res.resume();
          resolve(res.statusCode);
        },
      );
      request.on('error', reject);
      // A Buffer body: with a string body Node would send the headers as UTF-8 too.
      request.end(Buffer.from('x'));
    });
    expect(status).toBe(200);
    await client.send(
      new CopyObjectCommand({
        Bucket,
        Key: 'meta2',
        CopySource: `${Bucket}/meta`,
        MetadataDirective: 'REPLACE',
        Metadata: { latin: 'Hello Worldé' },
      }),
    );
    const first = await client.send(new HeadObjectCommand({ Bucket, Key: 'meta' }));
    expect(first.Metadata?.utf8).toBe('Hello Worldé');
    // Beyond latin1, S3 answers RFC 2047 encoded words.
    expect(first.Metadata?.euro).toBe(`=?UTF-8?B?${Buffer.from('5 €').toString('base64')}?=`);
    const second = await client.send(new HeadObjectCommand({ Bucket, Key: 'meta2' }));
    expect(second.Metadata?.latin).toBe('Hello Worldé');
  });

  it('tags buckets, lists tags in key order and refuses bad names and keys as S3 does', async () => {
    expect(await refusal(client.send(new GetBucketTaggingCommand({ Bucket })))).toBe('404 NoSuchTagSet');
    await client.send(
      new PutBucketTaggingCommand({
        Bucket,
        Tagging: {
          TagSet: [
            { Key: 'team', Value: 'web' },
            { Key: 'env', Value: 'prod' },
          ],
        },
      }),
    );
    const tags = await client.send(new GetBucketTaggingCommand({ Bucket }));
    expect(tags.TagSet?.map((t) => t.Key)).toEqual(['env', 'team']);
    await client.send(new DeleteBucketTaggingCommand({ Bucket }));
    expect(await refusal(client.send(new GetBucketTaggingCommand({ Bucket })))).toBe('404 NoSuchTagSet');
    const eleven = Array.from({ length: 11 }, (_, i) => `k${i}=v`).join('&');
    expect(
      await refusal(client.send(new PutObjectCommand({ Bucket, Key: 'tagged', Body: 'x', Tagging: eleven }))),
    ).toBe('400 InvalidTag');
    expect(await refusal(client.send(new CreateBucketCommand({ Bucket: 'foo-.bar' })))).toBe(
      '400 InvalidBucketName',
    );
    expect(await refusal(client.send(new GetObjectCommand({ Bucket, Key: '\xae\x8a-' })))).toBe(
      '400 InvalidURI',
    );
  });

  it('keeps the content encoding a client gave beside aws-chunked', async () => {
    const { Readable } = await import('node:stream');
    await client.send(
      new PutObjectCommand({
        Bucket,
        Key: 'encoded',
        Body: Readable.from([Buffer.from('zipped')]),
        ContentLength: 6,
        ContentEncoding: 'deflate, gzip',
      }),
    );
    const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'encoded' }));
    expect(head.ContentEncoding).toBe('deflate, gzip');
  });
});
