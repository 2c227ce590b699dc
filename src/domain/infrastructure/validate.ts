// Whole-document validation: every problem of every block is collected, then reported in one 422
// (apply rules 1 and 2). Entries of named lists are addressed by their name
// (`spec.managed_databases.main-db.type`); domains and secrets by index. Every message names the
// resource, the field and what is accepted. Nothing here does I/O; checks that need the store
// (domain owners, type changes, schedule changes) are in plan.ts.
import type { ApplicationType } from '../../db/schema/infrastructure.js';
import { FieldErrorCollector, validationError, type FieldErrors } from '../errors.js';
import { APPLICATION_TYPES } from '../health-checks.js';
import {
  MANAGED_DATABASE_ENGINES,
  MANAGED_DATABASE_PLANS,
  MANAGED_DATABASE_ZONES,
  OBJECT_STORAGE_REGIONS,
  isPlanOffered,
  type ManagedDatabaseEngine,
} from '../plans.js';
import {
  CONTAINER_SERVICE_TYPES,
  NODEJS_VERSIONS,
  PHP_VERSIONS,
  SERVICE_TYPES,
  USER_AUTHENTICATION,
  dbPasswordPlaceholder,
  secretPlaceholder,
  servicePasswordPlaceholder,
  storageSecretKeyPlaceholder,
  type ContainerServiceType,
  type DesiredApplication,
  type DesiredContainerService,
  type DesiredDocument,
  type DesiredManagedDatabase,
  type DesiredObjectStorage,
  type DesiredSecret,
  type DesiredService,
  type DesiredVolume,
  type ServiceType,
} from './document.js';

type Obj = Record<string, unknown>;
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
const DEFAULT_LIST_LIMIT = 100;
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
const RESERVED_DATABASE_USERS_TEXT =
  "upadmin, names starting with 'berth', postgres, public, pg_*, root, mysql, mariadb.* and default";

const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

export const VALIDATION_MESSAGE = 'YAML validation failed';

/** Application, team-resource and entry names: a DNS label, as they become host names. */
export const RESOURCE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const RESOURCE_NAME_TEXT =
  'lower-case letters, digits and hyphens, 1-63 characters, not starting or ending with a hyphen';
export const APPLICATION_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const APPLICATION_NAME_TEXT =
  'letters, digits, ".", "_" and "-", 1-63 characters, starting with a letter or digit';
const HOST_LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
export const SECRET_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,254}$/;
const ENV_NAME = SECRET_KEY;
const SIZE_MI_GI = /^[1-9][0-9]{0,6}(Mi|Gi)$/;
const SIZE_GI = /^[1-9][0-9]{0,6}Gi$/;
const PHP_SETTING = /^[A-Za-z_][A-Za-z0-9_.]*=.*$/;
const PHP_EXTENSION = /^[A-Za-z0-9_-]{1,64}$/;
const BUCKET = /^[a-z0-9](?:[a-z0-9.-]{1,61}[a-z0-9])$/;
const ISO_8601 =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/;
const MAX_REPLICAS = 100;
const MAX_VOLUME_GB = 10_000;

const APPLICATION_FIELDS = [
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
const SETTINGS_FIELDS = [
  'health_check_path',
  'health_check_enabled',
  'scheduler_enabled',
  'replicas',
  'memory',
  'scheduled_deletion_at',
] as const;
const SPEC_FIELDS = [
  'application',
  'domains',
  'secrets',
  'volumes',
  'services',
  'container_services',
  'managed_databases',
  'object_storage',
] as const;

/** A short, safe rendering of a value for a message. */
function repr(value: unknown): string {
  if (value === null || value === undefined) return 'nothing';
  if (typeof value === 'string') return `'${value.length > 60 ? `${value.slice(0, 57)}...` : value}'`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return 'a list';
  return 'a mapping';
}

const oneOf = (values: readonly string[]): string => `one of ${values.join(', ')}`;

/** A version written as a YAML number (8.4, 24) is read as the string the author meant. */
function versionText(value: unknown, decimals: boolean): string | undefined {
  if (typeof value === 'string') return value.trim() === '' ? undefined : value;
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) {
    return decimals && Number.isInteger(value) ? value.toFixed(1) : String(value);
  }
  return undefined;
}

export function isIso8601(text: string): boolean {
  const m = ISO_8601.exec(text);
  if (!m) return false;
  const [, y, mo, d, h, mi, s] = m;
  const month = Number(mo);
  const day = Number(d);
  if (month < 1 || month > 12 || day < 1 || day > 31) return false;
  if (h !== undefined && (Number(h) > 23 || Number(mi) > 59 || Number(s ?? 0) > 59)) return false;
  const date = new Date(Date.UTC(Number(y), month - 1, day));
  if (date.getUTCDate() !== day) return false;
  return !Number.isNaN(Date.parse(h === undefined ? `${text}T00:00:00Z` : text.replace(' ', 'T')));
}

/** ISO 8601 text → the instant as `toISOString()`; a bare date is midnight UTC. */
export function normalizeTimestamp(text: string): string {
  const m = ISO_8601.exec(text);
  const value = m?.[4] === undefined ? `${text}T00:00:00Z` : text.replace(' ', 'T');
  return new Date(Date.parse(value)).toISOString();
}

export function isHostName(text: string): boolean {
  if (text.length > 253 || !text.includes('.')) return false;
  return text.split('.').every((label) => HOST_LABEL.test(label));
}

export function isAbsolutePath(text: string): boolean {
  return (
    text.startsWith('/') &&
    text.length <= 4096 &&
    !text.includes('\0') &&
    !text.split('/').some((segment) => segment === '..' || segment === '.')
  );
}

class Checker {
  readonly errors = new FieldErrorCollector();

  add(path: string, message: string): void {
    this.errors.add(path, message);
  }

  unknownFields(obj: Obj, allowed: readonly string[], path: string, resource: string): void {
    for (const key of Object.keys(obj)) {
      if (!allowed.includes(key)) {
        this.add(
          path === '' ? key : `${path}.${key}`,
          `${resource}: field '${key}' is not a known field; accepted fields: ${allowed.join(', ')}.`,
        );
      }
    }
  }

  /** Reads one field with `read`; reports a missing required field or a value `read` refuses. */
  field<T>(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    expected: string,
    read: (value: unknown) => T | undefined,
    required = false,
  ): T | undefined {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) {
      if (required) this.add(at, `${resource}: field '${key}' is required; expected ${expected}.`);
      return undefined;
    }
    const result = read(value);
    if (result === undefined) {
      this.add(at, `${resource}: field '${key}' must be ${expected}; got ${repr(value)}.`);
    }
    return result;
  }

  string(obj: Obj, key: string, path: string, resource: string, required = false, max = 255) {
    return this.field(
      obj,
      key,
      path,
      resource,
      `a string of at most ${max} characters`,
      (v) => (typeof v === 'string' && v.length <= max ? v : undefined),
      required,
    );
  }

  pattern(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    re: RegExp,
    expected: string,
    required = false,
  ): string | undefined {
    return this.field(
      obj,
      key,
      path,
      resource,
      expected,
      (v) => (typeof v === 'string' && re.test(v) ? v : undefined),
      required,
    );
  }

  enumeration<T extends string>(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    values: readonly T[],
    required = false,
    note = '',
  ): T | undefined {
    return this.field(
      obj,
      key,
      path,
      resource,
      `${oneOf(values)}${note}`,
      (v) => (typeof v === 'string' && (values as readonly string[]).includes(v) ? (v as T) : undefined),
      required,
    );
  }

  boolean(obj: Obj, key: string, path: string, resource: string): boolean | undefined {
    return this.field(obj, key, path, resource, 'true or false', (v) =>
      typeof v === 'boolean' ? v : undefined,
    );
  }

  /** Refuses a list longer than its limit (LIST_LIMITS), before any of its items is looked at. */
  private tooLong(value: unknown[], key: string, at: string, resource: string): boolean {
    const limit = LIST_LIMITS[key] ?? DEFAULT_LIST_LIMIT;
    if (value.length <= limit) return false;
    this.add(at, `${resource}: field '${key}' has ${value.length} items; at most ${limit} are accepted.`);
    return true;
  }

  /** A list of strings, each checked with `item`; bad items are reported at their index. */
  stringList(
    obj: Obj,
    key: string,
    path: string,
    resource: string,
    itemExpected: string,
    item: (text: string) => boolean = (s) => s.length <= 1000,
  ): string[] | undefined {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value)) {
      this.add(at, `${resource}: field '${key}' must be a list of ${itemExpected}; got ${repr(value)}.`);
      return undefined;
    }
    if (this.tooLong(value, key, at, resource)) return undefined;
    let ok = true;
    value.forEach((entry, index) => {
      if (typeof entry !== 'string' || !item(entry)) {
        ok = false;
        this.add(
          `${at}.${index}`,
          `${resource}: item ${index} of field '${key}' must be ${itemExpected}; got ${repr(entry)}.`,
        );
      }
    });
    return ok ? (value as string[]) : undefined;
  }

  /** A mapping field; reports a non-mapping and returns undefined for it. */
  mapping(obj: Obj, key: string, path: string, resource: string, expected: string): Obj | undefined {
    return this.field(obj, key, path, resource, `a mapping with ${expected}`, (v) =>
      isObj(v) ? v : undefined,
    );
  }

  /** A list of mappings; entries that are not mappings are reported at their index. */
  list(obj: Obj, key: string, path: string, resource: string, expected: string): Array<[Obj, number]> {
    const value = obj[key];
    const at = path === '' ? key : `${path}.${key}`;
    if (value === undefined || value === null) return [];
    if (!Array.isArray(value)) {
      this.add(at, `${resource}: field '${key}' must be a list of ${expected}; got ${repr(value)}.`);
      return [];
    }
    if (this.tooLong(value, key, at, resource)) return [];
    const entries: Array<[Obj, number]> = [];
    value.forEach((entry, index) => {
      if (isObj(entry)) entries.push([entry, index]);
      else
        this.add(
          `${at}.${index}`,
          `${resource}: entry ${index} of '${key}' must be a mapping with ${expected}; got ${repr(entry)}.`,
        );
    });
    return entries;
  }
}

/** Where an entry of a named list is reported: by its name when it has a usable one, else by index. */
function entryPath(listPath: string, entry: Obj, index: number): string {
  const name = entry.name;
  return typeof name === 'string' && name !== '' && !name.includes('.')
    ? `${listPath}.${name}`
    : `${listPath}.${index}`;
}

function entryLabel(kind: string, entry: Obj, index: number): string {
  const name = entry.name;
  return typeof name === 'string' && name !== '' ? `${kind} '${name}'` : `${kind} #${index}`;
}

/** Reports names used twice in one list. */
function checkUnique(c: Checker, names: Array<[string, string]>, kind: string, field = 'name'): void {
  const seen = new Set<string>();
  for (const [name, path] of names) {
    if (seen.has(name))
      c.add(
        `${path}.${field}`,
        `${kind} ${field} '${name}' is used more than once in the document; ${field}s must be unique.`,
      );
    seen.add(name);
  }
}

function validateApplication(
  c: Checker,
  raw: Obj,
  metadataName: string | undefined,
): DesiredApplication | undefined {
  const path = 'spec.application';
  const label = `Application '${metadataName ?? '?'}'`;
  c.unknownFields(raw, APPLICATION_FIELDS, path, label);
  const name = c.pattern(raw, 'name', path, label, APPLICATION_NAME, APPLICATION_NAME_TEXT);
  if (name !== undefined && metadataName !== undefined && name !== metadataName) {
    c.add(
      `${path}.name`,
      `${label}: field 'name' must match metadata.name ('${metadataName}'); got '${name}'.`,
    );
  }
  const type = c.enumeration<ApplicationType>(
    raw,
    'type',
    path,
    label,
    APPLICATION_TYPES,
    true,
    '; it cannot change after creation',
  );
  const version = c.field(raw, 'version', path, label, 'a version string such as "12"', (v) =>
    versionText(v, false),
  );
  const appLabel = c.string(raw, 'label', path, label);
  const tags = c.stringList(
    raw,
    'tags',
    path,
    label,
    'strings of 1-50 characters',
    (s) => s.length >= 1 && s.length <= 50,
  );

  const app: DesiredApplication = { name: metadataName ?? '', type: type ?? 'laravel', settings: {} };
  if (version !== undefined) app.version = version;
  if (appLabel !== undefined) app.label = appLabel;
  if (tags !== undefined) app.tags = tags;

  const repository = c.mapping(raw, 'repository', path, label, 'url, owner, name, branch');
  if (repository) {
    const p = `${path}.repository`;
    c.unknownFields(repository, ['url', 'owner', 'name', 'branch'], p, `${label} repository`);
    const url = c.field(
      repository,
      'url',
      p,
      `${label} repository`,
      'an https://, http://, ssh:// or git@ repository URL',
      (v) =>
        typeof v === 'string' && v.length <= 500 && /^(https?:\/\/|ssh:\/\/|git@)[^\s]+$/.test(v)
          ? v
          : undefined,
    );
    const owner = c.string(repository, 'owner', p, `${label} repository`);
    const repoName = c.string(repository, 'name', p, `${label} repository`);
    const branch = c.string(repository, 'branch', p, `${label} repository`);
    app.repository = {
      ...(url !== undefined ? { url } : {}),
      ...(owner !== undefined ? { owner } : {}),
      ...(repoName !== undefined ? { name: repoName } : {}),
      ...(branch !== undefined ? { branch } : {}),
    };
  }

  const runtime = c.mapping(raw, 'runtime', path, label, 'php_version, nodejs_version');
  if (runtime) {
    const p = `${path}.runtime`;
    c.unknownFields(runtime, ['php_version', 'nodejs_version'], p, `${label} runtime`);
    const php = c.field(runtime, 'php_version', p, `${label} runtime`, oneOf(PHP_VERSIONS), (v) => {
      const text = versionText(v, true);
      return text !== undefined && (PHP_VERSIONS as readonly string[]).includes(text) ? text : undefined;
    });
    const node = c.field(runtime, 'nodejs_version', p, `${label} runtime`, oneOf(NODEJS_VERSIONS), (v) => {
      const text = versionText(v, false);
      return text !== undefined && (NODEJS_VERSIONS as readonly string[]).includes(text) ? text : undefined;
    });
    app.runtime = {
      ...(php !== undefined ? { php_version: php } : {}),
      ...(node !== undefined ? { nodejs_version: node } : {}),
    };
  }

  const commands = c.mapping(raw, 'commands', path, label, 'build, init, start');
  if (commands) {
    const p = `${path}.commands`;
    c.unknownFields(commands, ['build', 'init', 'start'], p, `${label} commands`);
    const build = c.stringList(
      commands,
      'build',
      p,
      `${label} commands`,
      'shell commands (non-empty strings)',
      (s) => s.trim() !== '' && s.length <= 2000,
    );
    const init = c.stringList(
      commands,
      'init',
      p,
      `${label} commands`,
      'shell commands (non-empty strings)',
      (s) => s.trim() !== '' && s.length <= 2000,
    );
    const start = c.field(commands, 'start', p, `${label} commands`, 'a non-empty shell command', (v) =>
      typeof v === 'string' && v.trim() !== '' && v.length <= 2000 ? v : undefined,
    );
    app.commands = {
      ...(build !== undefined ? { build } : {}),
      ...(init !== undefined ? { init } : {}),
      ...(start !== undefined ? { start } : {}),
    };
  }

  const settings = c.mapping(raw, 'settings', path, label, SETTINGS_FIELDS.join(', '));
  if (settings) {
    const p = `${path}.settings`;
    const l = `${label} settings`;
    c.unknownFields(settings, SETTINGS_FIELDS, p, l);
    const enabled = c.boolean(settings, 'health_check_enabled', p, l);
    const hasPath = settings.health_check_path !== undefined && settings.health_check_path !== null;
    // Rule 8b: disabling and naming a path at once is contradictory.
    if (enabled === false && hasPath) {
      c.add(
        `${p}.health_check_path`,
        `${l}: field 'health_check_path' cannot be set together with health_check_enabled: false; remove the path or enable health checks.`,
      );
    } else {
      // Rule 8c: a non-empty path starting with '/'.
      const checkPath = c.field(
        settings,
        'health_check_path',
        p,
        l,
        "a non-empty path starting with '/' (for example /health)",
        (v) =>
          typeof v === 'string' && v.startsWith('/') && v.length <= 255 && !/\s/.test(v) ? v : undefined,
      );
      if (checkPath !== undefined) app.settings.health_check_path = checkPath;
    }
    if (settings.health_check_path === null) {
      c.add(
        `${p}.health_check_path`,
        `${l}: field 'health_check_path' must be a non-empty path starting with '/'; got an empty value.`,
      );
    }
    if (enabled !== undefined) app.settings.health_check_enabled = enabled;
    const scheduler = c.boolean(settings, 'scheduler_enabled', p, l);
    if (scheduler !== undefined) app.settings.scheduler_enabled = scheduler;
    const replicas = c.field(settings, 'replicas', p, l, `an integer from 1 to ${MAX_REPLICAS}`, (v) =>
      typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_REPLICAS ? v : undefined,
    );
    if (replicas !== undefined) app.settings.replicas = replicas;
    const memory = c.pattern(
      settings,
      'memory',
      p,
      l,
      SIZE_MI_GI,
      'a memory size with unit suffix Mi or Gi, such as 1024Mi or 2Gi',
    );
    if (memory !== undefined) app.settings.memory = memory;
    const deletion = c.field(
      settings,
      'scheduled_deletion_at',
      p,
      l,
      'an ISO 8601 timestamp such as 2026-12-01T00:00:00Z',
      (v) => (typeof v === 'string' && isIso8601(v) ? normalizeTimestamp(v) : undefined),
    );
    if (deletion !== undefined) app.settings.scheduled_deletion_at = deletion;
  }

  const php = c.mapping(raw, 'php', path, label, 'extensions, settings');
  if (php) {
    const p = `${path}.php`;
    c.unknownFields(php, ['extensions', 'settings'], p, `${label} php`);
    const extensions = c.stringList(
      php,
      'extensions',
      p,
      `${label} php`,
      'extension names (letters, digits, "_" and "-")',
      (s) => PHP_EXTENSION.test(s),
    );
    const phpSettings = c.stringList(
      php,
      'settings',
      p,
      `${label} php`,
      'entries of the form <directive>=<value> (for example memory_limit=512M)',
      (s) => PHP_SETTING.test(s) && s.length <= 1000,
    );
    app.php = {
      ...(extensions !== undefined ? { extensions } : {}),
      ...(phpSettings !== undefined ? { settings: phpSettings } : {}),
    };
  }
  return type === undefined ? undefined : app;
}

function validateDomains(c: Checker, spec: Obj): string[] {
  const domains: string[] = [];
  const seen = new Map<string, number>();
  for (const [entry, index] of c.list(spec, 'domains', 'spec', 'Domains', 'a domain field')) {
    const path = `spec.domains.${index}`;
    const label = `Domain #${index}`;
    c.unknownFields(entry, ['domain'], path, label);
    const domain = c.field(
      entry,
      'domain',
      path,
      label,
      'a host name such as app.example.com (letters, digits, hyphens, dot-separated labels)',
      (v) => (typeof v === 'string' && isHostName(v.toLowerCase()) ? v.toLowerCase() : undefined),
      true,
    );
    if (domain === undefined) continue;
    const first = seen.get(domain);
    if (first !== undefined) {
      c.add(
        `${path}.domain`,
        `${label}: domain '${domain}' is already listed as domain #${first}; domains must be unique.`,
      );
      continue;
    }
    seen.set(domain, index);
    domains.push(domain);
  }
  return domains;
}

function validateSecrets(c: Checker, spec: Obj): DesiredSecret[] {
  const secrets: DesiredSecret[] = [];
  const seen = new Map<string, number>();
  for (const [entry, index] of c.list(spec, 'secrets', 'spec', 'Secrets', 'key and value fields')) {
    const path = `spec.secrets.${index}`;
    const key = typeof entry.key === 'string' ? entry.key : undefined;
    const label = key ? `Secret #${index} ('${key}')` : `Secret #${index}`;
    c.unknownFields(entry, ['key', 'value'], path, label);
    const checkedKey = c.pattern(
      entry,
      'key',
      path,
      label,
      SECRET_KEY,
      'an environment variable name (letters, digits and "_", not starting with a digit)',
      true,
    );
    const value = c.field(
      entry,
      'value',
      path,
      label,
      `a string of at most ${MAX_SECRET_VALUE_BYTES / 1024} KiB (numbers and booleans are taken as their text)`,
      (v) =>
        (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') &&
        Buffer.byteLength(String(v)) <= MAX_SECRET_VALUE_BYTES
          ? String(v)
          : undefined,
      true,
    );
    if (checkedKey === undefined || value === undefined) continue;
    const first = seen.get(checkedKey);
    if (first !== undefined) {
      c.add(
        `${path}.key`,
        `${label}: key '${checkedKey}' is already used by secret #${first}; keys must be unique.`,
      );
      continue;
    }
    seen.set(checkedKey, index);
    secrets.push({ key: checkedKey, value: value === secretPlaceholder(checkedKey) ? null : value });
  }
  return secrets;
}

function validateVolumes(c: Checker, spec: Obj): DesiredVolume[] {
  const volumes: DesiredVolume[] = [];
  const names: Array<[string, string]> = [];
  for (const [entry, index] of c.list(
    spec,
    'volumes',
    'spec',
    'Volumes',
    'name, mount_path and volume_size',
  )) {
    const path = entryPath('spec.volumes', entry, index);
    const label = entryLabel('Volume', entry, index);
    c.unknownFields(entry, ['name', 'mount_path', 'volume_size'], path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const mount = c.field(
      entry,
      'mount_path',
      path,
      label,
      'an absolute path such as /var/www/html/storage',
      (v) => (typeof v === 'string' && isAbsolutePath(v) ? v : undefined),
      true,
    );
    const size = c.field(
      entry,
      'volume_size',
      path,
      label,
      `an integer number of GB from 1 to ${MAX_VOLUME_GB}`,
      (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_VOLUME_GB ? v : undefined),
      true,
    );
    if (name !== undefined) names.push([name, path]);
    if (name !== undefined && mount !== undefined && size !== undefined)
      volumes.push({ name, mount_path: mount, volume_size: size });
  }
  checkUnique(c, names, 'Volume');
  return volumes;
}

/** Settings each service type takes (spec: database for databases, extensions for postgresql, sftp credentials). */
const SERVICE_SETTINGS: Readonly<Record<ServiceType, readonly string[]>> = {
  mysql: ['database'],
  postgresql: ['database', 'extensions'],
  redis: [],
  valkey: [],
  rabbitmq: [],
  minio: [],
  sftp: ['username', 'password'],
  worker: [],
};

function validateServices(c: Checker, spec: Obj): DesiredService[] {
  const services: DesiredService[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'type', 'version', 'memory', 'volume_size', 'settings', 'command'];
  for (const [entry, index] of c.list(spec, 'services', 'spec', 'Services', fields.join(', '))) {
    const path = entryPath('spec.services', entry, index);
    const label = entryLabel('Service', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const type = c.enumeration(entry, 'type', path, label, SERVICE_TYPES, true);
    const version = c.field(entry, 'version', path, label, 'a version string or latest', (v) =>
      versionText(v, false),
    );
    const memory = c.pattern(
      entry,
      'memory',
      path,
      label,
      SIZE_MI_GI,
      'a memory size with unit suffix Mi or Gi, such as 512Mi or 2Gi',
    );
    const volumeSize = c.pattern(
      entry,
      'volume_size',
      path,
      label,
      SIZE_GI,
      'a size with unit suffix Gi, such as 20Gi',
    );
    const command = c.field(entry, 'command', path, label, 'a non-empty shell command', (v) =>
      typeof v === 'string' && v.trim() !== '' && v.length <= 2000 ? v : undefined,
    );
    if (
      type === 'worker' &&
      command === undefined &&
      (entry.command === undefined || entry.command === null)
    ) {
      c.add(
        `${path}.command`,
        `${label}: field 'command' is required for type worker; expected the shell command the worker runs.`,
      );
    }
    if (type !== undefined && type !== 'worker' && command !== undefined) {
      c.add(
        `${path}.command`,
        `${label}: field 'command' is only used by type worker; remove it or use type worker.`,
      );
    }
    let settings: Record<string, string | string[]> | undefined;
    let password: string | null | undefined;
    const rawSettings = c.mapping(entry, 'settings', path, label, 'the settings of the service type');
    if (rawSettings && type !== undefined && name !== undefined) {
      const p = `${path}.settings`;
      const allowed = SERVICE_SETTINGS[type];
      const l = `${label} (${type}) settings`;
      if (allowed.length === 0) {
        for (const key of Object.keys(rawSettings))
          c.add(`${p}.${key}`, `${l}: field '${key}' is not accepted; type ${type} takes no settings.`);
      } else {
        c.unknownFields(rawSettings, allowed, p, l);
      }
      settings = {};
      const database = allowed.includes('database')
        ? c.pattern(
            rawSettings,
            'database',
            p,
            l,
            /^[A-Za-z_][A-Za-z0-9_$-]{0,63}$/,
            'a database name (letters, digits, "_", "$" and "-", at most 64 characters)',
          )
        : undefined;
      if (database !== undefined) settings.database = database;
      const extensions = allowed.includes('extensions')
        ? c.stringList(rawSettings, 'extensions', p, l, 'PostgreSQL extension names', (s) =>
            /^[a-z0-9_-]{1,63}$/.test(s),
          )
        : undefined;
      if (extensions !== undefined) settings.extensions = extensions;
      if (type === 'sftp') {
        const username = c.pattern(
          rawSettings,
          'username',
          p,
          l,
          /^[a-z_][a-z0-9_-]{0,31}$/,
          'a user name (lower-case letters, digits, "_" and "-", at most 32 characters)',
        );
        if (username !== undefined) settings.username = username;
        const pass = c.string(rawSettings, 'password', p, l);
        if (pass !== undefined) password = pass === servicePasswordPlaceholder(name) ? null : pass;
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || type === undefined) continue;
    const service: DesiredService = { name, type };
    if (version !== undefined) service.version = version;
    if (memory !== undefined) service.memory = memory;
    if (volumeSize !== undefined) service.volume_size = volumeSize;
    if (settings !== undefined) service.settings = settings;
    if (password !== undefined) service.password = password;
    if (command !== undefined) service.command = command;
    services.push(service);
  }
  checkUnique(c, names, 'Service');
  return services;
}

function validateContainerServices(c: Checker, spec: Obj): DesiredContainerService[] {
  const result: DesiredContainerService[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'type', 'version', 'memory', 'volume_size', 'settings'];
  for (const [entry, index] of c.list(
    spec,
    'container_services',
    'spec',
    'Container services',
    fields.join(', '),
  )) {
    const path = entryPath('spec.container_services', entry, index);
    const label = entryLabel('Container service', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const type = c.enumeration<ContainerServiceType>(
      entry,
      'type',
      path,
      label,
      CONTAINER_SERVICE_TYPES,
      true,
    );
    const version = c.field(entry, 'version', path, label, 'a version string or latest', (v) =>
      versionText(v, false),
    );
    const memory = c.pattern(
      entry,
      'memory',
      path,
      label,
      SIZE_MI_GI,
      'a memory size with unit suffix Mi or Gi, such as 512Mi or 2Gi',
    );
    const volumeSize = c.pattern(
      entry,
      'volume_size',
      path,
      label,
      SIZE_GI,
      'a size with unit suffix Gi, such as 20Gi',
    );
    const rawSettings = c.mapping(
      entry,
      'settings',
      path,
      label,
      'environment-style settings whose values are strings',
    );
    let settings: Record<string, string> | undefined;
    if (rawSettings) {
      settings = {};
      for (const [key, value] of Object.entries(rawSettings)) {
        const at = `${path}.settings.${key}`;
        if (!ENV_NAME.test(key)) {
          c.add(
            at,
            `${label} settings: '${key}' is not a usable setting name; expected letters, digits and "_", not starting with a digit.`,
          );
        } else if (typeof value !== 'string') {
          c.add(
            at,
            `${label} settings: value of '${key}' must be a string (quote it in YAML); got ${repr(value)}.`,
          );
        } else {
          settings[key] = value;
        }
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || type === undefined) continue;
    const service: DesiredContainerService = { name, type };
    if (version !== undefined) service.version = version;
    if (memory !== undefined) service.memory = memory;
    if (volumeSize !== undefined) service.volume_size = volumeSize;
    if (settings !== undefined) service.settings = settings;
    result.push(service);
  }
  checkUnique(c, names, 'Container service');
  return result;
}

function validateManagedDatabases(c: Checker, spec: Obj): DesiredManagedDatabase[] {
  const result: DesiredManagedDatabase[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'type', 'plan', 'zone', 'users', 'logical_databases', 'password'];
  for (const [entry, index] of c.list(
    spec,
    'managed_databases',
    'spec',
    'Managed databases',
    fields.join(', '),
  )) {
    const path = entryPath('spec.managed_databases', entry, index);
    const label = entryLabel('Managed database', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const written = c.enumeration(
      entry,
      'type',
      path,
      label,
      [...MANAGED_DATABASE_ENGINES, 'redis'],
      true,
      ' (redis is accepted as an alias of valkey)',
    );
    const type: ManagedDatabaseEngine | undefined = written === 'redis' ? 'valkey' : written;
    const plan =
      type === undefined
        ? c.string(entry, 'plan', path, label, true)
        : c.field(
            entry,
            'plan',
            path,
            label,
            `a ${type} plan: ${oneOf(MANAGED_DATABASE_PLANS[type])}`,
            (v) => (typeof v === 'string' && isPlanOffered(type, v) ? v : undefined),
            true,
          );
    const zone = c.enumeration(entry, 'zone', path, label, MANAGED_DATABASE_ZONES, true);
    if (
      entry.password !== undefined &&
      (typeof name !== 'string' || entry.password !== dbPasswordPlaceholder(name))
    ) {
      c.add(
        `${path}.password`,
        `${label}: field 'password' is generated by the platform; the only accepted value is the placeholder ${dbPasswordPlaceholder(typeof entry.name === 'string' ? entry.name : 'NAME')}.`,
      );
    }
    let users: DesiredManagedDatabase['users'];
    if (entry.users !== undefined && entry.users !== null) {
      users = [];
      const seen = new Set<string>();
      for (const [user, i] of c.list(entry, 'users', path, label, 'username and authentication')) {
        const p = `${path}.users.${i}`;
        const l = `${label} user #${i}`;
        c.unknownFields(user, ['username', 'authentication'], p, l);
        const username = c.pattern(
          user,
          'username',
          p,
          l,
          /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/,
          'a user name (letters, digits, "_" and "-", at most 63 characters)',
          true,
        );
        const accepted = type === undefined ? [] : USER_AUTHENTICATION[type];
        let authentication: string | undefined;
        if (user.authentication !== undefined && user.authentication !== null && type !== undefined) {
          authentication =
            accepted.length === 0
              ? (c.add(
                  `${p}.authentication`,
                  `${l}: field 'authentication' is not used by ${type}; remove it.`,
                ),
                undefined)
              : c.enumeration(user, 'authentication', p, l, accepted);
        }
        if (username === undefined) continue;
        if (isReservedDatabaseUser(username)) {
          c.add(
            `${p}.username`,
            `${l}: username '${username}' is reserved; ${RESERVED_DATABASE_USERS_TEXT} cannot be declared.`,
          );
          continue;
        }
        if (seen.has(username)) {
          c.add(
            `${p}.username`,
            `${l}: username '${username}' is listed more than once; usernames must be unique.`,
          );
          continue;
        }
        seen.add(username);
        users.push(authentication === undefined ? { username } : { username, authentication });
      }
    }
    let logical: DesiredManagedDatabase['logical_databases'];
    if (entry.logical_databases !== undefined && entry.logical_databases !== null) {
      logical = [];
      const seen = new Set<string>();
      if (type === 'valkey') {
        c.add(
          `${path}.logical_databases`,
          `${label}: field 'logical_databases' is not used by valkey; remove it.`,
        );
      }
      for (const [db, i] of c.list(
        entry,
        'logical_databases',
        path,
        label,
        'name, character_set and collation',
      )) {
        const p = `${path}.logical_databases.${i}`;
        const l = `${label} logical database #${i}`;
        c.unknownFields(db, ['name', 'character_set', 'collation'], p, l);
        const dbName = c.pattern(
          db,
          'name',
          p,
          l,
          /^[A-Za-z_][A-Za-z0-9_$-]{0,63}$/,
          'a database name (letters, digits, "_", "$" and "-", at most 64 characters)',
          true,
        );
        const charset = c.pattern(
          db,
          'character_set',
          p,
          l,
          /^[A-Za-z0-9_-]{1,64}$/,
          'a character set name such as utf8mb4 or UTF8',
        );
        const collation = c.pattern(
          db,
          'collation',
          p,
          l,
          /^[A-Za-z0-9_.@-]{1,128}$/,
          'a collation name such as utf8mb4_unicode_ci or en_US.UTF-8',
        );
        if (dbName === undefined) continue;
        if (seen.has(dbName)) {
          c.add(`${p}.name`, `${l}: name '${dbName}' is listed more than once; names must be unique.`);
          continue;
        }
        seen.add(dbName);
        logical.push({
          name: dbName,
          ...(charset !== undefined ? { character_set: charset } : {}),
          ...(collation !== undefined ? { collation } : {}),
        });
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || type === undefined || plan === undefined || zone === undefined) continue;
    const database: DesiredManagedDatabase = { name, type, plan, zone };
    if (users !== undefined) database.users = users;
    if (logical !== undefined) database.logical_databases = logical;
    result.push(database);
  }
  checkUnique(c, names, 'Managed database');
  return result;
}

function validateObjectStorages(c: Checker, spec: Obj, hooks: ValidationHooks): DesiredObjectStorage[] {
  const result: DesiredObjectStorage[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'zone', 'plan', 'buckets', 'users', 'secret_key'];
  for (const [entry, index] of c.list(spec, 'object_storage', 'spec', 'Object storage', fields.join(', '))) {
    const path = entryPath('spec.object_storage', entry, index);
    const label = entryLabel('Object storage', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const zone = c.enumeration(
      entry,
      'zone',
      path,
      label,
      OBJECT_STORAGE_REGIONS,
      true,
      ' (object storage regions)',
    );
    // Accepted and ignored (spec): any short string.
    const plan = c.field(entry, 'plan', path, label, 'a plan name (accepted and ignored)', (v) =>
      versionText(v, false),
    );
    if (
      entry.secret_key !== undefined &&
      (typeof name !== 'string' || entry.secret_key !== storageSecretKeyPlaceholder(name))
    ) {
      c.add(
        `${path}.secret_key`,
        `${label}: field 'secret_key' is generated by the platform; the only accepted value is the placeholder ${storageSecretKeyPlaceholder(typeof entry.name === 'string' ? entry.name : 'NAME')}.`,
      );
    }
    const bucketList = c.stringList(
      entry,
      'buckets',
      path,
      label,
      'bucket names (3-63 lower-case letters, digits, "." and "-")',
      (s) => BUCKET.test(s) && !s.includes('..'),
    );
    let buckets: string[] | undefined;
    if (bucketList !== undefined) {
      buckets = [];
      const seen = new Set<string>();
      bucketList.forEach((bucket, i) => {
        if (seen.has(bucket))
          c.add(
            `${path}.buckets.${i}`,
            `${label}: bucket '${bucket}' is listed more than once; bucket names must be unique.`,
          );
        else buckets?.push(bucket);
        seen.add(bucket);
      });
    }
    let users: DesiredObjectStorage['users'];
    if (entry.users !== undefined && entry.users !== null) {
      users = [];
      const seen = new Set<string>();
      for (const [user, i] of c.list(entry, 'users', path, label, 'username and policies')) {
        const p = `${path}.users.${i}`;
        const l = `${label} user #${i}`;
        c.unknownFields(user, ['username', 'policies'], p, l);
        const username = c.pattern(
          user,
          'username',
          p,
          l,
          /^[A-Za-z0-9_.-]{1,64}$/,
          'a user name (letters, digits, "_", "." and "-", at most 64 characters)',
          true,
        );
        const policies = c.field(
          user,
          'policies',
          p,
          l,
          'a list of policies (policy names or policy mappings); it may be empty',
          (v) => (Array.isArray(v) && v.every((x) => typeof x === 'string' || isObj(x)) ? v : undefined),
        );
        if (username === undefined) continue;
        if (seen.has(username)) {
          c.add(
            `${p}.username`,
            `${l}: username '${username}' is listed more than once; usernames must be unique.`,
          );
          continue;
        }
        seen.add(username);
        users.push(policies === undefined ? { username } : { username, policies });
      }
    }
    if (hooks.objectStorageEntry) {
      const problems = hooks.objectStorageEntry({
        buckets: buckets ?? [],
        users: (users ?? []).map((u) => ({ username: u.username, policies: u.policies ?? [] })),
      });
      for (const problem of problems) {
        c.add(`${path}.${problem.path.replace(/\[(\d+)\]/g, '.$1')}`, `${label}: ${problem.message}.`);
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || zone === undefined) continue;
    const storage: DesiredObjectStorage = { name, zone };
    if (plan !== undefined) storage.plan = plan;
    if (buckets !== undefined) storage.buckets = buckets;
    if (users !== undefined) storage.users = users;
    result.push(storage);
  }
  checkUnique(c, names, 'Object storage');
  return result;
}

/** Checks another part of the system owns, run inside validation so their problems join the one 422. */
export interface ValidationHooks {
  /**
   * What object-storage provisioning would refuse in an entry (policy forms, for example). Paths are
   * relative to the entry, `users[1].policies`; messages name the problem.
   */
  objectStorageEntry?(entry: {
    buckets: readonly string[];
    users: ReadonlyArray<{ username?: string | undefined; policies: unknown }>;
  }): Array<{ path: string; message: string }>;
}

export type ValidationResult = { ok: true; document: DesiredDocument } | { ok: false; errors: FieldErrors };

/** Checks the whole document; never throws for content problems. */
export function checkDocument(raw: Record<string, unknown>, hooks: ValidationHooks = {}): ValidationResult {
  const c = new Checker();
  const doc = 'Document';
  c.unknownFields(raw, ['apiVersion', 'kind', 'metadata', 'spec'], '', doc);
  c.enumeration(raw, 'apiVersion', '', doc, ['v1'], true);
  c.enumeration(raw, 'kind', '', doc, ['Infrastructure'], true);

  let name: string | undefined;
  let team: string | number | undefined;
  const metadata = c.field(
    raw,
    'metadata',
    '',
    doc,
    'a mapping with name and team',
    (v) => (isObj(v) ? v : undefined),
    true,
  );
  if (metadata) {
    c.unknownFields(metadata, ['name', 'team'], 'metadata', 'Metadata');
    name = c.pattern(
      metadata,
      'name',
      'metadata',
      'Metadata',
      APPLICATION_NAME,
      `the application name: ${APPLICATION_NAME_TEXT}`,
      true,
    );
    team = c.field(
      metadata,
      'team',
      'metadata',
      'Metadata',
      'a team id (integer) or team name (string)',
      (v) =>
        (typeof v === 'number' && Number.isInteger(v) && v > 0) ||
        (typeof v === 'string' && v.trim() !== '' && v.length <= 100)
          ? v
          : undefined,
      true,
    );
  }
  const spec =
    c.field(
      raw,
      'spec',
      '',
      doc,
      `a mapping with ${SPEC_FIELDS.join(', ')}`,
      (v) => (isObj(v) ? v : undefined),
      true,
    ) ?? {};
  c.unknownFields(spec, SPEC_FIELDS, 'spec', 'Spec');

  const rawApp = c.mapping(spec, 'application', 'spec', 'Spec', APPLICATION_FIELDS.join(', '));
  const application = rawApp ? validateApplication(c, rawApp, name) : undefined;
  const domains = validateDomains(c, spec);
  const secrets = validateSecrets(c, spec);
  const volumes = validateVolumes(c, spec);
  const services = validateServices(c, spec);
  const containerServices = validateContainerServices(c, spec);
  const managedDatabases = validateManagedDatabases(c, spec);
  const objectStorages = validateObjectStorages(c, spec, hooks);

  if (c.errors.size > 0 || name === undefined || team === undefined) {
    return { ok: false, errors: c.errors.errors };
  }
  const touchesApplication =
    rawApp !== undefined ||
    ['domains', 'secrets', 'volumes', 'services', 'container_services'].some(
      (k) => spec[k] !== undefined && spec[k] !== null,
    );
  return {
    ok: true,
    document: {
      name,
      team,
      ...(application ? { application: { ...application, name } } : {}),
      domains,
      secrets,
      volumes,
      services,
      containerServices,
      managedDatabases,
      objectStorages,
      touchesApplication,
    },
  };
}

/** checkDocument, throwing the spec's 422 when anything is wrong. */
export function validateDocument(raw: Record<string, unknown>, hooks: ValidationHooks = {}): DesiredDocument {
  const result = checkDocument(raw, hooks);
  if (!result.ok) throw validationError(result.errors, VALIDATION_MESSAGE);
  return result.document;
}
