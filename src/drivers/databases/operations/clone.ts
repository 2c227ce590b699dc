// Clones: PostgreSQL from a base backup plus archived WAL, either to a point in time (recovery_target_time,
// then promote) or to the current state (a fresh base backup that carries its own WAL). MariaDB only from
// the current state, by dump: it has no archived binlog to replay here.
import fs from 'node:fs';
import path from 'node:path';
import { DEFAULT_PG_BIN_DIR, errorMessage, type MigrationStatus } from './common.js';
import {
  acceptsConnections,
  appendAutoConf,
  chownToServerUser,
  clusterState,
  isClusterRunning,
  logFileOf,
  startCluster,
  stopCluster,
  withLogTail,
  type StartOptions,
} from './cluster.js';
import { pgEnv, withMysql, withPg } from './connect.js';
import { dumpMigrate } from './dump.js';
import { OperationError } from './errors.js';
import { parseRecoveryTime } from '../types.js';
import { runCommand } from './exec.js';
import { parseConnectionUri, type ConnectionSpec } from './source-uri.js';

export const BACKUP_INFO_FILE = 'backup.json';

export interface BaseBackupInfo {
  /** Directory holding base.tar[.gz] (and pg_wal.tar[.gz] when the WAL is included). */
  dir: string;
  compressed: boolean;
  /** True when the backup carries the WAL it needs (restorable without an archive). */
  walIncluded: boolean;
  /** ISO-8601 times: the backup is consistent from `finishedAt` on. */
  startedAt: string;
  finishedAt: string;
  sizeBytes: number;
}

export interface BaseBackupInput {
  /** Superuser or REPLICATION user URI of the cluster. */
  sourceUri: string;
  /** Directory to create for this backup. */
  backupDir: string;
  pgBinDir?: string;
  /** Include the WAL needed for consistency (clone from the current state without an archive). */
  includeWal?: boolean;
  /** gzip the tar files: smaller, but costs CPU on backup and restore. */
  compress?: boolean;
  now?: () => Date;
}

/** pg_basebackup in tar format; writes backup.json beside the tars and returns the same data. */
export async function takeBaseBackup(input: BaseBackupInput): Promise<BaseBackupInfo> {
  const spec = parseConnectionUri(input.sourceUri);
  const now = input.now ?? (() => new Date());
  if (fs.existsSync(input.backupDir) && fs.readdirSync(input.backupDir).length > 0) {
    throw new OperationError('CLONE_FAILED', `Backup directory ${input.backupDir} is not empty`);
  }
  const startedAt = now().toISOString();
  await runCommand(
    {
      command: path.join(input.pgBinDir ?? DEFAULT_PG_BIN_DIR, 'pg_basebackup'),
      args: [
        '-D',
        input.backupDir,
        '-Ft',
        ...(input.compress ? ['-z'] : []),
        '-X',
        input.includeWal ? 'fetch' : 'none',
        '-c',
        'fast',
        '--no-sync',
        '-l',
        `berth ${startedAt}`,
      ],
      env: pgEnv(spec, 'postgres'),
    },
    { secrets: [spec.password], failureCode: 'CLONE_FAILED' },
  );
  const finishedAt = now().toISOString();
  const sizeBytes = fs
    .readdirSync(input.backupDir)
    .reduce((sum, f) => sum + fs.statSync(path.join(input.backupDir, f)).size, 0);
  const info: BaseBackupInfo = {
    dir: input.backupDir,
    compressed: input.compress ?? false,
    walIncluded: input.includeWal ?? false,
    startedAt,
    finishedAt,
    sizeBytes,
  };
  fs.writeFileSync(path.join(input.backupDir, BACKUP_INFO_FILE), JSON.stringify(info, null, 2));
  return info;
}

/** Reads backup.json of every backup directory under `root`, oldest first. */
export function listBaseBackups(root: string): BaseBackupInfo[] {
  if (!fs.existsSync(root)) return [];
  return fs
    .readdirSync(root)
    .map((d) => path.join(root, d, BACKUP_INFO_FILE))
    .filter((f) => fs.existsSync(f))
    .map((f) => ({ ...(JSON.parse(fs.readFileSync(f, 'utf8')) as BaseBackupInfo), dir: path.dirname(f) }))
    .sort((a, b) => a.finishedAt.localeCompare(b.finishedAt));
}

// Parses and bounds a recovery time (valid, not in the future): the interface's, as requests check it.
export { parseRecoveryTime };

/** The newest base backup that was complete at `time`; the WAL archive covers the rest. */
export function pickBaseBackup(backups: readonly BaseBackupInfo[], time: Date): BaseBackupInfo {
  if (backups.length === 0) throw new OperationError('NO_BASE_BACKUP', 'The database has no base backup yet');
  const usable = backups.filter((b) => new Date(b.finishedAt).getTime() <= time.getTime());
  const best = usable.sort((a, b) => a.finishedAt.localeCompare(b.finishedAt)).at(-1);
  if (!best) {
    const first = [...backups].sort((a, b) => a.finishedAt.localeCompare(b.finishedAt))[0];
    throw new OperationError(
      'RECOVERY_TIME_BEFORE_BACKUPS',
      `recovery_time ${time.toISOString()} is before the earliest restorable point ${first?.finishedAt ?? ''}`,
    );
  }
  return best;
}

/**
 * What clonePostgres writes into the copy's postgresql.auto.conf for its recovery. A copy that becomes
 * a managed instance drops them again (its driver's own settings then apply, archiving among them).
 */
export const RECOVERY_SETTINGS = [
  'archive_mode',
  'archive_command',
  'restore_command',
  'recovery_target_action',
  'hot_standby',
  'recovery_target_time',
] as const;

export interface PostgresCloneInput {
  baseBackup: BaseBackupInfo;
  /** Archive the source's archive_command fills; required for a point in time. */
  walArchiveDir?: string;
  /** Point in time to recover to; without it, everything in the backup (and archive) is replayed. */
  recoveryTime?: string | Date;
  /** New data directory (must not exist or be empty). */
  targetDataDir: string;
  /** Binaries of the source's major version. */
  binDir?: string;
  port: number;
  runAs?: string;
  socketDir?: string;
  /** Settings for the clone's server, e.g. its own archive_command. Archiving is off otherwise. */
  settings?: Record<string, string>;
  /** Leave the clone running (default: stop it once promoted; the driver starts it its own way). */
  keepRunning?: boolean;
  now?: Date;
}

export interface PostgresCloneResult {
  dataDir: string;
  port: number;
  running: boolean;
  recoveryTime: string | null;
  durationMs: number;
}

async function extract(archive: string, into: string): Promise<void> {
  await runCommand({ command: 'tar', args: ['-xf', archive, '-C', into] }, { failureCode: 'CLONE_FAILED' });
}

function tarOf(dir: string, base: string): string | undefined {
  return [`${base}.tar`, `${base}.tar.gz`].map((f) => path.join(dir, f)).find((f) => fs.existsSync(f));
}

export async function clonePostgres(input: PostgresCloneInput): Promise<PostgresCloneResult> {
  const started = Date.now();
  const time =
    input.recoveryTime === undefined ? undefined : parseRecoveryTime(input.recoveryTime, input.now);
  if (time && !input.walArchiveDir) {
    throw new OperationError(
      'PITR_NOT_SUPPORTED',
      'Point-in-time recovery needs a WAL archive; none is kept',
    );
  }
  if (time && time.getTime() < new Date(input.baseBackup.finishedAt).getTime()) {
    throw new OperationError(
      'RECOVERY_TIME_BEFORE_BACKUPS',
      `recovery_time ${time.toISOString()} is before the base backup finished (${input.baseBackup.finishedAt})`,
    );
  }
  const base = tarOf(input.baseBackup.dir, 'base');
  if (!base) throw new OperationError('NO_BASE_BACKUP', `No base.tar in ${input.baseBackup.dir}`);
  const dataDir = input.targetDataDir;
  if (fs.existsSync(dataDir) && fs.readdirSync(dataDir).length > 0) {
    throw new OperationError('CLONE_FAILED', `Target data directory ${dataDir} is not empty`);
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dataDir, 0o700);
  await extract(base, dataDir);
  const wal = tarOf(input.baseBackup.dir, 'pg_wal');
  if (wal) await extract(wal, path.join(dataDir, 'pg_wal'));

  const settings: Partial<Record<(typeof RECOVERY_SETTINGS)[number], string>> = {
    // The clone must never write into the source's archive.
    archive_mode: 'off',
    archive_command: '',
  };
  const archiveRecovery =
    time !== undefined || (input.walArchiveDir !== undefined && !input.baseBackup.walIncluded);
  if (archiveRecovery && input.walArchiveDir) {
    settings.restore_command = `cp "${input.walArchiveDir}/%f" "%p"`;
    settings.recovery_target_action = 'promote';
    // Without hot standby the replay does not demand max_connections etc. ≥ the source's, and pg_ctl -w
    // returns only once the clone is promoted.
    settings.hot_standby = 'off';
    // recovery_target_time has its own parser: it rejects ISO-8601's `T…Z`, so write `YYYY-MM-DD HH:MM:SS.mmm+00`.
    if (time) settings.recovery_target_time = time.toISOString().replace('T', ' ').replace('Z', '+00');
    fs.writeFileSync(path.join(dataDir, 'recovery.signal'), '');
  }
  appendAutoConf(dataDir, settings);
  await chownToServerUser(dataDir, input);

  const ref: StartOptions = {
    binDir: input.binDir ?? DEFAULT_PG_BIN_DIR,
    dataDir,
    port: input.port,
    failureCode: 'CLONE_FAILED',
    ...(input.runAs ? { runAs: input.runAs } : {}),
    ...(input.socketDir ? { socketDir: input.socketDir } : {}),
    ...(input.settings ? { settings: input.settings } : {}),
  };
  await startCluster(ref);
  // pg_ctl -w returns once the server accepts (read-only) connections; promotion comes after the replay.
  const deadline = Date.now() + 300_000;
  for (;;) {
    const state = await clusterState(ref).catch(() => 'unknown');
    // The control file says "in production" a moment before the postmaster admits connections.
    if (state === 'in production' && (await acceptsConnections(ref))) break;
    if (!(await isClusterRunning(ref)) || Date.now() > deadline) {
      await stopCluster(ref, 'immediate').catch(() => undefined);
      throw withLogTail(
        new Error(`Clone did not finish recovery (state: ${state})`),
        logFileOf(ref),
        'CLONE_FAILED',
      );
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!input.keepRunning) await stopCluster(ref);
  return {
    dataDir,
    port: input.port,
    running: input.keepRunning ?? false,
    recoveryTime: time?.toISOString() ?? null,
    durationMs: Date.now() - started,
  };
}

/**
 * The current state: a base backup taken now (with its WAL), restored into a new cluster. The backup
 * directory is kept so the caller can register it as the clone's first base backup or remove it.
 */
export async function clonePostgresNow(
  input: Omit<PostgresCloneInput, 'baseBackup' | 'recoveryTime' | 'walArchiveDir'> & {
    sourceUri: string;
    backupDir: string;
    pgBinDir?: string;
  },
): Promise<PostgresCloneResult & { backup: BaseBackupInfo }> {
  const backup = await takeBaseBackup({
    sourceUri: input.sourceUri,
    backupDir: input.backupDir,
    includeWal: true,
    ...(input.pgBinDir ? { pgBinDir: input.pgBinDir } : {}),
  });
  const result = await clonePostgres({ ...input, baseBackup: backup });
  return { ...result, backup };
}

/**
 * Makes the WAL up to now available in the archive: forces a commit record (recovery_target_time stops at
 * the first commit after the target, so one must exist after it) and switches to a new WAL segment so the
 * current one is archived. Waits until the archiver has copied it.
 */
export async function flushWalToArchive(sourceUri: string, timeoutMs = 30_000): Promise<void> {
  const spec = parseConnectionUri(sourceUri);
  await withPg(spec, 'source', async (c) => {
    await c.query('SELECT txid_current()');
    const r = await c.query<{ wal: string }>('SELECT pg_walfile_name(pg_switch_wal()) AS wal');
    const wal = r.rows[0]?.wal ?? '';
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await c.query<{ last: string | null; failed: string | null }>(
        'SELECT last_archived_wal AS last, last_failed_wal AS failed FROM pg_stat_archiver',
      );
      const last = s.rows[0]?.last ?? '';
      // WAL file names sort in LSN order within a timeline.
      if (last >= wal) return;
      if (Date.now() > deadline) {
        throw new OperationError(
          'CLONE_FAILED',
          `WAL ${wal} was not archived in time (last: ${last || 'none'})`,
        );
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  });
}

/** MariaDB clone: the current state only, by dump into the new instance. */
export async function cloneMysql(input: {
  sourceUri: string;
  targetUri: string;
  recoveryTime?: string | Date;
}): Promise<MigrationStatus> {
  if (input.recoveryTime !== undefined) {
    throw new OperationError(
      'PITR_NOT_SUPPORTED',
      'Point-in-time clones are available for PostgreSQL only; MariaDB clones copy the current state (omit recovery_time)',
    );
  }
  const source = parseConnectionUri(input.sourceUri);
  const target = parseConnectionUri(input.targetUri);
  const secrets = [source.password, target.password];
  const status = await dumpMigrate({ sourceUri: input.sourceUri, targetUri: input.targetUri });
  if (status.status === 'failed')
    throw new OperationError('CLONE_FAILED', status.error ?? 'Clone failed', secrets);
  try {
    await copyMysqlUsers(source, target);
  } catch (error) {
    throw new OperationError('CLONE_FAILED', `Copying users failed: ${errorMessage(error)}`, secrets);
  }
  return status;
}

const MYSQL_SYSTEM_USERS = new Set(['root', 'mariadb.sys', 'mysql', 'PUBLIC', '']);

/**
 * Copies accounts (with their password hashes) and grants. System accounts and the target's own admin are
 * left alone, so the clone's admin credentials stay the ones its driver set.
 */
export async function copyMysqlUsers(source: ConnectionSpec, target: ConnectionSpec): Promise<string[]> {
  const statements = await withMysql(source, 'source', async (c) => {
    const [users] = await c.query('SELECT User AS user, Host AS host FROM mysql.user WHERE is_role = ?', [
      'N',
    ]);
    const out: Array<{ account: string; sql: string[] }> = [];
    for (const { user, host } of users as Array<{ user: string; host: string }>) {
      if (MYSQL_SYSTEM_USERS.has(user) || user === target.user) continue;
      const account = `${myLiteral(user)}@${myLiteral(host)}`;
      const [create] = await c.query(`SHOW CREATE USER ${account}`);
      const [grants] = await c.query(`SHOW GRANTS FOR ${account}`);
      const first = (rows: unknown): string[] =>
        (rows as Array<Record<string, string>>).map((r) => Object.values(r)[0] ?? '');
      out.push({
        account: `${user}@${host}`,
        sql: [
          ...first(create).map((q) => q.replace(/^CREATE USER /, 'CREATE USER IF NOT EXISTS ')),
          ...first(grants),
        ],
      });
    }
    return out;
  });
  await withMysql(target, 'target', async (c) => {
    for (const { sql } of statements) for (const q of sql) await c.query(q);
  });
  return statements.map((s) => s.account);
}

const myLiteral = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
