// The `upcloud` managed-database driver: every instance is a service of UpCloud's Managed Database
// API (/1.3/database) in the configured zone. Berth keeps its rows, jobs, credentials and answers as
// with the local driver; the service carries Berth's mapping in its labels (berth_database: the
// managed database's uuid, berth_team: its team's id), so a Berth that restarted finds it again by
// listing. What UpCloud's recorded traffic (test/fixtures/upcloud) does not show is refused with a
// PermanentDriverError rather than guessed: docs/drivers.md, "Managed databases on UpCloud".
import { connectionLimit, parsePlan } from '../plan-limits.js';
import {
  PermanentDriverError,
  type BaseBackup,
  type DatabaseEngine,
  type InstanceEndpoint,
  type InstanceHealth,
  type InstanceRef,
  type InstanceRuntime,
  type InstanceSpec,
  type InstanceStatus,
  type ManagedDatabaseDriver,
  type PlanLimits,
  credentialsOfSpec,
} from '../types.js';
import { createUpCloudClient, UpCloudApiError, type UpCloudClient } from './client.js';

export interface UpCloudDriverOptions {
  apiUrl: string;
  username: string;
  password: string;
  zone: string;
  /** Between two reads of a service that is being made or powered on (default 5 s). */
  pollMs?: number;
  /** How long a service may take to run (default 30 min: UpCloud takes minutes). */
  readyTimeoutMs?: number;
  /**
   * How old a read may be for `health` (default 30 s): the supervisor asks every second, UpCloud's
   * API is not to be polled that often for every database.
   */
  healthMaxAgeMs?: number;
}

/** The part of UpCloud's service object the driver reads. */
export interface UpCloudService {
  uuid: string;
  name: string;
  type: string;
  plan: string;
  zone: string;
  state: string;
  powered: boolean;
  termination_protection?: boolean;
  service_uri_params?: { host?: string; port?: string };
  components?: Array<{ component: string; host: string; port: number; route: string; usage: string }>;
  metadata?: { pg_version?: string; mysql_version?: string; valkey_version?: string };
  properties?: { version?: string; ip_filter?: string[] };
  users?: Array<{ username: string; type: string; password?: string }>;
  databases?: Array<{ name: string }>;
  backups?: Array<{ backup_name: string; backup_time: string; data_size: number }>;
  labels?: Array<{ key: string; value: string }>;
  state_error?: Record<string, unknown>;
}

interface ServiceTypePlan {
  plan: string;
  node_count: number;
  memory_amount: number;
  storage_size: number;
  backup_config?: { max_count?: number };
  zones?: { zone?: Array<{ name: string }> };
}
type ServiceTypes = Record<string, { service_plans?: ServiceTypePlan[] }>;

export const DATABASE_LABEL = 'berth_database';
export const TEAM_LABEL = 'berth_team';
/** UpCloud's list is paged; Berth asks full pages. */
const PAGE = 100;
/** Berth's engine names are UpCloud's service types. */
const TYPE: Record<DatabaseEngine, string> = { pg: 'pg', mysql: 'mysql', valkey: 'valkey' };

const unsupported = (operation: string): PermanentDriverError =>
  new PermanentDriverError(`not supported by the upcloud driver: ${operation}`);

export function createUpCloudDatabaseDriver(options: UpCloudDriverOptions): ManagedDatabaseDriver {
  const api: UpCloudClient = createUpCloudClient(options);
  const pollMs = options.pollMs ?? 5000;
  const readyTimeoutMs = options.readyTimeoutMs ?? 30 * 60_000;
  /** The last service object read per Berth database: `endpoint` answers synchronously from it. */
  const known = new Map<string, UpCloudService>();
  /** When each database's service was last read from UpCloud (ms). */
  const readAt = new Map<string, number>();
  const healthMaxAgeMs = options.healthMaxAgeMs ?? 30_000;
  let serviceTypes: ServiceTypes | undefined;

  const remember = (id: string, service: UpCloudService): UpCloudService => {
    known.set(id, service);
    readAt.set(id, Date.now());
    return service;
  };

  /** The service of a Berth database: the one last seen, else found by its label; undefined if none. */
  async function find(ref: InstanceRef): Promise<UpCloudService | undefined> {
    const cached = known.get(ref.id);
    if (cached) return cached;
    for (let offset = 0; ; offset += PAGE) {
      const page = await api.request<UpCloudService[]>('GET', `/1.3/database?limit=${PAGE}&offset=${offset}`);
      const match = page.find((s) =>
        (s.labels ?? []).some((l) => l.key === DATABASE_LABEL && l.value === ref.id),
      );
      if (match) return remember(ref.id, match);
      if (page.length < PAGE) return undefined;
    }
  }

  async function read(id: string, uuid: string): Promise<UpCloudService | undefined> {
    try {
      return remember(id, await api.request<UpCloudService>('GET', `/1.3/database/${uuid}`));
    } catch (error) {
      if (error instanceof UpCloudApiError && error.status === 404) {
        known.delete(id);
        return undefined;
      }
      throw error;
    }
  }

  /** Reads the service until UpCloud says it runs; its `error` state fails with UpCloud's reason. */
  async function untilRunning(id: string, service: UpCloudService): Promise<UpCloudService> {
    const deadline = Date.now() + readyTimeoutMs;
    let current = service;
    // The first read follows at once (the answer to a create or power-on is `pending`), then every pollMs.
    let first = true;
    while (current.state !== 'running') {
      if (current.state === 'error') {
        throw new Error(
          `UpCloud service ${current.uuid} is in state error: ${JSON.stringify(current.state_error ?? {})}`,
        );
      }
      if (Date.now() > deadline) {
        throw new Error(
          `UpCloud service ${current.uuid} is still ${current.state} after ${readyTimeoutMs} ms`,
        );
      }
      if (!first) await new Promise((resolve) => setTimeout(resolve, pollMs));
      first = false;
      const fresh = await read(id, current.uuid);
      if (!fresh) throw new Error(`UpCloud service ${current.uuid} disappeared while starting`);
      current = fresh;
    }
    return current;
  }

  function runtimeOf(service: UpCloudService, spec: InstanceSpec): InstanceRuntime {
    const primary = service.components?.find((c) => c.usage === 'primary' && c.route === 'dynamic');
    const host = service.service_uri_params?.host ?? primary?.host ?? '';
    const port = Number(service.service_uri_params?.port ?? primary?.port ?? 0);
    const metadata = service.metadata ?? {};
    return {
      host,
      port,
      pid: null,
      version:
        metadata.pg_version ??
        metadata.mysql_version ??
        metadata.valkey_version ??
        service.properties?.version ??
        '',
      plan: service.plan,
      location: null,
      credentials: credentialsOfSpec(spec),
    };
  }

  /** Makes the service's users, passwords and logical databases those of the spec. */
  async function converge(service: UpCloudService, spec: InstanceSpec): Promise<void> {
    const base = `/1.3/database/${service.uuid}`;
    const users = new Map((service.users ?? []).map((u) => [u.username, u]));
    const primary = (service.users ?? []).find((u) => u.type === 'primary');
    // The admin is UpCloud's primary user; Berth hands out its own password for it.
    if (primary && primary.password !== spec.adminPassword) {
      await api.request('PATCH', `${base}/users/${encodeURIComponent(primary.username)}`, {
        password: spec.adminPassword,
      });
    }
    for (const user of spec.users) {
      if (user.authentication) throw unsupported(`user authentication '${user.authentication}'`);
      if (!users.has(user.username)) {
        await api.request('POST', `${base}/users`, { username: user.username });
      }
      if (users.get(user.username)?.password !== user.password) {
        await api.request('PATCH', `${base}/users/${encodeURIComponent(user.username)}`, {
          password: user.password,
        });
      }
    }
    const databases = new Set((service.databases ?? []).map((d) => d.name));
    for (const database of spec.databases) {
      if (database.extensions?.length) throw unsupported('extensions');
      if (database.characterSet) throw unsupported('character_set');
      if (databases.has(database.name)) continue;
      const locale = database.collation ?? 'en_US.UTF-8';
      await api.request('POST', `${base}/databases`, {
        name: database.name,
        lc_collate: locale,
        lc_ctype: locale,
      });
    }
  }

  async function create(spec: InstanceSpec): Promise<UpCloudService> {
    // A name UpCloud accepts as a host name prefix, unique per Berth database.
    const name = `berth-${spec.id.replace(/-/g, '').slice(0, 20)}`;
    const labels = [{ key: DATABASE_LABEL, value: spec.id }];
    if (spec.teamId !== undefined) labels.push({ key: TEAM_LABEL, value: String(spec.teamId) });
    try {
      return remember(
        spec.id,
        await api.request<UpCloudService>('POST', '/1.3/database', {
          hostname_prefix: name,
          plan: spec.plan,
          properties: {
            automatic_utility_network_ip_filter: true,
            ip_filter: ['0.0.0.0/0'],
            public_access: true,
          },
          title: name,
          type: TYPE[spec.engine],
          zone: options.zone,
          maintenance: { dow: 'monday', time: '12:00:00' },
          labels,
        }),
      );
    } catch (error) {
      // A plan or property UpCloud refuses will be refused again.
      if (error instanceof UpCloudApiError && error.status === 400)
        throw new PermanentDriverError(error.message);
      throw error;
    }
  }

  async function powerOn(spec: InstanceSpec, service: UpCloudService): Promise<UpCloudService> {
    if (service.powered) return service;
    return remember(
      spec.id,
      await api.request<UpCloudService>('PATCH', `/1.3/database/${service.uuid}`, { powered: true }),
    );
  }

  function checkPlan(spec: InstanceSpec, service: UpCloudService): void {
    // A plan change is a PATCH {plan} UpCloud's recorded traffic does not show: refused, not guessed.
    if (service.plan !== spec.plan) throw unsupported(`plan change (${service.plan} to ${spec.plan})`);
  }

  async function provision(spec: InstanceSpec): Promise<InstanceRuntime> {
    let service = (await find(spec)) ?? (await create(spec));
    checkPlan(spec, service);
    service = await untilRunning(spec.id, await powerOn(spec, service));
    await converge(service, spec);
    return runtimeOf(service, spec);
  }

  const limitsFromName = (engine: DatabaseEngine, plan: string): PlanLimits => {
    const shape = parsePlan(plan);
    return {
      nodes: shape.nodes,
      memoryMiB: shape.memoryMiB,
      storageMiB: shape.storageMiB,
      maxConnections: connectionLimit(engine, shape.memoryMiB),
      baseBackupRetention: 1,
    };
  };

  return {
    name: 'upcloud',
    remote: true,

    async verify() {
      let types: ServiceTypes;
      try {
        types = await api.request<ServiceTypes>('GET', '/1.3/database/service-types');
      } catch (error) {
        if (error instanceof UpCloudApiError && (error.status === 401 || error.status === 403)) {
          throw new Error(
            `UpCloud refused BERTH_UPCLOUD_USERNAME/BERTH_UPCLOUD_PASSWORD (${error.message}): check the API user's name and BERTH_UPCLOUD_PASSWORD`,
          );
        }
        const message = error instanceof Error ? error.message : String(error);
        throw new Error(
          `UpCloud's API at BERTH_UPCLOUD_API_URL (${options.apiUrl}) cannot be used: ${message}`,
        );
      }
      const zones = new Set<string>();
      for (const type of Object.values(types))
        for (const plan of type.service_plans ?? [])
          for (const z of plan.zones?.zone ?? []) zones.add(z.name);
      if (!zones.has(options.zone)) {
        throw new Error(
          `BERTH_UPCLOUD_ZONE '${options.zone}' has no managed database plans at UpCloud; zones offered: ${[...zones].sort().join(', ')}`,
        );
      }
      serviceTypes = types;
    },

    planLimits(engine, plan) {
      // UpCloud's own plan table once the start read it; before that, what the plan's name says.
      if (!serviceTypes) return limitsFromName(engine, plan);
      const found = serviceTypes[TYPE[engine]]?.service_plans?.find((p) => p.plan === plan);
      if (!found) throw new Error(`plan '${plan}' is not offered for ${engine} at UpCloud`);
      return {
        nodes: found.node_count,
        memoryMiB: found.memory_amount,
        storageMiB: found.storage_size,
        maxConnections: connectionLimit(engine, found.memory_amount),
        baseBackupRetention: found.backup_config?.max_count ?? 1,
      };
    },

    endpoint(ref): InstanceEndpoint {
      const service = known.get(ref.id);
      return {
        host: service?.service_uri_params?.host ?? '',
        ipFilter: service?.properties?.ip_filter ?? [],
        tls: true,
      };
    },

    async health(ref): Promise<InstanceHealth> {
      const seen = await find(ref);
      const fresh = seen && Date.now() - (readAt.get(ref.id) ?? 0) < healthMaxAgeMs;
      const service = fresh ? seen : seen && (await read(ref.id, seen.uuid));
      if (!service) return { state: 'crashed', reason: 'the UpCloud service is gone' };
      if (!service.powered || service.state === 'stopped') return { state: 'stopped' };
      if (service.state === 'running') return { state: 'running', pid: null, storageBytes: 0 };
      if (service.state === 'error')
        return {
          state: 'crashed',
          reason: `UpCloud reports an error: ${JSON.stringify(service.state_error ?? {})}`,
        };
      // Being made, changed or moved by UpCloud: its to finish, not Berth's to restart.
      return { state: 'elsewhere' };
    },

    provision,

    async start(spec) {
      const service = await find(spec);
      if (!service) return provision(spec);
      return runtimeOf(await untilRunning(spec.id, await powerOn(spec, service)), spec);
    },

    async stop(ref) {
      const service = await find(ref);
      if (!service || !service.powered) return;
      // UpCloud finishes the power-off on its own (`stopped`); Berth records it stopped now.
      remember(
        ref.id,
        await api.request<UpCloudService>('PATCH', `/1.3/database/${service.uuid}`, { powered: false }),
      );
    },

    async delete(ref) {
      const service = await find(ref);
      if (!service) return;
      try {
        await api.request('DELETE', `/1.3/database/${service.uuid}`);
      } catch (error) {
        if (!(error instanceof UpCloudApiError && error.status === 404)) throw error;
      }
      known.delete(ref.id);
    },

    async status(ref): Promise<InstanceStatus> {
      const seen = await find(ref);
      const service = seen && (await read(ref.id, seen.uuid));
      return { running: service?.state === 'running' && service.powered, pid: null, storageBytes: 0 };
    },

    async setPlan(spec) {
      const service = await find(spec);
      if (!service) throw new Error(`no UpCloud service for managed database ${spec.id}`);
      checkPlan(spec, service);
      return runtimeOf(service, spec);
    },

    restart() {
      // UpCloud's PUT …/start-maintenance has no recording: refused rather than guessed.
      return Promise.reject(unsupported('restart (maintenance)'));
    },

    async baseBackup(spec): Promise<BaseBackup[]> {
      // UpCloud takes its own backups: Berth lists them.
      const seen = await find(spec);
      const service = seen && (await read(spec.id, seen.uuid));
      return (service?.backups ?? []).map((b) => ({ ...b, start_wal: '' }));
    },
  };
}
