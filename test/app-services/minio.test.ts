// The `minio` service (issue 15): a private bucket on Berth's own S3 endpoint with a key scoped to it.
// Applied as a document and made sure of as a deployment does, used with the real AWS SDK and only the
// values the application is given: its key works in its bucket and nowhere else (another application's
// minio bucket, a team storage's bucket, even of the same name), another key does not open it; the
// storage is the application's, never the team's (lists, a single look-up, deletion, the YAML export,
// quotas); provisioning again changes nothing; deleting the application removes
// the bucket, its objects and files, and the key.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  GetObjectCommand,
  ListBucketsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { LOOKUP_TTL_MS } from '../../src/drivers/objectstorage/local/server.js';
import { networksAvailable, vethName } from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { appDocument, data } from './helpers.js';
import { DIALECTS } from '../helpers/store.js';
import { provisionStorage, refusal } from '../object-storage/helpers.js';

const TEAM_BUCKET = 'team-shared-bucket';

describe.each(DIALECTS)('minio service (%s)', (dialect) => {
  let t: TestApp;
  const apps: Record<string, number> = {};
  let teamKey: { id: string; secret: string };

  const apply = async (body: string, query = '?auto_deploy=false') =>
    t.request({
      method: 'POST',
      url: `/api/v1/infrastructure/apply${query}`,
      headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
      payload: body,
    });
  const get = (url: string) => t.request({ method: 'GET', url, headers: t.auth.platform });
  /** What the application is given for its service (GET …/services/<name>/environment). */
  const environment = async (appId: number, service: string): Promise<Record<string, string>> => {
    const response = await get(`/api/v1/applications/${appId}/services/${service}/environment`);
    expect(response.statusCode, response.body).toBe(200);
    return Object.fromEntries(
      data<Array<{ key: string; value: string }>>(response).map((e) => [e.key, e.value]),
    );
  };
  /**
   * The endpoint URL as application `appId` is given it: at the host end of its network as root
   * (docs/runtime.md, "Networks"), else on loopback.
   */
  const atApp = (appId: number, url: string) => {
    if (!networksAvailable()) return url;
    const veth = vethName(runtimeTag(t.ctx.config.dataDir), appId);
    const [link] = JSON.parse(
      execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', veth], { encoding: 'utf8' }),
    ) as Array<{ addr_info: Array<{ local: string }> }>;
    return url.replace('127.0.0.1', link!.addr_info[0]!.local);
  };
  /** A client with the application's key, from the host: Berth's endpoint on loopback. */
  const clientOf = (env: Record<string, string>) =>
    new S3Client({
      endpoint: `http://127.0.0.1:${new URL(env.S3_ENDPOINT!).port}`,
      region: env.S3_REGION,
      forcePathStyle: true,
      credentials: { accessKeyId: env.S3_ACCESS_KEY_ID!, secretAccessKey: env.S3_SECRET_ACCESS_KEY! },
      maxAttempts: 1,
    });
  const teamClient = () =>
    new S3Client({
      endpoint: t.ctx.services.objectStorage.driver.endpoint(),
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: teamKey.id, secretAccessKey: teamKey.secret },
      maxAttempts: 1,
    });
  const body = async (client: S3Client, Bucket: string, Key: string) =>
    (await client.send(new GetObjectCommand({ Bucket, Key }))).Body!.transformToString();

  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_QUOTA_OBJECT_STORAGES: '2' } });
    const team = t.user.team_id;
    // A storage of the team's own, made as apply makes one.
    teamKey = (await provisionStorage(t.ctx, team, TEAM_BUCKET, [{ username: 'admin', policies: ['admin'] }]))
      .admin!;
    for (const [name, services] of [
      ['shop', [{ name: 'files', type: 'minio', settings: { bucket: 'shop-files' } }]],
      ['blog', [{ name: 'media', type: 'minio' }]],
      // Asks for a name the team's storage holds: names are per storage, so it gets its own of that name.
      ['wiki', [{ name: 'assets', type: 'minio', settings: { bucket: TEAM_BUCKET } }]],
    ] as const) {
      const response = await apply(appDocument(name, [...services]));
      expect(response.statusCode, response.body).toBe(200);
      apps[name] = response.json<{ application_id: number }>().application_id;
    }
    // What a deployment's release does before anything starts (apply provisions only engine types).
    for (const id of Object.values(apps)) await t.ctx.services.appServices.ensureApplication(id);
  });
  afterAll(() => t?.close());

  it('gives the application a bucket and a key on Berth’s endpoint that read, write and list there', async () => {
    const env = await environment(apps.shop!, 'files');
    expect(env).toMatchObject({
      S3_BUCKET: 'shop-files',
      S3_REGION: 'us-east-1',
      S3_ENDPOINT: atApp(apps.shop!, t.ctx.services.objectStorage.driver.endpoint()),
    });
    expect(env.S3_ACCESS_KEY_ID).toMatch(/^[A-Z0-9]{20}$/);
    expect(env.S3_SECRET_ACCESS_KEY).toHaveLength(40);
    const client = clientOf(env);
    await client.send(new PutObjectCommand({ Bucket: 'shop-files', Key: 'a/one.txt', Body: 'one' }));
    await client.send(new PutObjectCommand({ Bucket: 'shop-files', Key: 'two.txt', Body: 'two' }));
    expect(await body(client, 'shop-files', 'a/one.txt')).toBe('one');
    const listed = await client.send(new ListObjectsV2Command({ Bucket: 'shop-files' }));
    expect(listed.Contents?.map((c) => c.Key)).toEqual(['a/one.txt', 'two.txt']);
    // Its own bucket is all it sees.
    const buckets = await client.send(new ListBucketsCommand({}));
    expect(buckets.Buckets?.map((b) => b.Name)).toEqual(['shop-files']);

    const view = data<Array<{ name: string; type: string; status: string; engine_version: string }>>(
      await get(`/api/v1/applications/${apps.shop!}/services`),
    );
    expect(view).toEqual([
      expect.objectContaining({
        name: 'files',
        type: 'minio',
        status: 'running',
        engine_version: 'Berth S3',
      }),
    ]);
  });

  it('derives a bucket name when the document names none, and keeps one another storage holds', async () => {
    const blog = await environment(apps.blog!, 'media');
    expect(blog.S3_BUCKET).toMatch(new RegExp(`^app-${apps.blog!}-media-[0-9a-f]{8}$`));
    const wiki = await environment(apps.wiki!, 'assets');
    expect(wiki.S3_BUCKET).toBe(TEAM_BUCKET);
    const client = clientOf(wiki);
    await client.send(new PutObjectCommand({ Bucket: wiki.S3_BUCKET, Key: 'k', Body: 'wiki' }));
    expect(await body(client, wiki.S3_BUCKET!, 'k')).toBe('wiki');
    // The team's bucket of the same name is another bucket.
    await teamClient().send(new PutObjectCommand({ Bucket: TEAM_BUCKET, Key: 'k', Body: 'team' }));
    expect(await body(client, TEAM_BUCKET, 'k')).toBe('wiki');
    expect(await body(teamClient(), TEAM_BUCKET, 'k')).toBe('team');
  });

  it('refuses the key anywhere but its bucket, and other keys in its bucket', async () => {
    const shop = clientOf(await environment(apps.shop!, 'files'));
    const blogEnv = await environment(apps.blog!, 'media');
    const blog = clientOf(blogEnv);
    await blog.send(new PutObjectCommand({ Bucket: blogEnv.S3_BUCKET, Key: 'secret.txt', Body: 'blog' }));
    await teamClient().send(new PutObjectCommand({ Bucket: TEAM_BUCKET, Key: 'team.txt', Body: 'team' }));

    // Other storages' buckets are not in the shop's storage: no such bucket there.
    for (const [Bucket, Key] of [
      [blogEnv.S3_BUCKET!, 'secret.txt'],
      [TEAM_BUCKET, 'team.txt'],
    ] as const) {
      expect(await refusal(shop.send(new GetObjectCommand({ Bucket, Key }))), Bucket).toMatchObject({
        code: 'NoSuchBucket',
      });
      expect(
        await refusal(shop.send(new PutObjectCommand({ Bucket, Key: 'x', Body: 'x' }))),
        Bucket,
      ).toMatchObject({ code: 'NoSuchBucket' });
      expect(await refusal(shop.send(new ListObjectsV2Command({ Bucket }))), Bucket).toMatchObject({
        code: 'NoSuchBucket',
      });
    }
    // Neither another application's key nor the team's admin key opens the shop's bucket.
    for (const other of [blog, teamClient()]) {
      expect(
        await refusal(other.send(new GetObjectCommand({ Bucket: 'shop-files', Key: 'two.txt' }))),
      ).toMatchObject({ code: 'NoSuchBucket' });
      expect(
        await refusal(other.send(new PutObjectCommand({ Bucket: 'shop-files', Key: 'x', Body: 'x' }))),
      ).toMatchObject({ code: 'NoSuchBucket' });
    }
    // It makes no other bucket, and cannot give its own up.
    expect(await refusal(shop.send(new CreateBucketCommand({ Bucket: 'shop-more' })))).toMatchObject({
      code: 'AccessDenied',
    });
    expect(await refusal(shop.send(new DeleteBucketCommand({ Bucket: 'shop-files' })))).toMatchObject({
      code: 'AccessDenied',
    });
    expect(await body(blog, blogEnv.S3_BUCKET!, 'secret.txt')).toBe('blog');
  });

  it('keeps the applications’ storages out of the team’s storages, export, quota and documents', async () => {
    const team = t.user.team_id;
    const listed = data<Array<{ name: string }>>(await get(`/api/v1/teams/${team}/object-storage`));
    expect(listed.map((s) => s.name)).toEqual(['main']);

    const exported = await get(`/api/v1/teams/${team}/export-yaml`);
    expect(exported.statusCode).toBe(200);
    const doc = parse(exported.body) as { spec: { object_storage?: Array<{ name: string }> } };
    expect(doc.spec.object_storage?.map((s) => s.name)).toEqual(['main']);
    expect(exported.body).not.toContain('shop-files');

    // Neither by uuid nor by name: not found, not deletable.
    const own = await t.ctx.db
      .selectFrom('object_storages')
      .select(['uuid', 'name'])
      .where('application_id', '=', apps.shop!)
      .executeTakeFirstOrThrow();
    for (const ref of [own.uuid, encodeURIComponent(own.name)]) {
      expect((await get(`/api/v1/teams/${team}/object-storage/${ref}`)).statusCode).toBe(404);
      const deleted = await t.request({
        method: 'DELETE',
        url: `/api/v1/teams/${team}/object-storage/${ref}`,
        headers: t.auth.platform,
      });
      expect(deleted.statusCode).toBe(404);
    }

    const teamDocument = (storages: unknown[]) =>
      stringify({
        apiVersion: 'v1',
        kind: 'Infrastructure',
        metadata: { name: 'storage', team: 'acme' },
        spec: { object_storage: storages },
      });
    // The quota (2 here) counts the team's one storage, not the applications' three.
    const second = await apply(
      teamDocument([{ name: 'more', zone: 'europe-1', buckets: ['more-bucket'] }]),
      '?dry_run=true',
    );
    expect(second.statusCode, second.body).toBe(200);
    // A team storage may name a bucket like the application's: it is another bucket.
    const same = await apply(
      teamDocument([{ name: 'more', zone: 'europe-1', buckets: ['shop-files'] }]),
      '?dry_run=true',
    );
    expect(same.statusCode, same.body).toBe(200);
  });

  it('provisions again to the same bucket and key', async () => {
    const before = await environment(apps.shop!, 'files');
    await t.ctx.services.appServices.ensureApplication(apps.shop!);
    await t.ctx.services.appServices.ensureApplication(apps.shop!);
    expect(await environment(apps.shop!, 'files')).toEqual(before);
    const storage = await t.ctx.db
      .selectFrom('object_storages')
      .select('id')
      .where('application_id', '=', apps.shop!)
      .execute();
    expect(storage).toHaveLength(1);
    const keys = await t.ctx.db
      .selectFrom('s3_access_keys')
      .select('access_key_id')
      .where('object_storage_id', '=', storage[0]!.id)
      .execute();
    expect(keys).toEqual([{ access_key_id: before.S3_ACCESS_KEY_ID }]);
    expect(await body(clientOf(before), 'shop-files', 'two.txt')).toBe('two');
  });

  it('is served by Berth’s endpoint: started again where it moved, never counted as a crash', async () => {
    const runner = t.ctx.services.serviceRunners.find((r) => r.types.includes('minio'))!;
    const instance = await t.ctx.db
      .selectFrom('app_service_instances')
      .select('uuid')
      .where('application_id', '=', apps.shop!)
      .executeTakeFirstOrThrow();
    const ref = { id: instance.uuid, type: 'minio' };
    const before = await environment(apps.shop!, 'files');
    expect(await runner.status(ref)).toEqual({ running: true, pid: null });
    // No Berth start served it here: the service did, and it stops with it.
    const served = t.ctx.services.objectStorage.served()!;
    expect(before.S3_ENDPOINT).toBe(atApp(apps.shop!, `http://127.0.0.1:${served.port}`));
    await served.close();
    expect(await runner.status(ref)).toEqual({ running: false, pid: null });

    const supervisor = t.ctx.services.appServices.startSupervisor({ intervalMs: 60_000 });
    await supervisor.tick();
    await supervisor.stop();
    expect(await runner.status(ref)).toEqual({ running: true, pid: null });
    const after = await environment(apps.shop!, 'files');
    expect(after.S3_ENDPOINT).toBe(
      atApp(apps.shop!, `http://127.0.0.1:${t.ctx.services.objectStorage.served()!.port}`),
    );
    expect(after.S3_ACCESS_KEY_ID).toBe(before.S3_ACCESS_KEY_ID);
    expect(await body(clientOf(after), 'shop-files', 'two.txt')).toBe('two');
    const view = data<Array<{ restarts: number; status: string }>>(
      await get(`/api/v1/applications/${apps.shop!}/services`),
    );
    expect(view).toEqual([expect.objectContaining({ status: 'running', restarts: 0 })]);

    const restarted = await t.request({
      method: 'POST',
      url: `/api/v1/applications/${apps.shop!}/services/files/restart`,
      headers: t.auth.platform,
    });
    expect(restarted.statusCode, restarted.body).toBe(200);
    expect(await environment(apps.shop!, 'files')).toEqual(after);
    const logs = await get(`/api/v1/applications/${apps.shop!}/services/files/logs`);
    expect(data(logs)).toEqual([]);
    const formats = data<Array<{ name: string; value: string }>>(
      await get(`/api/v1/applications/${apps.shop!}/services/files/connection-formats`),
    );
    expect(formats.find((f) => f.name === 'url')?.value).toBe(`${after.S3_ENDPOINT}/shop-files`);
  });

  it('removes the bucket, its objects and the key with the application', async () => {
    const env = await environment(apps.blog!, 'media');
    const client = clientOf(env);
    const storage = await t.ctx.db
      .selectFrom('object_storages')
      .select('id')
      .where('application_id', '=', apps.blog!)
      .executeTakeFirstOrThrow();
    const bucket = await t.ctx.db
      .selectFrom('s3_buckets')
      .select('id')
      .where('name', '=', env.S3_BUCKET!)
      .executeTakeFirstOrThrow();
    const files = path.join(t.ctx.config.dataDir, 'objects', 'data', String(bucket.id));
    expect(fs.existsSync(files)).toBe(true);

    const deleted = await t.request({
      method: 'DELETE',
      url: `/api/v1/applications/${apps.blog!}`,
      headers: t.auth.platform,
    });
    expect(deleted.statusCode, deleted.body).toBe(202);
    await t.ctx.services.jobs.runner().runDue();
    expect((await get(`/api/v1/applications/${apps.blog!}`)).statusCode).toBe(404);

    expect(
      await t.ctx.db.selectFrom('object_storages').select('id').where('id', '=', storage.id).execute(),
    ).toEqual([]);
    expect(
      await t.ctx.db.selectFrom('s3_buckets').select('id').where('id', '=', bucket.id).execute(),
    ).toEqual([]);
    expect(
      await t.ctx.db.selectFrom('s3_objects').select('id').where('bucket_id', '=', bucket.id).execute(),
    ).toEqual([]);
    expect(
      await t.ctx.db
        .selectFrom('s3_access_keys')
        .select('id')
        .where('access_key_id', '=', env.S3_ACCESS_KEY_ID!)
        .execute(),
    ).toEqual([]);
    expect(fs.existsSync(files)).toBe(false);
    // Past the endpoint's look-up cache, the old key opens nothing.
    await new Promise((r) => setTimeout(r, LOOKUP_TTL_MS + 100));
    expect(await refusal(client.send(new ListBucketsCommand({})))).toMatchObject({
      code: 'InvalidAccessKeyId',
    });
    // The other applications' storages are untouched.
    expect(await body(clientOf(await environment(apps.shop!, 'files')), 'shop-files', 'two.txt')).toBe('two');
  });
});
