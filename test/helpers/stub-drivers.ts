// Drivers of every family that run nothing: they keep in memory what Berth asked of them and answer as
// a remote driver would (no pid, no file on this host). They prove the seam: Berth composed with them
// (test/architecture/drivers.test.ts) applies a document through each family without touching this
// machine. They stand for drivers that cannot run here (a cloud provider's API), never for an engine
// that can: every feature test runs on the real local drivers.
import { Readable } from 'node:stream';
import type { ArtifactInfo, ArtifactStore } from '../../src/drivers/artifacts/types.js';
import type {
  AppRuntimeDriver,
  AppSpec,
  InstanceStatus as RuntimeInstanceStatus,
  LogLine,
  RuntimeStatus,
} from '../../src/drivers/runtime/driver.js';
import {
  credentialsOfSpec,
  type InstanceRef,
  type InstanceRuntime,
  type InstanceSpec,
  type ManagedDatabaseDriver,
} from '../../src/drivers/databases/types.js';
import type {
  ObjectStorageCredential,
  ObjectStorageDriver,
  ObjectStorageSpec,
  BucketAcl,
} from '../../src/drivers/objectstorage/driver.js';
import type {
  ServiceRef,
  ServiceRunner,
  ServiceRuntime,
  ServiceSpec,
} from '../../src/drivers/services/types.js';

/** Every call a stub received, in order: `family.method target`. */
export type CallLog = string[];

export function stubRuntimeDriver(calls: CallLog): AppRuntimeDriver & { specs: Map<number, AppSpec> } {
  const releases = new Map<number, Set<string>>();
  const running = new Map<number, { release: string; replicas: number }>();
  const specs = new Map<number, AppSpec>();
  const lines = new Map<number, LogLine[]>();
  const say = (appId: number, line: string) =>
    (lines.get(appId) ?? lines.set(appId, []).get(appId)!).push({
      at: new Date().toISOString(),
      source: 'stub',
      stream: 'system',
      line,
    });
  return {
    name: 'stub',
    specs,
    endpoints: { http: undefined, https: undefined },
    capabilities: () => ({
      nodejsVersions: ['22'],
      phpVersions: [],
      phpExtensions: [],
      checkPhpSettings: () => undefined,
    }),
    async build(app, release, source, step) {
      calls.push(`runtime.build ${app.name} ${source.kind}`);
      step.building?.();
      step.log(`stub build of ${release}`);
      (releases.get(app.id) ?? releases.set(app.id, new Set()).get(app.id)!).add(release);
      return Promise.resolve({ commit: null, branch: null });
    },
    hasRelease: (appId, release) => Promise.resolve(releases.get(appId)?.has(release) ?? false),
    release(app) {
      calls.push(`runtime.release ${app.name}`);
      return Promise.resolve();
    },
    rollout(app, release) {
      calls.push(`runtime.rollout ${app.name} replicas=${app.replicas}`);
      specs.set(app.id, app);
      running.set(app.id, { release, replicas: app.replicas });
      say(app.id, `serving ${release}`);
      return Promise.resolve();
    },
    ensureRunning(app, release) {
      specs.set(app.id, app);
      running.set(app.id, { release, replicas: app.replicas });
      return Promise.resolve();
    },
    stop(appId) {
      running.delete(appId);
      return Promise.resolve();
    },
    remove(appId) {
      calls.push(`runtime.remove ${appId}`);
      running.delete(appId);
      releases.delete(appId);
      return Promise.resolve();
    },
    pruneReleases: () => Promise.resolve(),
    status(appId): Promise<RuntimeStatus> {
      const now = running.get(appId);
      if (!now) return Promise.resolve({ release: null, instances: [] });
      const instances: RuntimeInstanceStatus[] = Array.from({ length: now.replicas }, (_, index) => ({
        name: `web-${now.release}-${index}`,
        release: now.release,
        state: 'running',
        pid: null,
        port: null,
        startedAt: null,
        restarts: 0,
        lastRestartReason: null,
        healthy: true,
        memoryLimitBytes: specs.get(appId)?.memoryBytes ?? 0,
      }));
      return Promise.resolve({ release: now.release, instances });
    },
    logs: (appId, { tail }) => Promise.resolve((lines.get(appId) ?? []).slice(-tail)),
    followLogs: () => () => undefined,
    exec: (_app, _release, command) =>
      Promise.resolve({ exitCode: 0, output: `stub ran ${command}\n`, truncated: false }),
    checkSourceArchive: () => Promise.resolve(undefined),
    sourceArchive: () => Promise.resolve(undefined),
    start: () => Promise.resolve(),
    close: () => Promise.resolve(),
  };
}

export function stubDatabaseDriver(calls: CallLog): ManagedDatabaseDriver {
  const instances = new Map<string, InstanceSpec>();
  const runtime = (spec: InstanceSpec): InstanceRuntime => ({
    host: `${spec.id}.databases.example`,
    port: 5432,
    pid: null,
    version: spec.engine === 'pg' ? '17.2' : spec.engine === 'mysql' ? '8.0.40' : '8.0.1',
    plan: spec.plan,
    location: null,
    credentials: credentialsOfSpec(spec),
  });
  const up = (spec: InstanceSpec) => {
    instances.set(spec.id, spec);
    return Promise.resolve(runtime(spec));
  };
  return {
    name: 'stub',
    planLimits: () => ({
      nodes: 1,
      memoryMiB: 2048,
      storageMiB: 25 * 1024,
      maxConnections: 100,
      baseBackupRetention: 1,
    }),
    endpoint: (ref) => ({ host: `${ref.id}.databases.example`, ipFilter: ['0.0.0.0/0'] }),
    health: (ref) =>
      Promise.resolve(
        instances.has(ref.id) ? { state: 'running', pid: null, storageBytes: 0 } : { state: 'stopped' },
      ),
    provision(spec) {
      calls.push(`databases.provision ${spec.engine} ${spec.plan}`);
      return up(spec);
    },
    start: up,
    setPlan: up,
    restart: up,
    stop: () => Promise.resolve(),
    delete(ref: InstanceRef) {
      calls.push(`databases.delete ${ref.engine}`);
      instances.delete(ref.id);
      return Promise.resolve();
    },
    status: (ref) => Promise.resolve({ running: instances.has(ref.id), pid: null, storageBytes: 0 }),
    baseBackup: () => Promise.resolve([]),
  };
}

export function stubObjectStorageDriver(calls: CallLog): ObjectStorageDriver {
  const storages = new Map<number, ObjectStorageSpec>();
  const acls = new Map<string, BucketAcl>();
  return {
    name: 'stub',
    endpoint: () => 'https://s3.stub.example',
    storageEndpoints: (uuid) => ({ path: `https://s3.stub.example/${uuid}`, virtualHost: null }),
    serve: () => Promise.resolve(undefined),
    problems: (entry) =>
      entry.buckets
        .map((bucket, index) => ({ bucket, index }))
        .filter(({ bucket }) => bucket.startsWith('refused'))
        .map(({ index }) => ({ path: `buckets[${index}]`, message: 'the stub refuses this name' })),
    provision(spec) {
      calls.push(`objectStorage.provision ${spec.name} ${spec.buckets.join(',')}`);
      storages.set(spec.id, spec);
      return Promise.resolve();
    },
    credentials: (storageId) =>
      Promise.resolve(
        (storages.get(storageId)?.users ?? []).map((user, index): ObjectStorageCredential => ({
          username: user.username ?? `user-${index}`,
          accessKeyId: `STUB${storageId}${index}`,
          secretKey: 'stub-secret',
          policies: user.policies,
        })),
      ),
    buckets: (storageId) => Promise.resolve([...(storages.get(storageId)?.buckets ?? [])]),
    bucketAcl: (storageId, bucket) =>
      Promise.resolve(
        storages.get(storageId)?.buckets.includes(bucket)
          ? (acls.get(`${storageId}/${bucket}`) ?? 'private')
          : undefined,
      ),
    setBucketAcl(storageId, bucket, acl) {
      if (!storages.get(storageId)?.buckets.includes(bucket)) return Promise.resolve(false);
      calls.push(`objectStorage.setBucketAcl ${bucket} ${acl}`);
      acls.set(`${storageId}/${bucket}`, acl);
      return Promise.resolve(true);
    },
    publicBuckets: (storageId) =>
      Promise.resolve(
        (storages.get(storageId)?.buckets ?? []).filter(
          (bucket) => (acls.get(`${storageId}/${bucket}`) ?? 'private') !== 'private',
        ),
      ),
    remove(storageId) {
      calls.push(`objectStorage.remove ${storageId}`);
      storages.delete(storageId);
      return Promise.resolve();
    },
  };
}

/** One runner for every non-database service type, serving nowhere on this host. */
export function stubServiceRunner(calls: CallLog, types: readonly string[]): ServiceRunner {
  const running = new Set<string>();
  const runtime = (spec: ServiceSpec): ServiceRuntime => {
    running.add(spec.id);
    return { host: `${spec.name}.services.example`, port: 7000, pid: null, version: 'stub', location: null };
  };
  return {
    types,
    provision(spec) {
      calls.push(`services.provision ${spec.type} ${spec.name}`);
      return Promise.resolve(runtime(spec));
    },
    start: (spec) => Promise.resolve(runtime(spec)),
    restart: (spec) => Promise.resolve(runtime(spec)),
    stop(ref: ServiceRef) {
      running.delete(ref.id);
      return Promise.resolve();
    },
    delete(ref) {
      calls.push(`services.delete ${ref.type}`);
      running.delete(ref.id);
      return Promise.resolve();
    },
    status: (ref) => Promise.resolve({ running: running.has(ref.id), pid: null }),
    logs: () => Promise.resolve([]),
  };
}

/** Artifacts kept in memory, with URLs on a host that is not this one. */
export function stubArtifactStore(calls: CallLog): ArtifactStore {
  const kept = new Map<string, { bytes: Buffer; info: ArtifactInfo }>();
  return {
    name: 'stub',
    async put(key, body, { maxBytes }) {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of body) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) throw new Error(`the artifact is larger than ${maxBytes} bytes`);
        chunks.push(chunk as Buffer);
      }
      calls.push(`artifacts.put ${key}`);
      const info = { key, size, modifiedAt: new Date() };
      kept.set(key, { bytes: Buffer.concat(chunks), info });
      return info;
    },
    open: (key) => Promise.resolve(kept.has(key) ? Readable.from([kept.get(key)!.bytes]) : undefined),
    stat: (key) => Promise.resolve(kept.get(key)?.info),
    exists: (key) => Promise.resolve(kept.has(key)),
    remove(key) {
      kept.delete(key);
      return Promise.resolve();
    },
    removeApplication(appId) {
      calls.push(`artifacts.removeApplication ${appId}`);
      for (const key of kept.keys()) if (key.startsWith(`apps/${appId}/`)) kept.delete(key);
      return Promise.resolve();
    },
    url: (key, ttlSeconds) => `https://artifacts.stub.example/${key}?ttl=${ttlSeconds}`,
    localFile: () => Promise.reject(new Error('the stub store keeps no file on this host')),
  };
}
