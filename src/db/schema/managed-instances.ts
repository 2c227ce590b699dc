// Runtime of each managed database's instance, kept by the managed-database service: where it
// listens, which process it is, the sealed credentials, backups and what the supervisor saw.
import type { Generated } from 'kysely';

export interface ManagedInstancesTable {
  id: Generated<number>;
  managed_database_id: number;
  /** Driver that runs the instance (`local`). */
  driver: string;
  port: number | null;
  /** OS pid of the server when last seen running (local driver); null when stopped on purpose. */
  pid: number | null;
  /** Where the instance's files are (local driver). */
  data_dir: string | null;
  /** Full server version, e.g. `15.18`. */
  version: string | null;
  /** The plan whose limits are in effect (differs from the database's plan until a change is applied). */
  applied_plan: string | null;
  admin_username: string;
  /** SecretBox-sealed admin password. */
  admin_password_encrypted: string;
  /** SecretBox-sealed JSON: Record<username, password>. */
  user_passwords_encrypted: string;
  /** 1 unless powered off. */
  powered: number;
  storage_bytes: number | null;
  /** Times the supervisor found the process dead and restarted it. */
  restarts: number;
  last_restart_at: string | null;
  last_restart_reason: string | null;
  /** JSON: BaseBackup[] (oldest first), for pg. */
  backups: string;
  last_backup_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface ManagedInstancesTables {
  managed_instances: ManagedInstancesTable;
}
