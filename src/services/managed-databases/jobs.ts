// The managed-database jobs: the keys other code removes or looks up directly (their payloads are
// declared with the job map, src/services/jobs.ts).
import { jobKey } from '../jobs.js';

export const BASE_BACKUP_INTERVAL_MS = 24 * 60 * 60 * 1000;

export const provisionJobKey = (uuid: string): string => jobKey('managed_database.provision', { uuid });
export const powerJobKey = (uuid: string): string => jobKey('managed_database.power', { uuid });
export const baseBackupJobKey = (uuid: string): string => jobKey('managed_database.base_backup', { uuid });

// Declared with the job map, which the payloads' modules use (and so cannot be used by it).
export type { ProvisionPayload } from '../jobs.js';
