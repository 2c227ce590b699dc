// Every sub-resource and header of the S3 API reference that Berth does not implement is refused
// before it touches data: the object and the bucket read the same afterwards.
import {
  DeleteObjectCommand,
  DeleteObjectTaggingCommand,
  GetBucketLifecycleConfigurationCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  PutObjectLegalHoldCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage } from './helpers.js';

const SUBRESOURCES = [
  'accelerate',
  'acl',
  'analytics',
  'attributes',
  'cors',
  'encryption',
  'intelligent-tiering',
  'inventory',
  'legal-hold',
  'lifecycle',
  'logging',
  'metadataConfiguration',
  'metadataTable',
  'metrics',
  'notification',
  'object-lock',
  'ownershipControls',
  'policy',
  'policyStatus',
  'publicAccessBlock',
  'renameObject',
  'replication',
  'requestPayment',
  'restore',
  'retention',
  'select',
  'session',
  'tagging',
  'torrent',
  'uploads',
  'versioning',
  'versions',
  'website',
  'some-future-operation',
];

/** Sub-resource requests Berth implements (CreateMultipartUpload, ListObjectVersions). */
const IMPLEMENTED = new Set([
  `POST doc.txt?uploads`,
  'GET /?versions',
  // ListMultipartUploads and GetObjectAttributes (buckets.ts, objects.ts): reads.
  'GET /?uploads',
  'GET /?tagging',
  'PUT /?tagging',
  'DELETE /?tagging',
  'GET doc.txt?attributes',
  // Bucket CORS configuration and object tagging (cors.ts, tagging.ts): they touch no object data.
  'GET /?cors',
  'PUT /?cors',
  'DELETE /?cors',
  'GET doc.txt?tagging',
  'PUT doc.txt?tagging',
  'DELETE doc.txt?tagging',
  // Canned ACLs, bucket policies and PublicAccessBlock (access.ts): no object data either.
  'GET /?acl',
  'PUT /?acl',
  'GET doc.txt?acl',
  'PUT doc.txt?acl',
  'GET /?policy',
  'PUT /?policy',
  'DELETE /?policy',
  'GET /?policyStatus',
  'GET /?publicAccessBlock',
  'PUT /?publicAccessBlock',
  'DELETE /?publicAccessBlock',
]);

/** Headers that change what a write or read means; Berth must refuse them rather than ignore them. */
const HEADERS: Array<Record<string, string>> = [
  { 'x-amz-server-side-encryption': 'AES256' },
  { 'x-amz-server-side-encryption': 'aws:kms', 'x-amz-server-side-encryption-aws-kms-key-id': 'k' },
  { 'x-amz-server-side-encryption-context': 'e30=' },
  { 'x-amz-server-side-encryption-bucket-key-enabled': 'true' },
  {
    'x-amz-server-side-encryption-customer-algorithm': 'AES256',
    'x-amz-server-side-encryption-customer-key': Buffer.alloc(32, 1).toString('base64'),
    'x-amz-server-side-encryption-customer-key-md5': 'x',
  },
  { 'x-amz-object-lock-mode': 'GOVERNANCE', 'x-amz-object-lock-retain-until-date': '2099-01-01T00:00:00Z' },
  { 'x-amz-object-lock-legal-hold': 'ON' },
  // Canned ACLs are honoured (access.ts), but not these two, nor grants to other accounts.
  { 'x-amz-acl': 'log-delivery-write' },
  { 'x-amz-acl': 'aws-exec-read' },
  { 'x-amz-grant-read': 'id=999999' }, // another account's: the owner's own are honoured (acl.test.ts)
  { 'x-amz-grant-full-control': 'id=999999' },
  { 'x-amz-website-redirect-location': '/elsewhere' },
  { 'x-amz-storage-class': 'GLACIER' },
  { 'x-amz-mfa': '1 2' },
  { 'x-amz-write-offset-bytes': '0' },
  { 'x-amz-expected-bucket-owner': '999999' },
  { 'x-amz-if-match-size': '1' },
];

async function refusal(promise: Promise<unknown>): Promise<number | undefined> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException) return error.$metadata.httpStatusCode;
    throw error;
  }
  return 200;
}

describe.each(DIALECTS)('unimplemented S3 requests on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  const Bucket = 'kept';
  const Key = 'doc.txt';
  const BODY = 'original content';

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    client = await adminStorage(t.ctx, t.user.team_id, s3.url, Bucket);
    await client.send(new PutObjectCommand({ Bucket, Key, Body: BODY, ContentType: 'text/plain' }));
  });

  afterAll(async () => {
    client?.destroy();
    await s3?.close();
    await t?.close();
  });

  /** The object's content, type and ETag, and the bucket's keys: what no refused request may change. */
  async function snapshot() {
    const got = await client.send(new GetObjectCommand({ Bucket, Key }));
    const listed = await client.send(new ListObjectsV2Command({ Bucket }));
    return {
      body: await got.Body!.transformToString(),
      type: got.ContentType,
      etag: got.ETag,
      keys: (listed.Contents ?? []).map((c) => `${c.Key}:${c.ETag}`),
    };
  }

  /**
   * Sends a request through the SDK (so it is signed as clients sign it) with its method, query and
   * headers replaced just before signing.
   */
  function raw(method: string, key: string | undefined, query: Record<string, string>, headers = {}) {
    const command =
      key === undefined ? new ListObjectsV2Command({ Bucket }) : new GetObjectCommand({ Bucket, Key: key });
    type Args = { request: unknown };
    (command.middlewareStack as { add(m: unknown, o: { step: string }): void }).add(
      (next: (args: Args) => Promise<unknown>) => (args: Args) => {
        const request = args.request as {
          method: string;
          query: Record<string, string>;
          headers: Record<string, string>;
          body?: unknown;
        };
        request.method = method;
        request.query = query;
        request.headers = { ...request.headers, ...headers };
        if (method === 'PUT' || method === 'POST') request.body = '<Tagging><TagSet/></Tagging>';
        return next(args);
      },
      { step: 'build' },
    );
    return refusal(command instanceof GetObjectCommand ? client.send(command) : client.send(command));
  }

  it('refuses every sub-resource Berth does not implement, on buckets and objects, by every method', async () => {
    const before = await snapshot();
    const answers: string[] = [];
    for (const sub of SUBRESOURCES) {
      for (const method of ['GET', 'PUT', 'POST', 'DELETE', 'HEAD']) {
        for (const key of [undefined, Key]) {
          const request = `${method} ${key ?? '/'}?${sub}`;
          if (IMPLEMENTED.has(request)) continue;
          const status = await raw(method, key, { [sub]: '' });
          if (status !== 501 && status !== 405) answers.push(`${request}: ${status}`);
        }
      }
    }
    expect(answers).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('refuses headers it does not honour on writes, copies, deletes and reads', async () => {
    const before = await snapshot();
    const answers: string[] = [];
    for (const headers of HEADERS) {
      for (const method of ['PUT', 'DELETE', 'GET']) {
        const status = await raw(method, Key, {}, headers);
        if (status === 200 || status === 204 || status === 206 || status === 304)
          answers.push(`${method} ${JSON.stringify(headers)}: ${status}`);
      }
      const copy = await raw(
        'PUT',
        Key,
        {},
        { ...headers, 'x-amz-copy-source': `${Bucket}/${Key}`, 'x-amz-metadata-directive': 'REPLACE' },
      );
      if (copy === 200) answers.push(`copy ${JSON.stringify(headers)}: ${copy}`);
    }
    expect(answers.filter((a) => !a.startsWith('GET {"if-'))).toEqual([]);
    // Conditional PUTs and completes are honoured (conditional.ts); a conditional copy or delete is not.
    for (const headers of [{ 'if-match': '"0123"' }, { 'if-none-match': '*' }]) {
      expect(await raw('DELETE', Key, {}, headers)).toBeGreaterThanOrEqual(400);
      expect(
        await raw('PUT', Key, {}, { ...headers, 'x-amz-copy-source': `${Bucket}/${Key}` }),
      ).toBeGreaterThanOrEqual(400);
    }
    expect(await snapshot()).toEqual(before);
  });

  it('answers the operations clients send most with the errors they expect, and keeps the data', async () => {
    const before = await snapshot();
    // Deleting an object's tags removes its tags, never the object (it once did).
    expect(await refusal(client.send(new DeleteObjectTaggingCommand({ Bucket, Key })))).toBe(200);
    expect(
      await refusal(client.send(new PutObjectLegalHoldCommand({ Bucket, Key, LegalHold: { Status: 'ON' } }))),
    ).toBe(501);
    expect(await refusal(client.send(new DeleteObjectCommand({ Bucket, Key, VersionId: 'abc' })))).toBe(400);
    expect(
      await refusal(client.send(new PutObjectCommand({ Bucket, Key, Body: 'x', IfNoneMatch: '*' }))),
    ).toBe(412);
    expect(await refusal(client.send(new GetBucketLifecycleConfigurationCommand({ Bucket })))).toBe(501);
    expect(await refusal(client.send(new HeadObjectCommand({ Bucket, Key, VersionId: 'abc' })))).toBe(400);
    expect(await snapshot()).toEqual(before);
    // The one version of an unversioned object is `null`.
    expect(await refusal(client.send(new HeadObjectCommand({ Bucket, Key, VersionId: 'null' })))).toBe(200);
  });
});
