// The s3 artifact store (BERTH_ARTIFACT_STORE=s3, issue 29 item 1): Berth B keeps artifacts in the
// upstream bucket under artifacts/<key>; the upstream is a second Berth's (A's) S3 endpoint, a real S3
// protocol peer, and A's bucket is inspected directly. Round trip, all-or-nothing writes, the cap, the
// presigned URLs (fetched with plain fetch: the bytes; an altered signature and an expired URL are
// refused by A), an upload through B's API landing in A's bucket, and the start check.
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { GetObjectCommand, ListObjectsV2Command, type S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import type { ServedEndpoint } from '../../src/drivers/objectstorage/driver.js';
import { ArtifactTooLargeError, sourceKey } from '../../src/drivers/artifacts/types.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { expectUnusableUpstreamRefused } from '../helpers/upstream.js';
import { apply } from '../infrastructure/helpers.js';
import { provisionStorage, s3Client } from '../object-storage/helpers.js';
import { archiveOf } from './node-app.js';

const bytesOf = async (body: Readable | undefined) => {
  const chunks: Buffer[] = [];
  for await (const chunk of body!) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

describe.each(DIALECTS)('the artifact store in an upstream S3 bucket (%s)', (dialect) => {
  let a: TestApp;
  let b: TestApp;
  let upstreamEndpoint: ServedEndpoint;
  /** A's own view of the upstream bucket. */
  let upstream: S3Client;
  let upstreamEnv: Record<string, string>;

  const upstreamKeys = async (prefix = 'artifacts/') =>
    (
      (await upstream.send(new ListObjectsV2Command({ Bucket: 'berth-blobs', Prefix: prefix }))).Contents ??
      []
    )
      .map((c) => c.Key!)
      .sort();
  const upstreamBytes = async (Key: string) =>
    Buffer.from(
      await (
        await upstream.send(new GetObjectCommand({ Bucket: 'berth-blobs', Key }))
      ).Body!.transformToByteArray(),
    );
  /** B's spools and downloads. */
  const temporaries = () => fs.readdirSync(path.join(b.ctx.config.dataDir, 'artifacts', '.tmp'));

  beforeAll(async () => {
    a = await createTestApp(dialect, { team: 'upstream', env: { BERTH_OBJECT_STORAGE_DRIVER: 'local' } });
    upstreamEndpoint = await a.ctx.services.objectStorage.serveEndpoint();
    const keys = await provisionStorage(a.ctx, a.user.team_id, 'berth-blobs', [
      { username: 'berth', policies: ['admin'] },
    ]);
    upstream = s3Client(upstreamEndpoint.url, keys.berth!.id, keys.berth!.secret);
    upstreamEnv = {
      // Object storage stays local here: only the artifacts go upstream.
      BERTH_OBJECT_STORAGE_DRIVER: 'local',
      BERTH_ARTIFACT_STORE: 's3',
      BERTH_S3_UPSTREAM_URL: upstreamEndpoint.url,
      BERTH_S3_UPSTREAM_BUCKET: 'berth-blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: keys.berth!.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: keys.berth!.secret,
    };
    b = await createTestApp(dialect, { env: upstreamEnv });
  });

  afterAll(async () => {
    upstream?.destroy();
    await b?.close();
    await upstreamEndpoint?.close();
    await a?.close();
  });

  it('puts, stats, opens, copies to a local file, removes, and removes an application’s artifacts', async () => {
    const store = b.ctx.services.artifacts;
    expect(store.name).toBe('s3');
    expect('openSigned' in store).toBe(false);
    const key = sourceKey(7, 'one.tgz');
    const body = Buffer.alloc(300_000, 3);
    const put = await store.put(key, Readable.from([body.subarray(0, 1000), body.subarray(1000)]), {
      maxBytes: body.length,
    });
    expect(put).toMatchObject({ key, size: body.length });
    expect(await upstreamKeys()).toEqual([`artifacts/${key}`]);
    expect((await upstreamBytes(`artifacts/${key}`)).equals(body)).toBe(true);

    expect(await store.stat(key)).toMatchObject({ key, size: body.length });
    expect(await store.exists(key)).toBe(true);
    expect((await bytesOf(await store.open(key))).equals(body)).toBe(true);
    const local = await store.localFile(key);
    expect(fs.readFileSync(local!.path).equals(body)).toBe(true);
    expect(fs.statSync(local!.path).mode & 0o777).toBe(0o600);
    await local!.release();
    expect(fs.existsSync(local!.path)).toBe(false);

    const missing = sourceKey(7, 'never.tgz');
    expect(await store.stat(missing)).toBeUndefined();
    expect(await store.exists(missing)).toBe(false);
    expect(await store.open(missing)).toBeUndefined();
    expect(await store.localFile(missing)).toBeUndefined();

    await store.remove(key);
    expect(await store.exists(key)).toBe(false);
    await store.remove(key); // gone already: no error

    for (const k of [
      sourceKey(7, 'a.tgz'),
      `apps/7/releases/d1.tar.gz`,
      sourceKey(8, 'b.tgz'),
      sourceKey(70, 'c.tgz'),
    ])
      await store.put(k, Readable.from([Buffer.from(k)]), { maxBytes: 1024 });
    await store.removeApplication(7);
    // Application 70's keys share the prefix "apps/7" but not "apps/7/".
    expect(await upstreamKeys()).toEqual([
      'artifacts/apps/70/sources/c.tgz',
      'artifacts/apps/8/sources/b.tgz',
    ]);
    expect(temporaries()).toEqual([]);
    await expect(store.put('apps/7/sources/../../x', Readable.from([]), { maxBytes: 1 })).rejects.toThrow(
      /artifact key must be/,
    );
  });

  it('keeps nothing of a body that fails midway or one over its cap; the key keeps what it had', async () => {
    const store = b.ctx.services.artifacts;
    const key = sourceKey(9, 'kept.tgz');
    await store.put(key, Readable.from([Buffer.from('the first one')]), { maxBytes: 1024 });
    const before = await upstreamKeys();
    const failing = Readable.from(
      (async function* () {
        yield Buffer.alloc(64 * 1024, 1);
        await Promise.resolve();
        throw new Error('the client went away');
      })(),
    );
    await expect(store.put(key, failing, { maxBytes: 1024 * 1024 })).rejects.toThrow('the client went away');
    await expect(
      store.put(sourceKey(9, 'big.tgz'), Readable.from([Buffer.alloc(1024), Buffer.alloc(1025)]), {
        maxBytes: 2048,
      }),
    ).rejects.toThrow(ArtifactTooLargeError);
    expect(await upstreamKeys()).toEqual(before);
    expect((await upstreamBytes(`artifacts/${key}`)).toString()).toBe('the first one');
    expect(temporaries()).toEqual([]);
  });

  it('signs URLs of the upstream: the bytes by plain fetch; an altered signature or an expired URL refused', async () => {
    const store = b.ctx.services.artifacts;
    const key = sourceKey(11, 'signed.tgz');
    const body = Buffer.alloc(70_000, 5);
    await store.put(key, Readable.from([body]), { maxBytes: body.length });

    const url = new URL(store.url(key, 60));
    expect(`${url.protocol}//${url.host}`).toBe(upstreamEndpoint.url);
    expect(url.pathname).toBe(`/berth-blobs/artifacts/${key}`);
    expect(url.searchParams.get('X-Amz-Expires')).toBe('60');
    const fetched = await fetch(url);
    expect(fetched.status).toBe(200);
    expect(Buffer.from(await fetched.arrayBuffer()).equals(body)).toBe(true);

    const signature = url.searchParams.get('X-Amz-Signature')!;
    const altered = new URL(url);
    altered.searchParams.set('X-Amz-Signature', `${signature[0] === '0' ? '1' : '0'}${signature.slice(1)}`);
    const refused = await fetch(altered);
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('SignatureDoesNotMatch');
    // The URL of one key does not open another.
    const other = new URL(url);
    other.pathname = `/berth-blobs/artifacts/${sourceKey(11, 'other.tgz')}`;
    expect((await fetch(other)).status).toBe(403);

    const short = store.url(key, 1);
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const expired = await fetch(short);
    expect(expired.status).toBe(403);
    expect(await expired.text()).toMatch(/expired/i);

    // Berth's own signed-URL route serves no artifact of this store: its URLs are the upstream's.
    const route = await b.request({
      url: `/internal/artifacts/${key}?expires=9999999999&signature=${'0'.repeat(64)}`,
    });
    expect(route.statusCode).toBe(404);

    expect(() => store.url(key, 0)).toThrow(RangeError);
    expect(() => store.url(key, 24 * 3600 + 1)).toThrow(RangeError);
    expect(() => store.url('apps/11/sources/../x', 60)).toThrow(/artifact key must be/);
  });

  it('stores a source uploaded through B’s API in A’s bucket under artifacts/apps/<id>/sources/', async () => {
    const res = await apply(b, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'uploaded', team: b.user.team_id },
      spec: { application: { name: 'uploaded', type: 'nodejs', commands: { start: 'node server.js' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const appId = res.json<{ application_id: number }>().application_id;
    const archive = archiveOf({ 'server.js': 'console.log(1)\n' });
    const stored = await b.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/source?deploy=false`,
      headers: { ...b.auth.platform, 'content-type': 'application/gzip' },
      payload: archive,
    });
    expect(stored.statusCode, stored.body).toBe(200);
    const row = await b.ctx.db
      .selectFrom('applications')
      .select('uploaded_source')
      .where('id', '=', appId)
      .executeTakeFirstOrThrow();
    const key = `artifacts/${sourceKey(appId, row.uploaded_source!)}`;
    expect(await upstreamKeys(`artifacts/apps/${appId}/`)).toEqual([key]);
    expect((await upstreamBytes(key)).equals(archive)).toBe(true);
    // Nothing of it on B's disk: the check read a download that is gone again.
    expect(temporaries()).toEqual([]);
    expect(fs.existsSync(path.join(b.ctx.config.dataDir, 'artifacts', 'apps'))).toBe(false);
  });

  it('refuses to start without its settings, or with an upstream bucket it cannot use', async () => {
    expect(() => loadConfig({ BERTH_DATA_DIR: '/tmp/x', BERTH_ARTIFACT_STORE: 's3' })).toThrow(
      /BERTH_S3_UPSTREAM_URL is required with BERTH_ARTIFACT_STORE=s3[\s\S]*BERTH_S3_UPSTREAM_BUCKET is required[\s\S]*BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY is required/,
    );
    expect(() =>
      loadConfig({ BERTH_DATA_DIR: '/tmp/x', BERTH_ARTIFACT_STORE: 's3', BERTH_OBJECT_STORAGE_DRIVER: 's3' }),
    ).toThrow(
      /BERTH_S3_UPSTREAM_URL is required with BERTH_OBJECT_STORAGE_DRIVER=s3 or BERTH_ARTIFACT_STORE=s3/,
    );
    expect(() => loadConfig({ BERTH_DATA_DIR: '/tmp/x', BERTH_ARTIFACT_STORE: 'ftp' })).toThrow(
      /BERTH_ARTIFACT_STORE/,
    );
    await expectUnusableUpstreamRefused(dialect, upstreamEnv);
  });
});
