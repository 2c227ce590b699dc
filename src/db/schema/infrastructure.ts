// Tables behind the Infrastructure document: applications and what hangs off them, and a team's
// managed databases and object storage. JSON columns are text holding JSON.
import type { ColumnType, Generated } from 'kysely';

import type { ApplicationType } from '../../domain/applications.js';
import type { ApplicationStatus, DeploymentStatus, DeploymentStep } from '../../domain/deployments.js';

export type { ApplicationType };

export interface ApplicationsTable {
  id: Generated<number>;
  team_id: number;
  name: string;
  type: ApplicationType;
  version: string | null;
  label: string | null;
  /** JSON: string[] */
  tags: string;
  /** JSON: { url?, owner?, name?, branch? } */
  repository: string;
  /** JSON: { php_version?, nodejs_version? } */
  runtime: string;
  /** JSON: { build?: string[], init?: string[], start?: string } */
  commands: string;
  health_check_enabled: number;
  /** Null: the default path of the application's type. */
  health_check_path: string | null;
  scheduler_enabled: number | null;
  replicas: number | null;
  memory: string | null;
  /** JSON: { extensions?: string[], settings?: string[] } */
  php: string;
  scheduled_deletion_at: string | null;
  /** Ploi's application states (src/domain/deployments.ts). */
  status: Generated<ApplicationStatus>;
  status_reason: string | null;
  /** 1 while suspended: nothing runs and the edge answers 503. */
  suspended: Generated<number>;
  /** The deployment whose release serves; null before the first success. */
  live_deployment_id: number | null;
  /** File name of the last uploaded source archive under the application's directory. */
  uploaded_source: string | null;
  uploaded_source_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface DomainsTable {
  id: Generated<number>;
  application_id: number;
  /** Lower-case host name; unique across the platform. */
  domain: string;
  created_at: string;
}

export interface SecretsTable {
  id: Generated<number>;
  application_id: number;
  key: string;
  /** AES-256-GCM sealed value (SecretBox). */
  value_encrypted: string;
  /** Keyed hash of the value, for change detection without decrypting. */
  value_hash: string;
  created_at: string;
  updated_at: string;
}

export interface VolumesTable {
  id: Generated<number>;
  application_id: number;
  name: string;
  mount_path: string;
  volume_size: number;
  created_at: string;
  updated_at: string;
}

export interface ServicesTable {
  id: Generated<number>;
  application_id: number;
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  /** JSON of the non-secret settings. */
  settings: string;
  /** Sealed JSON of secret settings (sftp password), or null. */
  secret_settings: string | null;
  /** Keyed hash of the secret settings, for change detection. */
  secret_settings_hash: string | null;
  command: string | null;
  created_at: string;
  updated_at: string;
}

export interface ContainerServicesTable {
  id: Generated<number>;
  application_id: number;
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  /** JSON: Record<string, string> */
  settings: string;
  created_at: string;
  updated_at: string;
}

export interface DeploymentsTable {
  id: Generated<number>;
  application_id: number;
  status: DeploymentStatus;
  /** Why it was made: `apply`, `deploy`, `rollback`, `source upload`. */
  reason: string;
  step: DeploymentStep | null;
  /** `git`, `archive` or `bundled` once fetched. */
  source: string | null;
  branch: string | null;
  commit_sha: string | null;
  /** 1: reuses the release of the last successful build instead of building. */
  skip_build: number | null;
  /** The deployment a rollback returns to. */
  rollback_of: number | null;
  /** The release directory it built or reuses. */
  release: string | null;
  error: string | null;
  started_at: string | null;
  finished_at: string | null;
  deadline_at: string | null;
  requested_by: number | null;
  created_at: string;
  updated_at: string;
}

export interface DeploymentLogsTable {
  id: Generated<number>;
  deployment_id: number;
  at: string;
  line: string;
}

export interface CommandHistoryTable {
  id: Generated<number>;
  application_id: number;
  user_id: number | null;
  command: string;
  status: 'running' | 'finished' | 'failed';
  exit_code: number | null;
  output: string;
  started_at: string;
  finished_at: string | null;
}

export interface RuntimeEventsTable {
  id: Generated<number>;
  application_id: number;
  at: string;
  kind: string;
  instance: string;
  message: string;
}

export type ManagedDatabaseType = 'mysql' | 'pg' | 'valkey';

export interface ManagedDatabasesTable {
  id: Generated<number>;
  uuid: string;
  team_id: number;
  name: string;
  title: string | null;
  type: ManagedDatabaseType;
  plan: string;
  zone: string;
  /** JSON: Array<{ username, authentication? }> (passwords live in the driver's sealed state). */
  users: string;
  /** JSON: Array<{ name, character_set?, collation? }> */
  logical_databases: string;
  /** UpCloud's states: pending, setup-service, running, rebuilding, poweroff, error, deleted… */
  state: string;
  state_reason: string | null;
  /** A plan or zone change from apply that needs action in the panel. */
  pending_plan: string | null;
  pending_zone: string | null;
  created_at: string;
  updated_at: string;
}

export interface ObjectStoragesTable {
  id: Generated<number>;
  uuid: string;
  team_id: number;
  name: string;
  zone: string;
  plan: string | null;
  /** JSON: string[] */
  buckets: string;
  /** JSON: { [bucket]: 'private' | 'public-read' }: the buckets the document wrote with an `acl` (migration 029). */
  bucket_acls: ColumnType<string, string | undefined, string>;
  /** JSON: Array<{ username, policies: unknown[] }> (keys live in the driver's tables). */
  users: string;
  state: string;
  state_reason: string | null;
  pending_zone: string | null;
  /**
   * Set on an application's private storage (its `minio` service, migration 023): never one of the
   * team's object storages (lists, exports, apply and quotas leave it out). Null for the team's own.
   */
  application_id: ColumnType<number | null, number | null | undefined, number | null>;
  created_at: string;
  updated_at: string;
}

/** Raised by triggers on every write to the tables apply plans against (migration 009). */
export interface TeamRevisionsTable {
  team_id: number;
  revision: number;
}

export interface InfrastructureTables {
  applications: ApplicationsTable;
  domains: DomainsTable;
  secrets: SecretsTable;
  volumes: VolumesTable;
  services: ServicesTable;
  container_services: ContainerServicesTable;
  deployments: DeploymentsTable;
  deployment_logs: DeploymentLogsTable;
  command_history: CommandHistoryTable;
  runtime_events: RuntimeEventsTable;
  managed_databases: ManagedDatabasesTable;
  object_storages: ObjectStoragesTable;
  team_revisions: TeamRevisionsTable;
}
