// Point-in-time and current-state clones of a real PostgreSQL 15 cluster that archives its WAL.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  clonePostgres,
  clonePostgresNow,
  flushWalToArchive,
  listBaseBackups,
  parseRecoveryTime,
  pickBaseBackup,
  stopCluster,
  takeBaseBackup,
  type BaseBackupInfo,
} from '../../src/drivers/databases/operations/index.js';
import { startPostgres, PG15_BIN, type PostgresServer } from '../helpers/postgres-server.js';
import { freePort, isRoot, execFileAsync } from '../helpers/processes.js';
import { pgQuery } from './fixtures.js';

describe('PostgreSQL clones', () => {
  let source: PostgresServer;
  let work: string;
  let archive: string;
  const started: string[] = [];

  beforeAll(async () => {
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-clone-'));
    fs.chmodSync(work, 0o755);
    archive = path.join(work, 'wal-archive');
    fs.mkdirSync(archive);
    if (isRoot()) await execFileAsync('chown', ['postgres:postgres', archive]);
    source = await startPostgres({
      conf: ['wal_level=replica', 'archive_mode=on', `"archive_command=cp %p ${archive}/%f"`],
    });
    await pgQuery(
      source.url,
      `CREATE TABLE t (id serial PRIMARY KEY, phase text, at timestamptz DEFAULT clock_timestamp())`,
    );
    await pgQuery(source.url, `INSERT INTO t (phase) SELECT 'base' FROM generate_series(1, 1000)`);
  });
  afterAll(async () => {
    for (const dataDir of started)
      await stopCluster({ binDir: PG15_BIN, dataDir }, 'immediate').catch(() => undefined);
    await source?.stop();
    fs.rmSync(work, { recursive: true, force: true });
  });

  const counts = async (port: number): Promise<Record<string, number>> => {
    const url = new URL(source.url);
    url.port = String(port);
    const rows = await pgQuery<{ phase: string; n: number }>(
      url.toString(),
      'SELECT phase, count(*)::int AS n FROM t GROUP BY phase ORDER BY phase',
    );
    return Object.fromEntries(rows.map((r) => [r.phase, r.n]));
  };

  it('restores exactly the rows committed before the recovery time', async () => {
    const backup = await takeBaseBackup({
      sourceUri: source.url,
      backupDir: path.join(work, 'backups', 'b1'),
    });
    expect(listBaseBackups(path.join(work, 'backups'))).toEqual([backup]);
    await pgQuery(source.url, `INSERT INTO t (phase) SELECT 'keep' FROM generate_series(1, 500)`);
    await new Promise((r) => setTimeout(r, 20));
    const [{ now: target } = { now: new Date() }] = await pgQuery<{ now: Date }>(
      source.url,
      'SELECT clock_timestamp() AS now',
    );
    await new Promise((r) => setTimeout(r, 20));
    await pgQuery(source.url, `INSERT INTO t (phase) SELECT 'discard' FROM generate_series(1, 500)`);
    await flushWalToArchive(source.url);

    const dataDir = path.join(work, 'pitr');
    const port = await freePort();
    started.push(dataDir);
    const result = await clonePostgres({
      baseBackup: pickBaseBackup(listBaseBackups(path.join(work, 'backups')), target),
      walArchiveDir: archive,
      recoveryTime: target.toISOString(),
      targetDataDir: dataDir,
      port,
      keepRunning: true,
    });
    expect(result).toMatchObject({ dataDir, port, running: true, recoveryTime: target.toISOString() });
    expect(await counts(port)).toEqual({ base: 1000, keep: 500 });
    // No Unix socket (nor its lock file) in the shared /tmp, where a stale lock of a server killed on
    // the same port (another OS account's) would make the start fail "could not open lock file".
    expect(fs.readdirSync('/tmp').filter((f) => f.startsWith(`.s.PGSQL.${port}`))).toEqual([]);
    // The clone is promoted (writable) and does not archive into the source's archive.
    const url = new URL(source.url);
    url.port = String(port);
    await pgQuery(url.toString(), `INSERT INTO t (phase) VALUES ('clone')`);
    expect(await pgQuery(url.toString(), `SELECT current_setting('archive_mode') AS m`)).toEqual([
      { m: 'off' },
    ]);
    await stopCluster({ binDir: PG15_BIN, dataDir });
  });

  it('clones the current state from a fresh base backup', async () => {
    await pgQuery(source.url, `INSERT INTO t (phase) VALUES ('latest')`);
    const dataDir = path.join(work, 'now');
    const port = await freePort();
    started.push(dataDir);
    const result = await clonePostgresNow({
      sourceUri: source.url,
      backupDir: path.join(work, 'now-backup'),
      targetDataDir: dataDir,
      port,
      keepRunning: true,
    });
    expect(result.backup.walIncluded).toBe(true);
    expect(await counts(port)).toEqual({ base: 1000, keep: 500, discard: 500, latest: 1 });
    await stopCluster({ binDir: PG15_BIN, dataDir });
  });

  it('refuses recovery times that cannot be served, each with its code', async () => {
    const backups = listBaseBackups(path.join(work, 'backups'));
    const first = backups[0] as BaseBackupInfo;
    expect(() => parseRecoveryTime('yesterday')).toThrow(
      expect.objectContaining({ code: 'RECOVERY_TIME_INVALID' }),
    );
    expect(() => parseRecoveryTime(new Date(Date.now() + 60_000).toISOString())).toThrow(
      expect.objectContaining({ code: 'RECOVERY_TIME_IN_FUTURE' }),
    );
    const before = new Date(new Date(first.startedAt).getTime() - 1000);
    expect(() => pickBaseBackup(backups, before)).toThrow(
      expect.objectContaining({ code: 'RECOVERY_TIME_BEFORE_BACKUPS' }),
    );
    expect(() => pickBaseBackup([], new Date())).toThrow(expect.objectContaining({ code: 'NO_BASE_BACKUP' }));
    // An occupied target directory is refused before anything is written into it.
    const occupied = path.join(work, 'occupied');
    fs.mkdirSync(occupied);
    fs.writeFileSync(path.join(occupied, 'keep.txt'), 'mine');
    await expect(
      clonePostgres({ baseBackup: first, targetDataDir: occupied, port: 1 }),
    ).rejects.toMatchObject({
      code: 'CLONE_FAILED',
    });
    expect(fs.readdirSync(occupied)).toEqual(['keep.txt']);
    await expect(
      clonePostgres({
        baseBackup: first,
        recoveryTime: new Date().toISOString(),
        targetDataDir: path.join(work, 'x'),
        port: 1,
      }),
    ).rejects.toMatchObject({ code: 'PITR_NOT_SUPPORTED' });
    await expect(
      clonePostgres({
        baseBackup: first,
        walArchiveDir: archive,
        recoveryTime: before.toISOString(),
        targetDataDir: path.join(work, 'y'),
        port: 1,
      }),
    ).rejects.toMatchObject({ code: 'RECOVERY_TIME_BEFORE_BACKUPS' });
  });
});
