// Pending maintenance: settings waiting for a restart, and newer installed minor versions.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  compareVersions,
  pendingMaintenance,
  requireMaintenance,
} from '../../src/drivers/databases/operations/index.js';
import { PG15_BIN, startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { pgQuery } from './fixtures.js';

describe('pending maintenance', () => {
  let server: PostgresServer;
  let work: string;
  beforeAll(async () => {
    server = await startPostgres();
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-maint-'));
  });
  afterAll(async () => {
    await server?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  it('compares versions numerically', () => {
    expect(compareVersions('15.20', '15.9')).toBe(1);
    expect(compareVersions('10.11.19', '10.11.19')).toBe(0);
    expect(compareVersions('10.11.2', '10.11.19')).toBe(-1);
  });

  it('reports nothing on a fresh server, then a setting that waits for a restart', async () => {
    await expect(requireMaintenance({ uri: server.url })).rejects.toMatchObject({
      code: 'NO_MAINTENANCE_AVAILABLE',
    });
    await pgQuery(server.url, `ALTER SYSTEM SET max_wal_senders = 7`);
    await pgQuery(server.url, `SELECT pg_reload_conf()`);
    const updates = await requireMaintenance({ uri: server.url });
    expect(updates).toEqual([
      { kind: 'configuration', description: expect.stringContaining('max_wal_senders') as unknown },
    ]);
  });

  it('reports a newer installed minor version of the running major', async () => {
    // A stand-in for an upgraded package: a `postgres` that reports the next minor of the running one.
    const [row] = await pgQuery<{ v: string }>(server.url, `SELECT current_setting('server_version') AS v`);
    const [major, minor] = (row?.v ?? '').split(/[.\s]/);
    const bin = path.join(work, 'bin');
    fs.mkdirSync(bin);
    fs.writeFileSync(
      path.join(bin, 'postgres'),
      `#!/bin/sh\necho "postgres (PostgreSQL) ${major}.${Number(minor) + 1}"\n`,
      {
        mode: 0o755,
      },
    );
    const updates = await pendingMaintenance({ uri: server.url, binDir: bin });
    expect(updates[0]).toEqual({
      kind: 'minor_version',
      description: `Update PostgreSQL ${major}.${minor} to ${major}.${Number(minor) + 1}`,
    });
    // The real binaries are the running ones: no version update from them.
    expect((await pendingMaintenance({ uri: server.url, binDir: PG15_BIN })).map((u) => u.kind)).toEqual([
      'configuration',
    ]);
  });
});
