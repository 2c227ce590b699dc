// How desired values are compared with stored ones and merged into them, and how report lines read.
import { effectiveHealthCheckPath } from '../../health-checks.js';
import type { DesiredDocument, DesiredStorageUser } from '../document.js';
import type {
  Action,
  ApplicationState,
  ChangeLine,
  ObjectStorageState,
  Plan,
  ResourceChange,
  ResourceKind,
} from './types.js';

/** JSON with object keys sorted: `{a, b}` and `{b, a}` are the same setting; list order still counts. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

export const same = (a: unknown, b: unknown): boolean => canonical(a) === canonical(b);

/** Application fields whose change needs a new deployment (the others are bookkeeping). */
export const DEPLOYED_FIELDS: ReadonlySet<keyof ApplicationState> = new Set([
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

/** Records an entry of the document in `resource_changes`. */
export function report(
  p: Plan,
  resource: ResourceKind,
  name: string,
  type: string | null,
  action: Action,
  fields: string[] = [],
  pending: ResourceChange['pending'] = [],
): void {
  p.resources.push({ resource, name, type, action, fields, pending });
}

const isMapping = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/**
 * The paths under `prefix` whose values differ: the keys of two mappings (a key one of them lacks
 * counts), or `prefix` itself for anything else.
 */
export function changedPaths(prefix: string, desired: unknown, current: unknown): string[] {
  if (!isMapping(desired) || !isMapping(current)) return same(desired, current) ? [] : [prefix];
  const keys = [...new Set([...Object.keys(desired), ...Object.keys(current)])];
  const paths = keys.filter((key) => !same(desired[key], current[key])).map((key) => `${prefix}.${key}`);
  return paths.length > 0 || same(desired, current) ? paths : [prefix];
}

/** Application fields under `settings:` in the document; the others are at the block's top level. */
const APPLICATION_SETTINGS: ReadonlySet<keyof ApplicationState> = new Set([
  'health_check_enabled',
  'health_check_path',
  'scheduler_enabled',
  'replicas',
  'memory',
  'scheduled_deletion_at',
]);

/** The document paths (`settings.replicas`, `repository.branch`) of the application fields that change. */
export function applicationPaths(
  changed: Array<keyof ApplicationState>,
  merged: ApplicationState,
  current: ApplicationState,
): string[] {
  return changed.flatMap((key) =>
    APPLICATION_SETTINGS.has(key) ? [`settings.${key}`] : changedPaths(key, merged[key], current[key]),
  );
}

export function line(subject: string, done: string, would: string): ChangeLine {
  return { done: `${subject} ${done}`, would: `[DRY RUN] Would ${would}` };
}

export function lower(subject: string): string {
  return subject.charAt(0).toLowerCase() + subject.slice(1);
}

/** An empty list inside commands/php means "none", the same as no key: stored one way only. */
export function prune<T extends object>(obj: T): T {
  return Object.fromEntries(
    Object.entries(obj).filter(([, v]) => !(Array.isArray(v) && v.length === 0)),
  ) as T;
}

export function desiredApplicationValues(doc: DesiredDocument): ApplicationState | undefined {
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
export function mergedApplication(current: ApplicationState, doc: DesiredDocument): ApplicationState {
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

export function mergeByKey<T extends object>(current: T[], desired: T[] | undefined, key: keyof T): T[] {
  if (!desired) return current;
  const out = current.map((item) => ({ ...item }));
  for (const want of desired) {
    const index = out.findIndex((item) => item[key] === want[key]);
    if (index === -1) out.push({ ...want });
    else out[index] = { ...out[index], ...want };
  }
  return out;
}

export function mergeStorageUsers(
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
