// The Infrastructure document after validation: every value checked and normalised. A field that is
// `undefined` was omitted from the document; apply leaves the stored value alone (apply rule 4).
import type { ApplicationType } from '../applications.js';
import type { ManagedDatabaseEngine } from '../plans.js';

export const SERVICE_TYPES = [
  'mysql',
  'postgresql',
  'redis',
  'valkey',
  'rabbitmq',
  'minio',
  'sftp',
  'worker',
] as const;
export type ServiceType = (typeof SERVICE_TYPES)[number];

export const CONTAINER_SERVICE_TYPES = ['gotenberg', 'chrome-headless', 'clickhouse', 'meilisearch'] as const;
export type ContainerServiceType = (typeof CONTAINER_SERVICE_TYPES)[number];

/** Ploi Cloud's runtime versions (REST create and settings PATCH). */
export const PHP_VERSIONS = ['8.5', '8.4', '8.3', '8.2', '8.1', '8.0', '7.4'] as const;
export const NODEJS_VERSIONS = ['none', '20', '22', '24'] as const;

/** User authentication methods per engine; Valkey users have none. */
export const USER_AUTHENTICATION: Readonly<Record<ManagedDatabaseEngine, readonly string[]>> = {
  mysql: ['caching_sha2_password', 'mysql_native_password'],
  pg: ['scram-sha-256', 'md5'],
  valkey: [],
};

export interface DesiredApplicationSettings {
  health_check_path?: string;
  health_check_enabled?: boolean;
  scheduler_enabled?: boolean;
  replicas?: number;
  memory?: string;
  /** Normalised to `Date.toISOString()`; omitted means "clear the schedule". */
  scheduled_deletion_at?: string;
}

export interface DesiredApplication {
  name: string;
  type: ApplicationType;
  version?: string;
  label?: string;
  tags?: string[];
  repository?: { url?: string; owner?: string; name?: string; branch?: string };
  runtime?: { php_version?: string; nodejs_version?: string };
  commands?: { build?: string[]; init?: string[]; start?: string };
  settings: DesiredApplicationSettings;
  php?: { extensions?: string[]; settings?: string[] };
}

export interface DesiredSecret {
  key: string;
  /** null: the export placeholder, meaning "keep the stored value". */
  value: string | null;
}

export interface DesiredVolume {
  name: string;
  mount_path: string;
  volume_size: number;
}

export interface DesiredService {
  name: string;
  type: ServiceType;
  version?: string;
  memory?: string;
  volume_size?: string;
  /** Non-secret settings (database, extensions, username). */
  settings?: Record<string, string | string[]>;
  /** sftp password; null is the export placeholder ("keep the stored one"). */
  password?: string | null;
  command?: string;
}

export interface DesiredContainerService {
  name: string;
  type: ContainerServiceType;
  version?: string;
  memory?: string;
  volume_size?: string;
  settings?: Record<string, string>;
}

export interface DesiredDatabaseUser {
  username: string;
  authentication?: string;
}

export interface DesiredLogicalDatabase {
  name: string;
  character_set?: string;
  collation?: string;
}

export interface DesiredManagedDatabase {
  name: string;
  type: ManagedDatabaseEngine;
  plan: string;
  zone: string;
  users?: DesiredDatabaseUser[];
  logical_databases?: DesiredLogicalDatabase[];
}

export interface DesiredStorageUser {
  username: string;
  /** Omitted: an existing user keeps its policies; a new one gets none. */
  policies?: unknown[];
}

/** The canned ACLs a bucket of the document may give (`buckets: [{name, acl}]`). */
export const DOCUMENT_BUCKET_ACLS = ['private', 'public-read'] as const;
export type DocumentBucketAcl = (typeof DOCUMENT_BUCKET_ACLS)[number];

export interface DesiredObjectStorage {
  name: string;
  zone: string;
  plan?: string;
  buckets?: string[];
  /** The listed buckets written with an `acl`, by name (set whenever `buckets` is). */
  bucket_acls?: Record<string, DocumentBucketAcl>;
  users?: DesiredStorageUser[];
}

export interface DesiredDocument {
  /** metadata.name: the application's name. */
  name: string;
  /** metadata.team: a team id or name. */
  team: string | number;
  application?: DesiredApplication;
  domains: string[];
  secrets: DesiredSecret[];
  volumes: DesiredVolume[];
  services: DesiredService[];
  containerServices: DesiredContainerService[];
  managedDatabases: DesiredManagedDatabase[];
  objectStorages: DesiredObjectStorage[];
  /** True when the document touches the application (its block or anything attached to it). */
  touchesApplication: boolean;
}

/** `<NAME>` of a placeholder: upper-cased, every character other than A-Z and 0-9 as `_`. */
export function placeholderName(name: string): string {
  return name.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

export const dbPasswordPlaceholder = (name: string): string => `\${DB_${placeholderName(name)}_PASSWORD}`;
export const storageSecretKeyPlaceholder = (name: string): string =>
  `\${STORAGE_${placeholderName(name)}_SECRET_KEY}`;
export const secretPlaceholder = (key: string): string => `\${SECRET_${placeholderName(key)}}`;
export const servicePasswordPlaceholder = (name: string): string =>
  `\${SERVICE_${placeholderName(name)}_PASSWORD}`;
