// The managed-database jobs: their payload (the job map is src/services/jobs.ts) and the keys other
// code removes or looks up directly.
import type { NewJob } from '../../jobs/queue.js';
import { jobKey } from '../jobs.js';

export const BASE_BACKUP_INTERVAL_MS = 24 * 60 * 60 * 1000;

export const provisionJobKey = (uuid: string): string => jobKey('managed_database.provision', { uuid });
export const powerJobKey = (uuid: string): string => jobKey('managed_database.power', { uuid });
export const baseBackupJobKey = (uuid: string): string => jobKey('managed_database.base_backup', { uuid });

export interface ProvisionPayload {
  uuid: string;
  /**
   * Work that must finish before the database is ready (a clone's data copy): enqueued once the server
   * runs, with the database left in `setup-service`; that job sets `running` itself.
   */
  followUp?: Omit<NewJob, 'runAt'>;
}
