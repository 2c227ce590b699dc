// Unprivileged system accounts for what Berth runs on behalf of tenants (database servers, dump and
// restore tools). Each account has no login shell and no home directory; names are Berth's own,
// never a tenant's input.
import { execFileSync, type ExecFileSyncOptionsWithStringEncoding } from 'node:child_process';

export const isRoot = (): boolean => process.getuid?.() === 0;

/** Berth's own account names: `berth-` followed by lowercase letters, digits and `-`, at most 32. */
const ACCOUNT_NAME = /^berth-[a-z0-9-]{1,26}$/;

export interface SystemAccount {
  name: string;
  uid: number;
  gid: number;
}

const QUIET: ExecFileSyncOptionsWithStringEncoding = {
  encoding: 'utf8',
  stdio: ['ignore', 'pipe', 'ignore'],
};

/** An existing account (Berth's or the system's own, such as `postgres`), or undefined. */
export function findAccount(name: string): SystemAccount | undefined {
  try {
    const uid = Number(execFileSync('id', ['-u', '--', name], QUIET).trim());
    const gid = Number(execFileSync('id', ['-g', '--', name], QUIET).trim());
    return { name, uid, gid };
  } catch {
    return undefined;
  }
}

const known = new Map<string, SystemAccount>();

/**
 * Berth's accounts take their ids from a range of their own, not the distribution's system range
 * (100-999), which a platform with a few hundred databases and applications would exhaust and which
 * the distribution's own packages need. Below 2^21 (what a ustar archive can record).
 */
export const ACCOUNT_ID_RANGE = { min: 300_000, max: 399_999 } as const;
const ID_RANGE_OPTIONS = ['SYS_UID_MIN', 'SYS_GID_MIN', 'SYS_UID_MAX', 'SYS_GID_MAX'].flatMap((key) => [
  '-K',
  `${key}=${key.endsWith('MIN') ? ACCOUNT_ID_RANGE.min : ACCOUNT_ID_RANGE.max}`,
]);

/**
 * Accounts of a role rather than of one tenant's instance: every Berth process on the host shares them
 * (`berth-ops` runs the dump and restore tools, `berth-office` LibreOffice, `berth-edge` HAProxy once
 * it has bound its ports), and they are never removed.
 */
export const SHARED_ACCOUNTS = { tools: 'berth-ops', office: 'berth-office', edge: 'berth-edge' } as const;
const shared = new Set<string>(Object.values(SHARED_ACCOUNTS));

/**
 * The per-instance accounts this process created and has not removed (the test suite removes them
 * after each file). Shared accounts are left out: another process may be using them.
 */
const created = new Set<string>();
export const accountsCreatedHere = (): string[] => [...created];

/**
 * The system account `name`, created (with its own group) when missing. Only root can create one;
 * when Berth does not run as root this throws, and callers run things as Berth's own user instead.
 */
export function ensureSystemAccount(name: string): SystemAccount {
  if (!ACCOUNT_NAME.test(name)) throw new Error(`invalid system account name '${name}'`);
  const cached = known.get(name);
  if (cached) return cached;
  let account = findAccount(name);
  if (!account) {
    if (!isRoot()) throw new Error(`system account '${name}' is missing and Berth is not root`);
    try {
      execFileSync(
        'useradd',
        [
          '--system',
          '--user-group',
          '--no-create-home',
          '--home-dir',
          '/nonexistent',
          '--shell',
          '/usr/sbin/nologin',
          ...ID_RANGE_OPTIONS,
          '--',
          name,
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      if (!shared.has(name)) created.add(name);
    } catch (error) {
      // Another Berth process may have created it between the look-up and useradd.
      if (!findAccount(name)) throw error;
    }
    account = findAccount(name);
    if (!account) throw new Error(`system account '${name}' could not be created`);
  }
  known.set(name, account);
  return account;
}

/** Forgets a remembered account (it is being deleted; one made later under the name gets a new uid). */
export function forgetSystemAccount(name: string): void {
  known.delete(name);
}

/**
 * Deletes one of Berth's accounts and its group, and forgets it; nothing happens when it is missing.
 * Call it once nothing runs as it (userdel refuses a user that runs something) and its files are gone:
 * a later account may receive the same uid.
 */
export function removeSystemAccount(name: string): void {
  if (!ACCOUNT_NAME.test(name)) throw new Error(`not an account name of Berth's: '${name}'`);
  forgetSystemAccount(name);
  created.delete(name);
  if (!findAccount(name)) return;
  execFileSync('userdel', ['--', name], { stdio: ['ignore', 'ignore', 'pipe'] });
}

export const SETPRIV_PATH = '/usr/bin/setpriv';

/**
 * The command prefix that runs the rest of argv as `account`: its uid and gid, no groups, no
 * capabilities (inheritable or bounding), no_new_privs.
 */
export function dropPrivileges(account: { uid: number; gid: number }): string[] {
  for (const id of [account.uid, account.gid]) {
    // Root would keep everything the drop is for.
    if (!Number.isSafeInteger(id) || id < 1) throw new Error(`invalid sandbox account id ${id}`);
  }
  return [
    SETPRIV_PATH,
    `--reuid=${account.uid}`,
    `--regid=${account.gid}`,
    '--clear-groups',
    '--inh-caps=-all',
    '--bounding-set=-all',
    '--no-new-privs',
    '--',
  ];
}
