// The SQL of the /1.3 operations' requests: check tasks, migrations, and the rows a clone starts from
// (src/services/db-operations/requests.ts). The jobs that carry them out read and write through here too.
import type { Insertable, Kysely, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ManagedDatabaseMigrationsTable, ManagedDatabaseTasksTable } from '../schema/db-operations.js';
import type { ManagedDatabasesTable } from '../schema/infrastructure.js';

type Db = Kysely<Database> | Transaction<Database>;

export function createDbOperationsRepository(db: Db) {
  return {
    insertTask: (values: Insertable<ManagedDatabaseTasksTable>) =>
      db.insertInto('managed_database_tasks').values(values).execute(),

    findTask: (databaseUuid: string, id: string) =>
      db
        .selectFrom('managed_database_tasks')
        .selectAll()
        .where('id', '=', id)
        .where('database_uuid', '=', databaseUuid)
        .executeTakeFirst(),

    /** Whether an upgrade_check to `target` succeeded for this database (an upgrade needs one). */
    async upgradeChecked(databaseUuid: string, target: string): Promise<boolean> {
      const row = await db
        .selectFrom('managed_database_tasks')
        .select('id')
        .where('database_uuid', '=', databaseUuid)
        .where('operation', '=', 'upgrade_check')
        .where('target_version', '=', target)
        .where('success', '=', 1)
        .executeTakeFirst();
      return row !== undefined;
    },

    findMigration: (databaseUuid: string) =>
      db
        .selectFrom('managed_database_migrations')
        .select(['status', 'method'])
        .where('database_uuid', '=', databaseUuid)
        .executeTakeFirst(),

    /** The database's one migration record, replaced by a new one. */
    async replaceMigration(values: Insertable<ManagedDatabaseMigrationsTable>): Promise<void> {
      await db
        .deleteFrom('managed_database_migrations')
        .where('database_uuid', '=', values.database_uuid)
        .execute();
      await db.insertInto('managed_database_migrations').values(values).execute();
    },

    async nameTaken(teamId: number, name: string): Promise<boolean> {
      const row = await db
        .selectFrom('managed_databases')
        .select('id')
        .where('team_id', '=', teamId)
        .where('name', '=', name)
        .executeTakeFirst();
      return row !== undefined;
    },

    insertDatabase: (values: Insertable<ManagedDatabasesTable>) =>
      db.insertInto('managed_databases').values(values).execute(),
  };
}
