// Maintenance mode lives in the store so that `berth admin maintenance on` reaches every replica.
// Requests read a copy that is at most one second old.
import { iso, type Clock } from '../domain/clock.js';
import type { SettingsRepository } from '../db/repositories/settings.js';

const KEY = 'maintenance';
const CACHE_MS = 1000;

export interface MaintenanceSwitch {
  isOn(): Promise<boolean>;
  set(on: boolean): Promise<void>;
}

export function createMaintenanceSwitch(deps: {
  settings: SettingsRepository;
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
      await deps.settings.set(KEY, on ? 'on' : 'off', iso(deps.clock.now()));
      cached = { on, at: Date.now() };
    },
  };
}
