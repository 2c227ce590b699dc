// A managed database as UpCloud's /1.3/database answers it (test/fixtures/upcloud/dbapi-notes.md §2),
// with the values its instance really has: the host and address filter its driver serves it on, its
// own port, the limits its driver gives the plan, no TLS.
import type { BaseBackup, DatabaseEngine, ManagedDatabaseDriver } from '../../drivers/databases/types.js';
import { declaredDatabases, declaredUsers, engineOf } from './declared.js';
import type { ManagedDatabaseRow, ManagedInstanceRow } from '../../db/repositories/managed-databases.js';

export interface Secrets {
  admin: string;
  users: Record<string, string>;
}

/** UpCloud writes times without fractions: 2024-01-31T21:33:18Z. */
const upcloudTime = (text: string): string => text.replace(/\.\d+Z$/, 'Z');

function majorOf(engine: string, version: string | null): string | null {
  if (!version) return null;
  const parts = version.split(/[.-]/);
  // PostgreSQL majors are one number since 10; MariaDB and Valkey majors are two.
  return engine === 'pg' ? (parts[0] ?? null) : parts.slice(0, 2).join('.');
}

/**
 * `secrets` is undefined for callers who may not see passwords: the URI and users then carry none.
 */
export function serviceObject(
  driver: Pick<ManagedDatabaseDriver, 'planLimits' | 'endpoint'>,
  row: ManagedDatabaseRow,
  instance: ManagedInstanceRow | undefined,
  secrets: Secrets | undefined,
): Record<string, unknown> {
  const engine = engineOf(row.type);
  const ref = { id: row.uuid, engine };
  const endpoint = driver.endpoint(ref);
  const host = endpoint.host;
  const port = instance?.port ?? null;
  const ready = port !== null && instance?.applied_plan !== null && instance?.applied_plan !== undefined;
  const admin = instance?.admin_username ?? 'upadmin';
  const adminAuth = secrets
    ? `${encodeURIComponent(admin)}:${encodeURIComponent(secrets.admin)}`
    : encodeURIComponent(admin);
  const limits = safeLimits(driver, engine, row.plan);
  const storageUsed = instance?.storage_bytes ?? null;
  const storageLimit = (limits?.storageMiB ?? 0) * 1024 * 1024;
  const writeBlocked = storageLimit > 0 && storageUsed !== null && storageUsed > storageLimit;

  let serviceUri = '';
  let params: Record<string, string> = {};
  if (ready) {
    const password: Record<string, string> = secrets ? { password: secrets.admin } : {};
    // A driver whose servers require TLS gets UpCloud's own spellings of it in the URI and params.
    const tls = endpoint.tls === true;
    switch (engine) {
      case 'pg': {
        const mode = tls ? 'require' : 'disable';
        serviceUri = `postgres://${adminAuth}@${host}:${port}/defaultdb?sslmode=${mode}`;
        params = {
          dbname: 'defaultdb',
          host,
          ...password,
          port: String(port),
          ssl_mode: mode,
          user: admin,
        };
        break;
      }
      case 'mysql': {
        const mode = tls ? 'REQUIRED' : 'DISABLED';
        serviceUri = `mysql://${adminAuth}@${host}:${port}/defaultdb?ssl-mode=${mode}`;
        params = {
          dbname: 'defaultdb',
          host,
          ...password,
          port: String(port),
          ssl_mode: mode,
          user: admin,
        };
        break;
      }
      case 'valkey':
        serviceUri = `${tls ? 'rediss' : 'redis'}://${adminAuth}@${host}:${port}`;
        params = { host, ...password, port: String(port), ssl: tls ? 'required' : 'disabled', user: admin };
        break;
    }
  }

  const version = instance?.version ?? null;
  const metadata: Record<string, unknown> =
    engine === 'pg'
      ? {
          pg_version: version,
          max_connections: limits?.maxConnections ?? null,
          write_block_threshold_exceeded: writeBlocked,
        }
      : engine === 'mysql'
        ? { mysql_version: version, write_block_threshold_exceeded: writeBlocked }
        : { valkey_version: version };
  metadata.storage_used_bytes = storageUsed;
  metadata.storage_limit_bytes = storageLimit || null;
  metadata.memory_limit_mib = limits?.memoryMiB ?? null;
  metadata.process_restarts = instance?.restarts ?? 0;
  metadata.last_process_restart = instance?.last_restart_at
    ? { time: upcloudTime(instance.last_restart_at), reason: instance.last_restart_reason }
    : null;

  const properties: Record<string, unknown> = {
    version: majorOf(engine, version),
    automatic_utility_network_ip_filter: false,
    ip_filter: endpoint.ipFilter,
    public_access: false,
  };
  if (engine !== 'valkey') Object.assign(properties, { backup_hour: 0, backup_minute: 0 });
  if (engine === 'valkey')
    Object.assign(properties, { valkey_maxmemory_policy: 'noeviction', valkey_ssl: endpoint.tls === true });

  const users = [
    { username: admin, type: 'primary', ...(secrets ? { password: secrets.admin } : {}) },
    ...declaredUsers(row).map((u) => ({
      username: u.username,
      type: 'normal',
      ...(engine === 'pg' ? { authentication: u.authentication ?? 'scram-sha-256' } : {}),
      ...(engine === 'mysql' ? { authentication: 'mysql_native_password' } : {}),
      ...(secrets && secrets.users[u.username] ? { password: secrets.users[u.username] } : {}),
    })),
  ];

  const body: Record<string, unknown> = {
    uuid: row.uuid,
    zone: row.zone,
    name: row.name,
    title: row.title ?? row.name,
    type: engine,
    plan: row.plan,
    state: row.state,
    powered: instance ? instance.powered === 1 : true,
    termination_protection: false,
    node_count: limits?.nodes ?? 1,
    create_time: upcloudTime(row.created_at),
    update_time: upcloudTime(row.updated_at),
    service_uri: serviceUri,
    service_uri_params: params,
    maintenance: { dow: 'monday', time: '12:00:00', pending_updates: [] },
    metadata,
    properties,
    networks: [],
    // One host runs one node whatever the plan's node count (docs/drivers.md).
    node_states: [{ name: `${row.name}-1`, role: 'master', state: row.state }],
    labels: [],
    backups: parseBackups(instance?.backups).map((b) => ({
      backup_name: b.backup_name,
      backup_time: b.backup_time,
      data_size: b.data_size,
    })),
    components: ready ? [{ component: engine, host, port, route: 'dynamic', usage: 'primary' }] : [],
    users,
    // Recorded list answers carry these two; Berth has no extra disks or integrations.
    additional_disk_space_gib: 0,
    service_integrations: [],
  };
  if (engine !== 'valkey') {
    body.databases = [
      { name: 'defaultdb' },
      ...declaredDatabases(row)
        .filter((d) => d.name !== 'defaultdb')
        .map((d) =>
          engine === 'pg'
            ? {
                name: d.name,
                lc_collate: d.collation ?? 'C.UTF-8',
                lc_ctype: d.collation ?? 'C.UTF-8',
                encoding: d.character_set ?? 'UTF8',
              }
            : { name: d.name, character_set: d.character_set ?? 'utf8mb4', collation: d.collation ?? null },
        ),
    ];
  }
  if (row.state === 'error' && row.state_reason) body.state_error = { message: row.state_reason };
  if (row.pending_plan !== null || row.pending_zone !== null) {
    body.pending_change = { plan: row.pending_plan, zone: row.pending_zone };
  }
  return body;
}

function parseBackups(text: string | undefined): BaseBackup[] {
  try {
    return text ? (JSON.parse(text) as BaseBackup[]) : [];
  } catch {
    return [];
  }
}

function safeLimits(driver: Pick<ManagedDatabaseDriver, 'planLimits'>, engine: DatabaseEngine, plan: string) {
  try {
    return driver.planLimits(engine, plan);
  } catch {
    return undefined;
  }
}
