// Tables of the foundation: identities, credentials, settings, jobs, audit.
// Booleans are integers (0/1) and timestamps ISO 8601 text, so one schema serves SQLite and PostgreSQL.
import type { Generated } from 'kysely';

export type Role = 'owner' | 'member';
export type CredentialKind = 'api_token' | 'tools_key' | 'db_api';
export type JobState = 'queued' | 'running' | 'done' | 'dead';

export interface UsersTable {
  id: Generated<number>;
  email: string;
  created_at: string;
  /** The user's monthly tools credits; null: the server-wide default (BERTH_TOOLS_MONTHLY_CREDITS). */
  tools_monthly_credits: number | null;
  /** scrypt hash (src/crypto/passwords.ts); null: no password, sign-in by link only. */
  password_hash: string | null;
}

export interface TeamsTable {
  id: Generated<number>;
  name: string;
  created_at: string;
}

export interface MembershipsTable {
  team_id: number;
  user_id: number;
  role: Role;
  created_at: string;
}

export interface CredentialsTable {
  id: Generated<number>;
  user_id: number;
  kind: CredentialKind;
  name: string;
  /** sha256 of the token for api_token/tools_key; the username for db_api. Unique per kind. */
  lookup: string;
  /** sha256 of the password for db_api; null for the token kinds (the lookup is the hash). */
  secret_hash: string | null;
  /** First characters of the token, shown in lists so users can tell tokens apart. */
  hint: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
}

export interface SettingsTable {
  key: string;
  value: string;
  updated_at: string;
}

export interface JobsTable {
  id: Generated<number>;
  type: string;
  key: string;
  payload: string;
  state: JobState;
  run_at: string;
  attempts: number;
  max_attempts: number;
  /** Set when the job is enqueued again while running: it runs once more after this run. */
  rerun: number;
  lease_owner: string | null;
  lease_expires_at: string | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface AuditLogTable {
  id: Generated<number>;
  at: string;
  user_id: number | null;
  team_id: number | null;
  action: string;
  target: string;
  details: string;
  /** The e-mail of the account that made the change, `operator` (berth admin), null: Berth itself. */
  actor: string | null;
  /** `api_token:<id>`, `session:<id>`, `tools_key:<id>`, `db_api:<id>` or `operator`; never a secret. */
  credential: string | null;
  address: string | null;
  target_kind: string | null;
  /** JSON, secret values replaced by a placeholder. */
  before_state: string | null;
  after_state: string | null;
}

/** A browser session (cookie); the token is stored as its sha256 only. */
export interface SessionsTable {
  id: Generated<number>;
  user_id: number;
  token_hash: string;
  user_agent: string;
  address: string;
  created_at: string;
  last_seen_at: string;
  expires_at: string;
  revoked_at: string | null;
}

/** A one-time sign-in link; the token is stored as its sha256 only. */
export interface SignInLinksTable {
  id: Generated<number>;
  user_id: number;
  token_hash: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

export type AccountMailState = 'outbox' | 'sent' | 'failed';

/** Mail to one person about their account (a sign-in link, an invitation); never team-visible. */
export interface AccountMailTable {
  id: Generated<number>;
  user_id: number;
  recipient: string;
  subject: string;
  /** Sealed by the secret box: the body carries a sign-in link. */
  body_encrypted: string;
  state: AccountMailState;
  last_error: string | null;
  created_at: string;
  sent_at: string | null;
}

export interface FoundationTables {
  users: UsersTable;
  teams: TeamsTable;
  memberships: MembershipsTable;
  credentials: CredentialsTable;
  settings: SettingsTable;
  jobs: JobsTable;
  audit_log: AuditLogTable;
  sessions: SessionsTable;
  sign_in_links: SignInLinksTable;
  account_mail: AccountMailTable;
}
