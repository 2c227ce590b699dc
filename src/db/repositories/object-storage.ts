// The SQL of object storages (src/services/object-storage/index.ts, the `minio` application service):
// a team's storages, which apply declares, and the private ones of applications' minio services.
import type { Insertable, Kysely, Transaction, Updateable } from 'kysely';
import type { Database } from '../schema/index.js';
import type { ObjectStoragesTable } from '../schema/infrastructure.js';
import type { ObjectStorageRow } from './infrastructure.js';

type Db = Kysely<Database> | Transaction<Database>;

export function createObjectStorageRepository(db: Db) {
  /** A team's own storages (not applications' private ones), by uuid or name when `ref` is given. */
  const teamStorages = (teamId: number, ref?: string) => {
    let query = db
      .selectFrom('object_storages')
      .selectAll()
      .where('team_id', '=', teamId)
      .where('application_id', 'is', null)
      .orderBy('name');
    if (ref !== undefined) query = query.where((eb) => eb.or([eb('uuid', '=', ref), eb('name', '=', ref)]));
    return query.execute();
  };

  return {
    teamStorages,

    findTeamStorage: async (teamId: number, ref: string): Promise<ObjectStorageRow | undefined> =>
      (await teamStorages(teamId, ref))[0],

    /** A team's storage by uuid (an application's minio service provisions its own). */
    findTeamStorageByUuid: (uuid: string): Promise<ObjectStorageRow | undefined> =>
      db
        .selectFrom('object_storages')
        .selectAll()
        .where('uuid', '=', uuid)
        .where('application_id', 'is', null)
        .executeTakeFirst(),

    /** An application's private storage (its minio service instance's) by uuid. */
    findApplicationStorage: (uuid: string): Promise<ObjectStorageRow | undefined> =>
      db
        .selectFrom('object_storages')
        .selectAll()
        .where('uuid', '=', uuid)
        .where('application_id', 'is not', null)
        .executeTakeFirst(),

    /** Inserts the storage unless one with its uuid exists (a concurrent maker's row stays). */
    insertIfAbsent: (values: Insertable<ObjectStoragesTable>) =>
      db
        .insertInto('object_storages')
        .values(values)
        .onConflict((oc) => oc.column('uuid').doNothing())
        .execute(),

    update: (id: number, values: Updateable<ObjectStoragesTable>) =>
      db.updateTable('object_storages').set(values).where('id', '=', id).execute(),

    delete: (id: number) => db.deleteFrom('object_storages').where('id', '=', id).execute(),
  };
}
