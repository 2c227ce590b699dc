// A backup target that is a directory on this host (a mounted disk, a network share).
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { blobPath, MANIFEST, type BackupTarget } from './types.js';

async function durableCopy(from: string, to: string): Promise<void> {
  await fs.promises.mkdir(path.dirname(to), { recursive: true, mode: 0o700 });
  const temp = `${to}.tmp-${randomBytes(6).toString('hex')}`;
  try {
    await fs.promises.copyFile(from, temp);
    const handle = await fs.promises.open(temp, 'r+');
    await handle.datasync().finally(() => handle.close());
    await fs.promises.rename(temp, to);
  } finally {
    await fs.promises.rm(temp, { force: true });
  }
}

export function createDirectoryTarget(dir: string): BackupTarget {
  const root = path.resolve(dir);
  fs.mkdirSync(root, { recursive: true, mode: 0o700 });
  return {
    description: root,
    hasBlob: (sha256) =>
      fs.promises.stat(path.join(root, blobPath(sha256))).then(
        () => true,
        () => false,
      ),
    putBlob: (sha256, file) => durableCopy(file, path.join(root, blobPath(sha256))),
    getBlob: (sha256, to) => fs.promises.copyFile(path.join(root, blobPath(sha256)), to),
    async readManifest() {
      try {
        return await fs.promises.readFile(path.join(root, MANIFEST));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw error;
      }
    },
    async writeManifest(data) {
      const temp = path.join(root, `${MANIFEST}.tmp`);
      await fs.promises.writeFile(temp, data, { mode: 0o600 });
      await durableCopy(temp, path.join(root, MANIFEST));
      await fs.promises.rm(temp, { force: true });
    },
  };
}
