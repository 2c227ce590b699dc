// Answers of the managed-database API (/1.3): UpCloud's service object
// (src/services/managed-databases/view.ts, test/fixtures/upcloud/dbapi-notes.md §2), tasks, migration
// status and maintenance. Open objects: UpCloud adds fields, and so may Berth.
import { Type } from 'typebox';
import { Nullable, OneOf } from './common.js';

/** UpCloud's times, without fractions: 2024-01-31T21:33:18Z. */
const Time = Type.String({ description: 'ISO 8601 time without fractions' });

const ServiceObject = Type.Object(
  {
    uuid: Type.String(),
    zone: Type.String(),
    name: Type.String(),
    title: Type.String(),
    type: OneOf(['pg', 'mysql', 'valkey']),
    plan: Type.String(),
    state: Type.String({
      description: 'pending, setup-service, running, rebalancing, stopped, error, delete-service, …',
    }),
    powered: Type.Boolean(),
    termination_protection: Type.Boolean(),
    node_count: Type.Integer(),
    create_time: Time,
    update_time: Time,
    service_uri: Type.String({ description: 'Empty until provisioned; the password only for owners' }),
    service_uri_params: Type.Record(Type.String(), Type.String()),
    maintenance: Type.Object({
      dow: Type.String(),
      time: Type.String(),
      pending_updates: Type.Array(Type.Object({ description: Type.String() }), {
        description: 'Asked live for GET /1.3/database/{uuid} only; [] elsewhere',
      }),
    }),
    metadata: Type.Object({
      pg_version: Type.Optional(Nullable(Type.String())),
      mysql_version: Type.Optional(Nullable(Type.String())),
      valkey_version: Type.Optional(Nullable(Type.String())),
      max_connections: Type.Optional(Nullable(Type.Integer())),
      write_block_threshold_exceeded: Type.Optional(Type.Boolean()),
      storage_used_bytes: Nullable(Type.Integer()),
      storage_limit_bytes: Nullable(Type.Integer()),
      memory_limit_mib: Nullable(Type.Number()),
      process_restarts: Type.Integer(),
      last_process_restart: Nullable(Type.Object({ time: Time, reason: Nullable(Type.String()) })),
    }),
    properties: Type.Object({
      version: Nullable(Type.String({ description: 'The major; after POST …/upgrade already the target' })),
      automatic_utility_network_ip_filter: Type.Boolean(),
      ip_filter: Type.Array(Type.String()),
      public_access: Type.Boolean(),
      backup_hour: Type.Optional(Type.Integer()),
      backup_minute: Type.Optional(Type.Integer()),
      valkey_maxmemory_policy: Type.Optional(Type.String()),
      valkey_ssl: Type.Optional(Type.Boolean()),
      migration: Type.Optional(
        Type.Object(
          {
            host: Type.String(),
            port: Type.Integer(),
            username: Type.String(),
            dbname: Type.String(),
            method: OneOf(['dump', 'replication']),
            ignore_dbs: Type.String(),
            ssl: Type.Boolean(),
          },
          { description: 'POST …/migration: the migration started (never its password)' },
        ),
      ),
    }),
    networks: Type.Array(Type.Unknown()),
    node_states: Type.Array(Type.Object({ name: Type.String(), role: Type.String(), state: Type.String() })),
    labels: Type.Array(Type.Unknown()),
    backups: Type.Array(
      Type.Object({ backup_name: Type.String(), backup_time: Type.String(), data_size: Type.Integer() }),
    ),
    components: Type.Array(
      Type.Object({
        component: Type.String(),
        host: Type.String(),
        port: Type.Integer(),
        route: Type.String(),
        usage: Type.String(),
      }),
    ),
    users: Type.Array(
      Type.Object({
        username: Type.String(),
        type: OneOf(['primary', 'normal']),
        authentication: Type.Optional(Type.String()),
        password: Type.Optional(Type.String({ description: "For the teams' owners" })),
      }),
    ),
    databases: Type.Optional(
      Type.Array(
        Type.Object({
          name: Type.String(),
          lc_collate: Type.Optional(Type.String()),
          lc_ctype: Type.Optional(Type.String()),
          encoding: Type.Optional(Type.String()),
          character_set: Type.Optional(Type.String()),
          collation: Type.Optional(Nullable(Type.String())),
        }),
        { description: 'PostgreSQL and MySQL; not Valkey' },
      ),
    ),
    additional_disk_space_gib: Type.Integer(),
    service_integrations: Type.Array(Type.Unknown()),
    state_error: Type.Optional(Type.Object({ message: Type.String() })),
    pending_change: Type.Optional(
      Type.Object(
        { plan: Nullable(Type.String()), zone: Nullable(Type.String()) },
        { description: 'A plan or zone change from apply waiting for action in the panel' },
      ),
    ),
  },
  { description: 'The managed database as an UpCloud service object' },
);

export const ServiceResponse = ServiceObject;

export const ServiceListResponse = Type.Array(ServiceObject, {
  description: "The caller's managed databases as UpCloud service objects",
});

const ResultCode = Type.Object({
  code: Type.String(),
  message: Type.String(),
  dbname: Type.Optional(Type.String()),
});

export const TaskResponse = Type.Object(
  {
    id: Type.String(),
    create_time: Type.String(),
    operation: Type.String({ description: '`pg_migration_check`, `mysql_upgrade_check`, …' }),
    result: Type.String(),
    result_codes: Type.Array(ResultCode),
    success: Nullable(Type.Boolean({ description: 'null while the task runs' })),
    source_pg_version: Type.Optional(Type.String()),
    target_pg_version: Type.Optional(Type.String()),
  },
  { description: 'The task' },
);

export const MigrationStatusResponse = Type.Object(
  {
    status: OneOf(['running', 'done', 'failed']),
    method: OneOf(['', 'pg_dump', 'mysqldump', 'replication']),
    error: Type.Optional(Type.String()),
    seconds_behind_master: Type.Number(),
    source_active: Type.Boolean(),
    databases: Type.Array(
      Type.Object({
        dbname: Type.String(),
        method: OneOf(['pg_dump', 'mysqldump', 'replication']),
        status: OneOf(['pending', 'running', 'done', 'failed', 'syncing']),
        error: Type.Optional(Type.String()),
      }),
    ),
  },
  { description: 'The migration’s status; `done` and idle for a database that never migrated' },
);

export const MaintenanceResponse = Type.Object(
  { message: Type.String() },
  { description: 'Maintenance applied: what it applied' },
);
