// Desired document + current state → the writes to make and the report of an apply. Pure: the
// service loads the state, calls planApply, then performs `ops` in one transaction (or not at all
// for a dry run). Checks that need the current state live here: domains held by other
// applications, type changes, schedules in the past, placeholders without a stored value.
import type { ApplicationType } from '../../db/schema/infrastructure.js';
import type { FieldErrors } from '../errors.js';
import { effectiveHealthCheckPath } from '../health-checks.js';
import type { ManagedDatabaseEngine } from '../plans.js';
import {
  secretPlaceholder,
  servicePasswordPlaceholder,
  type DesiredDatabaseUser,
  type DesiredDocument,
  type DesiredLogicalDatabase,
  type DesiredStorageUser,
} from './document.js';

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
  users: Array<{ username: string; policies: unknown[] }>;
  pending_zone: string | null;
}

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
  objectStorages: ReadonlyMap<string, ObjectStorageState & { id: number; uuid: string }>;
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

export interface ApplyPlan {
  /** Problems found against the current state; non-empty means 422 and no writes. */
  errors: FieldErrors;
  ops: Operation[];
  lines: ChangeLine[];
  structured: StructuredChanges;
  needsDeployment: boolean;
}

export interface PlanInputs {
  document: DesiredDocument;
  state: CurrentState;
  now: Date;
  /** Keyed hash of a secret value (SecretBox.keyedHash): compares without the stored plaintext. */
  hash(value: string): string;
}

/** JSON with object keys sorted: `{a, b}` and `{b, a}` are the same setting; list order still counts. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

const same = (a: unknown, b: unknown): boolean => canonical(a) === canonical(b);

/** Application fields whose change needs a new deployment (the others are bookkeeping). */
const DEPLOYED_FIELDS: ReadonlySet<keyof ApplicationState> = new Set([
  'version',
  'repository',
  'runtime',
  'commands',
  'health_check_enabled',
  'health_check_path',
  'scheduler_enabled',
  'replicas',
  'memory',
  'php',
]);

function line(subject: string, done: string, would: string): ChangeLine {
  return { done: `${subject} ${done}`, would: `[DRY RUN] Would ${would}` };
}

function lower(subject: string): string {
  return subject.charAt(0).toLowerCase() + subject.slice(1);
}

/** An empty list inside commands/php means "none", the same as no key: stored one way only. */
function prune<T extends object>(obj: T): T {
  return Object.fromEntries(
    Object.entries(obj).filter(([, v]) => !(Array.isArray(v) && v.length === 0)),
  ) as T;
}

function desiredApplicationValues(doc: DesiredDocument): ApplicationState | undefined {
  const app = doc.application;
  if (!app) return undefined;
  return {
    name: doc.name,
    type: app.type,
    version: app.version ?? null,
    label: app.label ?? null,
    tags: app.tags ?? [],
    repository: app.repository ?? {},
    runtime: app.runtime ?? {},
    commands: prune(app.commands ?? {}),
    health_check_enabled: app.settings.health_check_enabled ?? true,
    health_check_path: app.settings.health_check_path ?? null,
    scheduler_enabled: app.settings.scheduler_enabled ?? null,
    replicas: app.settings.replicas ?? null,
    memory: app.settings.memory ?? null,
    php: prune(app.php ?? {}),
    scheduled_deletion_at: app.settings.scheduled_deletion_at ?? null,
  };
}

/** Field-by-field overlay: what the document gives replaces, what it omits stays (apply rule 4). */
function mergedApplication(current: ApplicationState, doc: DesiredDocument): ApplicationState {
  const app = doc.application;
  if (!app) return current;
  const s = app.settings;
  return {
    ...current,
    version: app.version ?? current.version,
    label: app.label ?? current.label,
    tags: app.tags ?? current.tags,
    repository: { ...current.repository, ...app.repository },
    runtime: { ...current.runtime, ...app.runtime },
    commands: prune({ ...current.commands, ...app.commands }),
    health_check_enabled: s.health_check_enabled ?? current.health_check_enabled,
    health_check_path:
      s.health_check_path !== undefined &&
      s.health_check_path !== effectiveHealthCheckPath(current.type, current.health_check_path)
        ? s.health_check_path
        : current.health_check_path,
    scheduler_enabled: s.scheduler_enabled ?? current.scheduler_enabled,
    replicas: s.replicas ?? current.replicas,
    memory: s.memory ?? current.memory,
    php: prune({ ...current.php, ...app.php }),
    // The one field cleared by omission (apply rule 4).
    scheduled_deletion_at: s.scheduled_deletion_at ?? null,
  };
}

function mergeByKey<T extends object>(current: T[], desired: T[] | undefined, key: keyof T): T[] {
  if (!desired) return current;
  const out = current.map((item) => ({ ...item }));
  for (const want of desired) {
    const index = out.findIndex((item) => item[key] === want[key]);
    if (index === -1) out.push({ ...want });
    else out[index] = { ...out[index], ...want };
  }
  return out;
}

function mergeStorageUsers(
  current: ObjectStorageState['users'],
  desired: DesiredStorageUser[] | undefined,
): ObjectStorageState['users'] {
  if (!desired) return current;
  const out = current.map((u) => ({ ...u }));
  for (const want of desired) {
    const existing = out.find((u) => u.username === want.username);
    if (!existing) out.push({ username: want.username, policies: want.policies ?? [] });
    else if (want.policies !== undefined) existing.policies = want.policies;
  }
  return out;
}

export function planApply(input: PlanInputs): ApplyPlan {
  const { document: doc, state, now } = input;
  const errors: FieldErrors = {};
  const fail = (path: string, message: string) => (errors[path] ??= []).push(message);
  const ops: Operation[] = [];
  const lines: ChangeLine[] = [];
  const structured: StructuredChanges = {
    application: null,
    domains: [],
    secrets: [],
    volumes: [],
    services: [],
    container_services: [],
    managed_databases: [],
    object_storage: [],
  };
  let needsDeployment = false;
  const current = state.application;
  const appSubject = `Application '${doc.name}'`;

  if (doc.touchesApplication) {
    const desired = desiredApplicationValues(doc);
    if (!current && !desired) {
      fail(
        'spec.application',
        `${appSubject} does not exist in this team; add spec.application with its type (${['laravel', 'nodejs', 'wordpress'].join(', ')}) to create it.`,
      );
    }
    const scheduled = doc.application?.settings.scheduled_deletion_at;
    if (
      scheduled !== undefined &&
      scheduled !== current?.scheduled_deletion_at &&
      Date.parse(scheduled) <= now.getTime()
    ) {
      fail(
        'spec.application.settings.scheduled_deletion_at',
        `${appSubject} settings: field 'scheduled_deletion_at' must be a future ISO 8601 timestamp; got ${scheduled} (now is ${now.toISOString()}).`,
      );
    }
    if (current && desired && desired.type !== current.type) {
      fail(
        'spec.application.type',
        `${appSubject}: field 'type' cannot change after creation; it is ${current.type}, the document says ${desired.type}.`,
      );
    } else if (!current && desired) {
      ops.push({ kind: 'application.create', values: desired });
      structured.application = { action: 'created', name: doc.name };
      lines.push(line(appSubject, 'created', `create ${lower(appSubject)}`));
      if (desired.scheduled_deletion_at) {
        lines.push(
          line(
            appSubject,
            `scheduled for deletion at ${desired.scheduled_deletion_at}`,
            `schedule ${lower(appSubject)} for deletion at ${desired.scheduled_deletion_at}`,
          ),
        );
      }
      needsDeployment = true;
    } else if (current) {
      const merged = mergedApplication(current, doc);
      const changed = (Object.keys(merged) as Array<keyof ApplicationState>).filter(
        (key) => !same(merged[key], current[key]),
      );
      if (changed.length === 0) {
        structured.application = { action: 'unchanged', name: doc.name };
      } else {
        const values: Partial<ApplicationState> = {};
        for (const key of changed) Object.assign(values, { [key]: merged[key] });
        ops.push({ kind: 'application.update', id: current.id, values });
        structured.application = { action: 'updated', name: doc.name };
        const fields = changed.filter((k) => k !== 'scheduled_deletion_at');
        if (fields.length > 0) {
          lines.push(
            line(
              appSubject,
              `updated (${fields.join(', ')})`,
              `update ${lower(appSubject)} (${fields.join(', ')})`,
            ),
          );
        }
        if (changed.includes('scheduled_deletion_at')) {
          lines.push(
            merged.scheduled_deletion_at === null
              ? line(
                  appSubject,
                  'deletion schedule cleared',
                  `clear the deletion schedule of ${lower(appSubject)}`,
                )
              : line(
                  appSubject,
                  `scheduled for deletion at ${merged.scheduled_deletion_at}`,
                  `schedule ${lower(appSubject)} for deletion at ${merged.scheduled_deletion_at}`,
                ),
          );
        }
        if (changed.some((k) => DEPLOYED_FIELDS.has(k))) needsDeployment = true;
      }
    }

    doc.domains.forEach((domain, index) => {
      if (state.domains.has(domain)) {
        structured.domains.push({ action: 'unchanged', domain });
      } else if (state.domainsHeldElsewhere.has(domain)) {
        fail(
          `spec.domains.${index}.domain`,
          `Domain #${index}: domain '${domain}' is already used by another application; a domain can belong to one application on the platform.`,
        );
      } else {
        ops.push({ kind: 'domain.create', domain });
        structured.domains.push({ action: 'created', domain });
        lines.push(line(`Domain '${domain}'`, 'added', `add domain '${domain}'`));
      }
    });

    doc.secrets.forEach((secret, index) => {
      const stored = state.secrets.get(secret.key);
      const subject = `Secret '${secret.key}'`;
      if (secret.value === null) {
        if (stored) structured.secrets.push({ action: 'unchanged', key: secret.key });
        else
          fail(
            `spec.secrets.${index}.value`,
            `Secret #${index} ('${secret.key}'): field 'value' is the export placeholder ${secretPlaceholder(secret.key)} but the application holds no value for it; put the real value in the document.`,
          );
        return;
      }
      if (!stored) {
        ops.push({ kind: 'secret.create', key: secret.key, value: secret.value });
        structured.secrets.push({ action: 'created', key: secret.key });
        lines.push(line(subject, 'created', `create ${lower(subject)}`));
        needsDeployment = true;
      } else if (stored.value_hash !== input.hash(secret.value)) {
        ops.push({ kind: 'secret.update', id: stored.id, key: secret.key, value: secret.value });
        structured.secrets.push({ action: 'updated', key: secret.key });
        lines.push(line(subject, 'updated', `update ${lower(subject)}`));
        needsDeployment = true;
      } else {
        structured.secrets.push({ action: 'unchanged', key: secret.key });
      }
    });

    for (const volume of doc.volumes) {
      const stored = state.volumes.get(volume.name);
      const subject = `Volume '${volume.name}'`;
      if (!stored) {
        ops.push({ kind: 'volume.create', values: volume });
        structured.volumes.push({ action: 'created', name: volume.name });
        lines.push(
          line(
            subject,
            `created (${volume.volume_size} GB at ${volume.mount_path})`,
            `create ${lower(subject)} (${volume.volume_size} GB at ${volume.mount_path})`,
          ),
        );
        needsDeployment = true;
        continue;
      }
      const values: Partial<VolumeState> = {};
      if (stored.mount_path !== volume.mount_path) values.mount_path = volume.mount_path;
      if (stored.volume_size !== volume.volume_size) values.volume_size = volume.volume_size;
      const fields = Object.keys(values);
      if (fields.length === 0) {
        structured.volumes.push({ action: 'unchanged', name: volume.name });
      } else {
        ops.push({ kind: 'volume.update', id: stored.id, values });
        structured.volumes.push({ action: 'updated', name: volume.name });
        lines.push(
          line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
        );
        needsDeployment = true;
      }
    }

    for (const service of doc.services) {
      const stored = state.services.get(service.name);
      const subject = `Service '${service.name}' (${service.type})`;
      const at = `spec.services.${service.name}`;
      if (!stored) {
        if (service.password === null) {
          fail(
            `${at}.settings.password`,
            `Service '${service.name}' settings: field 'password' is the export placeholder ${servicePasswordPlaceholder(service.name)} but the service does not exist yet; put the real password in the document.`,
          );
          continue;
        }
        ops.push({
          kind: 'service.create',
          values: {
            name: service.name,
            type: service.type,
            version: service.version ?? null,
            memory: service.memory ?? null,
            volume_size: service.volume_size ?? null,
            settings: service.settings ?? {},
            command: service.command ?? null,
          },
          password: service.password ?? null,
        });
        structured.services.push({ action: 'created', name: service.name, type: service.type });
        lines.push(line(subject, 'created', `create ${lower(subject)}`));
        needsDeployment = true;
        continue;
      }
      if (stored.type !== service.type) {
        fail(
          `${at}.type`,
          `Service '${service.name}': field 'type' cannot change; it is ${stored.type}, the document says ${service.type}.`,
        );
        continue;
      }
      const values: Partial<ServiceState> = {};
      if (service.version !== undefined && service.version !== stored.version)
        values.version = service.version;
      if (service.memory !== undefined && service.memory !== stored.memory) values.memory = service.memory;
      if (service.volume_size !== undefined && service.volume_size !== stored.volume_size)
        values.volume_size = service.volume_size;
      if (service.settings !== undefined && !same(service.settings, stored.settings))
        values.settings = service.settings;
      if (service.command !== undefined && service.command !== stored.command)
        values.command = service.command;
      const password =
        typeof service.password === 'string' && input.hash(service.password) !== stored.secret_settings_hash
          ? service.password
          : undefined;
      const fields = [...Object.keys(values), ...(password !== undefined ? ['settings.password'] : [])];
      if (fields.length === 0) {
        structured.services.push({ action: 'unchanged', name: service.name, type: service.type });
      } else {
        ops.push({
          kind: 'service.update',
          id: stored.id,
          values,
          ...(password !== undefined ? { password } : {}),
        });
        structured.services.push({ action: 'updated', name: service.name, type: service.type });
        lines.push(
          line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
        );
        needsDeployment = true;
      }
    }

    for (const service of doc.containerServices) {
      const stored = state.containerServices.get(service.name);
      const subject = `Container service '${service.name}' (${service.type})`;
      if (!stored) {
        ops.push({
          kind: 'container_service.create',
          values: {
            name: service.name,
            type: service.type,
            version: service.version ?? null,
            memory: service.memory ?? null,
            volume_size: service.volume_size ?? null,
            settings: service.settings ?? {},
          },
        });
        structured.container_services.push({ action: 'created', name: service.name, type: service.type });
        lines.push(line(subject, 'created', `create ${lower(subject)}`));
        needsDeployment = true;
        continue;
      }
      if (stored.type !== service.type) {
        fail(
          `spec.container_services.${service.name}.type`,
          `Container service '${service.name}': field 'type' cannot change; it is ${stored.type}, the document says ${service.type}.`,
        );
        continue;
      }
      const values: Partial<ContainerServiceState> = {};
      if (service.version !== undefined && service.version !== stored.version)
        values.version = service.version;
      if (service.memory !== undefined && service.memory !== stored.memory) values.memory = service.memory;
      if (service.volume_size !== undefined && service.volume_size !== stored.volume_size)
        values.volume_size = service.volume_size;
      if (service.settings !== undefined && !same(service.settings, stored.settings))
        values.settings = service.settings;
      const fields = Object.keys(values);
      if (fields.length === 0) {
        structured.container_services.push({ action: 'unchanged', name: service.name, type: service.type });
      } else {
        ops.push({ kind: 'container_service.update', id: stored.id, values });
        structured.container_services.push({ action: 'updated', name: service.name, type: service.type });
        lines.push(
          line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
        );
        needsDeployment = true;
      }
    }
  }

  for (const database of doc.managedDatabases) {
    const stored = state.managedDatabases.get(database.name);
    const subject = `Managed database '${database.name}'`;
    const at = `spec.managed_databases.${database.name}`;
    if (!stored) {
      ops.push({
        kind: 'managed_database.create',
        values: {
          name: database.name,
          type: database.type,
          plan: database.plan,
          zone: database.zone,
          users: database.users ?? [],
          logical_databases: database.logical_databases ?? [],
          pending_plan: null,
          pending_zone: null,
        },
      });
      structured.managed_databases.push({ action: 'created', name: database.name, type: database.type });
      lines.push(
        line(
          subject,
          'created (provisioning started)',
          `create ${lower(subject)} (provisioning would start)`,
        ),
      );
      continue;
    }
    if (stored.type !== database.type) {
      fail(
        `${at}.type`,
        `${subject}: field 'type' cannot change; it is ${stored.type}, the document says ${database.type}.`,
      );
      continue;
    }
    const values: Partial<ManagedDatabaseState> = {};
    const users = mergeByKey(stored.users, database.users, 'username');
    const logical = mergeByKey(stored.logical_databases, database.logical_databases, 'name');
    if (!same(users, stored.users)) values.users = users;
    if (!same(logical, stored.logical_databases)) values.logical_databases = logical;
    const reconcile = Object.keys(values).length > 0;
    const needsAction: string[] = [];
    if (database.plan !== stored.plan) {
      needsAction.push(`plan change from '${stored.plan}' to '${database.plan}'`);
      if (stored.pending_plan !== database.plan) values.pending_plan = database.plan;
    }
    if (database.zone !== stored.zone) {
      needsAction.push(`zone change from '${stored.zone}' to '${database.zone}'`);
      if (stored.pending_zone !== database.zone) values.pending_zone = database.zone;
    }
    if (Object.keys(values).length > 0) {
      ops.push({ kind: 'managed_database.update', id: stored.id, uuid: stored.uuid, values, reconcile });
    }
    if (reconcile) {
      const fields = ['users', 'logical_databases'].filter((k) => k in values);
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
    }
    for (const what of needsAction) {
      lines.push(
        line(
          subject,
          `${what} needs action in the panel (not applied)`,
          `record the ${what} of ${lower(subject)}; it needs action in the panel and would not be applied`,
        ),
      );
    }
    const action: Action = needsAction.length > 0 ? 'needs_action' : reconcile ? 'updated' : 'unchanged';
    structured.managed_databases.push({ action, name: database.name, type: database.type });
  }

  for (const storage of doc.objectStorages) {
    const stored = state.objectStorages.get(storage.name);
    const subject = `Object storage '${storage.name}'`;
    if (!stored) {
      ops.push({
        kind: 'object_storage.create',
        values: {
          name: storage.name,
          zone: storage.zone,
          plan: storage.plan ?? null,
          buckets: storage.buckets ?? [],
          users: (storage.users ?? []).map((u) => ({ username: u.username, policies: u.policies ?? [] })),
          pending_zone: null,
        },
      });
      structured.object_storage.push({ action: 'created', name: storage.name });
      lines.push(
        line(
          subject,
          'created (provisioning started)',
          `create ${lower(subject)} (provisioning would start)`,
        ),
      );
      continue;
    }
    const values: Partial<ObjectStorageState> = {};
    const buckets = storage.buckets
      ? [...stored.buckets, ...storage.buckets.filter((b) => !stored.buckets.includes(b))]
      : stored.buckets;
    const users = mergeStorageUsers(stored.users, storage.users);
    if (!same(buckets, stored.buckets)) values.buckets = buckets;
    if (!same(users, stored.users)) values.users = users;
    const reconcile = Object.keys(values).length > 0;
    const needsAction = storage.zone !== stored.zone;
    if (needsAction && stored.pending_zone !== storage.zone) values.pending_zone = storage.zone;
    if (Object.keys(values).length > 0) {
      ops.push({ kind: 'object_storage.update', id: stored.id, uuid: stored.uuid, values, reconcile });
    }
    if (reconcile) {
      const fields = ['buckets', 'users'].filter((k) => k in values);
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
    }
    if (needsAction) {
      const what = `zone change from '${stored.zone}' to '${storage.zone}'`;
      lines.push(
        line(
          subject,
          `${what} needs action in the panel (not applied)`,
          `record the ${what} of ${lower(subject)}; it needs action in the panel and would not be applied`,
        ),
      );
    }
    structured.object_storage.push({
      action: needsAction ? 'needs_action' : reconcile ? 'updated' : 'unchanged',
      name: storage.name,
    });
  }

  return { errors, ops, lines, structured, needsDeployment };
}
