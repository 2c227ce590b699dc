// A built release on its way to the cluster: the release directory packed as a tar.gz into the artifact
// store, with its SHA-256 (which the pods' fetch checks before unpacking; decision 0013).
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { PassThrough } from 'node:stream';
import type { ArtifactStore } from '../../artifacts/types.js';

/** Largest release archive (a release carries its node_modules or vendor). */
const RELEASE_MAX_BYTES = 4 * 1024 ** 3;

/** The SHA-256 of the artifact under `key`, or undefined when there is none. */
export async function hashArtifact(artifacts: ArtifactStore, key: string): Promise<string | undefined> {
  const body = await artifacts.open(key);
  if (!body) return undefined;
  const hash = createHash('sha256');
  for await (const chunk of body) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Packs `dir` into the store under `key`, whole or not at all. */
export async function packRelease(
  artifacts: ArtifactStore,
  key: string,
  dir: string,
): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  // `dir` is the builder's own path for a release name Berth chose; nothing of a request reaches tar.
  const tar = spawn('tar', ['-czf', '-', '-C', dir, '.'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  tar.stderr.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  const exited = new Promise<number | null>((resolve) => tar.on('close', resolve));
  const body = new PassThrough();
  tar.stdout.on('data', (chunk: Buffer) => hash.update(chunk));
  tar.stdout.pipe(body);
  const failed = (): Error => new Error(`packing the release failed: ${stderr.trim()}`);
  // tar's failure after its last byte would otherwise leave a truncated archive in the store.
  void exited.then((code) => {
    if (code !== 0) body.destroy(failed());
  });
  const info = await artifacts.put(key, body, { maxBytes: RELEASE_MAX_BYTES });
  if ((await exited) !== 0) {
    await artifacts.remove(key);
    throw failed();
  }
  return { sha256: hash.digest('hex'), size: info.size };
}
