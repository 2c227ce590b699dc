// The SQL of the /1.3 operations' requests: check tasks, migrations, and the rows a clone starts from
// (src/services/db-operations/requests.ts). The jobs that carry them out read and write through here too.
import type { Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ManagedDatabaseMigrationsTable, ManagedDatabaseTasksTable } from '../schema/db-operations.js';
import type { ManagedDatabasesTable } from '../schema/infrastructure.js';

type Db = Kysely<Database> | Transaction<Database>;

export type MigrationRow = Selectable<ManagedDatabaseMigrationsTable>;

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

    findTaskById: (id: string) =>
      db.selectFrom('managed_database_tasks').selectAll().where('id', '=', id).executeTakeFirst(),

    updateTask: (id: string, values: Updateable<ManagedDatabaseTasksTable>) =>
      db.updateTable('managed_database_tasks').set(values).where('id', '=', id).execute(),

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

    /** The database's migration record, all of it (its source sealed). */
    migrationOf: (databaseUuid: string): Promise<MigrationRow | undefined> =>
      db
        .selectFrom('managed_database_migrations')
        .selectAll()
        .where('database_uuid', '=', databaseUuid)
        .executeTakeFirst(),

    /** Updates the migration record; with `unlessStopped`, a stopped one is left as it is. */
    async updateMigration(
      databaseUuid: string,
      values: Updateable<ManagedDatabaseMigrationsTable>,
      options: { unlessStopped?: boolean } = {},
    ): Promise<void> {
      let update = db
        .updateTable('managed_database_migrations')
        .set(values)
        .where('database_uuid', '=', databaseUuid);
      if (options.unlessStopped) update = update.where('status', '<>', 'stopped');
      await update.execute();
    },

    /** The database's one migration record, replaced by a new one. */
    async replaceMigration(values: Insertable<ManagedDatabaseMigrationsTable>): Promise<void> {
      await db
        .deleteFrom('managed_database_migrations')
        .where('database_uuid', '=', values.database_uuid)
        .execute();
      await db.insertInto('managed_database_migrations').values(values).execute();
    },

    /** Deletes the database's tasks and migration record (which holds the source's credentials, sealed). */
    async deleteRecordsOf(databaseUuid: string): Promise<void> {
      await db.deleteFrom('managed_database_tasks').where('database_uuid', '=', databaseUuid).execute();
      await db.deleteFrom('managed_database_migrations').where('database_uuid', '=', databaseUuid).execute();
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
