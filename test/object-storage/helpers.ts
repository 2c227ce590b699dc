// Object storages inserted and enqueued exactly as apply does, and S3 clients for their users.
import { S3Client } from '@aws-sdk/client-s3';
import { iso } from '../../src/domain/clock.js';
import { createBackgroundWork } from '../../src/jobs/index.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import { viewObjectStorages } from '../../src/services/object-storage/index.js';
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

/** One object storage with one bucket and an `admin` user, provisioned as apply does; its client. */
export async function adminStorage(ctx: AppContext, teamId: number, endpoint: string, bucket: string) {
  await applyObjectStorage(ctx, teamId, {
    name: 'main',
    buckets: [bucket],
    users: [{ username: 'admin', policies: ['admin'] }],
  });
  await createBackgroundWork(ctx).runDue();
  const [storage] = await viewObjectStorages(ctx, { id: teamId, role: 'owner' });
  const user = storage!.users[0]!;
  return s3Client(endpoint, user.access_key_id, user.secret_key!);
}
