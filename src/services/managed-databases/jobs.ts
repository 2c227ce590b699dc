// The managed-database jobs: their names, keys and payloads.
import type { NewJob } from '../../jobs/queue.js';

export const PROVISION_JOB = 'managed_database.provision';
export const BASE_BACKUP_JOB = 'managed_database.base_backup';
export const BASE_BACKUP_INTERVAL_MS = 24 * 60 * 60 * 1000;

export const DELETE_JOB = 'managed_database.delete';
export const POWER_JOB = 'managed_database.power';
export const provisionJobKey = (uuid: string): string => `${PROVISION_JOB}:${uuid}`;
export const deleteJobKey = (uuid: string): string => `${DELETE_JOB}:${uuid}`;
export const powerJobKey = (uuid: string): string => `${POWER_JOB}:${uuid}`;
export const baseBackupJobKey = (uuid: string): string => `${BASE_BACKUP_JOB}:${uuid}`;

export interface ProvisionPayload {
  uuid: string;
  /**
   * Work that must finish before the database is ready (a clone's data copy): enqueued once the server
   * runs, with the database left in `setup-service`; that job sets `running` itself.
   */
  followUp?: Omit<NewJob, 'runAt'>;
}
