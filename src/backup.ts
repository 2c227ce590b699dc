// `berth admin backup` and `berth admin restore` (issue 31, docs/operations.md "Backup and restore"):
// the whole platform of one data dir, taken while Berth serves and put back on a fresh machine. Like
// lifecycle.ts it spans every family: the store (src/db/snapshot.ts), the secret key (sealed with the
// operator's passphrase), the managed databases and applications' database services (their drivers'
// dumps), the object bytes the store names, and the data dir's applications' releases, sources and
// volumes, artifacts and services' files (src/drivers/backup/files.ts), into a content-addressed
// target (src/drivers/backup/).
import os from 'node:os';
import path from 'node:path';
import { mkdirSync, readFileSync } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import type { Config } from './config/index.js';
import type { AppContext } from './context.js';
import { openStore } from './db/connect.js';
import { readSnapshot, storeIsEmpty, writeSnapshot, type Row, type StoreSnapshot } from './db/snapshot.js';
import { loadOrCreateMasterKey } from './crypto/secret-box.js';
import { sealWithPassphrase, unsealWithPassphrase, type SealedSecret } from './crypto/passphrase-seal.js';
import { createDirectoryTarget } from './drivers/backup/dir.js';
import { heldOrPlacedObjectFile, holdObjectRemovals } from './drivers/objectstorage/local/files.js';
import {
  human,
  MANIFEST_FORMAT,
  previousManifest,
  verifiedManifest,
  type Manifest,
  type Progress,
} from './backup-manifest.js';
import { createS3Target } from './drivers/backup/s3.js';
import { pauseApplication } from './drivers/runtime/local/pause.js';
import type { BackupTarget } from './drivers/backup/types.js';
import {
  dataDirEntries,
  makeStagingDir,
  readFile,
  removeFile,
  removeTree,
  restoreEntry,
  stageBuffer,
  stageFile,
  writeFile,
  type FileEntry,
} from './drivers/backup/files.js';

/** File times move in coarse ticks: a file changed this long before a copy began counts as changed. */
const CHANGE_MARGIN_MS = 2_000;

export { MANIFEST_FORMAT, type Manifest, type Progress };

const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** A directory, or `s3://bucket/prefix` with the endpoint and credential of BERTH_S3_UPSTREAM_*. */
export function backupTarget(config: Config, to: string): BackupTarget {
  if (to.startsWith('s3://')) {
    const s3 = config.backupS3;
    if (!s3)
      throw new Error(
        `an s3:// backup target needs BERTH_S3_UPSTREAM_URL, BERTH_S3_UPSTREAM_ACCESS_KEY_ID and BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY (the bucket is the URL's)`,
      );
    return createS3Target(to, s3);
  }
  if (!path.isAbsolute(to) && !to.startsWith('.'))
    throw new Error(`--to must be a directory path or s3://bucket/prefix, got '${to}'`);
  return createDirectoryTarget(to);
}

/**
 * Takes a backup of the context's data dir and store into `target`. Throws (and writes no manifest)
 * on any failure, saying what failed; the manifest is written last.
 */
export async function runBackup(
  ctx: AppContext,
  target: BackupTarget,
  passphrase: string,
  progress: Progress = () => undefined,
): Promise<Manifest> {
  if (passphrase === '') throw new Error('the backup passphrase is empty: refused');
  const { dataDir } = ctx.config;
  const staging = makeStagingDir(path.join(os.tmpdir(), 'berth-backups'));
  const previous = await previousManifest(target);
  // Blobs a complete earlier backup wrote are there: unchanged files are not looked up again.
  const known = new Set(previous?.files.flatMap((f) => (f.kind === 'file' ? [f.sha256] : [])) ?? []);
  const before = new Map(
    previous?.files.flatMap((f) => (f.kind === 'file' ? [[f.path, f] as const] : [])) ?? [],
  );
  const files: FileEntry[] = [];
  const stats = { files: 0, bytes: 0, copied_files: 0, copied_bytes: 0 };
  /** Keeps a staged file as its blob unless the target has it; records the entry. */
  const keep = async (
    entryPath: string,
    staged: { staged: string; sha256: string; size: number },
    mode = 0o600,
    mtime = Date.now(),
  ) => {
    try {
      if (!known.has(staged.sha256) && !(await target.hasBlob(staged.sha256))) {
        await target.putBlob(staged.sha256, staged.staged);
        stats.copied_files++;
        stats.copied_bytes += staged.size;
      }
      known.add(staged.sha256);
    } finally {
      await removeFile(staged.staged);
    }
    stats.files++;
    stats.bytes += staged.size;
    files.push({ path: entryPath, kind: 'file', size: staged.size, sha256: staged.sha256, mode, mtime });
  };
  /** A data-dir file: not read again when its size and time are those of the last backup. */
  const keepDataFile = async (
    relative: string,
    stat: { size: number; mode: number; mtimeMs: number },
    from = path.join(dataDir, relative),
  ) => {
    const entryPath = `data/${relative.split(path.sep).join('/')}`;
    const { size, mtimeMs: mtime } = stat;
    const mode = stat.mode & 0o7777;
    const earlier = before.get(entryPath);
    if (earlier && earlier.kind === 'file' && earlier.size === size && earlier.mtime === mtime) {
      stats.files++;
      stats.bytes += size;
      files.push({ ...earlier, mode });
      return true;
    }
    const staged = await stageFile(from, staging);
    if (!staged) return false;
    await keep(entryPath, staged, mode, mtime);
    return true;
  };
  const entryPathOf = (relative: string) => `data/${relative.split(path.sep).join('/')}`;
  /** A directory, link or file of the data dir, recorded; true for a file kept. */
  const keepDataEntry = async (entry: {
    relative: string;
    stat: { size: number; mode: number; mtimeMs: number };
    kind: 'file' | 'link' | 'dir';
  }): Promise<boolean> => {
    const entryPath = entryPathOf(entry.relative);
    if (entry.kind === 'dir') files.push({ path: entryPath, kind: 'dir', mode: entry.stat.mode & 0o7777 });
    else if (entry.kind === 'link')
      files.push({
        path: entryPath,
        kind: 'link',
        target: await readLink(path.join(dataDir, entry.relative)),
      });
    else return keepDataFile(entry.relative, entry.stat);
    return false;
  };
  /**
   * The volumes of application `appId` read again while it is paused: each file changed since `since`
   * (or not seen before), and what was added or removed; the rest keeps what 4 read.
   */
  const copyVolumesAgain = async (appId: number, since: number) => {
    const prefix = `data/apps/${appId}/volumes/`;
    const first = new Map<string, FileEntry>();
    for (const entry of files.filter((f) => f.path.startsWith(prefix))) {
      first.set(entry.path, entry);
      if (entry.kind === 'file') {
        stats.files--;
        stats.bytes -= entry.size;
      }
    }
    let kept = 0;
    for (const entry of files) if (!entry.path.startsWith(prefix)) files[kept++] = entry;
    files.length = kept;
    const paused =
      ctx.config.drivers.runtime === 'local'
        ? await pauseApplication(dataDir, appId)
        : { reason: 'its runtime keeps no volumes here' };
    // A backup stopped by a signal while the application is paused lets it go first. In `berth admin
    // backup` the signal is then raised again, to end the process as it would have; in a serving Berth
    // (scheduled backups) its own handler stops it.
    const onSignal = (signal: NodeJS.Signals) => {
      if ('resumeSync' in paused) paused.resumeSync();
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    };
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    for (const signal of signals) process.once(signal, onSignal);
    const started = performance.now();
    let again = 0;
    let againBytes = 0;
    try {
      for await (const entry of dataDirEntries(dataDir, path.join('apps', String(appId), 'volumes'))) {
        const earlier = first.get(entryPathOf(entry.relative));
        const unchanged =
          entry.kind === 'file' &&
          earlier?.kind === 'file' &&
          entry.stat.ctimeMs < since &&
          earlier.size === entry.stat.size &&
          earlier.mtime === entry.stat.mtimeMs;
        if (unchanged) {
          files.push({ ...earlier, mode: entry.stat.mode & 0o7777 });
          stats.files++;
          stats.bytes += earlier.size;
        } else if (await keepDataEntry(entry)) {
          again++;
          againBytes += entry.stat.size;
        }
      }
    } finally {
      for (const signal of signals) process.off(signal, onSignal);
      if ('resume' in paused) await paused.resume();
    }
    const took = ((performance.now() - started) / 1000).toFixed(2);
    progress(
      'resume' in paused
        ? `volumes of application ${appId}: paused ${took} s to read again ${again} files written meanwhile (${human(againBytes)})`
        : `volumes of application ${appId}: read again ${again} files written meanwhile (${human(againBytes)}), not paused: ${paused.reason}`,
    );
  };
  try {
    // 1. The store, in one transaction, then the object files it names. Removals of object files
    // are held meanwhile (a file replaced after the snapshot is still the snapshot's to copy).
    const releaseHold =
      ctx.config.drivers.objectStorage === 'local' ? await holdObjectRemovals(dataDir) : undefined;
    let snapshot: StoreSnapshot;
    try {
      const named: string[] = [];
      let rows = 0;
      snapshot = await readSnapshot(ctx.db, ctx.store.dialect, async (table, tableRows) => {
        rows += tableRows.length;
        await keep(`store/${table}.json`, await stageBuffer(Buffer.from(JSON.stringify(tableRows)), staging));
        if (table === 's3_objects' || table === 's3_upload_parts')
          for (const row of tableRows) if (typeof row.file === 'string') named.push(row.file);
      });
      progress(`store: ${snapshot.tables.length} tables, ${rows} rows (migration ${snapshot.migration})`);
      const objectsBefore = stats.bytes;
      for (const file of releaseHold ? named : []) {
        const relative = path.normalize(file);
        if (relative.startsWith('..') || path.isAbsolute(relative))
          throw new Error(`the store names an object file outside the objects directory: ${file}`);
        const at = await heldOrPlacedObjectFile(dataDir, relative);
        const stat = at === undefined ? undefined : await statOf(at);
        if (
          at === undefined ||
          stat === undefined ||
          !(await keepDataFile(path.join('objects', relative), stat, at))
        )
          throw new Error(`the object file ${file} the store names is missing from ${dataDir}/objects`);
      }
      progress(`objects: ${releaseHold ? named.length : 0} files, ${human(stats.bytes - objectsBefore)}`);
    } finally {
      await releaseHold?.();
    }
    // 2. The secret key, sealed.
    const key = loadOrCreateMasterKey(dataDir, ctx.config.secretKey);
    const sealed = await sealWithPassphrase(key, passphrase);
    await keep('key.sealed', await stageBuffer(Buffer.from(JSON.stringify(sealed)), staging));
    progress('key: sealed with the passphrase');
    // 3. Managed databases and applications' database services, dumped while they serve.
    const dumps = makeStagingDir(staging);
    const dumpDir = (kind: string) => (uuid: string) => {
      const dir = path.join(dumps, kind, uuid);
      return (mkdirSyncSafe(dir), dir);
    };
    const keepDumps = async (kind: string, what: string, uuid: string, written: string[]) => {
      let size = 0;
      for (const file of written) {
        const staged = await stageFile(file, staging);
        if (!staged) throw new Error(`the dump ${file} of ${what} ${uuid} disappeared`);
        size += staged.size;
        await keep(`${kind}/${uuid}/${path.basename(file)}`, staged);
      }
      progress(`${what} ${uuid}: ${written.length} dump files, ${human(size)}`);
    };
    const { exported } = await ctx.services.managedDatabases.exportData(dumpDir('databases'));
    for (const { uuid, files: written } of exported) await keepDumps('databases', 'database', uuid, written);
    const services = await ctx.services.appServices.exportData(dumpDir('app-services'));
    for (const { uuid, files: written } of services.exported)
      await keepDumps('app-services', 'service', uuid, written);
    // 4. The data dir: releases, sources, volumes, artifacts, services' files. A file changed from
    // shortly before this moment on may have been read while it was written; applications' volumes
    // are read again in 5. (The margin: file times move in coarse ticks.)
    const copyStarted = Date.now() - CHANGE_MARGIN_MS;
    const withVolumes = new Set<number>();
    let count = 0;
    const dataBefore = stats.bytes;
    for await (const entry of dataDirEntries(dataDir)) {
      const volumeOf = /^data\/apps\/(\d+)\/volumes\//.exec(entryPathOf(entry.relative));
      if (volumeOf) withVolumes.add(Number(volumeOf[1]));
      if (await keepDataEntry(entry)) {
        count++;
        if (count % 1000 === 0) progress(`files: ${count} so far, ${human(stats.bytes - dataBefore)}`);
      }
    }
    progress(`files: ${count} (releases, sources, volumes, artifacts), ${human(stats.bytes - dataBefore)}`);
    // 5. Each application's volumes once more, the application paused (src/drivers/runtime/local/
    // pause.ts): what was written during 4 is read again, so the copy is the volume at one moment.
    for (const appId of withVolumes) await copyVolumesAgain(appId, copyStarted);
    const manifest: Manifest = {
      format: MANIFEST_FORMAT,
      berth_version: VERSION,
      created_at: new Date().toISOString(),
      store: snapshot,
      databases: { exported: exported.map((e) => e.uuid) },
      services: { exported: services.exported.map((e) => e.uuid) },
      files,
      stats,
    };
    await target.writeManifest(Buffer.from(JSON.stringify(manifest, null, 1)));
    progress(
      `done: ${stats.files} files, ${human(stats.bytes)}; copied ${stats.copied_files} files, ${human(stats.copied_bytes)} (the rest was already in ${target.description})`,
    );
    return manifest;
  } finally {
    await removeTree(staging);
  }
}

// Small file-system helpers (this module is an entry point's, like lifecycle.ts).
const statOf = (file: string) =>
  lstat(file).then(
    (s) => (s.isFile() ? s : undefined),
    () => undefined,
  );
const readLink = (file: string) => readlink(file);
const mkdirSyncSafe = (dir: string) => mkdirSync(dir, { recursive: true, mode: 0o700 });

/**
 * The part of a restore before Berth can open its context: checks every file, unseals the key,
 * refuses a data dir or store that is not empty, writes the key, the store's rows and the data dir's
 * files. Returns the manifest and where the fetched blobs wait (the databases' dumps are loaded
 * through the context next, by restoreDatabases).
 */
export async function restoreFoundation(
  config: Config,
  target: BackupTarget,
  passphrase: string,
  progress: Progress = () => undefined,
): Promise<{ manifest: Manifest; staging: string }> {
  const staging = makeStagingDir(path.join(config.dataDir, '..'));
  try {
    const manifest = await verifiedManifest(target, staging, progress);
    const blob = (entryPath: string) => {
      const entry = manifest.files.find((f) => f.path === entryPath);
      if (!entry || entry.kind !== 'file') throw new Error(`the backup has no ${entryPath}`);
      return path.join(staging, entry.sha256);
    };
    const sealed = JSON.parse((await readFile(blob('key.sealed'))).toString('utf8')) as SealedSecret;
    const key = await unsealWithPassphrase(sealed, passphrase);
    progress('key: unsealed');
    for (const name of ['berth.sqlite', 'secret.key'])
      if (await statOf(path.join(config.dataDir, name)))
        throw new Error(
          `${config.dataDir} is not a fresh data dir (it has ${name}): restore into an empty one`,
        );
    if (config.secretKey !== undefined) {
      if (!loadOrCreateMasterKey(config.dataDir, config.secretKey).equals(key))
        throw new Error(
          "BERTH_SECRET_KEY is set and is not the backup's key: unset it, or set it to the key the backup was made with",
        );
    } else {
      await writeFile(path.join(config.dataDir, 'secret.key'), key.toString('hex') + '\n');
    }
    const store = await openStore({
      databaseUrl: config.databaseUrl,
      sqlitePath: path.join(config.dataDir, 'berth.sqlite'),
      migrate: false,
    });
    try {
      if (!(await storeIsEmpty(store.db, store.dialect)))
        throw new Error('the store is not empty: restore into an empty store');
      if (manifest.store.dialect !== store.dialect)
        progress(`store: ${manifest.store.dialect} rows into a ${store.dialect} store`);
      await writeSnapshot(
        store.db,
        store.dialect,
        manifest.store,
        async (table) => JSON.parse((await readFile(blob(`store/${table}.json`))).toString('utf8')) as Row[],
      );
    } finally {
      await store.close();
    }
    progress(`store: ${manifest.store.tables.length} tables restored`);
    let count = 0;
    for (const entry of manifest.files) {
      if (!entry.path.startsWith('data/')) continue;
      const at = { ...entry, path: entry.path.slice('data/'.length) };
      await restoreEntry(
        config.dataDir,
        at,
        entry.kind === 'file' ? path.join(staging, entry.sha256) : undefined,
      );
      if (entry.kind === 'file') count++;
    }
    progress(`files: ${count} restored (objects, releases, sources, volumes, artifacts)`);
    return { manifest, staging };
  } catch (error) {
    await removeTree(staging);
    throw error;
  }
}

/**
 * The rest of a restore, through the context: each managed database and each application's database
 * service provisioned and its dump loaded.
 */
export async function restoreDatabases(
  ctx: AppContext,
  restored: { manifest: Manifest; staging: string },
  progress: Progress = () => undefined,
): Promise<void> {
  const { manifest, staging } = restored;
  /** The dump files of `<kind>/<uuid>/`, put in a directory of their own. */
  const dumpsOf = async (kind: string, uuid: string): Promise<string> => {
    const dir = path.join(staging, kind, uuid);
    mkdirSyncSafe(dir);
    for (const entry of manifest.files) {
      if (entry.kind !== 'file' || !entry.path.startsWith(`${kind}/${uuid}/`)) continue;
      await restoreEntry(
        dir,
        { ...entry, path: path.basename(entry.path) },
        path.join(staging, entry.sha256),
      );
    }
    return dir;
  };
  try {
    for (const uuid of manifest.databases.exported) {
      await ctx.services.managedDatabases.importData(uuid, await dumpsOf('databases', uuid));
      progress(`database ${uuid}: restored`);
    }
    for (const uuid of manifest.services?.exported ?? []) {
      await ctx.services.appServices.importData(uuid, await dumpsOf('app-services', uuid));
      progress(`service ${uuid}: restored`);
    }
  } finally {
    await removeTree(staging);
  }
}

/** When the next scheduled backup is due after `now`. */
export function nextBackupAt(schedule: NonNullable<Config['backup']>['schedule'], now: Date): Date {
  if ('everyMinutes' in schedule) return new Date(now.getTime() + schedule.everyMinutes * 60_000);
  const next = new Date(now);
  next.setUTCHours(schedule.dailyAt.hour, schedule.dailyAt.minute, 0, 0);
  if (next.getTime() <= now.getTime()) next.setUTCDate(next.getUTCDate() + 1);
  return next;
}

/**
 * BERTH_BACKUP_SCHEDULE in a serving Berth: a backup to BERTH_BACKUP_TO at each time it names, one at a
 * time, its progress and outcome in the log. A failed run is logged and the next one is taken as planned.
 */
export function startBackupSchedule(ctx: AppContext): { stop(): Promise<void> } | undefined {
  const settings = ctx.config.backup;
  if (!settings) return undefined;
  const log = ctx.logger.child({ component: 'backup' });
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const plan = () => {
    if (stopped) return;
    const at = nextBackupAt(settings.schedule, new Date());
    log.info({ at: at.toISOString(), to: settings.to }, 'next scheduled backup');
    timer = setTimeout(() => {
      running = runBackup(ctx, backupTarget(ctx.config, settings.to), settings.passphrase, (line) =>
        log.info(line),
      )
        .then(
          (manifest) => log.info({ ...manifest.stats }, 'scheduled backup finished'),
          (error: unknown) => log.error({ err: error }, 'scheduled backup failed'),
        )
        .finally(plan);
    }, at.getTime() - Date.now());
    timer.unref();
  };
  plan();
  return {
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
