// What runs for an application's services and container services (migrations 021, 022), kept by the app-services
// service beside apply's `services` rows.
import type { Generated } from 'kysely';

export interface AppServiceInstancesTable {
  id: Generated<number>;
  /** `service` (a row of `services`) or `container` (of `container_services`); migration 022. */
  source: string;
  /** services.id or container_services.id: one instance per service. */
  service_id: number;
  application_id: number;
  /** Names the instance on the driver's side (its directory and OS account). */
  uuid: string;
  /** `pg`, `mysql` or `valkey` (on the managed-database driver), else the service's type. */
  engine: string;
  /** provisioning, running, restarting, failed (domain/app-services.ts). */
  state: string;
  state_reason: string | null;
  port: number | null;
  /** The server's pid when last seen running; null when Berth stopped it on purpose. */
  pid: number | null;
  version: string | null;
  data_dir: string | null;
  /** The sizing the running server has (the driver's `plan+<MiB>MiB`); null before it first ran. */
  applied_sizing: string | null;
  /** JSON of ServiceRuntime.extra (vhost, bucket, endpoint, token path), or null. */
  extra: string | null;
  username: string;
  /** SecretBox-sealed password of `username`. */
  password_encrypted: string;
  restarts: number;
  last_restart_at: string | null;
  last_restart_reason: string | null;
  created_at: string;
  updated_at: string;
}

export interface AppServicesTables {
  app_service_instances: AppServiceInstancesTable;
}
