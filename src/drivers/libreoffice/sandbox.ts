// The jail LibreOffice runs in (issue 11, item 3). A document can link images, OLE objects and other
// documents by URL (`http://…`, `file:///etc/passwd`); LibreOffice resolves some of them while loading or
// exporting whatever its settings say. So each soffice runs under bubblewrap:
// - in new user, network, PID, IPC and UTS namespaces: the network namespace has only its own loopback,
//   so nothing it connects to leaves it (the UNO link to the worker is a pipe inside the same jail);
// - with a file system of read-only /usr, the few /etc entries it needs (fonts, its own configuration),
//   a private /tmp, and read-write only its profile and the job directories it is handed;
// - with no capabilities, a new session (no TIOCSTI into a terminal) and death with its parent;
// - as the unprivileged system account `berth-office` when Berth runs as root (the jail's user namespace
//   maps that account, not root), so an escape from the jail is an unprivileged user on the host.
// Settings in the profile also tell LibreOffice not to follow links at all (defence in depth).
import fs from 'node:fs/promises';
import path from 'node:path';
import { PRIVATE_KERNEL_MOUNTS, readOnlySystemArgs } from '../os/bwrap.js';
import { ensureSystemAccount, isRoot, SHARED_ACCOUNTS, type SystemAccount } from '../os/users.js';

export { BWRAP_PATH } from '../os/bwrap.js';

/** /etc entries soffice and python need; nothing else of the host's /etc (passwd, Berth's config) is visible. */
const ETC_ENTRIES = [
  '/etc/fonts',
  '/etc/libreoffice',
  '/etc/ld.so.cache',
  '/etc/alternatives',
  '/etc/localtime',
];

/** `bwrap` arguments that run `command` jailed, with `writable` directories bound read-write at their paths. */
export function sandboxArgs(writable: readonly string[], command: readonly string[]): string[] {
  return [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--cap-drop',
    'ALL',
    '--clearenv',
    '--setenv',
    'HOME',
    '/tmp',
    '--setenv',
    'PATH',
    '/usr/bin',
    '--setenv',
    'LANG',
    'C.UTF-8',
    ...readOnlySystemArgs(),
    ...ETC_ENTRIES.flatMap((entry) => ['--ro-bind-try', entry, entry]),
    ...PRIVATE_KERNEL_MOUNTS,
    ...writable.flatMap((dir) => ['--bind', dir, dir]),
    '--',
    ...command,
  ];
}

/**
 * LibreOffice settings written into a fresh profile: no linked content is loaded from documents (every
 * location is untrusted: the trusted-locations list is empty), and links are never updated in Writer
 * and Calc (0 = never).
 */
const NO_LINKS_XCU = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="BlockUntrustedRefererLinks" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="SecureURL" oor:op="fuse"><value/></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Office.Writer/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>0</value></prop></item>
<item oor:path="/org.openoffice.Office.Calc/Content/Update"><prop oor:name="Link" oor:op="fuse"><value>0</value></prop></item>
</oor:items>
`;

/** Creates `profileDir` with the no-links settings (before soffice first starts on it). */
export async function prepareProfile(profileDir: string, account: SystemAccount | undefined): Promise<void> {
  const user = path.join(profileDir, 'user');
  const settings = path.join(user, 'registrymodifications.xcu');
  await fs.mkdir(user, { recursive: true, mode: 0o700 });
  await fs.writeFile(settings, NO_LINKS_XCU, { mode: 0o600 });
  await handOver(account, profileDir, user, settings);
}

/** The account soffice runs as: `berth-office` when Berth is root, else Berth's own user (undefined). */
export function officeAccount(): SystemAccount | undefined {
  return isRoot() ? ensureSystemAccount(SHARED_ACCOUNTS.office) : undefined;
}

/** Gives `paths` to the office account, so that the jailed soffice can use them (root needs no grant). */
export async function handOver(account: SystemAccount | undefined, ...paths: string[]): Promise<void> {
  if (!account) return;
  for (const target of paths) await fs.chown(target, account.uid, account.gid);
}
