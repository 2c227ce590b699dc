// Object storage use cases: the provisioning job that apply enqueues, the endpoint's start, and the
// owner's view of a storage (endpoint, buckets, credentials). One service per context, built by
// src/composition.ts from the driver its config names.
import type { Kysely } from 'kysely';
import { enqueue, handles, jobKey } from '../jobs.js';
import { iso, type Clock } from '../../domain/clock.js';
import type { Database } from '../../db/schema/index.js';
import { auditChange } from '../audit.js';
import { createObjectStorageRepository } from '../../db/repositories/object-storage.js';
import { deleteJobs } from '../../jobs/queue.js';
import { AppError } from '../../domain/errors.js';
import { requireRole } from '../../domain/roles.js';
import type { Role } from '../../db/schema/foundation.js';
import {
  ProvisionError,
  type ObjectStorageDriver,
  type ServedEndpoint,
} from '../../drivers/objectstorage/driver.js';
import type { JobHandler } from '../../jobs/runner.js';
import type { DocumentBucketAcl } from '../../domain/infrastructure/document.js';

export interface ObjectStorageDeps {
  db: Kysely<Database>;
  clock: Clock;
  driver: ObjectStorageDriver;
  /** Where the driver's endpoint listens (BERTH_HOST, BERTH_S3_PORT; 0: any free port). */
  listen: { host: string; port: number };
}

interface StoredUser {
  username?: string;
  policies?: unknown[];
}

/**
 * Makes the team's storage `uuid` match its row through the driver, then `running`. A problem a retry
 * cannot fix sets `error` with the reason; anything else throws (the job is retried).
 */
async function provisionStorage(deps: ObjectStorageDeps, uuid: string): Promise<void> {
  const storages = createObjectStorageRepository(deps.db);
  // A team's storage: an application's minio service provisions its own.
  const row = await storages.findTeamStorageByUuid(uuid);
  if (!row) return; // deleted since the job was queued
  try {
    const users = JSON.parse(row.users) as StoredUser[];
    await deps.driver.provision({
      id: row.id,
      uuid: row.uuid,
      name: row.name,
      buckets: JSON.parse(row.buckets) as string[],
      bucketAcls: JSON.parse(row.bucket_acls) as Record<string, 'private' | 'public-read'>,
      users: users.map((u) => ({ username: u.username, policies: u.policies ?? [] })),
    });
    // After the driver: a crash between the two leaves the job to run again, and provision is idempotent.
    await storages.update(row.id, {
      state: 'running',
      state_reason: null,
      updated_at: iso(deps.clock.now()),
    });
  } catch (error) {
    if (!(error instanceof ProvisionError)) throw error;
    await storages.update(row.id, {
      state: 'error',
      state_reason: error.message,
      updated_at: iso(deps.clock.now()),
    });
  }
}

/** Handler of `object_storage.provision` ({uuid}), which apply enqueues. */
function provisionHandler(deps: ObjectStorageDeps): Record<'object_storage.provision', JobHandler> {
  return handles('object_storage.provision', async ({ uuid }) => {
    if (typeof uuid === 'string') await provisionStorage(deps, uuid);
  });
}

export interface ObjectStorageView {
  uuid: string;
  name: string;
  zone: string;
  plan: string | null;
  state: string;
  state_reason: string | null;
  /** The shared endpoint: the access key picks the storage (every existing client uses it). */
  endpoint: string;
  /** The storage's own endpoint, which names it without a credential (docs/decisions/0008). */
  endpoints: { path: string; virtual_host: string | null };
  region: string;
  path_style: boolean;
  buckets: string[];
  /** The buckets whose canned ACL the storage's document (or the dashboard) sets. */
  bucket_acls: Record<string, DocumentBucketAcl>;
  /** The buckets anyone may read without a credential. */
  public_buckets: string[];
  users: Array<{ username: string; access_key_id: string; secret_key: string | null; policies: unknown[] }>;
  /** A zone change from apply that waits for the panel's action (apply-pending-change). */
  pending_changes: { zone: string } | null;
  created_at: string;
  updated_at: string;
}

/**
 * The panel's action for a zone change that apply reported but did not carry out (spec, apply rule
 * 5). On one host every zone is this host: the zone is recorded and nothing moves; a driver for a
 * provider with zones would move the storage here.
 */
async function applyPendingChange(
  deps: ObjectStorageDeps,
  team: { id: number; name: string; role: Role },
  ref: string,
  userId: number,
): Promise<void> {
  requireRole({ teamName: team.name, role: team.role }, 'owner', 'Carrying out a zone change');
  const at = iso(deps.clock.now());
  await deps.db.transaction().execute(async (trx) => {
    const storages = createObjectStorageRepository(trx);
    const row = await storages.findTeamStorage(team.id, ref);
    if (!row) throw new AppError('not_found', `Object storage '${ref}' not found`);
    if (row.pending_zone === null) {
      throw new AppError('conflict', `Object storage '${row.name}' has no pending zone change`);
    }
    await storages.update(row.id, { zone: row.pending_zone, pending_zone: null, updated_at: at });
    await auditChange(trx, {
      at,
      userId,
      action: 'object_storage.apply_pending_change',
      teamId: team.id,
      target: { kind: 'object_storage', id: row.uuid },
      before: { zone: row.zone },
      after: { zone: row.pending_zone },
    });
  });
}

/**
 * Sets a bucket's canned ACL as the storage's document would (owners; the dashboard's switch): recorded
 * with the storage, so export writes the bucket as `{name, acl}`, and carried out by provisioning.
 */
async function setBucketAcl(
  deps: ObjectStorageDeps,
  team: { id: number; name: string; role: Role },
  ref: string,
  bucket: string,
  acl: DocumentBucketAcl,
  userId: number,
): Promise<void> {
  requireRole({ teamName: team.name, role: team.role }, 'owner', "Changing a bucket's access");
  const row = await createObjectStorageRepository(deps.db).findTeamStorage(team.id, ref);
  if (!row) throw new AppError('not_found', `Object storage '${ref}' not found`);
  const listed = JSON.parse(row.buckets) as string[];
  // A bucket made through S3 (not in the document's list) joins the list, so that export names it.
  if (!listed.includes(bucket) && !(await deps.driver.buckets(row.id)).includes(bucket))
    throw new AppError('not_found', `Bucket '${bucket}' not found in object storage '${row.name}'`);
  const at = iso(deps.clock.now());
  await deps.db.transaction().execute(async (trx) => {
    const storages = createObjectStorageRepository(trx);
    const fresh = await storages.findTeamStorage(team.id, row.uuid);
    if (!fresh) throw new AppError('not_found', `Object storage '${ref}' not found`);
    const buckets = JSON.parse(fresh.buckets) as string[];
    const acls = JSON.parse(fresh.bucket_acls) as Record<string, DocumentBucketAcl>;
    await storages.update(row.id, {
      buckets: JSON.stringify(buckets.includes(bucket) ? buckets : [...buckets, bucket]),
      bucket_acls: JSON.stringify({ ...acls, [bucket]: acl }),
      updated_at: at,
    });
    // Carried out below at once; the job is there should this process stop before that.
    await enqueue(trx, 'object_storage.provision', { uuid: row.uuid }, { now: deps.clock.now() });
    await auditChange(trx, {
      at,
      userId,
      action: 'object_storage.bucket_acl',
      teamId: team.id,
      target: { kind: 'object_storage', id: row.uuid },
      before: { bucket, acl: acls[bucket] ?? null },
      after: { bucket, acl },
    });
  });
  await provisionStorage(deps, row.uuid);
}

/**
 * Deletes an object storage (team owners): its buckets, objects and access keys go, rows and files,
 * then the storage itself. Apply never deletes one; this is the explicit way.
 */
async function remove(
  deps: ObjectStorageDeps,
  team: { id: number; name: string; role: Role },
  ref: string,
  userId: number,
): Promise<{ uuid: string; name: string }> {
  requireRole({ teamName: team.name, role: team.role }, 'owner', 'Deleting an object storage');
  // A team's storage: an application's minio service goes with its application.
  const row = await createObjectStorageRepository(deps.db).findTeamStorage(team.id, ref);
  if (!row) throw new AppError('not_found', `Object storage '${ref}' not found`);
  await deps.driver.remove(row.id);
  const at = iso(deps.clock.now());
  await deps.db.transaction().execute(async (trx) => {
    await deleteJobs(trx, [jobKey('object_storage.provision', { uuid: row.uuid })]);
    await createObjectStorageRepository(trx).delete(row.id);
    await auditChange(trx, {
      at,
      userId,
      action: 'object_storage.delete',
      teamId: team.id,
      target: { kind: 'object_storage', id: row.uuid },
      before: { name: row.name, zone: row.zone },
    });
  });
  return { uuid: row.uuid, name: row.name };
}

/** A storage's own endpoint as the API shows it. */
export function endpointsView(
  driver: Pick<ObjectStorageDriver, 'storageEndpoints'>,
  uuid: string,
): { path: string; virtual_host: string | null } {
  const own = driver.storageEndpoints(uuid);
  return { path: own.path, virtual_host: own.virtualHost };
}

/** The team's object storages as its members see them; secret keys only for owners. */
async function view(
  deps: ObjectStorageDeps,
  team: { id: number; role: Role },
  ref?: string,
): Promise<ObjectStorageView[]> {
  const driver = deps.driver;
  // Applications' private storages (their minio services) are not the team's to see.
  const rows = await createObjectStorageRepository(deps.db).teamStorages(team.id, ref);
  if (ref !== undefined && rows.length === 0)
    throw new AppError('not_found', `Object storage '${ref}' not found`);
  return Promise.all(
    rows.map(async (row) => ({
      uuid: row.uuid,
      name: row.name,
      zone: row.zone,
      plan: row.plan,
      state: row.state,
      state_reason: row.state_reason,
      endpoint: driver.endpoint(),
      endpoints: endpointsView(driver, row.uuid),
      region: 'us-east-1',
      path_style: true,
      buckets: await driver.buckets(row.id),
      bucket_acls: JSON.parse(row.bucket_acls) as Record<string, DocumentBucketAcl>,
      public_buckets: await driver.publicBuckets(row.id),
      users: (await driver.credentials(row.id)).map((c) => ({
        username: c.username,
        access_key_id: c.accessKeyId,
        secret_key: team.role === 'owner' ? c.secretKey : null,
        policies: c.policies,
      })),
      pending_changes: row.pending_zone === null ? null : { zone: row.pending_zone },
      created_at: row.created_at,
      updated_at: row.updated_at,
    })),
  );
}

export function createObjectStorageService(deps: ObjectStorageDeps) {
  /** The endpoints this process serves and has not closed, oldest first. */
  const open = new Set<ServedEndpoint>();
  /** The one ensureServed started (closed by close()), and its start while under way. */
  let ensured: ServedEndpoint | undefined;
  let ensuring: Promise<ServedEndpoint | undefined> | undefined;
  /** The driver's provider serves its endpoint: nothing to start here. */
  let servesNothing = false;

  /** Starts what the driver serves here (the local S3 endpoint); undefined where it serves none. */
  async function serve(): Promise<ServedEndpoint | undefined> {
    const served = await deps.driver.serve(deps.listen);
    if (!served) {
      servesNothing = true;
      return undefined;
    }
    let closing: Promise<void> | undefined;
    const tracked: ServedEndpoint = {
      port: served.port,
      url: served.url,
      close: () => {
        open.delete(tracked);
        if (ensured === tracked) ensured = undefined;
        closing ??= served.close();
        return closing;
      },
    };
    open.add(tracked);
    return tracked;
  }
  const current = (): ServedEndpoint | undefined => open.values().next().value;

  return {
    /** The driver BERTH_OBJECT_STORAGE_DRIVER names. */
    driver: deps.driver,
    /** Starts what the object-storage driver serves here (the lifecycle). */
    serve,
    /**
     * The endpoint this process serves (Berth's start serves it), started when none is: an
     * application's `minio` service needs it. Undefined where the driver's provider serves it.
     */
    async ensureServed(): Promise<ServedEndpoint | undefined> {
      const served = current();
      if (served || servesNothing) return served;
      ensuring ??= serve()
        .then((made) => (ensured = made))
        .finally(() => {
          ensuring = undefined;
        });
      return ensuring;
    },
    /** The endpoint this process serves now, or undefined (none yet, or the provider serves it). */
    served: (): ServedEndpoint | undefined => current(),
    /** Whether the driver's provider serves the endpoint (then nothing is started here). */
    servesNothing: (): boolean => servesNothing,
    /** Closes the endpoint ensureServed started (the lifecycle closes its own). */
    async close(): Promise<void> {
      await ensuring?.catch(() => undefined);
      await ensured?.close();
    },
    /** The same where an endpoint must be served (tests, benchmarks, the S3 compatibility run). */
    async serveEndpoint(): Promise<ServedEndpoint> {
      const served = await serve();
      if (!served) throw new Error(`the ${deps.driver.name} object-storage driver serves no endpoint here`);
      return served;
    },
    /** Where users reach the storages (the endpoint this process serves, or the provider's). */
    endpoint: () => deps.driver.endpoint(),
    jobHandlers: () => provisionHandler(deps),
    view: (team: { id: number; role: Role }, ref?: string) => view(deps, team, ref),
    remove: (team: { id: number; name: string; role: Role }, ref: string, userId: number) =>
      remove(deps, team, ref, userId),
    applyPendingChange: (team: { id: number; name: string; role: Role }, ref: string, userId: number) =>
      applyPendingChange(deps, team, ref, userId),
    setBucketAcl: (
      team: { id: number; name: string; role: Role },
      ref: string,
      bucket: string,
      acl: DocumentBucketAcl,
      userId: number,
    ) => setBucketAcl(deps, team, ref, bucket, acl, userId),
  };
}

export type ObjectStorageService = ReturnType<typeof createObjectStorageService>;
