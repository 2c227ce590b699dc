// The audit log's one writer: who did what to which resource, in the caller's transaction (so the
// record commits with the change it records, or not at all).
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';

export interface AuditEntry {
  at: string;
  /** null: Berth itself (a job, a schedule, the supervisor). */
  userId: number | null;
  teamId: number;
  action: string;
  target: string;
  details: unknown;
}

export async function recordAudit(
  db: Kysely<Database> | Transaction<Database>,
  entry: AuditEntry,
): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      at: entry.at,
      user_id: entry.userId,
      team_id: entry.teamId,
      action: entry.action,
      target: entry.target,
      details: JSON.stringify(entry.details),
    })
    .execute();
}
