// A backup's manifest (`manifest.json`, written last): what `berth admin backup` recorded and `berth
// admin restore` reads back, every blob checked against its SHA-256 first.
import path from 'node:path';
import type { StoreSnapshot } from './db/snapshot.js';
import { hashFile, type FileEntry } from './drivers/backup/files.js';
import { MANIFEST, type BackupTarget } from './drivers/backup/types.js';

export const MANIFEST_FORMAT = 1;

export interface Manifest {
  format: number;
  berth_version: string;
  created_at: string;
  store: StoreSnapshot;
  /** Managed databases whose dumps are in `files` (under databases/<uuid>/), powered-off ones too. */
  databases: { exported: string[] };
  /**
   * Applications' database services (their instances' uuids) whose dumps are in `files` (under
   * app-services/<uuid>/); absent from backups of earlier Berths.
   */
  services?: { exported: string[] };
  /**
   * Every file of the backup: `key.sealed`, `store/<table>.json`, `databases/…`, `app-services/…`,
   * `data/…` (the data dir's).
   */
  files: FileEntry[];
  stats: { files: number; bytes: number; copied_files: number; copied_bytes: number };
}

export type Progress = (line: string) => void;

export const human = (bytes: number): string =>
  bytes >= 1 << 30
    ? `${(bytes / (1 << 30)).toFixed(1)} GiB`
    : bytes >= 1 << 20
      ? `${(bytes / (1 << 20)).toFixed(1)} MiB`
      : `${(bytes / 1024).toFixed(1)} KiB`;

export async function previousManifest(target: BackupTarget): Promise<Manifest | undefined> {
  const data = await target.readManifest().catch(() => undefined);
  if (!data) return undefined;
  try {
    const manifest = JSON.parse(data.toString('utf8')) as Manifest;
    return manifest.format === MANIFEST_FORMAT ? manifest : undefined;
  } catch {
    return undefined;
  }
}

/** The manifest of `target`, every blob checked against its SHA-256 (the first that is not, named). */
export async function verifiedManifest(
  target: BackupTarget,
  staging: string,
  progress: Progress,
): Promise<Manifest> {
  const data = await target.readManifest();
  if (!data) throw new Error(`${target.description} holds no ${MANIFEST}: no complete backup there`);
  let manifest: Manifest;
  try {
    manifest = JSON.parse(data.toString('utf8')) as Manifest;
  } catch {
    throw new Error(`${target.description}/${MANIFEST} is not JSON`);
  }
  if (manifest.format !== MANIFEST_FORMAT)
    throw new Error(`unknown backup format ${String(manifest.format)}`);
  const checked = new Map<string, string>();
  for (const entry of manifest.files) {
    if (entry.kind !== 'file' || checked.has(entry.sha256)) continue;
    const local = path.join(staging, entry.sha256);
    try {
      await target.getBlob(entry.sha256, local);
    } catch (error) {
      throw new Error(`${entry.path}: its bytes are missing from the backup (${(error as Error).message})`);
    }
    if ((await hashFile(local)) !== entry.sha256)
      throw new Error(
        `${entry.path}: its bytes do not match the manifest's SHA-256: the backup was altered or damaged`,
      );
    checked.set(entry.sha256, local);
  }
  progress(`verified: ${checked.size} files match their SHA-256 (${human(manifest.stats.bytes)})`);
  return manifest;
}
