// Who an instance is to the operating system and to its own server. Each instance runs as an OS
// account of its own, so that a server-side escape (a COPY … PROGRAM, a LOAD DATA INFILE) reaches that
// tenant's files only; and each server has a maintenance account that Berth alone uses (upgrades,
// clones, backups, users), so that the admin a team receives needs no superuser rights.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ensureSystemAccount, findAccount, isRoot, removeSystemAccount } from '../../os/users.js';
import { run } from './process.js';

/** The server-side account Berth keeps for itself in every instance; never handed out. */
export const MAINTENANCE_USER = 'berth_maint';

const INSTANCE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * The OS account of the instance at `root` (`berth-db-<20 hex of its uuid>`), created when missing;
 * `fallback` for templates and other directories that hold no tenant's data. Undefined unless root.
 */
export function instanceAccount(root: string, fallback: string | undefined): string | undefined {
  if (!isRoot()) return undefined;
  const id = path.basename(root);
  if (!INSTANCE_ID.test(id)) return fallback;
  const name = instanceAccountName(id);
  ensureSystemAccount(name);
  return name;
}

const instanceAccountName = (id: string): string => `berth-db-${id.replace(/-/g, '').slice(0, 20)}`;

/** Deletes the OS account of instance `id` (its server stopped, its files gone); none when not root. */
export function removeInstanceAccount(id: string): void {
  if (isRoot() && INSTANCE_ID.test(id)) removeSystemAccount(instanceAccountName(id));
}

/**
 * Hands the instance's files to its account and closes them to everyone else (0700), when they are
 * not its yet: a copy of a template, or an instance made before instances had accounts of their own.
 */
export async function ownInstance(root: string, account: string | undefined): Promise<void> {
  if (!account) return;
  const uid = (account.startsWith('berth-') ? ensureSystemAccount(account) : findAccount(account))?.uid;
  if (uid === undefined) throw new Error(`no OS account '${account}'`);
  if (fs.statSync(root).uid !== uid) await run('chown', ['-R', `${account}:${account}`, '--', root]);
  fs.chmodSync(root, 0o700);
}

/**
 * Beside the instances, not in them: the instance's own OS account owns its directory, and must not
 * read the password of the account that can undo its confinement. Root only (0700 / 0600).
 */
export const maintenanceFile = (root: string): string =>
  path.join(path.dirname(root), '.maintenance', path.basename(root));

/** The maintenance account's password of the instance at `root`, made once (0600). */
export function maintenancePassword(root: string): string {
  const file = maintenanceFile(root);
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const password = randomBytes(24).toString('base64url');
  fs.writeFileSync(file, password, { mode: 0o600, flag: 'wx' });
  return password;
}

/** The maintenance password when it was made already (a copied instance has none yet). */
export function existingMaintenancePassword(root: string): string | undefined {
  try {
    return fs.readFileSync(maintenanceFile(root), 'utf8');
  } catch {
    return undefined;
  }
}
