// The limits, name patterns and field lists the document's blocks are checked against.

export type Obj = Record<string, unknown>;
/**
 * The longest list each field may hold (docs/api/apply.md, "Limits"): bounds the work one document
 * can cause, and is far above what an application uses (Ploi, Render and Heroku set similar caps).
 */
export const LIST_LIMITS: Readonly<Record<string, number>> = {
  domains: 100,
  secrets: 500,
  volumes: 20,
  services: 20,
  container_services: 20,
  managed_databases: 50,
  object_storage: 50,
  tags: 50,
  users: 100,
  logical_databases: 100,
  buckets: 100,
  build: 50,
  init: 50,
  extensions: 50,
  settings: 100,
  policies: 20,
};
export const DEFAULT_LIST_LIMIT = 100;
/** A secret's value (a certificate chain or a key fits; Heroku's config vars are 32 KiB in all). */
export const MAX_SECRET_VALUE_BYTES = 32 * 1024;

/**
 * Database users a document may not declare: the admin a team receives (`upadmin`), Berth's own
 * accounts (`berth…`), and the engines' own (PostgreSQL `postgres`, `public`, `pg_*`; MariaDB `root`,
 * `mysql`, `mariadb.sys`; Valkey `default`). Case-insensitive, as PostgreSQL folds unquoted names.
 */
export function isReservedDatabaseUser(username: string): boolean {
  const name = username.toLowerCase();
  return (
    ['upadmin', 'postgres', 'public', 'root', 'mysql', 'default'].includes(name) ||
    name.startsWith('berth') ||
    name.startsWith('pg_') ||
    name.startsWith('mysql.') ||
    name.startsWith('mariadb.')
  );
}
export const RESERVED_DATABASE_USERS_TEXT =
  "upadmin, names starting with 'berth', postgres, public, pg_*, root, mysql, mariadb.* and default";

export const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export const VALIDATION_MESSAGE = 'YAML validation failed';

/** Application, team-resource and entry names: a DNS label, as they become host names. */
export const RESOURCE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
export const RESOURCE_NAME_TEXT =
  'lower-case letters, digits and hyphens, 1-63 characters, not starting or ending with a hyphen';
export const APPLICATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
export const APPLICATION_NAME_TEXT =
  'letters, digits, ".", "_" and "-", 1-63 characters, starting with a letter or digit';
export const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
export const SECRET_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,254}$/;
export const ENV_NAME = SECRET_KEY;
export const SIZE_MI_GI = /^[1-9][0-9]{0,6}(Mi|Gi)$/;
export const SIZE_GI = /^[1-9][0-9]{0,6}Gi$/;
export const PHP_SETTING = /^[A-Za-z_][A-Za-z0-9_.]*=.*$/;
export const PHP_EXTENSION = /^[A-Za-z0-9_-]{1,64}$/;
export const BUCKET = /^[a-z0-9](?:[a-z0-9.-]{1,61}[a-z0-9])$/;
export const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;
export const MAX_REPLICAS = 100;
export const MAX_VOLUME_GB = 10_000;

export const APPLICATION_FIELDS = [
  'name',
  'type',
  'version',
  'label',
  'tags',
  'repository',
  'runtime',
  'commands',
  'settings',
  'php',
] as const;
export const SETTINGS_FIELDS = [
  'health_check_path',
  'health_check_enabled',
  'scheduler_enabled',
  'replicas',
  'memory',
  'scheduled_deletion_at',
] as const;
export const SPEC_FIELDS = [
  'application',
  'domains',
  'secrets',
  'volumes',
  'services',
  'container_services',
  'managed_databases',
  'object_storage',
] as const;
