// Where backups are kept (issue 31): a directory, or a prefix of an S3 bucket. Content-addressed: a
// file's bytes are kept once under their SHA-256 (`blobs/<aa>/<sha256>`) whatever its name, so a
// second backup to the same place writes only what changed; `manifest.json` names every file of one
// backup with its size and SHA-256, and is written last, only when everything else is in place.

export interface BackupTarget {
  /** For messages: the directory or the s3:// URL. */
  readonly description: string;
  /** Whether the blob is already kept (then it is not written again). */
  hasBlob(sha256: string): Promise<boolean>;
  /** Keeps a local file's bytes as the blob `sha256` (written whole or not at all). */
  putBlob(sha256: string, file: string): Promise<void>;
  /** Writes the blob's bytes to the local file `to`. */
  getBlob(sha256: string, to: string): Promise<void>;
  /** The manifest's bytes, or undefined when the target has none (no complete backup). */
  readManifest(): Promise<Buffer | undefined>;
  /** Replaces the manifest (atomically where the target allows). */
  writeManifest(data: Buffer): Promise<void>;
}

export const MANIFEST = 'manifest.json';

/** What a blob of `sha256` is called under the target's root. */
export const blobPath = (sha256: string): string => {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a SHA-256: ${sha256}`);
  return `blobs/${sha256.slice(0, 2)}/${sha256}`;
};
