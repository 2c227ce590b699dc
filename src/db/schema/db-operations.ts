// The /1.3 managed-database operations: check tasks and the migration of each managed database.
// Source URIs carry passwords, so requests and sources are stored sealed with the secret box.

export interface ManagedDatabaseTasksTable {
  /** UUID, as UpCloud's task ids. */
  id: string;
  database_uuid: string;
  /** `migration_check` or `upgrade_check` (the wire name adds the engine prefix). */
  operation: string;
  /** SecretBox-sealed JSON of the request (holds the source URI with its password). */
  request: string;
  /** `running`, `done`. */
  state: string;
  /** null while running, then 0/1. */
  success: number | null;
  result: string;
  /** JSON: Array<{code, message, dbname?}>. */
  result_codes: string;
  target_version: string | null;
  /** JSON of extra fields the task answers with (source_pg_version, target_pg_version), or null. */
  details: string | null;
  create_time: string;
  update_time: string;
}

export interface ManagedDatabaseMigrationsTable {
  database_uuid: string;
  /** `dump` or `replication`. */
  method: string;
  /** SecretBox-sealed source URI. */
  source: string;
  ignore_dbs: string | null;
  /** 0/1: TLS required to the source. */
  ssl: number;
  /** `running`, `done`, `failed`. */
  status: string;
  /** JSON: the last MigrationStatus. */
  status_json: string;
  error: string | null;
  created_at: string;
  updated_at: string;
}

export interface DbOperationsTables {
  managed_database_tasks: ManagedDatabaseTasksTable;
  managed_database_migrations: ManagedDatabaseMigrationsTable;
}
