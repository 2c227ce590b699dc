// An operator may give one user a monthly tools allowance other than the server-wide default
// (`berth admin set-credits`); null means the default.
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('users').addColumn('tools_monthly_credits', 'integer').execute();
}
