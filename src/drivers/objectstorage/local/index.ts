// The local object-storage driver: buckets and access keys in the store, bytes served by the built-in
// S3 endpoint (server.ts).
import { randomBytes } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../../../config/index.js';
import type { Dialect } from '../../../db/dialect.js';
import type { Database } from '../../../db/schema/index.js';
import { iso, type Clock } from '../../../domain/clock.js';
import type { SecretBox } from '../../../crypto/secret-box.js';
import {
  BUCKET_ACLS,
  ProvisionError,
  type BucketAcl,
  type ObjectStorageDriver,
  type ObjectStorageEntry,
  type ObjectStorageSpec,
  type StorageEndpoints,
} from '../driver.js';
import { createAccessDecision, effectiveBlock } from './access.js';
import { localBlobStore, type BlobStore } from './blobs.js';
import { createObjectMetadata } from './metadata.js';
import { compilePolicies, PolicyError, withDocumentPublicRead } from './policy.js';
import { isValidBucketName, startS3Server } from './server.js';
import type { S3ServerDeps } from './kit.js';

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

function accessKeyId(): string {
  // AWS-shaped: 20 upper-case characters (256 is a multiple of 32: no bias).
  return `BK${Array.from(randomBytes(18), (b) => KEY_ALPHABET[b % 32]).join('')}`;
}

/** AWS-shaped 40-character secret. */
const secretKey = (): string => randomBytes(30).toString('base64');

/** The URL clients reach the endpoint at: the public host with the S3 port. */
export function s3EndpointUrl(config: Pick<Config, 'publicUrl' | 's3Port'>, port = config.s3Port): string {
  const url = new URL(config.publicUrl);
  url.protocol = 'http:';
  url.port = String(port);
  return url.origin;
}

/** A storage's own endpoint: `<shared>/<uuid>`, and `<uuid>.<host>` when the public host is a name. */
export function storageEndpointsOf(
  config: Pick<Config, 'publicUrl' | 's3Port'>,
  uuid: string,
  port = config.s3Port,
): StorageEndpoints {
  const shared = s3EndpointUrl(config, port);
  const url = new URL(shared);
  const isIp = /^[\d.]+$/.test(url.hostname) || url.hostname.startsWith('[');
  url.hostname = `${uuid}.${url.hostname}`;
  return { path: `${shared}/${uuid}`, virtualHost: isIp ? null : url.origin };
}

/** Host names under which `<bucket>.<host>` addresses a bucket (virtual-host style). */
export function virtualHostSuffixes(config: Pick<Config, 'publicUrl'>): string[] {
  const host = new URL(config.publicUrl).hostname;
  const isIp = /^[\d.]+$/.test(host) || host.startsWith('[');
  return [...new Set(['localhost', ...(isIp ? [] : [host])])];
}

export const usernameOf = (username: string | undefined, index: number): string =>
  username ?? `user-${index + 1}`;

/** What the local driver refuses before provisioning: invalid bucket names and policies it cannot enforce. */
export function localStorageProblems(entry: ObjectStorageEntry): Array<{ path: string; message: string }> {
  const problems: Array<{ path: string; message: string }> = [];
  entry.buckets.forEach((name, i) => {
    if (!isValidBucketName(name)) {
      problems.push({
        path: `buckets[${i}]`,
        message: `'${name}' is not a valid bucket name (3-63 lower-case letters, digits, '.' and '-')`,
      });
    }
  });
  entry.users.forEach((user, i) => {
    try {
      compilePolicies(user.policies);
    } catch (error) {
      if (!(error instanceof PolicyError)) throw error;
      problems.push({ path: `users[${i}].policies`, message: error.message });
    }
  });
  return problems;
}

export function createLocalObjectStorageDriver(deps: {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  secretBox: SecretBox;
  logger: Logger;
  config: Pick<Config, 'publicUrl' | 's3Port' | 'dataDir'> &
    Partial<Pick<Config, 's3BlockPublicAccess' | 'trustedProxies'>>;
  /** Where the bytes live: the data directory's files unless given (the s3 driver's upstream bucket). */
  blobs?: BlobStore;
  /** Each request the S3 endpoint answers, as it ends (metrics). */
  onRequest?: S3ServerDeps['onRequest'];
}): ObjectStorageDriver {
  const { db, clock, secretBox } = deps;
  // The endpoint's own queries (metadata.ts), for the bucket reads the dashboard's switches make.
  const metadata = createObjectMetadata(db, deps.dialect);
  const blobs = deps.blobs ?? localBlobStore(deps.config.dataDir);
  // Where the endpoint of this process really listens (BERTH_S3_PORT may be 0), for the URL users get.
  let listeningPort: number | undefined;

  /**
   * A document's `{name, acl}`: `public-read` makes the bucket's ACL public-read and lets anyone read
   * its objects through a statement of its policy that Berth keeps (the rest of the policy is the
   * tenant's and stays); `private` takes both away. Refused where public access is blocked.
   */
  async function applyDocumentAcl(
    trx: Transaction<Database>,
    storageId: number,
    bucket: string,
    acl: 'private' | 'public-read',
  ): Promise<void> {
    const row = await createObjectMetadata(trx, deps.dialect).findBucket(storageId, bucket);
    if (!row) throw new ProvisionError(`bucket '${bucket}' is not one of the storage's buckets`);
    const block = effectiveBlock(row, deps.config.s3BlockPublicAccess ?? false);
    if (acl === 'public-read' && (block.BlockPublicAcls || block.BlockPublicPolicy))
      throw new ProvisionError(
        `bucket '${bucket}' cannot be public-read: public access is blocked (BERTH_S3_BLOCK_PUBLIC_ACCESS or the bucket's PublicAccessBlock)`,
      );
    await trx
      .updateTable('s3_buckets')
      .set({ acl, policy: withDocumentPublicRead(row.policy, bucket, acl === 'public-read') })
      .where('id', '=', row.id)
      .execute();
  }

  async function provisionIn(trx: Transaction<Database>, spec: ObjectStorageSpec): Promise<void> {
    const now = iso(clock.now());
    for (const name of spec.buckets) {
      if (!isValidBucketName(name))
        throw new ProvisionError(`bucket name '${name}' is not a valid S3 bucket name`);
    }
    const usernames = spec.users.map((u, i) => usernameOf(u.username, i));
    if (new Set(usernames).size !== usernames.length) throw new ProvisionError('usernames must be unique');
    spec.users.forEach((user, i) => {
      try {
        compilePolicies(user.policies);
      } catch (error) {
        if (error instanceof PolicyError)
          throw new ProvisionError(`user '${usernames[i]}': ${error.message}`);
        throw error;
      }
    });

    for (const name of spec.buckets) {
      // Names are the storage's own (migration 024): only its own bucket of that name can be there.
      await trx
        .insertInto('s3_buckets')
        .values({ object_storage_id: spec.id, name, created_at: now })
        .onConflict((oc) => oc.columns(['object_storage_id', 'name']).doNothing())
        .execute();
    }
    for (const [name, acl] of Object.entries(spec.bucketAcls))
      await applyDocumentAcl(trx, spec.id, name, acl);

    const existing = await trx
      .selectFrom('s3_access_keys')
      .select(['id', 'username'])
      .where('object_storage_id', '=', spec.id)
      .execute();
    const byName = new Map(existing.map((k) => [k.username, k.id]));
    for (const [i, user] of spec.users.entries()) {
      const username = usernames[i]!;
      const policies = JSON.stringify(user.policies);
      const id = byName.get(username);
      if (id !== undefined) {
        await trx
          .updateTable('s3_access_keys')
          .set({ policies, updated_at: now })
          .where('id', '=', id)
          .execute();
        continue;
      }
      await trx
        .insertInto('s3_access_keys')
        .values({
          object_storage_id: spec.id,
          username,
          access_key_id: accessKeyId(),
          secret_encrypted: secretBox.encrypt(secretKey()),
          policies,
          created_at: now,
          updated_at: now,
        })
        .execute();
    }
    // A user removed from the document loses access; buckets stay (they may hold data).
    const gone = existing.filter((k) => !usernames.includes(k.username)).map((k) => k.id);
    if (gone.length > 0) await trx.deleteFrom('s3_access_keys').where('id', 'in', gone).execute();
  }

  return {
    name: blobs.kind,
    endpoint: () => s3EndpointUrl(deps.config, listeningPort),
    storageEndpoints: (uuid) => storageEndpointsOf(deps.config, uuid, listeningPort),

    async serve(listen) {
      const server = await startS3Server(
        {
          db,
          dialect: deps.dialect,
          clock,
          secretBox,
          logger: deps.logger,
          dataDir: deps.config.dataDir,
          blobs,
          virtualHostSuffixes: virtualHostSuffixes(deps.config),
          ...(deps.onRequest ? { onRequest: deps.onRequest } : {}),
          blockPublicAccess: deps.config.s3BlockPublicAccess ?? false,
          trustedProxies: deps.config.trustedProxies ?? [],
        },
        listen,
      );
      const previous = listeningPort;
      listeningPort = server.port;
      return {
        port: server.port,
        url: server.url,
        async close() {
          await server.close();
          if (listeningPort === server.port) listeningPort = previous;
        },
      };
    },

    problems: localStorageProblems,

    provision(spec: ObjectStorageSpec): Promise<void> {
      // Buckets and keys live in Berth's store: one transaction makes them all or nothing.
      return db.transaction().execute((trx) => provisionIn(trx, spec));
    },

    async credentials(storageId) {
      const rows = await db
        .selectFrom('s3_access_keys')
        .select(['username', 'access_key_id', 'secret_encrypted', 'policies'])
        .where('object_storage_id', '=', storageId)
        .orderBy('id')
        .execute();
      return rows.map((r) => ({
        username: r.username,
        accessKeyId: r.access_key_id,
        secretKey: secretBox.decrypt(r.secret_encrypted),
        policies: JSON.parse(r.policies) as unknown[],
      }));
    },

    async remove(storageId) {
      const buckets = (
        await db.selectFrom('s3_buckets').select('id').where('object_storage_id', '=', storageId).execute()
      ).map((b) => b.id);
      const uploads =
        buckets.length === 0
          ? []
          : (await db.selectFrom('s3_uploads').select('id').where('bucket_id', 'in', buckets).execute()).map(
              (u) => u.id,
            );
      await db.transaction().execute(async (trx) => {
        if (uploads.length > 0)
          await trx.deleteFrom('s3_upload_parts').where('upload_id', 'in', uploads).execute();
        if (buckets.length > 0) {
          await trx.deleteFrom('s3_uploads').where('bucket_id', 'in', buckets).execute();
          await trx.deleteFrom('s3_objects').where('bucket_id', 'in', buckets).execute();
          await trx.deleteFrom('s3_buckets').where('id', 'in', buckets).execute();
        }
        await trx.deleteFrom('s3_access_keys').where('object_storage_id', '=', storageId).execute();
      });
      // After the commit: a crash before this leaves blobs no row names, which the sweep removes.
      for (const id of buckets) await blobs.removeTree('data', id);
      for (const id of uploads) await blobs.removeTree('parts', id);
    },

    async bucketAcl(storageId, bucket) {
      const row = await db
        .selectFrom('s3_buckets')
        .select('acl')
        .where('object_storage_id', '=', storageId)
        .where('name', '=', bucket)
        .executeTakeFirst();
      if (!row) return undefined;
      return (BUCKET_ACLS as readonly string[]).includes(row.acl) ? (row.acl as BucketAcl) : 'private';
    },

    async setBucketAcl(storageId, bucket, acl) {
      if (!(BUCKET_ACLS as readonly string[]).includes(acl))
        throw new ProvisionError(`acl must be one of ${BUCKET_ACLS.join(', ')}`);
      const row = await metadata.findBucket(storageId, bucket);
      if (!row) return false;
      if (acl !== 'private' && effectiveBlock(row, deps.config.s3BlockPublicAccess ?? false).BlockPublicAcls)
        throw new ProvisionError(
          `bucket '${bucket}' cannot be ${acl}: public ACLs are blocked (BERTH_S3_BLOCK_PUBLIC_ACCESS or the bucket's PublicAccessBlock)`,
        );
      await db.updateTable('s3_buckets').set({ acl }).where('id', '=', row.id).execute();
      return true;
    },

    async publicBuckets(storageId) {
      const rows = await metadata.listBuckets(storageId);
      const decision = createAccessDecision(deps.config.s3BlockPublicAccess ?? false);
      return rows.filter((row) => decision.isPublic(row)).map((row) => row.name);
    },

    async buckets(storageId) {
      const rows = await db
        .selectFrom('s3_buckets')
        .select('name')
        .where('object_storage_id', '=', storageId)
        .orderBy('name')
        .execute();
      return rows.map((r) => r.name);
    },
  };
}
