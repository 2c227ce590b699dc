// What `POST /1.3/database/{uuid}/maintenance` would apply: a newer installed minor version of the running
// major (the binaries on disk are newer than the running server) or settings that wait for a restart.
// Applying is a restart by the driver; with nothing pending the route answers NO_MAINTENANCE_AVAILABLE.
import path from 'node:path';
import { DEFAULT_PG_BIN_DIR, versionOutput } from './common.js';
import { withMysql, withPg } from './connect.js';
import { OperationError } from './errors.js';
import { parseConnectionUri } from './source-uri.js';

import type { PendingUpdate } from '../types.js';

export type { PendingUpdate };

export interface MaintenanceInput {
  /** Admin URI of the managed database. */
  uri: string;
  /** Binaries the instance is (re)started with: PostgreSQL bin dir, or the mariadbd path. */
  binDir?: string;
  mariadbd?: string;
}

/** Compares dotted versions numerically: "15.20" > "15.9". */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return Math.sign(d);
  }
  return 0;
}

const firstVersion = (text: string): string => /(\d+(?:\.\d+)+)/.exec(text)?.[1] ?? '';

export async function pendingMaintenance(input: MaintenanceInput): Promise<PendingUpdate[]> {
  const spec = parseConnectionUri(input.uri);
  const updates: PendingUpdate[] = [];
  if (spec.engine === 'pg') {
    const { running, pending } = await withPg(
      { ...spec, database: spec.database || 'postgres' },
      'target',
      async (c) => {
        const v = await c.query<{ v: string }>(`SELECT current_setting('server_version') AS v`);
        const p = await c.query<{ name: string }>(
          'SELECT name FROM pg_settings WHERE pending_restart ORDER BY name',
        );
        return { running: firstVersion(v.rows[0]?.v ?? ''), pending: p.rows.map((r) => r.name) };
      },
    );
    const stdout = await versionOutput(path.join(input.binDir ?? DEFAULT_PG_BIN_DIR, 'postgres'));
    const installed = firstVersion(stdout.replace(/^.*\(PostgreSQL\)\s*/, ''));
    if (installed.split('.')[0] === running.split('.')[0] && compareVersions(installed, running) > 0) {
      updates.push({ kind: 'minor_version', description: `Update PostgreSQL ${running} to ${installed}` });
    }
    if (pending.length > 0) {
      updates.push({
        kind: 'configuration',
        description: `Apply settings that need a restart: ${pending.join(', ')}`,
      });
    }
  } else {
    const running = await withMysql(spec, 'target', async (c) => {
      const [rows] = await c.query('SELECT VERSION() AS v');
      return firstVersion((rows as Array<{ v: string }>)[0]?.v ?? '');
    });
    const stdout = await versionOutput(input.mariadbd ?? 'mariadbd');
    const installed = firstVersion(stdout.replace(/^.*Ver\s*/, ''));
    const major = (v: string): string => v.split('.').slice(0, 2).join('.');
    if (major(installed) === major(running) && compareVersions(installed, running) > 0) {
      updates.push({ kind: 'minor_version', description: `Update MariaDB ${running} to ${installed}` });
    }
  }
  return updates;
}

/** Throws NO_MAINTENANCE_AVAILABLE when there is nothing to apply; otherwise returns what the restart applies. */
export async function requireMaintenance(input: MaintenanceInput): Promise<PendingUpdate[]> {
  const updates = await pendingMaintenance(input);
  if (updates.length === 0) {
    throw new OperationError('NO_MAINTENANCE_AVAILABLE', 'There is no pending maintenance for this database');
  }
  return updates;
}
