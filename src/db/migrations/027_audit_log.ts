// The audit log records every change (issue 31, item 2; docs/decisions/0014-audit-log.md): besides the
// team, action, target and details it had, who made it (the e-mail at that moment, kept when the account
// goes), with which credential (its kind and id, never its secret), from which address, the target's kind,
// and the state before and after (JSON, secret values replaced). Rows written before this keep nulls.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const column of ['actor', 'credential', 'address', 'target_kind', 'before_state', 'after_state']) {
    await db.schema.alterTable('audit_log').addColumn(column, 'text').execute();
  }
  // The team's page reads newest first by id; the retention prune deletes by time.
  await db.schema.createIndex('audit_log_team').on('audit_log').columns(['team_id', 'id']).execute();
  await db.schema.createIndex('audit_log_at').on('audit_log').column('at').execute();
}
