// What every bubblewrap jail of Berth shares (LibreOffice's and the applications'): the binary, and a
// read-only /usr with the merged-/usr symlinks of Debian, so programs find their libraries and nothing
// else of the host's root is visible.

export const BWRAP_PATH = '/usr/bin/bwrap';

/** `bwrap` arguments for a read-only /usr and the /bin, /lib, /lib64 and /sbin symlinks into it. */
export function readOnlySystemArgs(): string[] {
  return [
    '--ro-bind',
    '/usr',
    '/usr',
    ...['bin', 'lib', 'lib64', 'sbin'].flatMap((dir) => ['--symlink', `usr/${dir}`, `/${dir}`]),
  ];
}

/** A fresh /proc and /dev, and a private /tmp: the jail sees none of the host's. */
export const PRIVATE_KERNEL_MOUNTS: readonly string[] = [
  '--proc',
  '/proc',
  '--dev',
  '/dev',
  '--tmpfs',
  '/tmp',
];

/**
 * bubblewrap's namespaces and limits for untrusted code: its own user (no nested ones), PID, IPC and
 * UTS namespaces, a new session and no capabilities. No --unshare-net: an application's sandboxes are
 * started inside its network namespace (joined before bwrap, as root: src/drivers/os/netns.ts), which
 * they share; without root they stay on the host's network. Whether it dies with Berth is the caller's
 * choice (DIE_WITH_BERTH): what serves (replicas, workers) outlives a restart of Berth, what Berth
 * waits for (builds, commands) does not.
 */
export const ISOLATION_ARGS: readonly string[] = [
  '--unshare-user',
  '--disable-userns',
  '--unshare-pid',
  '--unshare-ipc',
  '--unshare-uts',
  '--unshare-cgroup-try',
  '--new-session',
  '--cap-drop',
  'ALL',
];

/** The sandbox ends when the process that started it (Berth) does. */
export const DIE_WITH_BERTH: readonly string[] = ['--die-with-parent'];

/** ISOLATION_ARGS but for --disable-userns: Chromium's own sandbox is made of nested user namespaces. */
export const ISOLATION_ARGS_NESTED_USERNS: readonly string[] = ISOLATION_ARGS.filter(
  (arg) => arg !== '--disable-userns',
);
