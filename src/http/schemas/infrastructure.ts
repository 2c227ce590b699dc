// Answers of apply, the YAML exports, the application reads and removals, a team's managed databases
// and object storage (lists, one storage with credentials, the panel's actions).
import { Type } from 'typebox';
import { APPLICATION_TYPES } from '../../domain/health-checks.js';
import { Data, Nullable, OneOf, Timestamp } from './common.js';
import { Deployment } from './runtime.js';

const Action = OneOf(['created', 'updated', 'unchanged', 'needs_action'], {
  description: '`needs_action`: a plan or zone change that is not applied and waits for the panel',
});
const Named = Type.Object({ action: Action, name: Type.String() });
const Typed = Type.Object({ action: Action, name: Type.String(), type: Type.String() });

/**
 * The spec's "Apply response body" (structured_changes also lists volumes and container services), and
 * Berth's resource_changes beside it.
 */
export const ApplyResponse = Type.Object(
  {
    success: Type.Boolean(),
    application_id: Nullable(Type.Integer()),
    application_name: Type.String(),
    team: Type.String(),
    dry_run: Type.Boolean(),
    changes: Type.Array(Type.String()),
    structured_changes: Type.Object({
      application: Nullable(Named),
      domains: Type.Array(Type.Object({ action: Action, domain: Type.String() })),
      secrets: Type.Array(Type.Object({ action: Action, key: Type.String() })),
      volumes: Type.Array(Named),
      services: Type.Array(Typed),
      container_services: Type.Array(Typed),
      managed_databases: Type.Array(Typed),
      object_storage: Type.Array(Named),
    }),
    resource_changes: Type.Array(
      Type.Object({
        resource: OneOf([
          'application',
          'domain',
          'secret',
          'volume',
          'service',
          'container_service',
          'managed_database',
          'object_storage',
        ]),
        name: Type.String({ description: "The entry's name; a domain's host name, a secret's key" }),
        type: Nullable(Type.String()),
        action: Action,
        fields: Type.Array(Type.String(), {
          description:
            'Paths relative to the entry (settings.replicas, repository.branch, value) of the fields this apply changes; empty for created and unchanged',
        }),
        pending: Type.Array(Type.Object({ field: Type.String(), from: Type.String(), to: Type.String() }), {
          description: 'needs_action: the plan or zone change recorded for the panel, not applied',
        }),
      }),
      {
        description:
          "Berth's addition: every entry of the document in document order, with its kind, action and the fields that change",
      },
    ),
    errors: Type.Array(Type.String()),
    needs_deployment: Type.Boolean(),
    auto_deploy_enabled: Type.Boolean(),
    deployment_id: Nullable(Type.Integer()),
  },
  { description: 'Applied (or, with dry_run, planned): every change made' },
);

/** The Infrastructure document as a request body: YAML text, or the same document as JSON. */
export const YamlDocument = Type.String({
  description: 'One Infrastructure YAML document (apiVersion, kind: Infrastructure, metadata, spec)',
});
// No `type`: the route itself refuses a body that is not a mapping (400), as it does for YAML.
export const JsonDocument = Type.Unknown({
  description: 'The same document as JSON (read and validated by the route, not by this schema)',
});

const HealthCheck = Type.Object({
  enabled: Type.Boolean(),
  path: Type.String(),
  status: OneOf(['not monitored', 'unknown', 'healthy', 'unhealthy']),
});

const summaryFields = {
  id: Type.Integer(),
  team_id: Type.Integer(),
  name: Type.String(),
  type: OneOf(APPLICATION_TYPES),
  version: Nullable(Type.String()),
  label: Nullable(Type.String()),
  tags: Type.Array(Type.String()),
  health_check: HealthCheck,
  scheduled_deletion_at: Nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
};

export const ApplicationsResponse = Data(
  Type.Array(Type.Object(summaryFields)),
  'Applications of your teams',
);

const Strings = Type.Array(Type.String());
/** The buckets whose canned ACL the storage's document (or the dashboard) sets, by name. */
const BucketAcls = Type.Record(
  Type.String(),
  Type.Union([Type.Literal('private'), Type.Literal('public-read')]),
  {
    description: "Buckets written as {name, acl} in the storage's document, with their ACL",
  },
);

export const ApplicationResponse = Data(
  Type.Object({
    ...summaryFields,
    repository: Type.Object({
      url: Type.Optional(Type.String()),
      owner: Type.Optional(Type.String()),
      name: Type.Optional(Type.String()),
      branch: Type.Optional(Type.String()),
    }),
    runtime: Type.Object({
      php_version: Type.Optional(Type.String()),
      nodejs_version: Type.Optional(Type.String()),
    }),
    commands: Type.Object({
      build: Type.Optional(Strings),
      init: Type.Optional(Strings),
      start: Type.Optional(Type.String()),
    }),
    settings: Type.Object({
      health_check_path: Type.String(),
      health_check_enabled: Type.Boolean(),
      scheduler_enabled: Nullable(Type.Boolean()),
      replicas: Nullable(Type.Integer()),
      memory: Nullable(Type.String()),
      scheduled_deletion_at: Nullable(Timestamp),
    }),
    php: Type.Object({ extensions: Type.Optional(Strings), settings: Type.Optional(Strings) }),
    domains: Type.Array(Type.Object({ domain: Type.String() })),
    secrets: Type.Array(Type.Object({ key: Type.String() }), {
      description: 'Keys only: values are write-only',
    }),
    volumes: Type.Array(
      Type.Object({ name: Type.String(), mount_path: Type.String(), volume_size: Type.Integer() }),
    ),
    services: Type.Array(
      Type.Object({
        name: Type.String(),
        type: Type.String(),
        version: Nullable(Type.String()),
        memory: Nullable(Type.String()),
        volume_size: Nullable(Type.String()),
        settings: Type.Record(Type.String(), Type.Union([Type.String(), Strings])),
        has_password: Type.Boolean(),
        command: Nullable(Type.String()),
      }),
    ),
    container_services: Type.Array(
      Type.Object({
        name: Type.String(),
        type: Type.String(),
        version: Nullable(Type.String()),
        memory: Nullable(Type.String()),
        volume_size: Nullable(Type.String()),
        settings: Type.Record(Type.String(), Type.String()),
      }),
    ),
    latest_deployment: Nullable(Deployment),
  }),
  'The application with everything attached',
);

export const RemovedResponse = Data(
  Type.Object({ removed: OneOf(['domain', 'secret', 'volume']), name: Type.String() }),
  'Removed',
);

const DatabaseEngine = OneOf(['pg', 'mysql', 'valkey']);
const DatabaseUser = Type.Object({ username: Type.String(), authentication: Type.Optional(Type.String()) });
const LogicalDatabase = Type.Object({
  name: Type.String(),
  character_set: Type.Optional(Type.String()),
  collation: Type.Optional(Type.String()),
});

export const TeamManagedDatabasesResponse = Data(
  Type.Array(
    Type.Object({
      id: Type.Integer(),
      uuid: Type.String(),
      team_id: Type.Integer(),
      name: Type.String(),
      type: DatabaseEngine,
      plan: Type.String(),
      zone: Type.String(),
      state: Type.String({
        description: "UpCloud's states: pending, setup-service, running, stopped, error, …",
      }),
      state_reason: Nullable(Type.String()),
      users: Type.Array(DatabaseUser),
      logical_databases: Type.Array(LogicalDatabase),
      pending_changes: Nullable(
        Type.Object(
          { plan: Nullable(Type.String()), zone: Nullable(Type.String()) },
          { description: 'A plan or zone change from apply waiting for action in the panel' },
        ),
      ),
      created_at: Timestamp,
      updated_at: Timestamp,
    }),
  ),
  "The team's managed databases and their states (no credentials)",
);

const StorageUser = Type.Object({ username: Type.String(), policies: Type.Array(Type.Unknown()) });
const StorageEndpoints = Type.Object(
  {
    path: Type.String({ description: 'Path style under a prefix: `<shared endpoint>/<uuid>`' }),
    virtual_host: Nullable(
      Type.String({ description: '`<uuid>.<host>`; null when the public host is an IP address' }),
    ),
  },
  { description: "The storage's own endpoint: it names the storage, and its bucket names are its own" },
);
const PendingZone = Nullable(
  Type.Object({ zone: Type.String() }, { description: 'A zone change from apply waiting for the panel' }),
);

export const TeamObjectStoragesResponse = Data(
  Type.Array(
    Type.Object({
      id: Type.Integer(),
      uuid: Type.String(),
      team_id: Type.Integer(),
      name: Type.String(),
      zone: Type.String(),
      plan: Nullable(Type.String()),
      state: Type.String(),
      state_reason: Nullable(Type.String()),
      endpoints: StorageEndpoints,
      buckets: Strings,
      bucket_acls: BucketAcls,
      users: Type.Array(StorageUser),
      pending_changes: PendingZone,
      created_at: Timestamp,
      updated_at: Timestamp,
    }),
  ),
  "The team's object storage and their states (no credentials)",
);

/** services/object-storage, ObjectStorageView. */
const ObjectStorage = Type.Object({
  uuid: Type.String(),
  name: Type.String(),
  zone: Type.String(),
  plan: Nullable(Type.String()),
  state: Type.String(),
  state_reason: Nullable(Type.String()),
  endpoint: Type.String({
    description: 'The shared S3 endpoint: the access key that signs a request picks the storage',
  }),
  endpoints: StorageEndpoints,
  region: Type.String(),
  path_style: Type.Boolean(),
  buckets: Strings,
  bucket_acls: BucketAcls,
  public_buckets: Type.Array(Type.String(), {
    description: 'The buckets anyone may read without a credential (a public ACL or bucket policy)',
  }),
  users: Type.Array(
    Type.Object({
      username: Type.String(),
      access_key_id: Type.String(),
      secret_key: Nullable(Type.String({ description: "For the team's owners; null for members" })),
      policies: Type.Array(Type.Unknown()),
    }),
  ),
  pending_changes: PendingZone,
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const ObjectStorageResponse = Data(
  ObjectStorage,
  'The object storage with what its users need to connect',
);

export const DeletedObjectStorageResponse = Data(
  Type.Object({ uuid: Type.String(), name: Type.String(), deleted: Type.Literal(true) }),
  'Deleted, with its buckets, objects and keys',
);

const ManagedDatabaseSummary = {
  uuid: Type.String(),
  name: Type.String(),
  type: DatabaseEngine,
  plan: Type.String(),
  zone: Type.String(),
  state: Type.String(),
};

export const ManagedDatabaseResponse = Data(
  Type.Object({
    ...ManagedDatabaseSummary,
    version: Nullable(Type.String({ description: 'The engine major (PostgreSQL 15, MariaDB 11, …)' })),
    connection: Type.Object(
      {
        uri: Type.String({ description: 'Empty until the database is provisioned' }),
        params: Type.Record(Type.String(), Type.String()),
        users: Type.Array(
          Type.Object({
            username: Type.String(),
            type: OneOf(['primary', 'normal']),
            authentication: Type.Optional(Type.String()),
            password: Type.Optional(Type.String({ description: "For the team's owners" })),
          }),
        ),
        databases: Type.Array(Type.Object({ name: Type.String() })),
      },
      { description: 'The values GET /1.3/database/{uuid} answers, under one name' },
    ),
    pending_changes: Nullable(Type.Object({ plan: Nullable(Type.String()), zone: Nullable(Type.String()) })),
  }),
  'The managed database with its connection details',
);

export const ManagedDatabaseAcceptedResponse = Data(
  Type.Object(ManagedDatabaseSummary),
  'Accepted: the restart with the new limits runs as a job; the state shows its progress',
);

export const ManagedDatabaseDeletingResponse = Data(
  Type.Object({ uuid: Type.String(), name: Type.String(), state: Type.Literal('delete-service') }),
  'Accepted: state `delete-service` until it is gone',
);
