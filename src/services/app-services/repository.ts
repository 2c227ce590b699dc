// The SQL of the app-services service: apply's `services` rows of an application (read only) and the
// `app_service_instances` rows this service keeps beside them.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { Database } from '../../db/schema/index.js';
import type { AppServiceInstancesTable } from '../../db/schema/app-services.js';
import type { ServicesTable } from '../../db/schema/infrastructure.js';

export type ServiceRow = Omit<Selectable<ServicesTable>, 'secret_settings' | 'secret_settings_hash'>;
export type ServiceInstanceRow = Selectable<AppServiceInstancesTable>;
type Db = Kysely<Database> | Transaction<Database>;

export function createAppServicesRepository(db: Db) {
  return {
    /** An application's services in the document's order (never the sealed sftp password). */
    servicesOf: (appId: number): Promise<ServiceRow[]> =>
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
          'command',
          'created_at',
          'updated_at',
        ])
        .where('application_id', '=', appId)
        .orderBy('id')
        .execute(),

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

    findInstance: (serviceId: number): Promise<ServiceInstanceRow | undefined> =>
      db
        .selectFrom('app_service_instances')
        .selectAll()
        .where('service_id', '=', serviceId)
        .executeTakeFirst(),

    /** Instances that ran at least once: what the supervisor keeps running. */
    provisioned: (): Promise<ServiceInstanceRow[]> =>
      db
        .selectFrom('app_service_instances')
        .selectAll()
        .where('applied_sizing', 'is not', null)
        .orderBy('id')
        .execute(),

    insertInstance: (row: Omit<ServiceInstanceRow, 'id'>) =>
      db.insertInto('app_service_instances').values(row).execute(),

    updateInstance: (serviceId: number, patch: Partial<Omit<ServiceInstanceRow, 'id'>>) =>
      db.updateTable('app_service_instances').set(patch).where('service_id', '=', serviceId).execute(),

    deleteInstance: (serviceId: number) =>
      db.deleteFrom('app_service_instances').where('service_id', '=', serviceId).execute(),
  };
}

export type AppServicesRepository = ReturnType<typeof createAppServicesRepository>;
