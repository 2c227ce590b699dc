// Stored state → an Infrastructure document that apply accepts (export rules 1-4). Credentials
// never appear: each is replaced by its placeholder, which apply reads as "keep / regenerate". A
// secret made only of service references (docs/services.md) is shown as written: it holds none.
import { Document, isNode, stringify } from 'yaml';
import { effectiveHealthCheckPath } from '../health-checks.js';
import { isOnlyReferences } from '../service-references.js';
import {
  dbPasswordPlaceholder,
  secretPlaceholder,
  servicePasswordPlaceholder,
  storageSecretKeyPlaceholder,
} from './document.js';
import type {
  ApplicationState,
  ContainerServiceState,
  ManagedDatabaseState,
  ObjectStorageState,
  ServiceState,
  VolumeState,
} from './plan.js';

type Obj = Record<string, unknown>;

export interface TeamRef {
  id: number;
  name: string;
}

export interface ApplicationExportInput {
  team: TeamRef;
  application: ApplicationState;
  domains: string[];
  /** The secrets with their values opened: only a value made of service references is shown. */
  secrets: Array<{ key: string; value: string }>;
  volumes: VolumeState[];
  services: Array<ServiceState & { hasPassword: boolean }>;
  containerServices: ContainerServiceState[];
}

/** Copies only the keys that hold something, so the export shows what is set and nothing else. */
function compact(obj: Obj): Obj {
  const out: Obj = {};
  for (const [key, value] of Object.entries(obj)) {
    if (value === null || value === undefined) continue;
    if (Array.isArray(value) && value.length === 0) continue;
    if (typeof value === 'object' && !Array.isArray(value) && Object.keys(compact(value as Obj)).length === 0)
      continue;
    out[key] = typeof value === 'object' && !Array.isArray(value) ? compact(value as Obj) : value;
  }
  return out;
}

function applicationBlock(app: ApplicationState): Obj {
  const settings: Obj = app.health_check_enabled
    ? { health_check_path: effectiveHealthCheckPath(app.type, app.health_check_path) }
    : { health_check_enabled: false };
  Object.assign(settings, {
    scheduler_enabled: app.scheduler_enabled,
    replicas: app.replicas,
    memory: app.memory,
    scheduled_deletion_at: app.scheduled_deletion_at,
  });
  return compact({
    name: app.name,
    type: app.type,
    version: app.version,
    label: app.label,
    tags: app.tags,
    repository: app.repository,
    runtime: app.runtime,
    commands: app.commands,
    settings,
    php: app.php,
  });
}

export function applicationDocument(input: ApplicationExportInput): Obj {
  const spec: Obj = { application: applicationBlock(input.application) };
  if (input.domains.length > 0) spec.domains = input.domains.map((domain) => ({ domain }));
  if (input.secrets.length > 0) {
    // A reference names where a value comes from, not the value: it is written as it is. Any other
    // value (literal text beside a reference included) may be a credential: its placeholder.
    spec.secrets = input.secrets.map(({ key, value }) => ({
      key,
      value: isOnlyReferences(value) ? value : secretPlaceholder(key),
    }));
  }
  if (input.volumes.length > 0) {
    spec.volumes = input.volumes.map((v) => ({
      name: v.name,
      mount_path: v.mount_path,
      volume_size: v.volume_size,
    }));
  }
  if (input.services.length > 0) {
    spec.services = input.services.map((s) => {
      const settings: Obj = { ...s.settings };
      if (s.hasPassword) settings.password = servicePasswordPlaceholder(s.name);
      // Settings are written as stored (an empty list is a value), not compacted.
      const entry = compact({
        name: s.name,
        type: s.type,
        version: s.version,
        memory: s.memory,
        volume_size: s.volume_size,
        command: s.command,
      });
      return Object.keys(settings).length > 0 ? { ...entry, settings } : entry;
    });
  }
  if (input.containerServices.length > 0) {
    spec.container_services = input.containerServices.map((s) => {
      const entry = compact({
        name: s.name,
        type: s.type,
        version: s.version,
        memory: s.memory,
        volume_size: s.volume_size,
      });
      return Object.keys(s.settings).length > 0 ? { ...entry, settings: s.settings } : entry;
    });
  }
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: input.application.name, team: input.team.id },
    spec,
  };
}

/** metadata.name of a team export: the team name as an application-name-shaped word. */
export function teamDocumentName(teamName: string): string {
  const slug = teamName
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .slice(0, 63);
  return slug === '' ? 'team' : slug;
}

export function managedDatabaseEntry(db: ManagedDatabaseState): Obj {
  return compact({
    name: db.name,
    type: db.type,
    plan: db.plan,
    zone: db.zone,
    password: dbPasswordPlaceholder(db.name),
    users: db.users.map((u) => compact({ ...u })),
    logical_databases: db.logical_databases.map((d) => compact({ ...d })),
  });
}

export function objectStorageEntry(storage: ObjectStorageState): Obj {
  return compact({
    name: storage.name,
    zone: storage.zone,
    plan: storage.plan,
    secret_key: storageSecretKeyPlaceholder(storage.name),
    // Each bucket as it was written: its name, or {name, acl} when the document gave its ACL.
    buckets: storage.buckets.map((bucket) => {
      const acl = storage.bucket_acls[bucket];
      return acl === undefined ? bucket : { name: bucket, acl };
    }),
    // Policies are kept even when empty: "may be empty" is a stated value, not an absence.
    users: storage.users.map((u) => ({ username: u.username, policies: u.policies })),
  });
}

export function teamDocument(input: {
  team: TeamRef;
  managedDatabases: ManagedDatabaseState[];
  objectStorages: ObjectStorageState[];
}): Obj {
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: teamDocumentName(input.team.name), team: input.team.id },
    spec: {
      managed_databases: input.managedDatabases.map(managedDatabaseEntry),
      object_storage: input.objectStorages.map(objectStorageEntry),
    },
  };
}

/** A comment written before the node at `path`: shown to the reader, never read by apply. */
export interface YamlNote {
  path: Array<string | number>;
  comment: string;
}

export function toYaml(doc: Obj, notes: readonly YamlNote[] = []): string {
  if (notes.length === 0) return stringify(doc, { lineWidth: 0 });
  const document = new Document(doc);
  for (const note of notes) {
    const node = document.getIn(note.path, true);
    if (isNode(node)) node.commentBefore = ` ${note.comment}`;
  }
  return document.toString({ lineWidth: 0 });
}

/**
 * Each exported storage's own endpoint, as a comment before its entry. It is not a setting: the
 * platform gives every storage its own, so the document applied by another team (or on another
 * host) makes a storage with another endpoint, holding the same bucket names (docs/decisions/0008).
 */
export function storageEndpointNotes(endpoints: ReadonlyArray<string | undefined>): YamlNote[] {
  return endpoints.flatMap((endpoint, index) =>
    endpoint === undefined
      ? []
      : [{ path: ['spec', 'object_storage', index], comment: `endpoint: ${endpoint}` }],
  );
}
