// The hold a backup puts on object files (src/drivers/objectstorage/local/files.ts): while the backup
// that made it runs, a removed object file moves into the hold, readable where the backup looks for
// it; a hold whose backup is gone, even one whose pid another process has since, holds nothing.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createObjectFiles,
  heldOrPlacedObjectFile,
  holdObjectRemovals,
} from '../../src/drivers/objectstorage/local/files.js';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-hold-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** An object file placed as a PUT places it; its name relative to the objects directory. */
async function placed(files: ReturnType<typeof createObjectFiles>, body: string): Promise<string> {
  const temp = await files.temp();
  fs.writeFileSync(temp, body);
  return files.place(temp, 'data', 7);
}

describe('the backup hold on object files', () => {
  it('moves removed files into a live backup’s hold, and removes them again once that backup is gone', async () => {
    const files = createObjectFiles(dataDir);
    const release = await holdObjectRemovals(dataDir);
    const kept = await placed(files, 'kept for the backup');
    await files.remove(kept);
    expect(fs.existsSync(files.absolute(kept))).toBe(false);
    const held = await heldOrPlacedObjectFile(dataDir, kept);
    expect(held && fs.readFileSync(held, 'utf8')).toBe('kept for the backup');

    // The owner file names this process with another start time: a backup that died, its pid reused.
    const owner = path.join(dataDir, 'objects', 'backup-hold', 'owner');
    expect(fs.readFileSync(owner, 'utf8')).toMatch(new RegExp(`^${process.pid} \\d+$`));
    fs.writeFileSync(owner, `${process.pid} 1`);
    const gone = await placed(files, 'removed for good');
    await files.remove(gone);
    expect(await heldOrPlacedObjectFile(dataDir, gone)).toBeUndefined();
    await release();
    expect(fs.existsSync(path.join(dataDir, 'objects', 'backup-hold'))).toBe(false);
  });
});
