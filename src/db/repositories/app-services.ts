// The SQL of the app-services service: apply's `services` and `container_services` rows of an
// application (read only), seen as one list of units, and the `app_service_instances` rows this
// service keeps beside them.
import type { Insertable, Kysely, Selectable, Transaction, Updateable } from 'kysely';
import type { Database } from '../schema/index.js';
import type { AppServiceInstancesTable } from '../schema/app-services.js';
import type { ServicesTable } from '../schema/infrastructure.js';

/** Which table a unit comes from: `services` or `container_services`. */
export type ServiceSource = 'service' | 'container';

/**
 * A service or container service as apply stored it: a `services` row without its change-detection
 * hash (a container service has no secret settings and no command: null).
 */
export type ServiceRow = Omit<Selectable<ServicesTable>, 'secret_settings_hash'> & { source: ServiceSource };
export type ServiceInstanceRow = Selectable<AppServiceInstancesTable>;
type Db = Kysely<Database> | Transaction<Database>;

/** A unit's key: its source and id. */
export interface UnitKey {
  source: ServiceSource;
  id: number;
}

export function createAppServicesRepository(db: Db) {
  return {
    /** An application's services, then its container services, each in the document's order. */
    async servicesOf(appId: number): Promise<ServiceRow[]> {
      const [services, containers] = await Promise.all([
        db
          .selectFrom('services')
          .select([
            'id',
            'application_id',
            'name',
            'type',
            'version',
            'memory',
            'volume_size',
            'settings',
            'secret_settings',
            'command',
            'created_at',
            'updated_at',
          ])
          .where('application_id', '=', appId)
          .orderBy('id')
          .execute(),
        db
          .selectFrom('container_services')
          .selectAll()
          .where('application_id', '=', appId)
          .orderBy('id')
          .execute(),
      ]);
      return [
        ...services.map((s) => ({ ...s, source: 'service' as const })),
        ...containers.map((s) => ({
          ...s,
          source: 'container' as const,
          secret_settings: null,
          command: null,
        })),
      ];
    },

    /** The application's volumes (name and mount path), for services that work on its files. */
    volumesOf: (appId: number) =>
      db
        .selectFrom('volumes')
        .select(['name', 'mount_path', 'volume_size'])
        .where('application_id', '=', appId)
        .orderBy('id')
        .execute(),

    /** The team that owns the application (labels on what a remote runner makes); undefined when gone. */
    teamOf: async (appId: number): Promise<number | undefined> =>
      (await db.selectFrom('applications').select('team_id').where('id', '=', appId).executeTakeFirst())
        ?.team_id,

    /** The keys of the application's own secrets (they win over injected names). */
    secretKeys: async (appId: number): Promise<string[]> =>
      (await db.selectFrom('secrets').select('key').where('application_id', '=', appId).execute()).map(
        (r) => r.key,
      ),

    instancesOf: (appId: number): Promise<ServiceInstanceRow[]> =>
      db
        .selectFrom('app_service_instances')
        .selectAll()
        .where('application_id', '=', appId)
        .orderBy('id')
        .execute(),

    findInstance: (key: UnitKey): Promise<ServiceInstanceRow | undefined> =>
      db
        .selectFrom('app_service_instances')
        .selectAll()
        .where('source', '=', key.source)
        .where('service_id', '=', key.id)
        .executeTakeFirst(),

    /** Instances that ran at least once: what the supervisor keeps running. */
    provisioned: (): Promise<ServiceInstanceRow[]> =>
      db
        .selectFrom('app_service_instances')
        .selectAll()
        .where('applied_sizing', 'is not', null)
        .orderBy('id')
        .execute(),

    insertInstance: (row: Insertable<AppServiceInstancesTable>) =>
      db.insertInto('app_service_instances').values(row).execute(),

    updateInstance: (key: UnitKey, patch: Updateable<AppServiceInstancesTable>) =>
      db
        .updateTable('app_service_instances')
        .set(patch)
        .where('source', '=', key.source)
        .where('service_id', '=', key.id)
        .execute(),

    deleteInstance: (key: UnitKey) =>
      db
        .deleteFrom('app_service_instances')
        .where('source', '=', key.source)
        .where('service_id', '=', key.id)
        .execute(),
  };
}

export type AppServicesRepository = ReturnType<typeof createAppServicesRepository>;
