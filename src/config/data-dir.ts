// The data directory's permissions, checked and repaired at start (issue 11, item 15). It holds the
// store, the master key and bootstrap credentials: no other OS user may read it. The data dir itself
// may keep the search bit for others (0711, set by ensureTraversable): managed-database instances run
// as their own OS users under <dataDir>/databases and must traverse it; they cannot list it, and every
// file and other directory in it is the owner's alone. <dataDir>/databases is left to its driver.
import fs from 'node:fs';
import path from 'node:path';

/** Left to their drivers: managed-database instances and applications run as their own OS users, under
 * directories the driver gives them; `runtimes` holds language runtimes those users read. */
const DRIVER_OWNED = new Set(['databases', 'apps', 'runtimes']);

export interface ModeChange {
  path: string;
  from: string;
  to: string;
}

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, '0');

function restrict(file: string, keep: number, changes: ModeChange[]): void {
  const mode = fs.lstatSync(file).mode & 0o777;
  const wanted = mode & keep;
  if (wanted === mode) return;
  fs.chmodSync(file, wanted);
  changes.push({ path: file, from: octal(mode), to: octal(wanted) });
}

/**
 * Creates the data dir 0700 if missing; takes read and write from group and others on it (search
 * stays, see above), and every permission from group and others on the files and directories at its
 * top level but the driver-owned ones. Returns what it changed, for the log.
 */
export function secureDataDir(dataDir: string): ModeChange[] {
  const changes: ModeChange[] = [];
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  restrict(dataDir, 0o711, changes);
  // The top level only: a directory of 0700 hides what is below it, and a start stays one readdir
  // however many objects or files the directories hold.
  for (const entry of fs.readdirSync(dataDir, { withFileTypes: true })) {
    if (DRIVER_OWNED.has(entry.name) || entry.isSymbolicLink()) continue;
    restrict(path.join(dataDir, entry.name), 0o700, changes);
  }
  return changes;
}
