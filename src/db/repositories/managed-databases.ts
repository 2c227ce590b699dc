// The SQL of the managed-database service: managed_databases rows (written by apply) and the
// managed_instances rows this service keeps beside them.
import type { Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ManagedDatabasesTable } from '../schema/infrastructure.js';
import type { ManagedInstancesTable } from '../schema/managed-instances.js';

export type ManagedDatabaseRow = Selectable<ManagedDatabasesTable>;
export type ManagedInstanceRow = Selectable<ManagedInstancesTable>;
type Db = Kysely<Database> | Transaction<Database>;

export function createManagedDatabaseRepository(db: Db) {
  return {
    findDatabase: (uuid: string): Promise<ManagedDatabaseRow | undefined> =>
      db.selectFrom('managed_databases').selectAll().where('uuid', '=', uuid).executeTakeFirst(),

    databasesOfTeams: (teamIds: number[]): Promise<ManagedDatabaseRow[]> =>
      teamIds.length === 0
        ? Promise.resolve([])
        : db
            .selectFrom('managed_databases')
            .selectAll()
            .where('team_id', 'in', teamIds)
            .orderBy('id')
            .execute(),

    findInstance: (databaseId: number): Promise<ManagedInstanceRow | undefined> =>
      db
        .selectFrom('managed_instances')
        .selectAll()
        .where('managed_database_id', '=', databaseId)
        .executeTakeFirst(),

    instancesOf: (databaseIds: number[]): Promise<ManagedInstanceRow[]> =>
      databaseIds.length === 0
        ? Promise.resolve([])
        : db
            .selectFrom('managed_instances')
            .selectAll()
            .where('managed_database_id', 'in', databaseIds)
            .execute(),

    /** Instances that were provisioned at least once, with their database. */
    provisionedInstances: () =>
      db
        .selectFrom('managed_instances')
        .innerJoin('managed_databases', 'managed_databases.id', 'managed_instances.managed_database_id')
        .selectAll('managed_instances')
        .select(['managed_databases.uuid', 'managed_databases.state'])
        .where('managed_instances.applied_plan', 'is not', null)
        .orderBy('managed_instances.id')
        .execute(),

    setState: (id: number, state: string, reason: string | null, at: string) =>
      db
        .updateTable('managed_databases')
        .set({ state, state_reason: reason, updated_at: at })
        .where('id', '=', id)
        .execute(),

    updateDatabase: (id: number, values: Updateable<ManagedDatabasesTable>) =>
      db.updateTable('managed_databases').set(values).where('id', '=', id).execute(),

    /** Deletes the database's rows: its instance, then the database itself. */
    async deleteDatabase(id: number): Promise<void> {
      await db.deleteFrom('managed_instances').where('managed_database_id', '=', id).execute();
      await db.deleteFrom('managed_databases').where('id', '=', id).execute();
    },

    insertInstance: (row: Insertable<ManagedInstancesTable>) =>
      db.insertInto('managed_instances').values(row).execute(),

    updateInstance: (databaseId: number, patch: Updateable<ManagedInstancesTable>) =>
      db.updateTable('managed_instances').set(patch).where('managed_database_id', '=', databaseId).execute(),
  };
}

export type ManagedDatabaseRepository = ReturnType<typeof createManagedDatabaseRepository>;
