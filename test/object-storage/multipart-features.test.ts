// Checksums as current SDKs send them, parts of multipart objects (partNumber, GetObjectAttributes),
// ListMultipartUploads and UploadPartCopy, each through the real SDK on both store dialects.
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectAttributesCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
  type ChecksumAlgorithm,
  type CompletedPart,
} from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage, outcome as refusal } from './helpers.js';

const MiB = 1024 * 1024;
const crc32 = (data: Buffer) => {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(zlib.crc32(data) >>> 0);
  return out.toString('base64');
};
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('base64');

describe.each(DIALECTS)('multipart features and checksums on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  const Bucket = 'features';
  const parts = [Buffer.alloc(5 * MiB, 'A'), Buffer.alloc(5 * MiB, 'B'), Buffer.alloc(MiB, 'C')];

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

  /** Uploads `parts` under `Key` with the given checksum settings; returns the completion's answer. */
  async function upload(Key: string, algorithm?: ChecksumAlgorithm, type?: 'COMPOSITE' | 'FULL_OBJECT') {
    const { UploadId, ChecksumAlgorithm: echoed } = await client.send(
      new CreateMultipartUploadCommand({ Bucket, Key, ChecksumAlgorithm: algorithm, ChecksumType: type }),
    );
    expect(echoed).toBe(algorithm);
    const done: CompletedPart[] = [];
    for (const [i, Body] of parts.entries()) {
      const sent = await client.send(
        new UploadPartCommand({
          Bucket,
          Key,
          UploadId,
          PartNumber: i + 1,
          Body,
          ChecksumAlgorithm: algorithm,
        }),
      );
      done.push({
        PartNumber: i + 1,
        ETag: sent.ETag,
        ChecksumCRC32: sent.ChecksumCRC32,
        ChecksumSHA256: sent.ChecksumSHA256,
      });
    }
    return client.send(
      new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: done } }),
    );
  }

  it('answers the CRC32 the SDK sends by default on PUT, and on GET only when asked', async () => {
    const Body = Buffer.from('checksummed body');
    const put = await client.send(new PutObjectCommand({ Bucket, Key: 'crc', Body }));
    expect(put.ChecksumCRC32).toBe(crc32(Body));
    const plain = await client.send(new HeadObjectCommand({ Bucket, Key: 'crc' }));
    expect(plain.ChecksumCRC32).toBeUndefined();
    const asked = await client.send(new HeadObjectCommand({ Bucket, Key: 'crc', ChecksumMode: 'ENABLED' }));
    expect([asked.ChecksumCRC32, asked.ChecksumType]).toEqual([crc32(Body), 'FULL_OBJECT']);
    // A streamed body: the checksum arrives in an aws-chunked trailer.
    const { Readable } = await import('node:stream');
    const streamed = await client.send(
      new PutObjectCommand({
        Bucket,
        Key: 'crc-stream',
        Body: Readable.from([Body]),
        ContentLength: Body.length,
        ChecksumAlgorithm: 'CRC32C',
      }),
    );
    expect(streamed.ChecksumCRC32C).toMatch(/^[A-Za-z0-9+/]{6}==$/);
    const got = await client.send(
      new GetObjectCommand({ Bucket, Key: 'crc-stream', ChecksumMode: 'ENABLED' }),
    );
    expect(await got.Body!.transformToString()).toBe('checksummed body'); // the SDK validated it too
    expect(got.ChecksumCRC32C).toBe(streamed.ChecksumCRC32C);
  });

  it('refuses a body whose checksum does not match, and stores nothing', async () => {
    const wrong = refusal(
      client.send(
        new PutObjectCommand({
          Bucket,
          Key: 'bad-sum',
          Body: 'data',
          ChecksumSHA256: sha256(Buffer.from('other')),
        }),
      ),
    );
    expect(await wrong).toBe('400 BadDigest');
    expect(await refusal(client.send(new HeadObjectCommand({ Bucket, Key: 'bad-sum' })))).toBe(
      '404 NotFound',
    );
  });

  it('keeps part layout: GET and HEAD by partNumber with the parts count, and the range past the end refused', async () => {
    const done = await upload('layout');
    for (const [i, body] of parts.entries()) {
      const got = await client.send(new GetObjectCommand({ Bucket, Key: 'layout', PartNumber: i + 1 }));
      expect(got.PartsCount).toBe(3);
      expect(got.ETag).toBe(done.ETag);
      expect(got.ContentLength).toBe(body.length);
      expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    }
    const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'layout', PartNumber: 2 }));
    expect([head.PartsCount, head.ContentLength, head.ContentRange]).toEqual([
      3,
      5 * MiB,
      `bytes ${5 * MiB}-${10 * MiB - 1}/${11 * MiB}`,
    ]);
    expect(await refusal(client.send(new GetObjectCommand({ Bucket, Key: 'layout', PartNumber: 4 })))).toBe(
      '400 InvalidPart',
    );
  });

  it('computes composite and full-object checksums of multipart uploads and answers each part’s', async () => {
    const composite = await upload('composite', 'SHA256');
    const expected = createHash('sha256')
      .update(Buffer.concat(parts.map((p) => createHash('sha256').update(p).digest())))
      .digest('base64');
    expect([composite.ChecksumSHA256, composite.ChecksumType]).toEqual([`${expected}-3`, 'COMPOSITE']);
    const full = await upload('full', 'CRC32', 'FULL_OBJECT');
    expect([full.ChecksumCRC32, full.ChecksumType]).toEqual([crc32(Buffer.concat(parts)), 'FULL_OBJECT']);
    const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'full', ChecksumMode: 'ENABLED' }));
    expect(head.ChecksumCRC32).toBe(full.ChecksumCRC32);
    const part = await client.send(
      new GetObjectCommand({ Bucket, Key: 'full', PartNumber: 2, ChecksumMode: 'ENABLED' }),
    );
    expect(part.ChecksumCRC32).toBe(crc32(parts[1]!));
    await part.Body!.transformToString();
    const attributes = await client.send(
      new GetObjectAttributesCommand({
        Bucket,
        Key: 'composite',
        ObjectAttributes: ['ETag', 'Checksum', 'ObjectParts', 'ObjectSize'],
      }),
    );
    expect(attributes.ObjectSize).toBe(11 * MiB);
    expect(attributes.Checksum?.ChecksumSHA256).toBe(`${expected}-3`);
    expect(attributes.ObjectParts?.TotalPartsCount).toBe(3);
    expect(attributes.ObjectParts?.Parts?.map((p) => [p.PartNumber, p.Size, p.ChecksumSHA256])).toEqual(
      parts.map((p, i) => [i + 1, p.length, sha256(p)]),
    );
  });

  it('refuses a completion whose part checksum differs from the part received', async () => {
    const Key = 'mismatch';
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket, Key, ChecksumAlgorithm: 'SHA256' }),
    );
    const sent = await client.send(
      new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: 1, Body: 'x', ChecksumAlgorithm: 'SHA256' }),
    );
    const complete = (ChecksumSHA256?: string) =>
      refusal(
        client.send(
          new CompleteMultipartUploadCommand({
            Bucket,
            Key,
            UploadId,
            MultipartUpload: { Parts: [{ PartNumber: 1, ETag: sent.ETag, ChecksumSHA256 }] },
          }),
        ),
      );
    expect(await complete(sha256(Buffer.from('y')))).toBe('400 InvalidPart');
    // The object's checksum the client declares on completion is checked against the one computed.
    const composite = `${createHash('sha256').update(Buffer.from(sent.ChecksumSHA256!, 'base64')).digest('base64')}-1`;
    const declare = (ChecksumSHA256: string) =>
      refusal(
        client.send(
          new CompleteMultipartUploadCommand({
            Bucket,
            Key,
            UploadId,
            ChecksumSHA256,
            MultipartUpload: {
              Parts: [{ PartNumber: 1, ETag: sent.ETag, ChecksumSHA256: sent.ChecksumSHA256 }],
            },
          }),
        ),
      );
    expect(await declare(`${sha256(Buffer.from('z'))}-1`)).toBe('400 BadDigest');
    expect(await declare(composite)).toBe('accepted');
    expect(await complete(undefined)).toBe('accepted'); // a retried completion answers 200 again
  });

  it('lists uploads in progress by key, with prefixes, delimiters and pages', async () => {
    const started: string[] = [];
    for (const Key of ['dir/a', 'dir/b', 'dir/sub/c', 'top']) {
      const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key }));
      started.push(UploadId!);
    }
    const all = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: 'dir/' }));
    expect(all.Uploads?.map((u) => u.Key)).toEqual(['dir/a', 'dir/b', 'dir/sub/c']);
    const rolled = await client.send(
      new ListMultipartUploadsCommand({ Bucket, Prefix: 'dir/', Delimiter: '/' }),
    );
    expect(rolled.Uploads?.map((u) => u.Key)).toEqual(['dir/a', 'dir/b']);
    expect(rolled.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['dir/sub/']);
    const first = await client.send(
      new ListMultipartUploadsCommand({ Bucket, Prefix: 'dir/', MaxUploads: 2 }),
    );
    expect([first.IsTruncated, first.NextKeyMarker]).toEqual([true, 'dir/b']);
    const rest = await client.send(
      new ListMultipartUploadsCommand({
        Bucket,
        Prefix: 'dir/',
        KeyMarker: first.NextKeyMarker,
        UploadIdMarker: first.NextUploadIdMarker,
      }),
    );
    expect(rest.Uploads?.map((u) => u.Key)).toEqual(['dir/sub/c']);
    for (const [i, Key] of ['dir/a', 'dir/b', 'dir/sub/c', 'top'].entries())
      await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId: started[i] }));
    const none = await client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: 'dir/' }));
    expect(none.Uploads ?? []).toEqual([]);
  });

  it('copies parts from existing objects, whole or by range, and refuses ranges past the end', async () => {
    const source = Buffer.concat([Buffer.alloc(5 * MiB, 'S'), Buffer.from('tail')]);
    await client.send(new PutObjectCommand({ Bucket, Key: 'copy-source', Body: source }));
    const Key = 'copied';
    const { UploadId } = await client.send(
      new CreateMultipartUploadCommand({ Bucket, Key, ChecksumAlgorithm: 'CRC32' }),
    );
    const CopySource = `${Bucket}/copy-source`;
    const whole = await client.send(
      new UploadPartCopyCommand({ Bucket, Key, UploadId, PartNumber: 1, CopySource }),
    );
    const range = await client.send(
      new UploadPartCopyCommand({
        Bucket,
        Key,
        UploadId,
        PartNumber: 2,
        CopySource,
        CopySourceRange: `bytes=${5 * MiB}-${5 * MiB + 3}`,
      }),
    );
    expect(range.CopyPartResult?.ChecksumCRC32).toBe(crc32(Buffer.from('tail')));
    expect(
      await refusal(
        client.send(
          new UploadPartCopyCommand({
            Bucket,
            Key,
            UploadId,
            PartNumber: 3,
            CopySource,
            CopySourceRange: 'bytes=0-99999999',
          }),
        ),
      ),
    ).toBe('416 InvalidRange');
    expect(
      await refusal(
        client.send(
          new UploadPartCopyCommand({
            Bucket,
            Key,
            UploadId,
            PartNumber: 3,
            CopySource,
            CopySourceRange: 'bytes=0-',
          }),
        ),
      ),
    ).toBe('400 InvalidArgument');
    const listed = await client.send(new ListPartsCommand({ Bucket, Key, UploadId }));
    expect(listed.Parts?.map((p) => p.Size)).toEqual([source.length, 4]);
    await client.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key,
        UploadId,
        MultipartUpload: {
          Parts: [
            {
              PartNumber: 1,
              ETag: whole.CopyPartResult?.ETag,
              ChecksumCRC32: whole.CopyPartResult?.ChecksumCRC32,
            },
            {
              PartNumber: 2,
              ETag: range.CopyPartResult?.ETag,
              ChecksumCRC32: range.CopyPartResult?.ChecksumCRC32,
            },
          ],
        },
      }),
    );
    const got = await client.send(new GetObjectCommand({ Bucket, Key }));
    const bytes = Buffer.from(await got.Body!.transformToByteArray());
    expect(bytes.equals(Buffer.concat([source, Buffer.from('tail')]))).toBe(true);
  });
});
