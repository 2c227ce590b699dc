// Conditional writes with the real AWS SDK: If-None-Match: * and If-Match on PutObject and
// CompleteMultipartUpload, checked again when the row is written so racing writers cannot both pass.
import { randomBytes } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage, putAfterContinue, refusal } from './helpers.js';

describe.each(DIALECTS)('conditional writes on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  const Bucket = 'cond';

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

  const read = async (Key: string) =>
    (await client.send(new GetObjectCommand({ Bucket, Key }))).Body!.transformToString();

  it('If-None-Match: * creates once and refuses to overwrite with 412', async () => {
    const first = await client.send(
      new PutObjectCommand({ Bucket, Key: 'once', Body: 'first', IfNoneMatch: '*' }),
    );
    expect(first.ETag).toBeDefined();
    expect(
      await refusal(
        client.send(new PutObjectCommand({ Bucket, Key: 'once', Body: 'second', IfNoneMatch: '*' })),
      ),
    ).toEqual({ code: 'PreconditionFailed', status: 412 });
    expect(await read('once')).toBe('first');
    // An ETag there means "not this version": refused when it is the current one, written otherwise.
    expect(
      await refusal(
        client.send(new PutObjectCommand({ Bucket, Key: 'once', Body: 'x', IfNoneMatch: first.ETag })),
      ),
    ).toEqual({ code: 'PreconditionFailed', status: 412 });
    expect(await read('once')).toBe('first');
    await client.send(new PutObjectCommand({ Bucket, Key: 'once', Body: 'second', IfNoneMatch: '"abc"' }));
    expect(await read('once')).toBe('second');
  });

  it('If-Match replaces only the version the client read (412 otherwise, 404 when missing)', async () => {
    const v1 = await client.send(new PutObjectCommand({ Bucket, Key: 'doc', Body: 'v1' }));
    const v2 = await client.send(new PutObjectCommand({ Bucket, Key: 'doc', Body: 'v2', IfMatch: v1.ETag }));
    expect(await read('doc')).toBe('v2');
    expect(
      await refusal(client.send(new PutObjectCommand({ Bucket, Key: 'doc', Body: 'v3', IfMatch: v1.ETag }))),
    ).toEqual({ code: 'PreconditionFailed', status: 412 });
    expect(await read('doc')).toBe('v2');
    await client.send(new PutObjectCommand({ Bucket, Key: 'doc', Body: 'v3', IfMatch: v2.ETag }));
    expect(await read('doc')).toBe('v3');
    expect(
      await refusal(
        client.send(new PutObjectCommand({ Bucket, Key: 'absent', Body: 'x', IfMatch: v2.ETag })),
      ),
    ).toEqual({ code: 'NoSuchKey', status: 404 });
  });

  it('checks the condition again when writing: a writer that raced in after the early check wins', async () => {
    const url = await getSignedUrl(client, new PutObjectCommand({ Bucket, Key: 'race' }), { expiresIn: 300 });
    // The early check passes (no object yet); then another writer creates the key; then the body goes.
    const late = await putAfterContinue(url, { 'if-none-match': '*' }, Buffer.from('late'), async () => {
      await client.send(new PutObjectCommand({ Bucket, Key: 'race', Body: 'early' }));
    });
    expect(late.status).toBe(412);
    expect(late.body).toContain('<Code>PreconditionFailed</Code>');
    expect(await read('race')).toBe('early');

    // If-Match matched early, but the object was deleted before the write: a conflict to retry.
    const { ETag } = await client.send(new PutObjectCommand({ Bucket, Key: 'gone', Body: 'v1' }));
    const url2 = await getSignedUrl(client, new PutObjectCommand({ Bucket, Key: 'gone' }), {
      expiresIn: 300,
    });
    const conflict = await putAfterContinue(url2, { 'if-match': ETag! }, Buffer.from('v2'), async () => {
      await client.send(new DeleteObjectCommand({ Bucket, Key: 'gone' }));
    });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toContain('<Code>ConditionalRequestConflict</Code>');
    expect(await refusal(read('gone'))).toEqual({ code: 'NoSuchKey', status: 404 });
  });

  it('CompleteMultipartUpload honours If-None-Match and If-Match and keeps the upload when refused', async () => {
    const existing = await client.send(new PutObjectCommand({ Bucket, Key: 'big', Body: 'old' }));
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'big' }));
    const body = randomBytes(1000);
    const part = await client.send(
      new UploadPartCommand({ Bucket, Key: 'big', UploadId, PartNumber: 1, Body: body }),
    );
    const complete = (condition: { IfNoneMatch?: string; IfMatch?: string }) =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key: 'big',
          UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
          ...condition,
        }),
      );
    expect(await refusal(complete({ IfNoneMatch: '*' }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(complete({ IfMatch: '"0123"' }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await refusal(complete({ IfNoneMatch: existing.ETag }))).toEqual({
      code: 'PreconditionFailed',
      status: 412,
    });
    expect(await read('big')).toBe('old');
    const parts = await client.send(new ListPartsCommand({ Bucket, Key: 'big', UploadId }));
    expect(parts.Parts?.map((p) => p.PartNumber)).toEqual([1]);
    await complete({ IfMatch: existing.ETag });
    const got = await client.send(new GetObjectCommand({ Bucket, Key: 'big' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    // If-Match on a key with no object: 404 NoSuchKey, as S3 answers; If-None-Match of another ETag passes.
    const other = await client.send(new CreateMultipartUploadCommand({ Bucket, Key: 'absent-big' }));
    const otherPart = await client.send(
      new UploadPartCommand({
        Bucket,
        Key: 'absent-big',
        UploadId: other.UploadId,
        PartNumber: 1,
        Body: 'x',
      }),
    );
    const completeOther = (condition: { IfNoneMatch?: string; IfMatch?: string }) =>
      client.send(
        new CompleteMultipartUploadCommand({
          Bucket,
          Key: 'absent-big',
          UploadId: other.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: otherPart.ETag }] },
          ...condition,
        }),
      );
    expect(await refusal(completeOther({ IfMatch: existing.ETag }))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    await completeOther({ IfNoneMatch: existing.ETag });
    expect(await read('absent-big')).toBe('x');
  });
});
