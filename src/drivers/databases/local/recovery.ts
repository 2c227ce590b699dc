// What the point-in-time clone and the physical clone need from an instance on this host: Berth's
// maintenance connection, the base backups a copy can start from, and a copy of the instance's data
// recovered from one of them (its WAL archive replayed to a time, or to its end).
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_PG_BIN_DIR, pgBinDirFor } from '../operations/common.js';
import { clonePostgres, flushWalToArchive } from '../operations/clone.js';
import { runCommand } from '../operations/exec.js';
import { OperationError } from '../operations/errors.js';
import type { DatabaseEngine, RestorableBackup } from '../types.js';
import { MAINTENANCE_USER, instanceAccount, maintenancePassword } from './accounts.js';
import { baseBackupsOf, walArchiveOf } from './postgres.js';
import { freePort } from './process.js';

/** Berth's own superuser connection to an instance (its maintenance account, never the team's admin). */
export function maintenanceUri(root: string, engine: DatabaseEngine, port: number): string {
  const password = encodeURIComponent(maintenancePassword(root));
  return engine === 'pg'
    ? `postgres://${MAINTENANCE_USER}:${password}@127.0.0.1:${port}/postgres?sslmode=disable`
    : `mysql://${MAINTENANCE_USER}:${password}@127.0.0.1:${port}/?ssl-mode=disabled`;
}

/** The instance's finished base backups, oldest first (an interrupted one has no manifest). */
export function restorableBackups(root: string): RestorableBackup[] {
  const dir = baseBackupsOf(root);
  if (!fs.existsSync(dir)) return [];
  const result: RestorableBackup[] = [];
  for (const name of fs.readdirSync(dir).sort()) {
    const manifest = path.join(dir, name, 'berth-backup.json');
    if (!fs.existsSync(manifest)) continue;
    const info = JSON.parse(fs.readFileSync(manifest, 'utf8')) as { backup_time: string };
    result.push({ name, startedAt: info.backup_time, finishedAt: fs.statSync(manifest).mtime.toISOString() });
  }
  return result.sort((a, b) => a.finishedAt.localeCompare(b.finishedAt));
}

export interface LocalRecoverOptions {
  backup: RestorableBackup;
  /** ISO 8601; undefined: replay the whole archive. */
  recoveryTime: string | undefined;
  /** An empty directory for the copy, on the file system the copy will be used on. */
  work: string;
  keepRunning: boolean;
  /** The instance's running major (its binaries replay the WAL). */
  major: number | undefined;
  /** Where the instance listens (its WAL is flushed to the archive first). */
  port: number;
}

/** A copy recovered on this host: its directory, binaries and account, and where it runs (if it does). */
export interface LocalCopy {
  dataDir: string;
  port: number;
  binDir: string;
  /** The OS account the copy's server runs as. */
  runAs?: string;
  /** The password of the copy's superuser (the source's maintenance account): it opens the copy once. */
  adminPassword: string;
}

/**
 * The instance's data at a point in time, or as it is now: the base backup (lz4 tar) restored into
 * `<work>/data` and the WAL archive replayed onto it (to the time, or to its end), on the instance's
 * own major, then promoted. The cluster is left running on a free port, or stopped.
 */
export async function recoverCopy(root: string, options: LocalRecoverOptions): Promise<LocalCopy> {
  const { backup, work } = options;
  const backupDir = path.join(baseBackupsOf(root), backup.name);
  if (!fs.existsSync(backupDir))
    throw new OperationError('PITR_NOT_SUPPORTED', 'The source keeps no WAL archive');
  const copy = path.join(work, 'backup');
  fs.mkdirSync(copy);
  // The recovery runs as the OS account of the instance whose files `work` is among (the clone's,
  // or the source's for a scratch copy); another instance's archive is closed to it, so the WAL it
  // replays is copied in first.
  const account = instanceAccount(path.dirname(work), undefined) ?? instanceAccount(root, undefined);
  const archive = path.join(work, 'wal-archive');
  const lz4 = path.join(backupDir, 'base.tar.lz4');
  if (fs.existsSync(lz4)) {
    await runCommand({ command: 'lz4', args: ['-d', '-q', lz4, path.join(copy, 'base.tar')] });
  } else {
    fs.copyFileSync(path.join(backupDir, 'base.tar'), path.join(copy, 'base.tar'));
  }
  // The commit that ends recovery must be in the archive, not only in the live WAL.
  await flushWalToArchive(maintenanceUri(root, 'pg', options.port));
  await runCommand({ command: 'cp', args: ['-a', '--', walArchiveOf(root), archive] });
  if (account) await runCommand({ command: 'chown', args: ['-R', `${account}:${account}`, '--', work] });
  const port = await freePort();
  const dataDir = path.join(work, 'data');
  const binDir = options.major === undefined ? DEFAULT_PG_BIN_DIR : pgBinDirFor(options.major);
  await clonePostgres({
    baseBackup: {
      dir: copy,
      compressed: false,
      walIncluded: false,
      startedAt: backup.startedAt,
      finishedAt: backup.finishedAt,
      sizeBytes: 0,
    },
    walArchiveDir: archive,
    ...(account ? { runAs: account } : {}),
    ...(options.recoveryTime ? { recoveryTime: options.recoveryTime } : {}),
    targetDataDir: dataDir,
    binDir,
    port,
    keepRunning: options.keepRunning,
    now: new Date(),
  });
  return {
    dataDir,
    port,
    binDir,
    adminPassword: maintenancePassword(root),
    ...(account ? { runAs: account } : {}),
  };
}
