// The s3 object-storage driver (BERTH_OBJECT_STORAGE_DRIVER=s3): Berth B answers S3 as ever and keeps
// the bytes in an upstream bucket; the upstream is a second Berth's (A's) S3 endpoint, a real S3
// protocol peer. Everything goes through B with the AWS SDK, and A's bucket is inspected directly.
import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  AbortMultipartUploadCommand,
  ListObjectsV2Command,
  ListPartsCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
  UploadPartCopyCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { createObjectMetadata } from '../../src/drivers/objectstorage/local/metadata.js';
import { upstreamBlobStore } from '../../src/drivers/objectstorage/local/upstream-blobs.js';
import type { ServedEndpoint } from '../../src/drivers/objectstorage/driver.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startListeningScript, waitFor } from '../helpers/processes.js';
import { DIALECTS } from '../helpers/store.js';
import { expectUnusableUpstreamRefused } from '../helpers/upstream.js';
import { applyObjectStorage, presignedPost, provisionStorage, refusal, s3Client } from './helpers.js';

const MiB = 1024 * 1024;
const md5 = (data: Buffer) => createHash('md5').update(data).digest('hex');

/** `size` bytes that differ from offset to offset (a shifted range would not match). */
function pattern(size: number, seed = 0): Buffer {
  const out = Buffer.alloc(size);
  for (let i = 0; i < size; i++) out[i] = (i * 31 + (i >> 8) + seed) & 0xff;
  return out;
}

/** The same bytes as a stream of 64 KiB chunks, made as they are read (nothing held whole). */
function patternStream(size: number, seed = 0): Readable {
  let offset = 0;
  return new Readable({
    read() {
      if (offset >= size) return this.push(null);
      const n = Math.min(64 * 1024, size - offset);
      const chunk = Buffer.alloc(n);
      for (let i = 0; i < n; i += 4) chunk.writeUInt32LE(((offset + i) * 2654435761 + seed) >>> 0, i);
      offset += n;
      this.push(chunk);
    },
  });
}

describe.each(DIALECTS)('object storage on an upstream S3 service, on %s', (dialect) => {
  let a: TestApp;
  let b: TestApp;
  let upstreamEndpoint: ServedEndpoint;
  let endpoint: ServedEndpoint;
  /** A's own view of the upstream bucket. */
  let upstream: S3Client;
  /** The tenant's client of B. */
  let tenant: S3Client;
  let upstreamEnv: Record<string, string>;
  let tenantKey: { id: string; secret: string };
  const Bucket = 'photos';

  async function upstreamKeys(): Promise<string[]> {
    const out = await upstream.send(new ListObjectsV2Command({ Bucket: 'berth-blobs' }));
    return (out.Contents ?? []).map((c) => c.Key!).sort();
  }

  async function upstreamBytes(key: string): Promise<Buffer> {
    const got = await upstream.send(new GetObjectCommand({ Bucket: 'berth-blobs', Key: key }));
    return Buffer.from(await got.Body!.transformToByteArray());
  }

  async function bytesOf(Key: string, Range?: string) {
    const got = await tenant.send(new GetObjectCommand({ Bucket, Key, ...(Range ? { Range } : {}) }));
    return { body: Buffer.from(await got.Body!.transformToByteArray()), got };
  }

  beforeAll(async () => {
    a = await createTestApp(dialect, { team: 'upstream', env: { BERTH_OBJECT_STORAGE_DRIVER: 'local' } });
    upstreamEndpoint = await a.ctx.services.objectStorage.serveEndpoint();
    const keys = await provisionStorage(a.ctx, a.user.team_id, 'berth-blobs', [
      { username: 'berth', policies: ['admin'] },
    ]);
    upstream = s3Client(upstreamEndpoint.url, keys.berth!.id, keys.berth!.secret);
    upstreamEnv = {
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: upstreamEndpoint.url,
      BERTH_S3_UPSTREAM_REGION: 'us-east-1',
      BERTH_S3_UPSTREAM_BUCKET: 'berth-blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: keys.berth!.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: keys.berth!.secret,
    };
    b = await createTestApp(dialect, { env: upstreamEnv });
    endpoint = await b.ctx.services.objectStorage.serveEndpoint();
    const own = await provisionStorage(b.ctx, b.user.team_id, Bucket, [
      { username: 'admin', policies: ['admin'] },
    ]);
    tenantKey = own.admin!;
    tenant = s3Client(endpoint.url, own.admin!.id, own.admin!.secret);
  });

  afterAll(async () => {
    tenant?.destroy();
    upstream?.destroy();
    await endpoint?.close();
    await b?.close();
    await upstreamEndpoint?.close();
    await a?.close();
  });

  it('keeps the bytes upstream under keys Berth makes up, never the tenant’s key', async () => {
    expect(b.ctx.services.objectStorage.driver.name).toBe('s3');
    const body = pattern(300_000, 1);
    const put = await tenant.send(new PutObjectCommand({ Bucket, Key: 'holiday/beach.jpg', Body: body }));
    expect(put.ETag).toBe(`"${md5(body)}"`);

    const { body: read, got } = await bytesOf('holiday/beach.jpg');
    expect(read.equals(body)).toBe(true);
    expect(got.ETag).toBe(`"${md5(body)}"`);
    const head = await tenant.send(new HeadObjectCommand({ Bucket, Key: 'holiday/beach.jpg' }));
    expect(head.ContentLength).toBe(body.length);

    const keys = await upstreamKeys();
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^objects\/data\/\d+\/[0-9a-f]{2}\/[0-9a-f]{24}$/);
    expect(keys.some((k) => k.includes('holiday') || k.includes('beach'))).toBe(false);
    expect((await upstreamBytes(keys[0]!)).equals(body)).toBe(true);
    // Nothing of it stays in B's data directory.
    const listed = await tenant.send(new ListObjectsV2Command({ Bucket }));
    expect(listed.Contents?.map((c) => c.Key)).toEqual(['holiday/beach.jpg']);
  });

  it('answers ranges from upstream range GETs', async () => {
    const body = pattern(300_000, 1);
    const ranged = await bytesOf('holiday/beach.jpg', 'bytes=1000-1999');
    expect(ranged.got.$metadata.httpStatusCode).toBe(206);
    expect(ranged.got.ContentRange).toBe(`bytes 1000-1999/${body.length}`);
    expect(ranged.body.equals(body.subarray(1000, 2000))).toBe(true);
    const suffix = await bytesOf('holiday/beach.jpg', 'bytes=-10');
    expect(suffix.body.equals(body.subarray(body.length - 10))).toBe(true);
    expect((await refusal(bytesOf('holiday/beach.jpg', `bytes=${body.length}-`))).status).toBe(416);
  });

  it('stores an empty object', async () => {
    const put = await tenant.send(new PutObjectCommand({ Bucket, Key: 'empty', Body: '' }));
    expect(put.ETag).toBe(`"${md5(Buffer.alloc(0))}"`);
    const { body, got } = await bytesOf('empty');
    expect(body.length).toBe(0);
    expect(got.ContentLength).toBe(0);
    await tenant.send(new DeleteObjectCommand({ Bucket, Key: 'empty' }));
  });

  it('streams a 20 MiB object both ways, with its checksum', async () => {
    const size = 20 * MiB;
    const sha = createHash('sha256');
    for await (const chunk of patternStream(size, 7)) sha.update(chunk as Buffer);
    const put = await tenant.send(
      new PutObjectCommand({
        Bucket,
        Key: 'big.bin',
        Body: patternStream(size, 7),
        ContentLength: size,
        ChecksumAlgorithm: 'SHA256',
      }),
    );
    expect(put.ChecksumSHA256).toBe(sha.copy().digest('base64'));
    const got = await tenant.send(new GetObjectCommand({ Bucket, Key: 'big.bin', ChecksumMode: 'ENABLED' }));
    expect(got.ContentLength).toBe(size);
    expect(got.ChecksumSHA256).toBe(put.ChecksumSHA256);
    const back = createHash('sha256');
    for await (const chunk of got.Body as Readable) back.update(chunk as Buffer);
    expect(back.digest('hex')).toBe(sha.digest('hex'));
  });

  it('refuses a body whose checksum does not match and leaves nothing upstream', async () => {
    const before = await upstreamKeys();
    const wrong = createHash('sha256').update('something else').digest('base64');
    const refused = await refusal(
      tenant.send(
        new PutObjectCommand({ Bucket, Key: 'bad.bin', Body: pattern(100_000), ChecksumSHA256: wrong }),
      ),
    );
    expect(refused).toEqual({ code: 'BadDigest', status: 400 });
    expect((await refusal(bytesOf('bad.bin'))).code).toBe('NoSuchKey');
    expect(await upstreamKeys()).toEqual(before);
  });

  it('abandons the upstream PUT when the tenant’s body is cut short, leaving nothing', async () => {
    const before = await upstreamKeys();
    const url = await getSignedUrl(tenant, new PutObjectCommand({ Bucket, Key: 'cut.bin' }), {
      expiresIn: 60,
    });
    const request = http.request(url, { method: 'PUT', headers: { 'content-length': 4 * MiB } });
    request.on('error', () => undefined);
    request.write(pattern(MiB));
    // A (the upstream) is receiving B's PUT: its body is on A's disk in flight.
    const inFlight = () => {
      const tmp = path.join(a.ctx.config.dataDir, 'objects', 'tmp');
      return fs.existsSync(tmp) ? fs.readdirSync(tmp) : [];
    };
    await waitFor(() => Promise.resolve(inFlight().length > 0 || undefined));
    request.destroy();
    // B cuts its upstream request short, so A drops what it was receiving rather than wait for the rest.
    await waitFor(() => Promise.resolve(inFlight().length === 0 || undefined));
    expect(await upstreamKeys()).toEqual(before);
    expect((await refusal(tenant.send(new HeadObjectCommand({ Bucket, Key: 'cut.bin' })))).status).toBe(404);
  });

  it('answers conditional requests from the metadata it keeps', async () => {
    const { got } = await bytesOf('holiday/beach.jpg');
    const notModified = await refusal(
      tenant.send(new GetObjectCommand({ Bucket, Key: 'holiday/beach.jpg', IfNoneMatch: got.ETag })),
    );
    expect(notModified.status).toBe(304);
    const failed = await refusal(
      tenant.send(new GetObjectCommand({ Bucket, Key: 'holiday/beach.jpg', IfMatch: '"0000"' })),
    );
    expect(failed.status).toBe(412);
    // A conditional write that is refused writes nothing upstream.
    const before = await upstreamKeys();
    const exists = await refusal(
      tenant.send(new PutObjectCommand({ Bucket, Key: 'holiday/beach.jpg', Body: 'x', IfNoneMatch: '*' })),
    );
    expect(exists.status).toBe(412);
    expect(await upstreamKeys()).toEqual(before);
  });

  it('assembles a multipart upload upstream and drops its parts there', async () => {
    const first = pattern(5 * MiB, 3);
    const second = pattern(MiB + 17, 4);
    const created = await tenant.send(
      new CreateMultipartUploadCommand({ Bucket, Key: 'parts.bin', ChecksumAlgorithm: 'CRC32' }),
    );
    const UploadId = created.UploadId!;
    const parts = [];
    for (const [i, body] of [first, second].entries()) {
      const part = await tenant.send(
        new UploadPartCommand({
          Bucket,
          Key: 'parts.bin',
          UploadId,
          PartNumber: i + 1,
          Body: body,
          ChecksumAlgorithm: 'CRC32',
        }),
      );
      parts.push({ PartNumber: i + 1, ETag: part.ETag!, ChecksumCRC32: part.ChecksumCRC32! });
    }
    // The parts are upstream blobs of their own while the upload is open.
    expect((await upstreamKeys()).filter((k) => k.startsWith('objects/parts/'))).toHaveLength(2);
    await tenant.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: 'parts.bin',
        UploadId,
        MultipartUpload: { Parts: parts },
      }),
    );
    const { body, got } = await bytesOf('parts.bin');
    expect(body.equals(Buffer.concat([first, second]))).toBe(true);
    expect(got.ETag).toMatch(/-2"$/);
    const part2 = await tenant.send(new GetObjectCommand({ Bucket, Key: 'parts.bin', PartNumber: 2 }));
    expect(Buffer.from(await part2.Body!.transformToByteArray()).equals(second)).toBe(true);
    expect((await upstreamKeys()).filter((k) => k.startsWith('objects/parts/'))).toEqual([]);
  });

  it('makes parts of ranges of an upstream object (UploadPartCopy)', async () => {
    const source = pattern(300_000, 1);
    const UploadId = (await tenant.send(new CreateMultipartUploadCommand({ Bucket, Key: 'spliced.bin' })))
      .UploadId!;
    const copied = await tenant.send(
      new UploadPartCopyCommand({
        Bucket,
        Key: 'spliced.bin',
        UploadId,
        PartNumber: 1,
        CopySource: `${Bucket}/holiday/beach.jpg`,
        CopySourceRange: 'bytes=100-5099',
      }),
    );
    expect(copied.CopyPartResult?.ETag).toBe(`"${md5(source.subarray(100, 5100))}"`);
    await tenant.send(
      new CompleteMultipartUploadCommand({
        Bucket,
        Key: 'spliced.bin',
        UploadId,
        MultipartUpload: { Parts: [{ PartNumber: 1, ETag: copied.CopyPartResult!.ETag! }] },
      }),
    );
    expect((await bytesOf('spliced.bin')).body.equals(source.subarray(100, 5100))).toBe(true);
  });

  it('stores a browser form upload (its length not declared) upstream', async () => {
    const before = await upstreamKeys();
    const form = new FormData();
    for (const [k, v] of Object.entries(
      presignedPost(tenantKey, Bucket, [['starts-with', '$key', 'forms/']]),
    ))
      form.append(k, v);
    form.append('key', 'forms/${filename}');
    form.append('file', new Blob([new Uint8Array(pattern(70_000, 9))]), 'scan.pdf');
    const res = await fetch(`${endpoint.url}/${Bucket}`, { method: 'POST', body: form });
    expect(res.status).toBe(204);
    expect((await bytesOf('forms/scan.pdf')).body.equals(pattern(70_000, 9))).toBe(true);
    expect(await upstreamKeys()).toHaveLength(before.length + 1);
  });

  it('copies objects upstream and deletes their bytes there', async () => {
    await tenant.send(
      new CopyObjectCommand({ Bucket, Key: 'copy.jpg', CopySource: `${Bucket}/holiday/beach.jpg` }),
    );
    expect((await bytesOf('copy.jpg')).body.equals(pattern(300_000, 1))).toBe(true);
    const before = await upstreamKeys();
    await tenant.send(new DeleteObjectCommand({ Bucket, Key: 'copy.jpg' }));
    expect((await refusal(bytesOf('copy.jpg'))).code).toBe('NoSuchKey');
    const after = await upstreamKeys();
    expect(after).toHaveLength(before.length - 1);
    expect((await bytesOf('holiday/beach.jpg')).body.equals(pattern(300_000, 1))).toBe(true);
  });

  it('refuses to start without its settings, or with an upstream bucket it cannot use', async () => {
    expect(() => loadConfig({ BERTH_DATA_DIR: '/tmp/x', BERTH_OBJECT_STORAGE_DRIVER: 's3' })).toThrow(
      /BERTH_S3_UPSTREAM_URL is required[\s\S]*BERTH_S3_UPSTREAM_BUCKET is required[\s\S]*BERTH_S3_UPSTREAM_ACCESS_KEY_ID is required[\s\S]*BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY is required/,
    );
    await expectUnusableUpstreamRefused(dialect, upstreamEnv);
  });

  // Last: it stops the upstream.
  it('answers 5xx when the upstream fails, and lists no object for the failed write', async () => {
    await upstreamEndpoint.close();
    const failed = await tenant
      .send(new PutObjectCommand({ Bucket, Key: 'lost.bin', Body: pattern(1000) }))
      .then(
        () => undefined,
        (error: unknown) => error as S3ServiceException,
      );
    expect(failed?.$metadata.httpStatusCode).toBe(503);
    expect(failed?.name).toBe('ServiceUnavailable');
    // What failed upstream (its address) is Berth's to log, not the tenant's to read.
    expect(failed?.message).not.toContain(new URL(upstreamEndpoint.url).port);
    const listed = await tenant.send(new ListObjectsV2Command({ Bucket }));
    expect(listed.Contents?.map((c) => c.Key)).not.toContain('lost.bin');
    expect((await refusal(tenant.send(new HeadObjectCommand({ Bucket, Key: 'lost.bin' })))).status).toBe(404);
  });
});

/** The S3 endpoint of `env` in a process of its own (upstream-endpoint.ts), once it listens. */
function endpointProcess(env: Record<string, string>) {
  return startListeningScript(path.join(import.meta.dirname, 'upstream-endpoint.ts'), env);
}

const killed = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });

describe('the s3 driver killed with SIGKILL during a multipart upload', () => {
  let a: TestApp;
  let upstreamEndpoint: ServedEndpoint;
  let upstream: S3Client;
  let env: Record<string, string>;
  let settings: Parameters<typeof upstreamBlobStore>[0];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upstream-kill-'));
  const children: ChildProcess[] = [];

  const partKeys = async () =>
    (
      (await upstream.send(new ListObjectsV2Command({ Bucket: 'berth-blobs', Prefix: 'objects/parts/' })))
        .Contents ?? []
    ).map((c) => c.Key!);
  /** Files the upstream Berth is receiving right now (its bodies in flight). */
  const arriving = () => {
    const tmp = path.join(a.ctx.config.dataDir, 'objects', 'tmp');
    return fs.existsSync(tmp) ? fs.readdirSync(tmp).map((f) => fs.statSync(path.join(tmp, f)).size) : [];
  };

  beforeAll(async () => {
    a = await createTestApp(DIALECTS[0]!, {
      team: 'upstream',
      env: { BERTH_OBJECT_STORAGE_DRIVER: 'local' },
    });
    upstreamEndpoint = await a.ctx.services.objectStorage.serveEndpoint();
    const keys = await provisionStorage(a.ctx, a.user.team_id, 'berth-blobs', [
      { username: 'berth', policies: ['admin'] },
    ]);
    upstream = s3Client(upstreamEndpoint.url, keys.berth!.id, keys.berth!.secret);
    settings = {
      url: upstreamEndpoint.url,
      region: 'us-east-1',
      bucket: 'berth-blobs',
      accessKeyId: keys.berth!.id,
      secretAccessKey: keys.berth!.secret,
    };
    env = {
      BERTH_DATA_DIR: dataDir,
      BERTH_LOG_LEVEL: 'silent',
      BERTH_S3_PORT: '0',
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: settings.url,
      BERTH_S3_UPSTREAM_BUCKET: settings.bucket,
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: settings.accessKeyId,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: settings.secretAccessKey,
    };
  });

  afterAll(async () => {
    for (const child of children) await killed(child);
    upstream?.destroy();
    await upstreamEndpoint?.close();
    await a?.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('leaves the upstream only the parts the upload holds, and none once it is aborted', async () => {
    // The killed Berth's store: SQLite in its data directory, as `berth serve` makes it.
    const setup = await createContext(loadConfig(env), { logger: pino({ level: 'silent' }) });
    const user = await setup.identity.createUser({ email: 'tenant@example.com', team: 'tenant' });
    await applyObjectStorage(setup, user.team_id, {
      name: 'main',
      buckets: ['media'],
      users: [{ username: 'admin', policies: ['admin'] }],
    });
    await setup.services.jobs.runner().runDue();
    const [storage] = await setup.services.objectStorage.view({ id: user.team_id, role: 'owner' });
    const key = storage!.users[0]!;
    await setup.close();

    const first = await endpointProcess(env);
    children.push(first.child);
    const tenant = s3Client(first.url, key.access_key_id, key.secret_key!);
    const Key = 'video.mp4';
    const UploadId = (await tenant.send(new CreateMultipartUploadCommand({ Bucket: 'media', Key })))
      .UploadId!;
    const part1 = await tenant.send(
      new UploadPartCommand({ Bucket: 'media', Key, UploadId, PartNumber: 1, Body: pattern(5 * MiB, 5) }),
    );
    // Part 2 sends 1 MiB of its 5 and stalls: Berth is streaming it upstream when it is killed.
    let sent = false;
    const stalled = new Readable({
      read() {
        if (sent) return;
        sent = true;
        this.push(pattern(MiB, 6));
      },
    });
    const part2 = tenant
      .send(
        new UploadPartCommand({
          Bucket: 'media',
          Key,
          UploadId,
          PartNumber: 2,
          Body: stalled,
          ContentLength: 5 * MiB,
        }),
      )
      .catch((error: unknown) => error);
    await waitFor(() => Promise.resolve(arriving().some((size) => size >= MiB) || undefined), 20_000);
    await killed(first.child);
    expect(await part2).toBeInstanceOf(Error);
    tenant.destroy();
    // The upstream drops the PUT that was cut off: nothing of part 2 is stored there.
    await waitFor(() => Promise.resolve(arriving().length === 0 || undefined), 20_000);
    expect(await partKeys()).toHaveLength(1);

    // A blob no row names (as a kill between an upstream PUT and its commit leaves) goes with the
    // orphan sweep the next start runs; its hour of grace is passed here by sweeping two hours ahead.
    const orphan = `objects/parts/999999/ab/${randomBytes(12).toString('hex')}`;
    await upstream.send(new PutObjectCommand({ Bucket: 'berth-blobs', Key: orphan, Body: 'left behind' }));
    const store = await createContext(loadConfig(env), { logger: pino({ level: 'silent' }) });
    try {
      const named = createObjectMetadata(store.db, store.store.dialect);
      const blobs = upstreamBlobStore(settings, dataDir, store.logger);
      const removed = await blobs.sweepOrphans(
        (names) => named.namedFiles(names),
        new Date(Date.now() + 2 * 3600_000),
        3600_000,
      );
      expect(removed).toBe(1);
    } finally {
      await store.close();
    }
    const [kept] = await partKeys();
    expect(await partKeys()).toEqual([kept]);

    // The next start serves the upload as it was; aborting it leaves no part upstream.
    const second = await endpointProcess(env);
    children.push(second.child);
    const again = s3Client(second.url, key.access_key_id, key.secret_key!);
    const listed = await again.send(new ListPartsCommand({ Bucket: 'media', Key, UploadId }));
    expect(listed.Parts?.map((p) => [p.PartNumber, p.ETag])).toEqual([[1, part1.ETag]]);
    await again.send(new AbortMultipartUploadCommand({ Bucket: 'media', Key, UploadId }));
    expect(await partKeys()).toEqual([]);
    again.destroy();
  });
});
