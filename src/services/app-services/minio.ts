// The `minio` service (docs/services.md): Berth runs no MinIO. An application's minio service is a
// private bucket on Berth's own S3-compatible endpoint (the object-storage driver's) with one access key
// whose policy reaches that bucket only. Its storage is a row of `object_storages` with
// `application_id` set (migration 023): never one of the team's storages (lists, exports, apply and
// quotas leave it out), and its bucket names are its own (migration 024). The endpoint is shared by
// every storage and served by Berth's process, so there is nothing of the instance's own to stop;
// deleting it removes the bucket, its objects and the key.
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/schema/index.js';
import {
  createInfrastructureRepository,
  type ObjectStorageRow,
} from '../../db/repositories/infrastructure.js';
import { createObjectStorageRepository } from '../../db/repositories/object-storage.js';
import { derivedBucket } from '../../domain/app-services.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { ObjectStorageDriver, ServedEndpoint } from '../../drivers/objectstorage/driver.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from '../../drivers/services/types.js';

/** What `version` says of an instance: no MinIO runs, Berth's endpoint serves it. */
export const MINIO_SERVICE_VERSION = 'Berth S3';
/** The region Berth's endpoint advertises (it accepts any in signatures); S3 clients need one. */
export const MINIO_SERVICE_REGION = 'us-east-1';
/** The one user of an instance's storage (its access key). */
const USERNAME = 'app';
const ARN = 'arn:aws:s3:::';

/** Everything on the bucket and its objects; never its deletion (the application's data would go). */
export function bucketPolicy(bucket: string): unknown[] {
  return [
    { Effect: 'Allow', Action: 's3:*', Resource: [`${ARN}${bucket}`, `${ARN}${bucket}/*`] },
    { Effect: 'Deny', Action: 's3:DeleteBucket', Resource: `${ARN}${bucket}` },
  ];
}

/**
 * The storage's name: unique in the team (the application's id, the service's name and the instance's
 * uuid) and never one a document can give (`:` is outside the names of spec.object_storage).
 */
export const storageName = (spec: Pick<ServiceSpec, 'applicationId' | 'name' | 'id'>): string =>
  `app:${spec.applicationId}:${spec.name}:${spec.id}`;

export interface MinioRunnerDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /**
   * Berth's object storage (made when first used): its driver and the endpoint this process serves
   * (src/services/object-storage). The driver's endpoint URL is the served one only for this driver.
   */
  objectStorage: () => {
    driver: ObjectStorageDriver;
    ensureServed(): Promise<ServedEndpoint | undefined>;
    served(): ServedEndpoint | undefined;
    servesNothing(): boolean;
  };
}

type StorageRow = ObjectStorageRow;

/**
 * The address to connect to a listener at `hostname` (a URL's: IPv6 in brackets): itself, or for one
 * on every address (0.0.0.0, ::, which takes IPv4 too) the loopback, which the runtime maps into an
 * application's network like every service's.
 */
function connectHost(hostname: string): string {
  const host = hostname.replace(/^\[(.*)\]$/, '$1');
  return host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
}

export function createMinioRunner(deps: MinioRunnerDeps): ServiceRunner {
  const log = deps.logger.child({ component: 'minio-service' });
  const now = () => iso(deps.clock.now());
  /** The endpoint port each instance was last handed (a restarted endpoint may listen elsewhere). */
  const handed = new Map<string, number>();

  const storages = createObjectStorageRepository(deps.db);
  const findRow = (uuid: string): Promise<StorageRow | undefined> => storages.findApplicationStorage(uuid);

  const bucketOf = (row: StorageRow): string => (JSON.parse(row.buckets) as string[])[0] ?? '';

  /**
   * `settings.bucket` when it is a valid name, else the derived name. The storage is the instance's
   * own, and bucket names are per storage: no other storage's bucket can take the name.
   */
  function chooseBucket(spec: ServiceSpec): string {
    const asked = spec.settings.bucket;
    const derived = derivedBucket(spec);
    if (typeof asked !== 'string' || asked === '') return derived;
    const driver = deps.objectStorage().driver;
    if (driver.problems({ buckets: [asked], users: [] }).length > 0) {
      log.warn(
        { app: spec.applicationId, service: spec.name, bucket: asked },
        'invalid bucket name: derived one',
      );
      return derived;
    }
    return asked;
  }

  /** The instance's storage row, made the first time (a concurrent maker's row is used). */
  async function rowFor(spec: ServiceSpec): Promise<StorageRow> {
    const existing = await findRow(spec.id);
    if (existing) return existing;
    const app = await createInfrastructureRepository(deps.db).findApplication(spec.applicationId);
    if (!app) throw new Error(`application ${spec.applicationId} does not exist`);
    const bucket = chooseBucket(spec);
    const at = now();
    await storages.insertIfAbsent({
      uuid: spec.id,
      team_id: app.team_id,
      application_id: app.id,
      name: storageName(spec),
      zone: 'local',
      plan: null,
      buckets: JSON.stringify([bucket]),
      users: JSON.stringify([{ username: USERNAME, policies: bucketPolicy(bucket) }]),
      state: 'provisioning',
      state_reason: null,
      pending_zone: null,
      created_at: at,
      updated_at: at,
    });
    const made = await findRow(spec.id);
    if (!made)
      throw new Error(`object storage ${spec.id} exists but is not application ${spec.applicationId}'s`);
    return made;
  }

  function provisionBucket(row: StorageRow, bucket: string): Promise<void> {
    return deps.objectStorage().driver.provision({
      id: row.id,
      uuid: row.uuid,
      name: row.name,
      buckets: [bucket],
      bucketAcls: {},
      users: [{ username: USERNAME, policies: bucketPolicy(bucket) }],
    });
  }

  async function setRow(row: StorageRow, values: { buckets?: string; users?: string; state?: string }) {
    await storages.update(row.id, { ...values, updated_at: now() });
  }

  /**
   * Where the endpoint is: started in this process when it is not served yet. The host is the one the
   * endpoint listens on (BERTH_HOST), or the provider's.
   */
  async function endpoint(): Promise<{ host: string; port: number; url: string }> {
    const storage = deps.objectStorage();
    const served = await storage.ensureServed();
    const url = storage.driver.endpoint();
    if (served) return { host: connectHost(new URL(served.url).hostname), port: served.port, url };
    const parsed = new URL(url);
    return {
      host: connectHost(parsed.hostname),
      port: Number(parsed.port) || (parsed.protocol === 'https:' ? 443 : 80),
      url,
    };
  }

  async function runtimeOf(row: StorageRow, bucket: string): Promise<ServiceRuntime> {
    const storage = deps.objectStorage();
    const key = (await storage.driver.credentials(row.id)).find((c) => c.username === USERNAME);
    if (!key) throw new Error(`object storage of service instance ${row.uuid} has no access key`);
    const { host, port, url } = await endpoint();
    handed.set(row.uuid, port);
    return {
      host,
      port,
      pid: null,
      version: MINIO_SERVICE_VERSION,
      location: null,
      extra: {
        endpoint: url,
        bucket,
        region: MINIO_SERVICE_REGION,
        accessKeyId: key.accessKeyId,
        secretKey: key.secretKey,
      },
    };
  }

  async function provision(spec: ServiceSpec): Promise<ServiceRuntime> {
    const row = await rowFor(spec);
    const bucket = bucketOf(row);
    await provisionBucket(row, bucket);
    if (row.state !== 'running') await setRow(row, { state: 'running' });
    return runtimeOf(row, bucket);
  }

  /** The endpoint is served (again) and the storage exists: what provision returns, changing nothing. */
  async function start(spec: ServiceSpec): Promise<ServiceRuntime> {
    const row = await findRow(spec.id);
    if (!row || row.state !== 'running') return provision(spec);
    return runtimeOf(row, bucketOf(row));
  }

  return {
    types: ['minio'],
    provision,
    start,
    restart: start,

    /** Nothing of the instance's own runs: the endpoint is shared, and its key keeps working. */
    stop(ref: ServiceRef): Promise<void> {
      handed.delete(ref.id);
      return Promise.resolve();
    },

    /** The bucket, its objects and uploads, and the key go (the driver's rows and files), then the row. */
    async delete(ref: ServiceRef): Promise<void> {
      handed.delete(ref.id);
      const row = await findRow(ref.id);
      if (!row) return;
      await deps.objectStorage().driver.remove(row.id);
      await storages.delete(row.id);
    },

    /**
     * Running while its storage is provisioned and the endpoint serves at the port it was handed (a
     * Berth started again serves it elsewhere when BERTH_S3_PORT is 0: start hands the new one).
     */
    async status(ref: ServiceRef): Promise<{ running: boolean; pid: number | null }> {
      const row = await findRow(ref.id);
      const storage = deps.objectStorage();
      const served = storage.served();
      const serving = storage.servesNothing() || (served !== undefined && handed.get(ref.id) === served.port);
      return { running: row?.state === 'running' && serving, pid: null };
    },

    /** The endpoint keeps no access log: nothing to show. */
    logs(): Promise<string[]> {
      return Promise.resolve([]);
    },
  };
}
