// Tables of scheduled deletion: the warning markers on applications, the mail outbox and the
// tombstones of deleted applications.
import type { Generated } from 'kysely';

/**
 * Columns added to `applications`. Each marker holds the `scheduled_deletion_at` value that its warning
 * was handled for (sent, or superseded by the nearer warning). A schedule written by anyone (apply,
 * PATCH, dashboard) that differs from the marker therefore makes the warning due again, with no reset
 * step that a writer could forget.
 */
export interface ApplicationDeletionMarkers {
  deletion_warning_7d_for: string | null;
  deletion_warning_1d_for: string | null;
}

/** `not_sent`: it could never go out, because no mail server was configured while it held. */
export type NotificationState = 'unsent' | 'sent' | 'failed' | 'cancelled' | 'not_sent';
export type NotificationKind = 'deletion_warning_7d' | 'deletion_warning_1d' | 'application_deleted';

export interface NotificationsTable {
  id: Generated<number>;
  team_id: number;
  /** Not a foreign key: the message outlives the application it talks about. */
  application_id: number | null;
  kind: NotificationKind;
  /** One message per (kind, application, scheduled time, recipient): a second insert fails. */
  dedupe_key: string;
  recipient: string;
  subject: string;
  body: string;
  state: NotificationState;
  attempts: number;
  last_error: string | null;
  /** The deletion time a warning is about; the sender drops the warning once it no longer holds. */
  scheduled_for: string | null;
  created_at: string;
  updated_at: string;
  sent_at: string | null;
}

export interface ApplicationTombstonesTable {
  /** The deleted application's id (ids are never reused). */
  id: number;
  name: string;
  team_id: number;
  team_name: string;
  scheduled_deletion_at: string;
  deleted_at: string;
  /** JSON: what was removed (domains, counts of services, volumes, secrets, deployments). */
  details: string;
}

export interface ScheduledDeletionTables {
  applications: ApplicationDeletionMarkers;
  notifications: NotificationsTable;
  application_tombstones: ApplicationTombstonesTable;
}
