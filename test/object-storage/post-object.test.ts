// Browser form uploads (POST Object) with a policy signed as AWS documents it (SigV4 over the base64
// policy), built here by hand: the conditions, the size range, the success answers and every refusal.
import { createHash } from 'node:crypto';
import {
  GetObjectAclCommand,
  GetObjectCommand,
  HeadObjectCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { presignedPost, provisionStorage, s3Client } from './helpers.js';

describe.each(DIALECTS)('POST Object on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  const keys: Record<string, { id: string; secret: string }> = {};
  const Bucket = 'forms';

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    Object.assign(
      keys,
      await provisionStorage(t.ctx, t.user.team_id, Bucket, [
        { username: 'admin', policies: ['admin'] },
        { username: 'reader', policies: ['read'] },
      ]),
    );
    client = s3Client(s3.url, keys.admin!.id, keys.admin!.secret);
  });

  afterAll(async () => {
    client?.destroy();
    await s3?.close();
    await t?.close();
  });

  const conditions = [
    ['starts-with', '$key', 'user/42/'],
    ['starts-with', '$Content-Type', 'image/'],
    ['content-length-range', 1, 100],
    { success_action_status: '201' },
  ];

  async function post(fields: Record<string, string>, body: string, filename = 'photo.png') {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.append(k, v);
    form.append('file', new Blob([body]), filename);
    const res = await fetch(`${s3.url}/${Bucket}`, { method: 'POST', body: form, redirect: 'manual' });
    return { status: res.status, headers: res.headers, body: await res.text() };
  }

  const missing = async (Key: string) => {
    try {
      await client.send(new HeadObjectCommand({ Bucket, Key }));
    } catch (error) {
      return error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404;
    }
    return false;
  };

  it('stores the file under the policy, with ${filename}, and answers as success_action_status asks', async () => {
    const fields = presignedPost(keys.admin!, Bucket, conditions);
    const res = await post(
      { ...fields, key: 'user/42/${filename}', 'Content-Type': 'image/png', success_action_status: '201' },
      'PNGDATA',
    );
    expect(res.status).toBe(201);
    expect(res.body).toContain('<Key>user/42/photo.png</Key>');
    expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{32}"$/);
    const got = await client.send(new GetObjectCommand({ Bucket, Key: 'user/42/photo.png' }));
    expect(got.ContentType).toBe('image/png');
    expect(await got.Body!.transformToString()).toBe('PNGDATA');

    const redirect = presignedPost(keys.admin!, Bucket, [
      ['starts-with', '$key', 'user/42/'],
      { success_action_redirect: 'https://app.example/done' },
    ]);
    const moved = await post(
      { ...redirect, key: 'user/42/r.txt', success_action_redirect: 'https://app.example/done' },
      'r',
    );
    expect(moved.status).toBe(303);
    const location = new URL(moved.headers.get('location')!);
    expect(location.origin + location.pathname).toBe('https://app.example/done');
    expect(location.searchParams.get('key')).toBe('user/42/r.txt');
    expect(location.searchParams.get('bucket')).toBe(Bucket);
  });

  it('refuses what the policy does not allow, a forged or expired policy, and a key without PutObject', async () => {
    const fields = presignedPost(keys.admin!, Bucket, conditions);
    const good = {
      ...fields,
      key: 'user/42/a.png',
      'Content-Type': 'image/png',
      success_action_status: '201',
    };

    const tooBig = await post(good, 'x'.repeat(101));
    expect(tooBig.status).toBe(400);
    expect(tooBig.body).toContain('<Code>EntityTooLarge</Code>');
    const empty = await post(good, '');
    expect(empty.body).toContain('<Code>EntityTooSmall</Code>');
    expect(await missing('user/42/a.png')).toBe(true);

    const outside = await post({ ...good, key: 'user/43/a.png' }, 'x');
    expect(outside.status).toBe(403);
    expect(outside.body).toContain('Policy Condition failed');
    const wrongType = await post({ ...good, 'Content-Type': 'text/html' }, 'x');
    expect(wrongType.status).toBe(403);
    const extra = await post({ ...good, 'x-amz-meta-owner': 'someone' }, 'x');
    expect(extra.status).toBe(403);
    expect(extra.body).toContain('Extra input fields: x-amz-meta-owner');

    // A policy the browser rewrote no longer matches its signature.
    const forged = Buffer.from(
      Buffer.from(fields.policy!, 'base64').toString().replace('user/42/', 'user/'),
    ).toString('base64');
    const tampered = await post({ ...good, policy: forged, key: 'user/43/a.png' }, 'x');
    expect(tampered.status).toBe(403);
    expect(tampered.body).toContain('<Code>SignatureDoesNotMatch</Code>');

    const expired = presignedPost(keys.admin!, Bucket, conditions, { expiresInMs: -1000 });
    const late = await post(
      { ...expired, key: 'user/42/a.png', 'Content-Type': 'image/png', success_action_status: '201' },
      'x',
    );
    expect(late.status).toBe(403);
    expect(late.body).toContain('Policy expired');

    // The policy is signed by a key that may only read: the upload is refused.
    const reader = presignedPost(keys.reader!, Bucket, conditions);
    const denied = await post(
      { ...reader, key: 'user/42/a.png', 'Content-Type': 'image/png', success_action_status: '201' },
      'x',
    );
    expect(denied.status).toBe(403);
    expect(denied.body).toContain('<Code>AccessDenied</Code>');
    expect(await missing('user/42/a.png')).toBe(true);
  });

  it('verifies a checksum field and keeps the checksum, and refuses a file that does not match it', async () => {
    const body = 'checked bytes';
    const sha256 = createHash('sha256').update(body).digest('base64');
    const fields = presignedPost(keys.admin!, Bucket, [['starts-with', '$key', 'sums/']]);
    const ok = await post({ ...fields, key: 'sums/a', 'x-amz-checksum-sha256': sha256 }, body);
    expect(ok.status).toBe(204);
    const head = await client.send(new HeadObjectCommand({ Bucket, Key: 'sums/a', ChecksumMode: 'ENABLED' }));
    expect(head.ChecksumSHA256).toBe(sha256);

    const wrong = await post({ ...fields, key: 'sums/b', 'x-amz-checksum-sha256': sha256 }, 'other bytes');
    expect(wrong.status).toBe(400);
    expect(wrong.body).toContain('<Code>BadDigest</Code>');
    expect(await missing('sums/b')).toBe(true);

    // The algorithm alone: computed and kept; an algorithm the field does not match is refused.
    const computed = await post({ ...fields, key: 'sums/c', 'x-amz-checksum-algorithm': 'SHA256' }, body);
    expect(computed.status).toBe(204);
    const again = await client.send(
      new HeadObjectCommand({ Bucket, Key: 'sums/c', ChecksumMode: 'ENABLED' }),
    );
    expect(again.ChecksumSHA256).toBe(sha256);
    const mismatch = await post(
      { ...fields, key: 'sums/d', 'x-amz-checksum-algorithm': 'CRC32', 'x-amz-checksum-sha256': sha256 },
      body,
    );
    expect(mismatch.status).toBe(400);
    expect(await missing('sums/d')).toBe(true);
  });

  it('gives the object the canned ACL of the form, as x-amz-acl on a PUT', async () => {
    const fields = presignedPost(keys.admin!, Bucket, [
      ['starts-with', '$key', 'acl/'],
      { acl: 'public-read' },
    ]);
    expect((await post({ ...fields, key: 'acl/a', acl: 'public-read' }, 'a')).status).toBe(204);
    const acl = await client.send(new GetObjectAclCommand({ Bucket, Key: 'acl/a' }));
    expect(acl.Grants?.map((g) => g.Permission)).toEqual(['READ', 'FULL_CONTROL']);
    expect((await fetch(`${s3.url}/${Bucket}/acl/a`)).status).toBe(200);
  });
});
