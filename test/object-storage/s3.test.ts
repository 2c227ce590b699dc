// The S3 endpoint with the real AWS SDK: provisioning as apply triggers it, object and bucket
// operations, multipart, presigned and virtual-host requests, and every kind of refusal.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteBucketCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListBucketsCommand,
  ListObjectsCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  type ListObjectsV2CommandInput,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOOKUP_TTL_MS, type S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { applyObjectStorage, refusal, s3Client, storedBlobs } from './helpers.js';

async function text(client: S3Client, Bucket: string, Key: string, Range?: string) {
  const got = await client.send(new GetObjectCommand({ Bucket, Key, ...(Range ? { Range } : {}) }));
  return {
    body: await got.Body!.transformToString(),
    range: got.ContentRange,
    status: got.$metadata.httpStatusCode,
  };
}

async function listAll(client: S3Client, input: ListObjectsV2CommandInput) {
  const pages: string[][] = [];
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ ...input, ContinuationToken: token }));
    pages.push([
      ...(page.Contents ?? []).map((c) => c.Key!),
      ...(page.CommonPrefixes ?? []).map((p) => p.Prefix!),
    ]);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return pages;
}

function rawGet(url: string, host: string): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: target.port, path: target.pathname + target.search, headers: { host } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

describe.each(DIALECTS)('object storage on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  const clients: Record<string, S3Client> = {};
  const secrets: Record<string, { id: string; secret: string }> = {};
  const uuids: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    const team = t.user.team_id;
    uuids.main = await applyObjectStorage(t.ctx, team, {
      name: 'main',
      buckets: ['photos', 'docs'],
      users: [
        { username: 'admin', policies: ['admin'] },
        { username: 'reader', policies: ['read'] },
        {
          username: 'uploader',
          policies: [
            {
              Effect: 'Allow',
              Action: ['s3:PutObject', 's3:GetObject', 's3:ListBucket'],
              Resource: 'arn:aws:s3:::photos/uploads/*',
            },
          ],
        },
        { username: 'nobody', policies: [] },
      ],
    });
    uuids.second = await applyObjectStorage(t.ctx, team, {
      name: 'second',
      buckets: ['archive'],
      users: [{ username: 'boss', policies: ['admin'] }],
    });
    // Provisioned before the clash asks for 'photos', which is then its own name too (migration 024).
    await t.ctx.services.jobs.runner().runDue();
    uuids.clash = await applyObjectStorage(t.ctx, team, {
      name: 'clash',
      buckets: ['photos'],
      users: [{ username: 'x', policies: ['read'] }],
    });
    uuids.bad = await applyObjectStorage(t.ctx, team, {
      name: 'bad',
      buckets: ['fine-bucket'],
      users: [{ username: 'y', policies: ['superuser'] }],
    });
    await t.ctx.services.jobs.runner().runDue();
    for (const storage of await t.ctx.services.objectStorage.view({ id: team, role: 'owner' })) {
      for (const user of storage.users) {
        secrets[user.username] = { id: user.access_key_id, secret: user.secret_key! };
        clients[user.username] = s3Client(s3.url, user.access_key_id, user.secret_key!);
      }
    }
  });

  afterAll(async () => {
    for (const client of Object.values(clients)) client.destroy();
    await s3?.close();
    await t?.close();
  });

  it('provisions buckets and sealed keys, reports problems, and shows secrets to owners only', async () => {
    const rows = await t.ctx.db
      .selectFrom('object_storages')
      .select(['name', 'state', 'state_reason'])
      .execute();
    const state = Object.fromEntries(rows.map((r) => [r.name, r]));
    expect(state.main?.state).toBe('running');
    expect(state.second?.state).toBe('running');
    // Bucket names are per storage: another storage's 'photos' takes nothing from this one.
    expect(state.clash?.state).toBe('running');
    expect(state.bad?.state).toBe('error');
    expect(state.bad?.state_reason).toMatch(/unknown policy 'superuser'/);
    // Shaped like AWS's: 20 upper-case characters and a 40-character secret, as clients and docs expect.
    for (const { id, secret } of Object.values(secrets)) {
      expect(id).toMatch(/^BK[A-Z2-7]{18}$/);
      expect(secret).toHaveLength(40);
    }

    // Secrets are sealed at rest and never stored in plaintext.
    const stored = await t.ctx.db
      .selectFrom('s3_access_keys')
      .select(['access_key_id', 'secret_encrypted'])
      .execute();
    const admin = stored.find((k) => k.access_key_id === secrets.admin!.id)!;
    expect(admin.secret_encrypted).not.toContain(secrets.admin!.secret);
    expect(t.ctx.secretBox.decrypt(admin.secret_encrypted)).toBe(secrets.admin!.secret);

    // Provisioning again (a re-apply) keeps the keys.
    await applyObjectStorage(t.ctx, t.user.team_id, { name: 'main-again', buckets: [], users: [] });
    await t.ctx.services.jobs.runner().runDue();
    const [main] = await t.ctx.services.objectStorage.view({ id: t.user.team_id, role: 'owner' }, 'main');
    expect(main!.users.map((u) => u.access_key_id)).toContain(secrets.admin!.id);

    const owner = await t.request({
      url: '/api/v1/teams/acme/object-storage/main',
      headers: t.auth.platform,
    });
    expect(owner.statusCode).toBe(200);
    const view = owner.json<{
      data: { endpoint: string; buckets: string[]; users: Array<Record<string, unknown>> };
    }>().data;
    expect(view.endpoint).toBe(s3.url);
    expect(view.buckets).toEqual(['docs', 'photos']);
    expect(view.users.find((u) => u.username === 'admin')).toMatchObject({
      access_key_id: secrets.admin!.id,
      secret_key: secrets.admin!.secret,
    });

    const member = await t.ctx.identity.createUser({
      email: 'member@example.com',
      team: 'acme',
      role: 'member',
    });
    const seen = await t.request({
      url: `/api/v1/teams/acme/object-storage/${uuids.main}`,
      headers: { authorization: `Bearer ${member.api_token}` },
    });
    expect(seen.statusCode).toBe(200);
    const users = seen.json<{ data: { users: Array<Record<string, unknown>> } }>().data.users;
    expect(users.length).toBe(4);
    expect(users.every((u) => u.secret_key === null && typeof u.access_key_id === 'string')).toBe(true);
    expect(seen.body).not.toContain(secrets.admin!.secret);

    const missing = await t.request({
      url: '/api/v1/teams/acme/object-storage/nope',
      headers: t.auth.platform,
    });
    expect(missing.statusCode).toBe(404);
    const outsider = await t.ctx.identity.createUser({ email: 'outsider@example.com', team: 'elsewhere' });
    const foreign = await t.request({
      url: '/api/v1/teams/acme/object-storage/main',
      headers: { authorization: `Bearer ${outsider.api_token}` },
    });
    expect(foreign.statusCode).toBe(403);
  });

  it('serves a storage created by applying a YAML document, with the credentials the API shows', async () => {
    const document = [
      'apiVersion: v1',
      'kind: Infrastructure',
      'metadata: {name: media-site, team: acme}',
      'spec:',
      '  object_storage:',
      '    - name: media',
      '      zone: europe-1',
      '      buckets: [site-media]',
      '      users:',
      '        - {username: app, policies: [readwrite]}',
      '',
    ].join('\n');
    const applied = await t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply?auto_deploy=false',
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: document,
    });
    expect(applied.statusCode).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    const shown = await t.request({
      url: '/api/v1/teams/acme/object-storage/media',
      headers: t.auth.platform,
    });
    const view = shown.json<{
      data: { state: string; endpoint: string; users: Array<{ access_key_id: string; secret_key: string }> };
    }>().data;
    expect(view.state).toBe('running');
    const app = s3Client(view.endpoint, view.users[0]!.access_key_id, view.users[0]!.secret_key);
    await app.send(new PutObjectCommand({ Bucket: 'site-media', Key: 'logo.svg', Body: '<svg/>' }));
    expect((await text(app, 'site-media', 'logo.svg')).body).toBe('<svg/>');
    // Another storage's bucket is no bucket of this one's.
    expect(await refusal(app.send(new GetObjectCommand({ Bucket: 'photos', Key: 'a.txt' })))).toEqual({
      code: 'NoSuchBucket',
      status: 404,
    });
    app.destroy();
  });

  it('puts, lists with prefix, delimiter and pagination, gets ranges, copies and deletes', async () => {
    const admin = clients.admin!;
    const keys = [
      'a.txt',
      'dir/1.txt',
      'dir/2.txt',
      'dir/sub/3.txt',
      'z.txt',
      'é.txt',
      'with space+plus.txt',
    ];
    for (const Key of keys) {
      await admin.send(
        new PutObjectCommand({
          Bucket: 'photos',
          Key,
          Body: `content of ${Key}`,
          Metadata: { origin: 'test' },
        }),
      );
    }
    // A streamed body of known length (aws-chunked with a CRC32 trailer when the SDK chooses it).
    await admin.send(
      new PutObjectCommand({
        Bucket: 'docs',
        Key: 'streamed.bin',
        Body: Readable.from([Buffer.from('0123456789')]),
        ContentLength: 10,
      }),
    );
    expect((await text(admin, 'docs', 'streamed.bin')).body).toBe('0123456789');

    const byteOrder = [...keys].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
    expect((await listAll(admin, { Bucket: 'photos' })).flat()).toEqual(byteOrder);
    const pages = await listAll(admin, { Bucket: 'photos', MaxKeys: 2 });
    expect(pages.map((p) => p.length)).toEqual([2, 2, 2, 1]);
    expect(pages.flat()).toEqual(byteOrder);

    const dir = await admin.send(
      new ListObjectsV2Command({ Bucket: 'photos', Prefix: 'dir/', Delimiter: '/' }),
    );
    expect(dir.Contents?.map((c) => c.Key)).toEqual(['dir/1.txt', 'dir/2.txt']);
    expect(dir.CommonPrefixes?.map((p) => p.Prefix)).toEqual(['dir/sub/']);
    expect(dir.Contents?.[0]).toMatchObject({
      Size: 'content of dir/1.txt'.length,
      ETag: `"${createHash('md5').update('content of dir/1.txt').digest('hex')}"`,
    });
    const rolled = await listAll(admin, { Bucket: 'photos', Delimiter: '/', MaxKeys: 1 });
    expect(rolled).toEqual([['a.txt'], ['dir/'], ['with space+plus.txt'], ['z.txt'], ['é.txt']]);
    // ListObjects (V1) resumes from the marker it was given, a key or a common prefix.
    const v1: string[] = [];
    let marker: string | undefined;
    for (let page = 0; page < 10; page += 1) {
      const got = await admin.send(
        new ListObjectsCommand({ Bucket: 'photos', Delimiter: '/', MaxKeys: 1, Marker: marker }),
      );
      v1.push(
        ...(got.Contents ?? []).map((c) => c.Key!),
        ...(got.CommonPrefixes ?? []).map((c) => c.Prefix!),
      );
      if (!got.IsTruncated) break;
      marker = got.NextMarker;
    }
    expect(v1).toEqual(['a.txt', 'dir/', 'with space+plus.txt', 'z.txt', 'é.txt']);

    expect(await text(admin, 'photos', 'a.txt', 'bytes=2-5')).toEqual({
      body: 'nten',
      range: 'bytes 2-5/16',
      status: 206,
    });
    expect((await text(admin, 'photos', 'a.txt', 'bytes=-5')).body).toBe('a.txt');
    expect((await text(admin, 'photos', 'a.txt', 'bytes=13-')).body).toBe('txt');
    expect(
      await refusal(admin.send(new GetObjectCommand({ Bucket: 'photos', Key: 'a.txt', Range: 'bytes=99-' }))),
    ).toEqual({
      code: 'InvalidRange',
      status: 416,
    });
    const head = await admin.send(new HeadObjectCommand({ Bucket: 'photos', Key: 'é.txt' }));
    expect(head.ContentLength).toBe('content of é.txt'.length + 1);
    expect(head.Metadata).toEqual({ origin: 'test' });
    expect(await refusal(admin.send(new GetObjectCommand({ Bucket: 'photos', Key: 'missing' })))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });

    await admin.send(
      new CopyObjectCommand({
        Bucket: 'docs',
        Key: 'copy.txt',
        CopySource: 'photos/with%20space%2Bplus.txt',
      }),
    );
    expect((await text(admin, 'docs', 'copy.txt')).body).toBe('content of with space+plus.txt');

    const deleted = await admin.send(
      new DeleteObjectsCommand({
        Bucket: 'photos',
        Delete: { Objects: [{ Key: 'dir/1.txt' }, { Key: 'dir/2.txt' }] },
      }),
    );
    expect(deleted.Deleted?.map((d) => d.Key).sort()).toEqual(['dir/1.txt', 'dir/2.txt']);
    await admin.send(new DeleteObjectCommand({ Bucket: 'photos', Key: 'z.txt' }));
    expect((await listAll(admin, { Bucket: 'photos', Prefix: 'dir/' })).flat()).toEqual(['dir/sub/3.txt']);
    expect((await listAll(admin, { Bucket: 'photos', Prefix: 'z' })).flat()).toEqual([]);

    // Concurrent PUTs of one key: one of them wins whole, and no replaced file stays on disk.
    const bodies = Array.from({ length: 8 }, (_, i) => `racer ${i} `.repeat(1000));
    await Promise.all(
      bodies.map((Body) => admin.send(new PutObjectCommand({ Bucket: 'docs', Key: 'race.txt', Body }))),
    );
    expect(bodies).toContain((await text(admin, 'docs', 'race.txt')).body);
    const docs = await t.ctx.db
      .selectFrom('s3_buckets')
      .select('id')
      .where('name', '=', 'docs')
      .executeTakeFirstOrThrow();
    const rows = await t.ctx.db
      .selectFrom('s3_objects')
      .select('file')
      .where('bucket_id', '=', docs.id)
      .execute();
    expect((await storedBlobs(t.ctx, 'data', docs.id)).length).toBe(rows.length);

    // Buckets: global names, ownership, emptiness.
    await admin.send(new CreateBucketCommand({ Bucket: 'scratch' }));
    const buckets = await admin.send(new ListBucketsCommand({}));
    expect(buckets.Buckets?.map((b) => b.Name)).toEqual(['docs', 'photos', 'scratch']);
    // A name another storage holds is free in this one, and stays that storage's there.
    await admin.send(new CreateBucketCommand({ Bucket: 'archive' }));
    expect((await admin.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name)).toEqual([
      'archive',
      'docs',
      'photos',
      'scratch',
    ]);
    await admin.send(new DeleteBucketCommand({ Bucket: 'archive' }));
    // us-east-1 answers a caller re-creating its own bucket with 200.
    const again = await admin.send(new CreateBucketCommand({ Bucket: 'photos' }));
    expect(again.$metadata.httpStatusCode).toBe(200);
    expect(await refusal(admin.send(new DeleteBucketCommand({ Bucket: 'photos' })))).toEqual({
      code: 'BucketNotEmpty',
      status: 409,
    });
    await admin.send(new PutObjectCommand({ Bucket: 'scratch', Key: 'gone', Body: 'x' }));
    await admin.send(new DeleteObjectCommand({ Bucket: 'scratch', Key: 'gone' }));
    await admin.send(new DeleteBucketCommand({ Bucket: 'scratch' }));
    expect((await refusal(admin.send(new HeadBucketCommand({ Bucket: 'scratch' })))).status).toBe(404);
    expect((await refusal(admin.send(new ListObjectsV2Command({ Bucket: 'nonexistent' })))).code).toBe(
      'NoSuchBucket',
    );
  });

  it('uploads a 20 MiB object in parts and reads the same bytes back', async () => {
    const admin = clients.admin!;
    const data = randomBytes(20 * 1024 * 1024);
    const cuts = [0, 8 * 1024 * 1024, 16 * 1024 * 1024, data.length];
    const { UploadId } = await admin.send(
      new CreateMultipartUploadCommand({
        Bucket: 'photos',
        Key: 'big/blob.bin',
        ContentType: 'application/x-test',
      }),
    );
    const parts: Array<{ PartNumber: number; ETag: string }> = [];
    // Parts may arrive in any order; the list in Complete decides.
    for (const PartNumber of [3, 1, 2]) {
      const Body = data.subarray(cuts[PartNumber - 1], cuts[PartNumber]);
      const { ETag } = await admin.send(
        new UploadPartCommand({ Bucket: 'photos', Key: 'big/blob.bin', UploadId, PartNumber, Body }),
      );
      expect(ETag).toBe(`"${createHash('md5').update(Body).digest('hex')}"`);
      parts.push({ PartNumber, ETag: ETag! });
    }
    // A single PUT hashed on the MD5 worker, its size no multiple of the batches, gets the MD5 as ETag.
    const odd = data.subarray(0, 4 * 1024 * 1024 + 12_345);
    const put = await admin.send(new PutObjectCommand({ Bucket: 'photos', Key: 'big/odd.bin', Body: odd }));
    expect(put.ETag).toBe(`"${createHash('md5').update(odd).digest('hex')}"`);
    parts.sort((a, b) => a.PartNumber - b.PartNumber);
    const listed = await admin.send(
      new ListPartsCommand({ Bucket: 'photos', Key: 'big/blob.bin', UploadId }),
    );
    expect(listed.Parts?.map((p) => [p.PartNumber, p.Size])).toEqual([
      [1, 8 * 1024 * 1024],
      [2, 8 * 1024 * 1024],
      [3, 4 * 1024 * 1024],
    ]);
    const done = await admin.send(
      new CompleteMultipartUploadCommand({
        Bucket: 'photos',
        Key: 'big/blob.bin',
        UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    const md5s = createHash('md5');
    for (const p of parts) md5s.update(Buffer.from(p.ETag.replace(/"/g, ''), 'hex'));
    expect(done.ETag).toBe(`"${md5s.digest('hex')}-3"`);

    const got = await admin.send(new GetObjectCommand({ Bucket: 'photos', Key: 'big/blob.bin' }));
    expect(got.ContentType).toBe('application/x-test');
    const bytes = Buffer.from(await got.Body!.transformToByteArray());
    expect(bytes.length).toBe(data.length);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(
      createHash('sha256').update(data).digest('hex'),
    );
    const across = await admin.send(
      new GetObjectCommand({
        Bucket: 'photos',
        Key: 'big/blob.bin',
        Range: `bytes=${cuts[1]! - 10}-${cuts[1]! + 9}`,
      }),
    );
    expect(Buffer.from(await across.Body!.transformToByteArray())).toEqual(
      data.subarray(cuts[1]! - 10, cuts[1]! + 10),
    );

    // The parts are gone once completed; the object is one blob.
    expect(await storedBlobs(t.ctx, 'parts')).toEqual([]);

    const aborted = await admin.send(
      new CreateMultipartUploadCommand({ Bucket: 'photos', Key: 'big/aborted.bin' }),
    );
    await admin.send(
      new UploadPartCommand({
        Bucket: 'photos',
        Key: 'big/aborted.bin',
        UploadId: aborted.UploadId,
        PartNumber: 1,
        Body: 'tiny',
      }),
    );
    await admin.send(
      new AbortMultipartUploadCommand({
        Bucket: 'photos',
        Key: 'big/aborted.bin',
        UploadId: aborted.UploadId,
      }),
    );
    expect(
      (
        await refusal(
          admin.send(
            new ListPartsCommand({ Bucket: 'photos', Key: 'big/aborted.bin', UploadId: aborted.UploadId }),
          ),
        )
      ).code,
    ).toBe('NoSuchUpload');
    expect(await storedBlobs(t.ctx, 'parts')).toEqual([]);
  });

  it('sweeps temporary files a stopped process left behind, and only old ones', async () => {
    const tmp = path.join(t.ctx.config.dataDir, 'objects', 'tmp');
    fs.mkdirSync(tmp, { recursive: true });
    fs.writeFileSync(path.join(tmp, 'stale'), 'x');
    const dayAgo = new Date(Date.now() - 25 * 3600_000);
    fs.utimesSync(path.join(tmp, 'stale'), dayAgo, dayAgo);
    fs.writeFileSync(path.join(tmp, 'in-flight'), 'y');
    const again = await t.ctx.services.objectStorage.serveEndpoint();
    await again.close();
    expect(fs.readdirSync(tmp)).toEqual(['in-flight']);
    fs.rmSync(path.join(tmp, 'in-flight'));
  });

  // The local driver's files (the upstream's keys are swept in upstream.test.ts): planted here with an
  // old mtime, which an upstream key's LastModified cannot be given.
  it.runIf(process.env.BERTH_TEST_OBJECT_STORAGE !== 's3')(
    'sweeps object files no object or part names, once they are an hour old',
    async () => {
      await clients.admin!.send(new PutObjectCommand({ Bucket: 'docs', Key: 'kept.txt', Body: 'kept' }));
      const kept = await t.ctx.db
        .selectFrom('s3_objects')
        .innerJoin('s3_buckets', 's3_buckets.id', 's3_objects.bucket_id')
        .select(['s3_objects.file', 's3_buckets.id as bucket'])
        .where('s3_buckets.name', '=', 'docs')
        .where('s3_objects.key', '=', 'kept.txt')
        .executeTakeFirstOrThrow();
      const root = path.join(t.ctx.config.dataDir, 'objects');
      const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
      const plant = (relative: string, old: boolean): string => {
        const file = path.join(root, relative);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, 'orphan');
        if (old) fs.utimesSync(file, twoHoursAgo, twoHoursAgo);
        return file;
      };
      // Left by a process stopped between placing and committing, or after a bucket or upload was deleted.
      const orphan = plant(`data/${kept.bucket}/zz/orphan`, true);
      const goneBucket = plant('data/999999/ab/orphan', true);
      const gonePart = plant('parts/999999/cd/orphan', true);
      const young = plant(`data/${kept.bucket}/zz/young`, false);
      fs.utimesSync(path.join(root, kept.file), twoHoursAgo, twoHoursAgo);

      const again = await t.ctx.services.objectStorage.serveEndpoint();
      await again.close(); // waits for the sweep it started

      for (const file of [orphan, goneBucket, gonePart]) expect(fs.existsSync(file)).toBe(false);
      expect(fs.existsSync(young)).toBe(true);
      const got = await clients.admin!.send(new GetObjectCommand({ Bucket: 'docs', Key: 'kept.txt' }));
      expect(await got.Body!.transformToString()).toBe('kept');
      fs.rmSync(young);
    },
  );

  it('serves presigned URLs and virtual-host-style requests, and refuses tampered or expired ones', async () => {
    const admin = clients.admin!;
    await admin.send(
      new PutObjectCommand({ Bucket: 'docs', Key: 'shared/report.txt', Body: 'quarterly numbers' }),
    );
    const url = await getSignedUrl(
      admin,
      new GetObjectCommand({ Bucket: 'docs', Key: 'shared/report.txt' }),
      { expiresIn: 60 },
    );
    const fetched = await fetch(url);
    expect(fetched.status).toBe(200);
    expect(await fetched.text()).toBe('quarterly numbers');

    const tampered = url.replace(
      /X-Amz-Signature=([0-9a-f])/,
      (_m, c: string) => `X-Amz-Signature=${c === '0' ? '1' : '0'}`,
    );
    const refused = await fetch(tampered);
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('<Code>SignatureDoesNotMatch</Code>');

    const old = await getSignedUrl(
      admin,
      new GetObjectCommand({ Bucket: 'docs', Key: 'shared/report.txt' }),
      {
        expiresIn: 60,
        signingDate: new Date(Date.now() - 3600_000),
      },
    );
    const expired = await fetch(old);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toContain('Request has expired');

    // Browsers: a preflight is answered without credentials; responses name the origin and expose the ETag.
    const putUrl = await getSignedUrl(
      admin,
      new PutObjectCommand({ Bucket: 'docs', Key: 'from-browser.txt' }),
      {
        expiresIn: 60,
      },
    );
    const preflight = await fetch(putUrl, {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example', 'access-control-request-method': 'PUT' },
    });
    expect(preflight.status).toBe(200);
    expect(preflight.headers.get('access-control-allow-methods')).toContain('PUT');
    const uploaded = await fetch(putUrl, {
      method: 'PUT',
      body: 'hello',
      headers: { origin: 'https://app.example' },
    });
    expect(uploaded.status).toBe(200);
    expect(uploaded.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(uploaded.headers.get('access-control-expose-headers')).toContain('ETag');
    expect((await text(admin, 'docs', 'from-browser.txt')).body).toBe('hello');

    // Virtual-host style: the bucket is the first label of the host name.
    const virtual = new S3Client({
      endpoint: `http://localhost:${s3.port}`,
      region: 'us-east-1',
      forcePathStyle: false,
      credentials: { accessKeyId: secrets.admin!.id, secretAccessKey: secrets.admin!.secret },
    });
    const vurl = await getSignedUrl(
      virtual,
      new GetObjectCommand({ Bucket: 'docs', Key: 'shared/report.txt' }),
      { expiresIn: 60 },
    );
    virtual.destroy();
    expect(new URL(vurl).hostname).toBe('docs.localhost');
    expect(await rawGet(vurl, new URL(vurl).host)).toEqual({ status: 200, body: 'quarterly numbers' });
  });

  it('refuses by policy, by wrong secret, by unknown key and by another storage key', async () => {
    const { admin, reader, uploader, nobody, boss } = clients;
    await admin!.send(new PutObjectCommand({ Bucket: 'photos', Key: 'public.txt', Body: 'hi' }));

    expect((await text(reader!, 'photos', 'public.txt')).body).toBe('hi');
    expect((await reader!.send(new ListObjectsV2Command({ Bucket: 'docs' }))).KeyCount).toBeGreaterThan(0);
    const denied = { code: 'AccessDenied', status: 403 };
    expect(
      await refusal(reader!.send(new PutObjectCommand({ Bucket: 'photos', Key: 'r.txt', Body: 'x' }))),
    ).toEqual(denied);
    expect(
      await refusal(reader!.send(new DeleteObjectCommand({ Bucket: 'photos', Key: 'public.txt' }))),
    ).toEqual(denied);
    expect(await refusal(reader!.send(new CreateBucketCommand({ Bucket: 'readers-bucket' })))).toEqual(
      denied,
    );
    const batch = await reader!.send(
      new DeleteObjectsCommand({ Bucket: 'photos', Delete: { Objects: [{ Key: 'public.txt' }] } }),
    );
    expect(batch.Errors?.map((e) => e.Code)).toEqual(['AccessDenied']);
    expect((await text(admin!, 'photos', 'public.txt')).body).toBe('hi');

    await uploader!.send(new PutObjectCommand({ Bucket: 'photos', Key: 'uploads/u.txt', Body: 'up' }));
    expect((await text(uploader!, 'photos', 'uploads/u.txt')).body).toBe('up');
    expect(
      (await uploader!.send(new ListObjectsV2Command({ Bucket: 'photos', Prefix: 'uploads/' }))).KeyCount,
    ).toBe(1);
    expect(await refusal(uploader!.send(new ListObjectsV2Command({ Bucket: 'photos' })))).toEqual(denied);
    expect(
      await refusal(
        uploader!.send(new PutObjectCommand({ Bucket: 'photos', Key: 'elsewhere.txt', Body: 'x' })),
      ),
    ).toEqual(denied);
    expect(
      await refusal(uploader!.send(new GetObjectCommand({ Bucket: 'photos', Key: 'public.txt' }))),
    ).toEqual(denied);

    expect(await refusal(nobody!.send(new ListBucketsCommand({})))).toEqual(denied);
    expect(
      await refusal(nobody!.send(new GetObjectCommand({ Bucket: 'photos', Key: 'public.txt' }))),
    ).toEqual(denied);

    // Another storage's admin key reaches its own buckets only: another storage's names are not there.
    const noSuchBucket = { code: 'NoSuchBucket', status: 404 };
    await boss!.send(new PutObjectCommand({ Bucket: 'archive', Key: 'mine.txt', Body: 'b' }));
    expect(await refusal(boss!.send(new GetObjectCommand({ Bucket: 'photos', Key: 'public.txt' })))).toEqual(
      noSuchBucket,
    );
    expect(await refusal(boss!.send(new ListObjectsV2Command({ Bucket: 'photos' })))).toEqual(noSuchBucket);
    expect(await refusal(admin!.send(new GetObjectCommand({ Bucket: 'archive', Key: 'mine.txt' })))).toEqual(
      noSuchBucket,
    );
    expect((await boss!.send(new ListBucketsCommand({}))).Buckets?.map((b) => b.Name)).toEqual(['archive']);

    const wrongSecret = s3Client(s3.url, secrets.admin!.id, secrets.boss!.secret);
    expect(
      await refusal(wrongSecret.send(new GetObjectCommand({ Bucket: 'photos', Key: 'public.txt' }))),
    ).toEqual({
      code: 'SignatureDoesNotMatch',
      status: 403,
    });
    const unknown = s3Client(s3.url, 'BKUNKNOWNUNKNOWN0000', secrets.admin!.secret);
    expect((await refusal(unknown.send(new ListBucketsCommand({})))).code).toBe('InvalidAccessKeyId');
    wrongSecret.destroy();
    unknown.destroy();

    // A body changed after signing (same length) is refused: the payload hash is part of the signature.
    const tamperer = s3Client(s3.url, secrets.admin!.id, secrets.admin!.secret);
    tamperer.middlewareStack.add(
      (next) => (args) => {
        (args.request as { body: unknown }).body = 'jello';
        return next(args);
      },
      { step: 'deserialize', name: 'tamperBody' },
    );
    expect(
      await refusal(
        tamperer.send(
          new PutObjectCommand({
            Bucket: 'photos',
            Key: 'tampered.txt',
            Body: 'hello',
            ChecksumAlgorithm: undefined,
          }),
        ),
      ),
    ).toEqual({ code: 'XAmzContentSHA256Mismatch', status: 400 });
    tamperer.destroy();
    expect(
      (await refusal(admin!.send(new HeadObjectCommand({ Bucket: 'photos', Key: 'tampered.txt' })))).status,
    ).toBe(404);

    // A body that does not match its declared checksum is refused and not stored.
    expect(
      (
        await refusal(
          admin!.send(
            new PutObjectCommand({
              Bucket: 'photos',
              Key: 'corrupt.txt',
              Body: 'abc',
              ChecksumCRC32: 'AAAAAA==',
            }),
          ),
        )
      ).code,
    ).toBe('BadDigest');
    expect(
      (await refusal(admin!.send(new HeadObjectCommand({ Bucket: 'photos', Key: 'corrupt.txt' })))).status,
    ).toBe(404);
  });
  it('applies a revoked key, a changed policy and a deleted bucket within the look-up bound', async () => {
    await applyObjectStorage(t.ctx, t.user.team_id, {
      name: 'cached',
      buckets: ['cache-test'],
      users: [{ username: 'temp', policies: ['readwrite'] }],
    });
    await t.ctx.services.jobs.runner().runDue();
    const [storage] = await t.ctx.services.objectStorage.view(
      { id: t.user.team_id, role: 'owner' },
      'cached',
    );
    const key = storage!.users[0]!;
    const temp = s3Client(s3.url, key.access_key_id, key.secret_key!);
    const bound = () => new Promise((resolve) => setTimeout(resolve, LOOKUP_TTL_MS + 50));
    try {
      await temp.send(new PutObjectCommand({ Bucket: 'cache-test', Key: 'a.txt', Body: 'a' }));

      // Another process narrows the key to reading (the store is all the endpoint shares with it).
      await t.ctx.db
        .updateTable('s3_access_keys')
        .set({ policies: JSON.stringify(['read']) })
        .where('access_key_id', '=', key.access_key_id)
        .execute();
      await bound();
      expect(
        await refusal(temp.send(new PutObjectCommand({ Bucket: 'cache-test', Key: 'b.txt', Body: 'b' }))),
      ).toEqual({ code: 'AccessDenied', status: 403 });
      expect((await text(temp, 'cache-test', 'a.txt')).body).toBe('a');

      // A bucket deleted through the endpoint is gone at once, and a new one is there at once.
      await clients.admin!.send(new CreateBucketCommand({ Bucket: 'cache-fresh' }));
      await clients.admin!.send(new PutObjectCommand({ Bucket: 'cache-fresh', Key: 'x', Body: 'x' }));
      await clients.admin!.send(new DeleteObjectCommand({ Bucket: 'cache-fresh', Key: 'x' }));
      await clients.admin!.send(new DeleteBucketCommand({ Bucket: 'cache-fresh' }));
      expect(
        (await refusal(clients.admin!.send(new HeadBucketCommand({ Bucket: 'cache-fresh' })))).status,
      ).toBe(404);

      // A bucket another process removes stops resolving within the bound.
      const gone = t.ctx.db.selectFrom('s3_buckets').select('id').where('name', '=', 'cache-test');
      await t.ctx.db.deleteFrom('s3_objects').where('bucket_id', 'in', gone).execute();
      await t.ctx.db.deleteFrom('s3_buckets').where('name', '=', 'cache-test').execute();
      await bound();
      expect((await refusal(temp.send(new ListObjectsV2Command({ Bucket: 'cache-test' })))).code).toBe(
        'NoSuchBucket',
      );

      // A revoked key is refused within the bound.
      await t.ctx.db.deleteFrom('s3_access_keys').where('access_key_id', '=', key.access_key_id).execute();
      await bound();
      expect((await refusal(temp.send(new ListBucketsCommand({})))).code).toBe('InvalidAccessKeyId');
    } finally {
      temp.destroy();
    }
  });
});
