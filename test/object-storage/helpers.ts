// Object storages inserted and enqueued exactly as apply does, and S3 clients for their users.
import { createHmac } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { ListObjectsV2Command, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { iso } from '../../src/domain/clock.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import type { AppContext } from '../../src/context.js';

export interface StorageInput {
  name: string;
  buckets: string[];
  users: Array<{ username?: string; policies: unknown[] }>;
}

/** Inserts a pending object storage and its provisioning job in one transaction (what apply does). */
export async function applyObjectStorage(
  ctx: AppContext,
  teamId: number,
  input: StorageInput,
): Promise<string> {
  const uuid = ctx.ids.uuid();
  const now = ctx.clock.now();
  await ctx.db.transaction().execute(async (trx) => {
    await trx
      .insertInto('object_storages')
      .values({
        uuid,
        team_id: teamId,
        name: input.name,
        zone: 'fi-hel1',
        plan: null,
        buckets: JSON.stringify(input.buckets),
        users: JSON.stringify(input.users),
        state: 'pending',
        state_reason: null,
        pending_zone: null,
        created_at: iso(now),
        updated_at: iso(now),
      })
      .execute();
    await enqueueJob(
      trx,
      {
        type: 'object_storage.provision',
        key: `object_storage.provision:${uuid}`,
        payload: { uuid },
        runAt: now,
      },
      now,
    );
  });
  return uuid;
}

export function s3Client(endpoint: string, accessKeyId: string, secretAccessKey: string): S3Client {
  return new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId, secretAccessKey },
    maxAttempts: 1,
  });
}

/** Presigned PUT sent by hand with Expect: 100-continue: `onContinue` runs once the endpoint has
 * accepted the headers (authentication and the early condition check passed), before the body goes. */
export function putAfterContinue(
  url: string,
  headers: Record<string, string>,
  body: Buffer,
  onContinue: () => Promise<void>,
): Promise<{ status: number; body: string }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: target.hostname,
        port: target.port,
        method: 'PUT',
        path: target.pathname + target.search,
        headers: { ...headers, 'content-length': body.length, expect: '100-continue' },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.on('continue', () => {
      onContinue().then(
        () => req.end(body),
        (error: unknown) => {
          req.destroy();
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  });
}

/** How a request ended: `accepted`, or the refusal's status and S3 error code (`404 NoSuchKey`). */
export async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException) return `${error.$metadata.httpStatusCode} ${error.name}`;
    throw error;
  }
  return 'accepted';
}

/** The S3 error a request was refused with; fails when it was not refused. */
export async function refusal(
  promise: Promise<unknown>,
): Promise<{ code: string; status: number | undefined }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException)
      return { code: error.name, status: error.$metadata.httpStatusCode };
    throw error;
  }
  throw new Error('request was not refused');
}

/**
 * One object storage with one bucket and the given users, provisioned as apply does; each user's
 * access key by user name.
 */
export async function provisionStorage(
  ctx: AppContext,
  teamId: number,
  bucket: string,
  users: Array<{ username: string; policies: unknown[] }>,
): Promise<Record<string, { id: string; secret: string }>> {
  await applyObjectStorage(ctx, teamId, { name: 'main', buckets: [bucket], users });
  await ctx.services.jobs.runner().runDue();
  const [storage] = await ctx.services.objectStorage.view({ id: teamId, role: 'owner' });
  return Object.fromEntries(
    storage!.users.map((u) => [u.username, { id: u.access_key_id, secret: u.secret_key! }]),
  );
}

/** One object storage with one bucket and an `admin` user, provisioned as apply does; its client. */
export async function adminStorage(ctx: AppContext, teamId: number, endpoint: string, bucket: string) {
  const keys = await provisionStorage(ctx, teamId, bucket, [{ username: 'admin', policies: ['admin'] }]);
  return s3Client(endpoint, keys.admin!.id, keys.admin!.secret);
}

const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();

/** The form fields of a presigned POST, following AWS's "Browser-based uploads using POST" algorithm. */
export function presignedPost(
  key: { id: string; secret: string },
  bucket: string,
  conditions: unknown[],
  options: { expiresInMs?: number; now?: Date } = {},
): Record<string, string> {
  const now = options.now ?? new Date();
  const amzDate = now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = amzDate.slice(0, 8);
  const credential = `${key.id}/${date}/us-east-1/s3/aws4_request`;
  const fields = {
    'x-amz-algorithm': 'AWS4-HMAC-SHA256',
    'x-amz-credential': credential,
    'x-amz-date': amzDate,
  };
  const policy = Buffer.from(
    JSON.stringify({
      expiration: new Date(now.getTime() + (options.expiresInMs ?? 300_000)).toISOString(),
      conditions: [{ bucket }, ...Object.entries(fields).map(([k, v]) => ({ [k]: v })), ...conditions],
    }),
  ).toString('base64');
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${key.secret}`, date), 'us-east-1'), 's3'), 'aws4_request');
  return { ...fields, policy, 'x-amz-signature': hmac(signingKey, policy).toString('hex') };
}

/**
 * The blobs (object or part bytes) the storage keeps under `<area>/<owner>/`, on whichever driver the
 * Berth runs: files under the data directory's objects/ (local), or keys under objects/ of the upstream
 * bucket (s3). Names relative to `<area>/<owner>/`, sorted.
 */
export async function storedBlobs(
  ctx: AppContext,
  area: 'data' | 'parts',
  owner?: number,
): Promise<string[]> {
  const under = owner === undefined ? `${area}/` : `${area}/${owner}/`;
  const upstream = ctx.config.s3Upstream;
  if (ctx.config.drivers.objectStorage === 's3' && upstream) {
    const client = s3Client(upstream.url, upstream.accessKeyId, upstream.secretAccessKey);
    const names: string[] = [];
    try {
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({
            Bucket: upstream.bucket,
            Prefix: `objects/${under}`,
            ContinuationToken: token,
          }),
        );
        for (const item of page.Contents ?? []) names.push(item.Key!.slice(`objects/${under}`.length));
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
    } finally {
      client.destroy();
    }
    return names.sort();
  }
  const root = path.join(ctx.config.dataDir, 'objects', under);
  if (!fs.existsSync(root)) return [];
  return fs
    .readdirSync(root, { recursive: true })
    .map(String)
    .filter((f) => fs.statSync(path.join(root, f)).isFile())
    .sort();
}

/** Two object storages of one team, each with an `admin` user; their uuids, ids and keys. */
export async function twoStorages(t: { ctx: AppContext; user: { team_id: number } }) {
  for (const name of ['main', 'other']) {
    await applyObjectStorage(t.ctx, t.user.team_id, {
      name,
      buckets: [],
      users: [
        { username: 'admin', policies: ['admin'] },
        { username: 'nobody', policies: [] },
      ],
    });
  }
  await t.ctx.services.jobs.runner().runDue();
  const views = await t.ctx.services.objectStorage.view({ id: t.user.team_id, role: 'owner' });
  const rows = await t.ctx.db.selectFrom('object_storages').select(['id', 'name']).execute();
  const of = (name: string) => {
    const view = views.find((s) => s.name === name)!;
    const key = (username: string) => {
      const user = view.users.find((u) => u.username === username)!;
      return { id: user.access_key_id, secret: user.secret_key! };
    };
    return {
      uuid: view.uuid,
      id: rows.find((r) => r.name === name)!.id,
      admin: key('admin'),
      nobody: key('nobody'),
    };
  };
  return { main: of('main'), other: of('other') };
}
