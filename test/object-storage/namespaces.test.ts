// Bucket names are scoped to their object storage (issue 26 item 6, docs/decisions/0008): two teams
// apply storages with the same bucket names, over the API as users do, and each reads and writes its
// own objects with its own keys, on the shared endpoint and on its storage's own, and never sees the
// other's (objects, listings, copies, multipart, browser form uploads, CORS rules). A team's export
// applied by another team makes the same storage and buckets there.
import http from 'node:http';
import { createHmac } from 'node:crypto';
import {
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutBucketCorsCommand,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { authHeaders, createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { refusal, s3Client } from './helpers.js';

interface StorageView {
  uuid: string;
  state: string;
  endpoint: string;
  endpoints: { path: string; virtual_host: string | null };
  buckets: string[];
  users: Array<{ username: string; access_key_id: string; secret_key: string }>;
}

const storageDocument = (team: number) => ({
  apiVersion: 'v1',
  kind: 'Infrastructure',
  metadata: { name: 'media', team },
  spec: {
    object_storage: [
      {
        name: 'media',
        zone: 'europe-1',
        buckets: ['assets', 'uploads'],
        users: [{ username: 'admin', policies: ['admin'] }],
      },
    ],
  },
});

/** A GET sent to 127.0.0.1 with the Host header a virtual-host URL names (no DNS for `*.localhost`). */
function getWithHost(url: string): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: target.port,
        path: target.pathname + target.search,
        headers: { host: target.host },
      },
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

const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** A browser form upload (presigned POST) of `body` to `key` in `bucket`, signed with an access key. */
async function formUpload(url: string, access: { id: string; secret: string }, bucket: string, key: string) {
  const amzDate = new Date()
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = amzDate.slice(0, 8);
  const fields: Record<string, string> = {
    key,
    'x-amz-algorithm': 'AWS4-HMAC-SHA256',
    'x-amz-credential': `${access.id}/${date}/us-east-1/s3/aws4_request`,
    'x-amz-date': amzDate,
  };
  fields.policy = Buffer.from(
    JSON.stringify({
      expiration: new Date(Date.now() + 300_000).toISOString(),
      conditions: [{ bucket }, ...Object.entries(fields).map(([k, v]) => ({ [k]: v }))],
    }),
  ).toString('base64');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${access.secret}`, date), 'us-east-1'), 's3'), 'aws4_request');
  fields['x-amz-signature'] = hmac(signingKey, fields.policy).toString('hex');
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  form.append('file', new Blob(['from a form']), 'f.txt');
  return fetch(`${url}/${bucket}`, { method: 'POST', body: form });
}

describe.each(DIALECTS)('bucket names per object storage (%s)', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  const teams: Record<'a' | 'b', { id: number; headers: Record<string, string> }> = {} as never;
  const views: Record<'a' | 'b', StorageView> = {} as never;
  const keys: Record<'a' | 'b', { id: string; secret: string }> = {} as never;
  const clients: S3Client[] = [];
  const client = (endpoint: string, who: 'a' | 'b', pathStyle = true) => {
    const made = new S3Client({
      endpoint,
      region: 'us-east-1',
      forcePathStyle: pathStyle,
      credentials: { accessKeyId: keys[who].id, secretAccessKey: keys[who].secret },
      maxAttempts: 1,
    });
    clients.push(made);
    return made;
  };
  const text = async (c: S3Client, Bucket: string, Key: string) =>
    (await c.send(new GetObjectCommand({ Bucket, Key }))).Body!.transformToString();

  const apply = (headers: Record<string, string>, body: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/infrastructure/apply',
      headers: { ...headers, 'content-type': 'application/yaml' },
      payload: body,
    });
  const view = async (who: 'a' | 'b', team = teams[who]) => {
    const res = await t.request({
      method: 'GET',
      url: `/api/v1/teams/${team.id}/object-storage/media`,
      headers: team.headers,
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json<{ data: StorageView }>().data;
  };

  beforeAll(async () => {
    // A host name (not an IP address) so that each storage also gets a virtual-host endpoint.
    t = await createTestApp(dialect, { env: { BERTH_PUBLIC_URL: 'http://localhost' } });
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    const beta = await t.ctx.identity.createUser({ email: 'b@example.com', team: 'beta', role: 'owner' });
    teams.a = { id: t.user.team_id, headers: t.auth.platform };
    teams.b = { id: beta.team_id, headers: authHeaders(beta).platform };
    // One after the other: B applies while A's buckets exist (once a 422, "bucket name is taken").
    for (const who of ['a', 'b'] as const) {
      const res = await apply(teams[who].headers, stringify(storageDocument(teams[who].id)));
      expect(res.statusCode, res.body).toBe(200);
      await t.ctx.services.jobs.runner().runDue();
      views[who] = await view(who);
      const admin = views[who].users[0]!;
      keys[who] = { id: admin.access_key_id, secret: admin.secret_key };
    }
  });

  afterAll(async () => {
    for (const c of clients) c.destroy();
    await s3?.close();
    await t?.close();
  });

  it('provisions both storages with the same bucket names, each with an endpoint of its own', () => {
    for (const who of ['a', 'b'] as const) {
      expect(views[who]).toMatchObject({
        state: 'running',
        buckets: ['assets', 'uploads'],
        endpoint: `http://localhost:${s3.port}`,
        endpoints: {
          path: `http://localhost:${s3.port}/${views[who].uuid}`,
          virtual_host: `http://${views[who].uuid}.localhost:${s3.port}`,
        },
      });
    }
    expect(views.a.uuid).not.toBe(views.b.uuid);
  });

  it('serves each team its own objects under the same names, on the shared endpoint and its own', async () => {
    for (const who of ['a', 'b'] as const) {
      const shared = client(views[who].endpoint, who);
      await shared.send(new PutObjectCommand({ Bucket: 'assets', Key: 'hello.txt', Body: `from ${who}` }));
      await shared.send(
        new CopyObjectCommand({ Bucket: 'uploads', Key: 'copy.txt', CopySource: 'assets/hello.txt' }),
      );
      const upload = await shared.send(
        new CreateMultipartUploadCommand({ Bucket: 'uploads', Key: 'parts.txt' }),
      );
      const part = await shared.send(
        new UploadPartCommand({
          Bucket: 'uploads',
          Key: 'parts.txt',
          UploadId: upload.UploadId,
          PartNumber: 1,
          Body: `parts of ${who}`,
        }),
      );
      await shared.send(
        new CompleteMultipartUploadCommand({
          Bucket: 'uploads',
          Key: 'parts.txt',
          UploadId: upload.UploadId,
          MultipartUpload: { Parts: [{ PartNumber: 1, ETag: part.ETag }] },
        }),
      );
      // A bucket made over S3 may take a name the other storage holds too.
      await shared.send(new CreateBucketCommand({ Bucket: 'scratch' }));
    }
    for (const who of ['a', 'b'] as const) {
      for (const endpoint of [views[who].endpoint, views[who].endpoints.path]) {
        const c = client(endpoint, who);
        expect(await text(c, 'assets', 'hello.txt')).toBe(`from ${who}`);
        expect(await text(c, 'uploads', 'copy.txt')).toBe(`from ${who}`);
        expect(await text(c, 'uploads', 'parts.txt')).toBe(`parts of ${who}`);
        const listed = await c.send(new ListObjectsV2Command({ Bucket: 'uploads' }));
        expect(listed.Contents?.map((o) => o.Key)).toEqual(['copy.txt', 'parts.txt']);
        const buckets = await c.send(new ListBucketsCommand({}));
        expect(buckets.Buckets?.map((b) => b.Name)).toEqual(['assets', 'scratch', 'uploads']);
      }
      // Virtual-host style on the storage's own host: `<bucket>.<uuid>.localhost`.
      const virtual = client(views[who].endpoints.virtual_host!, who, false);
      const url = await getSignedUrl(virtual, new GetObjectCommand({ Bucket: 'assets', Key: 'hello.txt' }));
      expect(new URL(url).hostname).toBe(`assets.${views[who].uuid}.localhost`);
      expect(await getWithHost(url)).toEqual({ status: 200, body: `from ${who}` });
    }
  });

  it('never lets a key reach the other storage, by its endpoint or by name', async () => {
    // B's key on A's own endpoint is refused before anything is read.
    const intruder = client(views.a.endpoints.path, 'b');
    expect(
      await refusal(intruder.send(new GetObjectCommand({ Bucket: 'assets', Key: 'hello.txt' }))),
    ).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    expect(await refusal(intruder.send(new ListBucketsCommand({})))).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    // A name only A holds is no bucket of B's.
    const a = client(views.a.endpoint, 'a');
    await a.send(new CreateBucketCommand({ Bucket: 'only-a' }));
    await a.send(new PutObjectCommand({ Bucket: 'only-a', Key: 'k', Body: 'a' }));
    const b = client(views.b.endpoint, 'b');
    expect(await refusal(b.send(new GetObjectCommand({ Bucket: 'only-a', Key: 'k' })))).toEqual({
      code: 'NoSuchBucket',
      status: 404,
    });
    // Nor can B copy from it: the copy source is looked up in the caller's storage.
    expect(
      await refusal(
        b.send(new CopyObjectCommand({ Bucket: 'assets', Key: 'stolen', CopySource: 'only-a/k' })),
      ),
    ).toEqual({ code: 'NoSuchBucket', status: 404 });
  });

  it('takes a browser form upload into the signing key’s storage, and refuses it on another’s endpoint', async () => {
    const uploaded = await formUpload(views.b.endpoint, keys.b, 'assets', 'form.txt');
    expect(uploaded.status).toBe(204);
    expect(await text(client(views.b.endpoint, 'b'), 'assets', 'form.txt')).toBe('from a form');
    expect(
      await refusal(
        client(views.a.endpoint, 'a').send(new GetObjectCommand({ Bucket: 'assets', Key: 'form.txt' })),
      ),
    ).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    const refused = await formUpload(views.a.endpoints.path, keys.b, 'assets', 'form2.txt');
    expect(refused.status).toBe(403);
  });

  it('answers browsers by the CORS rules of the storage the request names', async () => {
    await client(views.a.endpoint, 'a').send(
      new PutBucketCorsCommand({
        Bucket: 'assets',
        CORSConfiguration: {
          CORSRules: [{ AllowedOrigins: ['https://a.example'], AllowedMethods: ['PUT'] }],
        },
      }),
    );
    const preflight = (url: string) =>
      fetch(url, {
        method: 'OPTIONS',
        headers: { origin: 'https://b.example', 'access-control-request-method': 'PUT' },
      });
    // A's rules govern A's bucket; B's bucket of the same name has none (any origin).
    expect((await preflight(`${views.a.endpoints.path}/assets/x`)).status).toBe(403);
    expect((await preflight(`${views.b.endpoints.path}/assets/x`)).status).toBe(200);
    // On the shared endpoint a request names its storage by the key it claims.
    const signedB = await getSignedUrl(
      client(views.b.endpoint, 'b'),
      new GetObjectCommand({ Bucket: 'assets', Key: 'hello.txt' }),
    );
    const fromB = await fetch(signedB, { headers: { origin: 'https://b.example' } });
    expect(fromB.status).toBe(200);
    expect(fromB.headers.get('access-control-allow-origin')).toBe('https://b.example');
    const signedA = await getSignedUrl(
      client(views.a.endpoint, 'a'),
      new GetObjectCommand({ Bucket: 'assets', Key: 'hello.txt' }),
    );
    const fromA = await fetch(signedA, { headers: { origin: 'https://b.example' } });
    expect(fromA.status).toBe(200);
    expect(fromA.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses new bucket names shaped like a uuid, and still serves one made before', async () => {
    const a = client(views.a.endpoint, 'a');
    const uuidShaped = '0b6c7c1e-1111-4222-8333-123456789abc';
    expect(await refusal(a.send(new CreateBucketCommand({ Bucket: uuidShaped })))).toEqual({
      code: 'InvalidBucketName',
      status: 400,
    });
    const doc = storageDocument(teams.a.id);
    doc.spec.object_storage[0]!.buckets = [uuidShaped];
    const refused = await apply(teams.a.headers, stringify(doc));
    expect(refused.statusCode).toBe(422);
    expect(Object.keys(refused.json<{ errors: Record<string, string[]> }>().errors)).toEqual([
      'spec.object_storage.media.buckets.0',
    ]);
    // A bucket of that shape from before the rule: no storage has that uuid, so it is a bucket.
    const storage = await t.ctx.db
      .selectFrom('object_storages')
      .select('id')
      .where('uuid', '=', views.a.uuid)
      .executeTakeFirstOrThrow();
    await t.ctx.db
      .insertInto('s3_buckets')
      .values({ object_storage_id: storage.id, name: uuidShaped, created_at: new Date().toISOString() })
      .execute();
    await a.send(new PutObjectCommand({ Bucket: uuidShaped, Key: 'old.txt', Body: 'still here' }));
    expect(await text(a, uuidShaped, 'old.txt')).toBe('still here');
  });

  it('recreates a team’s storage and buckets from its export applied by another team', async () => {
    const exported = await t.request({
      method: 'GET',
      url: `/api/v1/teams/${teams.a.id}/export-yaml`,
      headers: teams.a.headers,
    });
    expect(exported.statusCode).toBe(200);
    // The storage's own endpoint is shown as a comment: the platform gives each storage its own.
    expect(exported.body).toContain(`# endpoint: ${views.a.endpoints.path}`);
    const gamma = await t.ctx.identity.createUser({ email: 'c@example.com', team: 'gamma', role: 'owner' });
    const document = parse(exported.body) as { metadata: { team: unknown } };
    document.metadata.team = gamma.team_id;
    const applied = await apply(authHeaders(gamma).platform, stringify(document));
    expect(applied.statusCode, applied.body).toBe(200);
    await t.ctx.services.jobs.runner().runDue();
    const made = await view('a', { id: gamma.team_id, headers: authHeaders(gamma).platform });
    expect(made).toMatchObject({ state: 'running', buckets: ['assets', 'uploads'] });
    expect(made.uuid).not.toBe(views.a.uuid);
    const c = s3Client(made.endpoints.path, made.users[0]!.access_key_id, made.users[0]!.secret_key);
    clients.push(c);
    await c.send(new PutObjectCommand({ Bucket: 'assets', Key: 'hello.txt', Body: 'from c' }));
    expect(await text(c, 'assets', 'hello.txt')).toBe('from c');
    expect(await text(client(views.a.endpoint, 'a'), 'assets', 'hello.txt')).toBe('from a');
  });
});
