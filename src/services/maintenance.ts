// Maintenance mode lives in the store so that `berth admin maintenance on` reaches every replica.
// Requests read a copy that is at most one second old.
import { iso, type Clock } from '../domain/clock.js';
import type { Kysely } from 'kysely';
import { createSettingsRepository, type SettingsRepository } from '../db/repositories/settings.js';
import type { Database } from '../db/schema/index.js';
import { auditChange } from './audit.js';

const KEY = 'maintenance';
const CACHE_MS = 1000;

export interface MaintenanceSwitch {
  isOn(): Promise<boolean>;
  set(on: boolean): Promise<void>;
}

export function createMaintenanceSwitch(deps: {
  settings: SettingsRepository;
  /** The store, for the switch and its audit entry in one transaction. */
  db: Kysely<Database>;
  clock: Clock;
}): MaintenanceSwitch {
  let cached: { on: boolean; at: number } | undefined;
  return {
    async isOn() {
      const now = Date.now();
      if (cached && now - cached.at < CACHE_MS) return cached.on;
      const on = (await deps.settings.get(KEY)) === 'on';
      cached = { on, at: now };
      return on;
    },
    async set(on) {
      const at = iso(deps.clock.now());
      await deps.db.transaction().execute(async (trx) => {
        await createSettingsRepository(trx).set(KEY, on ? 'on' : 'off', at);
        await auditChange(trx, {
          at,
          action: 'maintenance.update',
          teamId: null,
          target: { kind: 'platform', id: 'maintenance' },
          after: { maintenance: on ? 'on' : 'off' },
        });
      });
      cached = { on, at: Date.now() };
    },
  };
}
