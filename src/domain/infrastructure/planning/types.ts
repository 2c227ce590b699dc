// The current state a document is planned against, the writes a plan makes and its report.
import type { ApplicationType } from '../../applications.js';
import type { FieldErrors } from '../../errors.js';
import type { ManagedDatabaseEngine } from '../../plans.js';
import type {
  DesiredDatabaseUser,
  DesiredDocument,
  DesiredLogicalDatabase,
  DocumentBucketAcl,
} from '../document.js';

export type Action = 'created' | 'updated' | 'unchanged' | 'needs_action';

export interface ApplicationState {
  name: string;
  type: ApplicationType;
  version: string | null;
  label: string | null;
  tags: string[];
  repository: { url?: string; owner?: string; name?: string; branch?: string };
  runtime: { php_version?: string; nodejs_version?: string };
  commands: { build?: string[]; init?: string[]; start?: string };
  health_check_enabled: boolean;
  health_check_path: string | null;
  scheduler_enabled: boolean | null;
  replicas: number | null;
  memory: string | null;
  php: { extensions?: string[]; settings?: string[] };
  scheduled_deletion_at: string | null;
}

export interface VolumeState {
  name: string;
  mount_path: string;
  volume_size: number;
}

export interface ServiceState {
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  settings: Record<string, string | string[]>;
  command: string | null;
}

export interface ContainerServiceState {
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  settings: Record<string, string>;
}

export interface ManagedDatabaseState {
  name: string;
  type: ManagedDatabaseEngine;
  plan: string;
  zone: string;
  users: DesiredDatabaseUser[];
  logical_databases: DesiredLogicalDatabase[];
  pending_plan: string | null;
  pending_zone: string | null;
}

export interface ObjectStorageState {
  name: string;
  zone: string;
  plan: string | null;
  buckets: string[];
  /** The buckets the document wrote with an `acl` (export writes them back so). */
  bucket_acls: Record<string, DocumentBucketAcl>;
  users: Array<{ username: string; policies: unknown[] }>;
  pending_zone: string | null;
}

/** A stored object storage with its state and the buckets that really exist on the endpoint. */
export type StoredObjectStorage = ObjectStorageState & {
  id: number;
  uuid: string;
  state: string;
  /** The buckets that exist on the endpoint; loaded only for a storage in `error`, the one case that reads it. */
  created_buckets: string[];
};

/** What the store holds for the document's team and application. */
export interface CurrentState {
  application?: ApplicationState & { id: number };
  /** Domains of this application. */
  domains: ReadonlySet<string>;
  /** Domains of the document that another application holds. */
  domainsHeldElsewhere: ReadonlySet<string>;
  secrets: ReadonlyMap<string, { id: number; value_hash: string }>;
  volumes: ReadonlyMap<string, VolumeState & { id: number }>;
  services: ReadonlyMap<string, ServiceState & { id: number; secret_settings_hash: string | null }>;
  containerServices: ReadonlyMap<string, ContainerServiceState & { id: number }>;
  managedDatabases: ReadonlyMap<string, ManagedDatabaseState & { id: number; uuid: string }>;
  objectStorages: ReadonlyMap<string, StoredObjectStorage>;
}

export type Operation =
  | { kind: 'application.create'; values: ApplicationState }
  | { kind: 'application.update'; id: number; values: Partial<ApplicationState> }
  | { kind: 'domain.create'; domain: string }
  | { kind: 'secret.create'; key: string; value: string }
  | { kind: 'secret.update'; id: number; key: string; value: string }
  | { kind: 'volume.create'; values: VolumeState }
  | { kind: 'volume.update'; id: number; values: Partial<VolumeState> }
  | { kind: 'service.create'; values: ServiceState; password: string | null }
  | { kind: 'service.update'; id: number; values: Partial<ServiceState>; password?: string }
  | { kind: 'container_service.create'; values: ContainerServiceState }
  | { kind: 'container_service.update'; id: number; values: Partial<ContainerServiceState> }
  | { kind: 'managed_database.create'; values: ManagedDatabaseState }
  | {
      kind: 'managed_database.update';
      id: number;
      uuid: string;
      values: Partial<ManagedDatabaseState>;
      /** Users or databases changed: the provisioning job runs again to create them. */
      reconcile: boolean;
    }
  | { kind: 'object_storage.create'; values: ObjectStorageState }
  | {
      kind: 'object_storage.update';
      id: number;
      uuid: string;
      values: Partial<ObjectStorageState>;
      reconcile: boolean;
    };

/** One change line in both tenses: `Managed database 'x' created` / `[DRY RUN] Would create managed database 'x'`. */
export interface ChangeLine {
  done: string;
  would: string;
}

export interface StructuredChanges {
  application: { action: Action; name: string } | null;
  domains: Array<{ action: Action; domain: string }>;
  secrets: Array<{ action: Action; key: string }>;
  volumes: Array<{ action: Action; name: string }>;
  services: Array<{ action: Action; name: string; type: string }>;
  container_services: Array<{ action: Action; name: string; type: string }>;
  managed_databases: Array<{ action: Action; name: string; type: string }>;
  object_storage: Array<{ action: Action; name: string }>;
}

/** The kind of an entry of the document, as `resource_changes` names it. */
export type ResourceKind =
  | 'application'
  | 'domain'
  | 'secret'
  | 'volume'
  | 'service'
  | 'container_service'
  | 'managed_database'
  | 'object_storage';

/**
 * One entry of the document and what the apply does with it: the answer's `resource_changes` (Berth's
 * addition beside the spec's `structured_changes`), so that a client needs no change line parsed.
 */
export interface ResourceChange {
  resource: ResourceKind;
  /** The entry's name; a domain's host name, a secret's key. */
  name: string;
  /** The application's, a service's, a container service's or a managed database's type; else null. */
  type: string | null;
  action: Action;
  /**
   * Paths, relative to the entry as the document writes it (`settings.replicas`, `repository.branch`,
   * `value`), of the fields this apply changes. Empty for created and unchanged entries.
   */
  fields: string[];
  /** needs_action: the changes recorded for the panel and not applied (plan, zone). Else empty. */
  pending: Array<{ field: string; from: string; to: string }>;
}

export interface ApplyPlan {
  /** Problems found against the current state; non-empty means 422 and no writes. */
  errors: FieldErrors;
  ops: Operation[];
  lines: ChangeLine[];
  structured: StructuredChanges;
  /** Every entry of the document in document order, with the fields that change. */
  resources: ResourceChange[];
  needsDeployment: boolean;
}

export interface PlanInputs {
  document: DesiredDocument;
  state: CurrentState;
  now: Date;
  /** Keyed hash of a secret value (SecretBox.keyedHash): compares without the stored plaintext. */
  hash(value: string): string;
  /** Whether this Berth runs a service type (its runners); absent: the types no runner here has are not. */
  runsServiceType?: (type: string) => boolean;
}

/** What every block planner reads and adds to while one document is planned. */
export interface Plan {
  doc: DesiredDocument;
  state: CurrentState;
  now: Date;
  hash: (value: string) => string;
  runsServiceType: ((type: string) => boolean) | undefined;
  fail: (path: string, message: string) => void;
  ops: Operation[];
  lines: ChangeLine[];
  structured: StructuredChanges;
  resources: ResourceChange[];
  needsDeployment: boolean;
}
