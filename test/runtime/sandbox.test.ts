// The sandbox applications run in, with real processes: what a sandboxed shell can see, write and
// signal; who it runs as; the memory cap and its OOM count; that kill() and remove() leave nothing
// behind. The cgroup v2 path is checked against a fake hierarchy (this machine kind has v1 only).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createMemoryGroup,
  detectCgroups,
  groupDir,
  limitSubtree,
  removeTree,
  type MemoryGroup,
} from '../../src/drivers/os/cgroups.js';
import { processStartTime } from '../../src/drivers/os/processes.js';
import {
  ensureAppAccount,
  removeAppAccount,
  sandboxCommandLine,
  spawnSandboxed,
  type SandboxBind,
  type SandboxSpec,
} from '../../src/drivers/runtime/local/sandbox.js';
import { findAccount, isRoot } from '../../src/drivers/os/users.js';

const PATH = '/usr/local/bin:/usr/bin:/bin';
/** An application id no real application has, so its account `berth-app-<id>` is this run's own. */
const TEST_APP_ID = 900_000_000 + (process.pid % 100_000);
/** This run's own subtree of Berth's cgroups. */
const CGROUP_TAG = `test-sandbox-${process.pid}`;
const support = detectCgroups();

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-sandbox-'));
// The app's account must be able to reach the bind sources inside (search only, no listing).
fs.chmodSync(base, 0o711);
const release = fs.mkdtempSync(path.join(base, 'release-'));
const volume = fs.mkdtempSync(path.join(base, 'volume-'));
/** Stands for Berth's data dir: a directory the sandbox is given no bind for. */
const dataDir = fs.mkdtempSync(path.join(base, 'data-'));
fs.writeFileSync(path.join(dataDir, 'secret'), 'berth secret\n');

let account: { uid: number; gid: number } | undefined;
const uid = () => account?.uid ?? process.getuid!();
const gid = () => account?.gid ?? process.getgid!();

beforeAll(() => {
  account = ensureAppAccount(TEST_APP_ID);
  if (account) for (const dir of [release, volume]) fs.chownSync(dir, account.uid, account.gid);
});

afterAll(async () => {
  if (support) await removeTree(support, [CGROUP_TAG]);
  fs.rmSync(base, { recursive: true, force: true });
  removeAppAccount(TEST_APP_ID);
});

function spec(command: string[], overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  const binds: SandboxBind[] = [
    // The nested target first: the sandbox mounts parents first whatever the order.
    { source: volume, target: '/app/storage', writable: true },
    { source: release, target: '/app', writable: true },
  ];
  return { command, cwd: '/app', env: { PATH }, binds, account, memory: undefined, ...overrides };
}

async function run(
  command: string[],
  overrides: Partial<SandboxSpec> = {},
): Promise<{ code: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string }> {
  const sandboxed = spawnSandboxed(spec(command, overrides));
  const drained = Promise.all([once(sandboxed.stdout, 'close'), once(sandboxed.stderr, 'close')]);
  let stdout = '';
  let stderr = '';
  sandboxed.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  sandboxed.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exit = await sandboxed.exited;
  await drained;
  return { ...exit, stdout, stderr };
}

const once = (stream: NodeJS.EventEmitter, event: string) =>
  new Promise<void>((resolve) => stream.once(event, () => resolve()));

/** `key=value` lines of a probe script. */
function lines(text: string): Record<string, string> {
  return Object.fromEntries(
    text
      .split('\n')
      .filter((line) => line.includes('='))
      .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
  );
}

/** Waits until `condition` holds (polling), or fails after `timeoutMs`. */
async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}

/** Pids of processes running as `owner` (the app account is used by nothing else). */
function processesOf(owner: number): number[] {
  return fs
    .readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        return fs.statSync(`/proc/${entry}`).uid === owner;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Whether `pid` still runs (a zombie waiting for its parent to reap it runs nothing). */
const alive = (pid: number): boolean => {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
};

describe('spawnSandboxed: what the application sees', () => {
  it('has its release read-write at /app and its volume at the mount path, and nothing else of the host', async () => {
    const probe = [
      'echo release > /app/written && echo release=ok',
      'echo volume > /app/storage/written && echo volume=ok',
      'echo tmp > /tmp/written && echo tmp=ok',
      `cat ${dataDir}/secret >/dev/null 2>&1 && echo data=readable || echo data=hidden`,
      `test -e ${base} && echo base=visible || echo base=hidden`,
      'test -e /work && echo work=visible || echo work=hidden',
      'test -e /root && echo root=visible || echo root=hidden',
      'cat /etc/shadow >/dev/null 2>&1 && echo shadow=readable || echo shadow=hidden',
      'touch /usr/written 2>/dev/null && echo usr=writable || echo usr=readonly',
      'touch /written 2>/dev/null && echo rootfs=writable || echo rootfs=readonly',
      'touch /etc/written 2>/dev/null && echo etc=writable || echo etc=readonly',
      'echo passwd="$(cut -d: -f1 /etc/passwd | tr "\\n" " ")"',
      'test -s /etc/ssl/certs/ca-certificates.crt && echo certs=ok',
      'test -s /etc/resolv.conf && echo resolv=ok',
      'echo cwd=$(pwd)',
    ].join('; ');
    const result = await run(['/bin/sh', '-c', probe]);
    expect(result.code, result.stderr).toBe(0);
    expect(lines(result.stdout)).toEqual({
      release: 'ok',
      volume: 'ok',
      tmp: 'ok',
      data: 'hidden',
      base: 'hidden',
      work: 'hidden',
      root: 'hidden',
      shadow: 'hidden',
      usr: 'readonly',
      rootfs: 'readonly',
      etc: 'readonly',
      passwd: uid() === 0 ? 'root ' : 'root app ',
      certs: 'ok',
      resolv: 'ok',
      cwd: '/app',
    });
    // The writes landed in the host directories, owned by the app's account.
    expect(fs.readFileSync(path.join(release, 'written'), 'utf8')).toBe('release\n');
    expect(fs.readFileSync(path.join(volume, 'written'), 'utf8')).toBe('volume\n');
    expect(fs.statSync(path.join(release, 'written')).uid).toBe(uid());
    expect(fs.existsSync(path.join(release, 'storage', 'written'))).toBe(false);
  });

  it('runs as the app account with no capabilities, no other groups, in its own PID namespace', async () => {
    const probe = [
      'echo uid=$(id -u)',
      'echo gid=$(id -g)',
      'echo groups=$(id -G)',
      'echo user=$(id -un)',
      'echo capeff=$(grep CapEff /proc/self/status | cut -f2)',
      'echo capbnd=$(grep CapBnd /proc/self/status | cut -f2)',
      'echo nonewprivs=$(grep NoNewPrivs /proc/self/status | cut -f2)',
      'echo pid=$$',
      'echo processes=$(ls /proc | grep -c "^[0-9]")',
      'echo pidns=$(readlink /proc/self/ns/pid)',
      'unshare --user true 2>/dev/null && echo userns=allowed || echo userns=refused',
    ].join('; ');
    const result = await run(['/bin/sh', '-c', probe]);
    expect(result.code, result.stderr).toBe(0);
    const seen = lines(result.stdout);
    expect(seen).toMatchObject({
      uid: String(uid()),
      gid: String(gid()),
      groups: String(gid()),
      capeff: '0000000000000000',
      capbnd: '0000000000000000',
      nonewprivs: '1',
      // bwrap's reaper is pid 1, the command pid 2.
      pid: '2',
      userns: 'refused',
    });
    if (uid() !== 0) expect(seen.user).toBe('app');
    // The reaper, the shell, ls and grep: no process of the host.
    expect(Number(seen.processes)).toBeLessThanOrEqual(5);
    expect(seen.pidns).not.toBe(fs.readlinkSync('/proc/self/ns/pid'));
  });

  it('gets exactly the environment given, never on a command line, and no extra descriptors', async () => {
    process.env.BERTH_SANDBOX_TEST_MARKER = 'leaked';
    try {
      const env = { PATH, GREETING: 'hello world', TRICKY: '--setenv X y', EMPTY: '' };
      const printed = await run(['/usr/bin/env'], { env });
      expect(printed.code, printed.stderr).toBe(0);
      // bwrap sets PWD to the working directory, as a shell would.
      expect(printed.stdout.split('\n').filter(Boolean).sort()).toEqual(
        Object.entries({ ...env, PWD: '/app' })
          .map(([name, value]) => `${name}=${value}`)
          .sort(),
      );

      // The pipes that carried bwrap's options and the passwd and group files are closed: ls's own
      // directory descriptor is the only one beyond stdio.
      const descriptors = await run(['/bin/ls', '/proc/self/fd']);
      expect(descriptors.stdout.split('\n').filter(Boolean).sort()).toEqual(['0', '1', '2', '3']);

      const secret = 'sandbox-secret-value-42';
      const sandboxed = spawnSandboxed(spec(['/bin/sleep', '30'], { env: { PATH, SECRET: secret } }));
      await until(() => fs.readFileSync(`/proc/${sandboxed.pid}/cmdline`, 'utf8').includes('bwrap'));
      expect(fs.readFileSync(`/proc/${sandboxed.pid}/cmdline`, 'utf8')).not.toContain(secret);
      sandboxed.kill('SIGKILL');
      await sandboxed.exited;
    } finally {
      delete process.env.BERTH_SANDBOX_TEST_MARKER;
    }
  });

  it('refuses specs that would smuggle options or hide the system', () => {
    expect(() => spawnSandboxed(spec(['/bin/true'], { env: { 'A=B': 'x' } }))).toThrow(/variable name/);
    expect(() => spawnSandboxed(spec(['/bin/true'], { env: { A: 'x\0--bind' } }))).toThrow(/NUL/);
    const bind = (target: string) =>
      spec(['/bin/true'], { binds: [{ source: release, target, writable: true }] });
    for (const target of ['/usr/local', '/etc', '/', 'app', '/app/../etc', '/proc/1']) {
      expect(() => sandboxCommandLine(bind(target)), target).toThrow();
    }
    expect(() => sandboxCommandLine(spec(['/bin/true'], { account: { uid: 0, gid: 0 } }))).toThrow(/account/);
    expect(() => sandboxCommandLine(spec([]))).toThrow(/command/);

    // Whatever the command holds comes after `--`; the group join and the drop come first.
    const procsFiles = [
      '/sys/fs/cgroup/memory/berth/x/cgroup.procs',
      '/sys/fs/cgroup/pids/berth/x/cgroup.procs',
    ];
    const memory = { procsFile: procsFiles[0], procsFiles } as MemoryGroup;
    const argv = sandboxCommandLine(
      spec(['--bind', '/', '/host'], { account: { uid: 1234, gid: 1235 }, memory }),
    );
    expect(argv[0]).toBe('/bin/bash');
    expect(argv.slice(3, 5)).toEqual(['berth-sandbox', procsFiles.join(':')]);
    expect(argv.slice(5, 8)).toEqual(['/usr/bin/setpriv', '--reuid=1234', '--regid=1235']);
    expect(argv.slice(-4)).toEqual(['--', '--bind', '/', '/host']);
    expect(argv).not.toContain('--share-net');
    expect(argv).not.toContain('--unshare-net'); // no network given: the host's (Berth without root)

    // The application's network namespace is joined as root, after the groups, before the drop.
    const joined = sandboxCommandLine(
      spec(['/bin/true'], {
        account: { uid: 1234, gid: 1235 },
        memory,
        network: { namespacePath: '/run/netns/berth-b0123456789-7' },
      }),
    );
    expect(joined.slice(5, 9)).toEqual([
      '/usr/bin/nsenter',
      '--net=/run/netns/berth-b0123456789-7',
      '--',
      '/usr/bin/setpriv',
    ]);
    for (const namespacePath of [
      '/proc/1/ns/net',
      '/run/netns/../../proc/1/ns/net',
      '/run/netns/other',
      'berth-x',
    ])
      expect(
        () => sandboxCommandLine(spec(['/bin/true'], { network: { namespacePath } })),
        namespacePath,
      ).toThrow(/network namespace/);
  });
  it('runs nothing when the memory group cannot be joined', async () => {
    // The memory group is joined, the second (pids) group is gone: nothing runs either.
    const gone = {
      procsFiles: [path.join(base, 'joinable.procs'), path.join(base, 'no-such-group', 'cgroup.procs')],
    } as MemoryGroup;
    const result = await run(['/bin/sh', '-c', 'touch /app/ran'], { memory: gone });
    expect(result.code).toBe(125);
    expect(fs.existsSync(path.join(release, 'ran'))).toBe(false);
  });
});

describe.skipIf(process.arch !== 'x64')('spawnSandboxed: the seccomp filter', () => {
  it('filters every process (Seccomp: 2) and refuses what applications never need with EPERM', async () => {
    // Each call is one that succeeds (or fails otherwise) without the filter, so EPERM is the filter's.
    const calls = {
      getpid: 'syscall(39)',
      keyctl: 'syscall(250, 0, -3, 0)', // KEYCTL_GET_KEYRING_ID of the session keyring
      ptrace: 'syscall(101, 0, 0, 0, 0)', // PTRACE_TRACEME
      unshare: 'syscall(272, 0)', // no flags: a no-op
      personality_query: 'syscall(135, 0xffffffff)',
      personality_no_aslr: 'syscall(135, 0x0040000)', // ADDR_NO_RANDOMIZE
      io_uring_setup: 'syscall(425, 0, 0)',
      clone3: 'syscall(435, 0, 0)',
      x32_getpid: 'syscall(0x40000000 + 39)',
    };
    const script = Object.entries(calls)
      .map(
        ([name, call]) =>
          `{ my $r = ${call}; print "${name}=", ($r == -1 ? "errno" . ($! + 0) : "ok"), "\\n" }`,
      )
      .join(' ');
    const probe = await run(['/usr/bin/perl', '-e', script]);
    expect(probe.code, probe.stderr).toBe(0);
    expect(lines(probe.stdout)).toEqual({
      getpid: 'ok',
      keyctl: 'errno1',
      ptrace: 'errno1',
      unshare: 'errno1',
      personality_query: 'ok',
      personality_no_aslr: 'errno1',
      io_uring_setup: 'errno1',
      clone3: 'errno38', // ENOSYS: the C library falls back to clone, which the filter can inspect
      x32_getpid: 'errno1',
    });
    // The same calls outside the sandbox: what the filter changed.
    const host = execFileSync('/usr/bin/perl', ['-e', script]).toString();
    expect(lines(host)).toMatchObject({
      keyctl: 'ok',
      ptrace: 'ok',
      unshare: 'ok',
      personality_no_aslr: 'ok',
    });

    const status = await run(['/bin/sh', '-c', 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status']);
    expect(status.stdout).toMatch(/^Seccomp:\s+2$/m);
    // Ordinary programs are unaffected: node with a worker thread and a child process, a shell pipeline.
    const node = await run([
      '/usr/bin/node',
      '-e',
      "const { Worker } = require('worker_threads'); require('child_process').execSync('echo child | cat', { stdio: 'inherit' }); new Worker('require(\"worker_threads\").parentPort.postMessage(6 * 7)', { eval: true }).on('message', (m) => console.log('worker', m));",
    ]);
    expect(node.code, node.stderr).toBe(0);
    expect(node.stdout).toBe('child\nworker 42\n');
  });
});

describe.skipIf(!support)('spawnSandboxed: memory groups', () => {
  it('kills a process that outgrows its cap, and the group counts the OOM kill', async () => {
    const group = await createMemoryGroup(support!, [CGROUP_TAG, 'app-1', 'oom'], 64 * 1024 * 1024);
    if (support!.version === 1) {
      expect(fs.readFileSync(path.join(group.dir, 'memory.limit_in_bytes'), 'utf8').trim()).toBe('67108864');
      const withSwap = path.join(group.dir, 'memory.memsw.limit_in_bytes');
      if (fs.existsSync(withSwap)) expect(fs.readFileSync(withSwap, 'utf8').trim()).toBe('67108864');
    }
    expect(await group.oomKills()).toBe(0);
    const hog =
      'const kept = []; for (let i = 0; i < 400; i++) kept.push(Buffer.alloc(1 << 20, 1)); console.log("survived")';
    const result = await run(['/usr/bin/node', '-e', hog], { memory: group });
    expect(result.stdout).not.toContain('survived');
    // bwrap's reaper reports its child's SIGKILL as 128 + 9.
    expect(result.signal === 'SIGKILL' || result.code === 137, JSON.stringify(result)).toBe(true);
    expect(await group.oomKills()).toBeGreaterThanOrEqual(1);
    await group.remove();
    expect(fs.existsSync(group.dir)).toBe(false);
  });

  it('kill("SIGKILL") leaves no process behind, and remove() no group', async () => {
    const group = await createMemoryGroup(support!, [CGROUP_TAG, 'app-1', 'web-1-0'], 128 * 1024 * 1024);
    const sandboxed = spawnSandboxed(
      spec(['/bin/sh', '-c', '(sleep 1000 &) ; sleep 1000 & sleep 1000 & wait'], { memory: group }),
    );
    // bwrap, its reaper, the shell and three sleeps (one of them orphaned to the reaper).
    await until(async () => (await group.pids()).length >= 6);
    const inside = await group.pids();
    // Each with its start time: on a busy host a pid is soon another process's (pid_max 32768).
    const started = inside.map((pid) => ({ pid, at: processStartTime(pid) }));
    sandboxed.kill('SIGKILL');
    // The namespace's init was killed: bwrap reaps it and reports 128 + 9.
    expect(await sandboxed.exited).toEqual({ code: 137, signal: null });
    await until(async () => (await group.pids()).length === 0, 2000);
    expect(started.filter(({ pid, at }) => at !== undefined && processStartTime(pid) === at)).toEqual([]);
    if (account) expect(processesOf(account.uid).filter(alive)).toEqual([]);
    await group.remove();
    expect(fs.existsSync(group.dir)).toBe(false);
    await group.remove(); // idempotent
  });

  it('removeTree kills and deletes an application’s groups, leaves first', async () => {
    const web = await createMemoryGroup(support!, [CGROUP_TAG, 'app-2', 'web-1-0'], 64 * 1024 * 1024);
    await createMemoryGroup(support!, [CGROUP_TAG, 'app-2', 'worker-1-0'], 64 * 1024 * 1024);
    const sandboxed = spawnSandboxed(spec(['/bin/sleep', '1000'], { memory: web }));
    await until(async () => (await web.pids()).length >= 3);
    await removeTree(support!, [CGROUP_TAG, 'app-2']);
    await sandboxed.exited;
    expect(fs.existsSync(groupDir(support!, [CGROUP_TAG, 'app-2']))).toBe(false);
    expect(fs.existsSync(groupDir(support!, [CGROUP_TAG]))).toBe(true);
    await removeTree(support!, [CGROUP_TAG, 'app-2']); // idempotent
  });
});

describe.skipIf(!support?.pids || !support?.cpu)(
  'spawnSandboxed: an application’s process and CPU limits',
  () => {
    const read = (file: string) => fs.readFileSync(file, 'utf8').trim();
    /** The group of `pid` in the v1 hierarchy holding `controller`, from /proc/<pid>/cgroup. */
    const cgroupOf = (pid: number, controller: string) =>
      fs
        .readFileSync(`/proc/${pid}/cgroup`, 'utf8')
        .split('\n')
        .map((line) => line.split(':'))
        .find((fields) => fields[1]!.split(',').includes(controller))?.[2];

    it('a fork past the application’s pids.max fails with EAGAIN inside while the host forks on', async () => {
      const application = [CGROUP_TAG, 'app-3'];
      await limitSubtree(support!, application, { pidsMax: 40, cpuShares: 1024, cpuCores: 0.5 });
      const group = await createMemoryGroup(support!, [...application, 'exec-1'], 256 * 1024 * 1024, {
        tasks: true,
      });
      const pidsDir = path.join(support!.pids!, 'berth', ...application);
      const cpuDir = path.join(support!.cpu!, 'berth', ...application);
      expect(read(path.join(pidsDir, 'pids.max'))).toBe('40');
      expect(read(path.join(cpuDir, 'cpu.shares'))).toBe('1024');
      expect(read(path.join(cpuDir, 'cpu.cfs_period_us'))).toBe('100000');
      expect(read(path.join(cpuDir, 'cpu.cfs_quota_us'))).toBe('50000');
      expect(group.procsFiles).toEqual([
        group.procsFile,
        path.join(pidsDir, 'exec-1', 'cgroup.procs'),
        path.join(cpuDir, 'exec-1', 'cgroup.procs'),
        // The freezer's, so that a backup can pause the application (test/drivers/os/freezer.test.ts).
        ...(support!.freezer
          ? [path.join(support!.freezer, 'berth', ...application, 'exec-1', 'cgroup.procs')]
          : []),
      ]);

      // Forks until one fails, says how far it got, and waits with its children still there.
      const forker = [
        'my ($n, $errno) = (0, 0);',
        'for (1 .. 200) { my $pid = fork(); if (!defined $pid) { $errno = $! + 0; last } if ($pid == 0) { sleep 1000; exit 0 } $n++ }',
        '$| = 1; print "forked=$n\\nerrno=$errno\\n"; sleep 1000;',
      ].join(' ');
      const sandboxed = spawnSandboxed(spec(['/usr/bin/perl', '-e', forker], { memory: group }));
      let stdout = '';
      sandboxed.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      await until(() => stdout.includes('errno='), 20_000);
      const seen = lines(stdout);
      expect(seen.errno).toBe('11'); // EAGAIN
      expect(Number(seen.forked)).toBeGreaterThan(20);
      expect(Number(seen.forked)).toBeLessThan(40);
      expect(Number(read(path.join(pidsDir, 'pids.current')))).toBe(40);
      // Every process of the sandbox is in the application's groups of the three hierarchies.
      const inside = await group.pids();
      expect(inside.length).toBeGreaterThan(20);
      for (const pid of inside) {
        expect(cgroupOf(pid, 'pids')).toBe(`/berth/${CGROUP_TAG}/app-3/exec-1`);
        expect(cgroupOf(pid, 'cpu')).toBe(`/berth/${CGROUP_TAG}/app-3/exec-1`);
      }
      // The host is not in the application's budget.
      expect(execFileSync('/bin/echo', ['host forks']).toString()).toBe('host forks\n');

      sandboxed.kill('SIGKILL');
      await sandboxed.exited;
      await group.remove();
      for (const dir of [group.dir, path.join(pidsDir, 'exec-1'), path.join(cpuDir, 'exec-1')]) {
        expect(fs.existsSync(dir), dir).toBe(false);
      }
      await removeTree(support!, application);
      for (const dir of [pidsDir, cpuDir, groupDir(support!, application)])
        expect(fs.existsSync(dir), dir).toBe(false);
    });

    it('the CFS quota throttles an application that would take more than its cores', async () => {
      const application = [CGROUP_TAG, 'app-4'];
      await limitSubtree(support!, application, { pidsMax: 64, cpuShares: 1024, cpuCores: 0.1 });
      const group = await createMemoryGroup(support!, [...application, 'web-1'], 64 * 1024 * 1024, {
        tasks: true,
      });
      const cpuDir = path.join(support!.cpu!, 'berth', ...application);
      expect(read(path.join(cpuDir, 'cpu.cfs_quota_us'))).toBe('10000');
      const throttled = () =>
        Number(
          /^nr_throttled (\d+)$/m.exec(fs.readFileSync(path.join(cpuDir, 'cpu.stat'), 'utf8'))?.[1] ?? 0,
        );
      expect(throttled()).toBe(0);
      const sandboxed = spawnSandboxed(spec(['/usr/bin/perl', '-e', '1 while 1'], { memory: group }));
      // A busy loop spends its 10 ms of each 100 ms period and waits out the rest.
      await until(() => throttled() >= 2, 10_000);
      sandboxed.kill('SIGKILL');
      await sandboxed.exited;
      await removeTree(support!, application);
      expect(fs.existsSync(cpuDir)).toBe(false);
    });
  },
);

describe('spawnSandboxed: stopping', () => {
  it('kill() sends SIGTERM to the application, which shuts down cleanly, and nothing survives', async () => {
    const script = 'trap "echo stopping; exit 7" TERM; sleep 1000 & echo ready; wait';
    const sandboxed = spawnSandboxed(spec(['/bin/sh', '-c', script]));
    const drained = once(sandboxed.stdout, 'close');
    let stdout = '';
    sandboxed.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    await until(() => stdout.includes('ready'));
    const tree = descendantsOf(sandboxed.pid);
    expect(tree.length).toBeGreaterThanOrEqual(3); // reaper, shell, sleep
    sandboxed.kill();
    expect(await sandboxed.exited).toEqual({ code: 7, signal: null });
    await drained;
    expect(stdout).toContain('stopping');
    await until(() => tree.filter(alive).length === 0, 2000);
    sandboxed.kill(); // after the exit: nothing to signal, no error
  });
});

describe('cgroups: versions and paths', () => {
  it('detects v2 from cgroup.controllers and v1 from the memory hierarchy, and nothing without memory', () => {
    const v2 = fs.mkdtempSync(path.join(base, 'cgv2-'));
    fs.writeFileSync(path.join(v2, 'cgroup.controllers'), 'cpuset cpu io memory pids\n');
    expect(detectCgroups(v2)).toEqual({ version: 2, root: v2, pids: v2, cpu: v2 });
    const v2WithoutMemory = fs.mkdtempSync(path.join(base, 'cgv2-'));
    fs.writeFileSync(path.join(v2WithoutMemory, 'cgroup.controllers'), 'cpu io pids\n');
    expect(detectCgroups(v2WithoutMemory)).toBeUndefined();
    const v1 = fs.mkdtempSync(path.join(base, 'cgv1-'));
    fs.mkdirSync(path.join(v1, 'memory'));
    fs.writeFileSync(path.join(v1, 'memory', 'memory.limit_in_bytes'), '9223372036854771712\n');
    expect(detectCgroups(v1)).toEqual({ version: 1, root: path.join(v1, 'memory') });
    // The pids and cpu hierarchies, when mounted (cpu alone, or with cpuacct as Debian does).
    fs.mkdirSync(path.join(v1, 'pids'));
    fs.writeFileSync(path.join(v1, 'pids', 'cgroup.procs'), '');
    fs.mkdirSync(path.join(v1, 'cpu,cpuacct'));
    fs.writeFileSync(path.join(v1, 'cpu,cpuacct', 'cpu.shares'), '1024\n');
    expect(detectCgroups(v1)).toEqual({
      version: 1,
      root: path.join(v1, 'memory'),
      pids: path.join(v1, 'pids'),
      cpu: path.join(v1, 'cpu,cpuacct'),
    });
    expect(detectCgroups(fs.mkdtempSync(path.join(base, 'none-')))).toBeUndefined();
    if (fs.existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes') && isRoot()) {
      expect(detectCgroups()).toMatchObject({ version: 1, root: '/sys/fs/cgroup/memory' });
      if (fs.existsSync('/sys/fs/cgroup/pids/cgroup.procs'))
        expect(detectCgroups()?.pids).toBe('/sys/fs/cgroup/pids');
      if (fs.existsSync('/sys/fs/cgroup/cpu/cpu.shares'))
        expect(detectCgroups()?.cpu).toMatch(/^\/sys\/fs\/cgroup\/cpu/);
    }
  });

  it('v2: enables the memory controller down the path, caps memory and swap, and reads memory.events', async () => {
    const root = fs.mkdtempSync(path.join(base, 'cgv2-'));
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    fs.writeFileSync(path.join(root, 'cgroup.subtree_control'), 'cpu\n');
    // What the kernel creates with the directory: memory.swap.max exists when swap is accounted.
    const leaf = path.join(root, 'berth', 'app-12', 'web-5-0');
    fs.mkdirSync(leaf, { recursive: true });
    fs.writeFileSync(path.join(leaf, 'memory.swap.max'), 'max\n');
    const support2 = detectCgroups(root)!;
    const group = await createMemoryGroup(support2, ['app-12', 'web-5-0'], 256 * 1024 * 1024);
    expect(group.dir).toBe(leaf);
    expect(group.procsFile).toBe(path.join(leaf, 'cgroup.procs'));
    for (const parent of [root, path.join(root, 'berth'), path.join(root, 'berth', 'app-12')]) {
      expect(fs.readFileSync(path.join(parent, 'cgroup.subtree_control'), 'utf8'), parent).toBe('+memory');
    }
    expect(fs.readFileSync(path.join(leaf, 'memory.max'), 'utf8')).toBe(String(256 * 1024 * 1024));
    expect(fs.readFileSync(path.join(leaf, 'memory.swap.max'), 'utf8')).toBe('0');
    fs.writeFileSync(path.join(leaf, 'memory.events'), 'low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n');
    expect(await group.oomKills()).toBe(2);
    fs.writeFileSync(group.procsFile, '');
    expect(await group.pids()).toEqual([]);
  });

  it('v2: an application’s shared limits are pids.max, cpu.weight and cpu.max, controllers enabled down the path', async () => {
    const root = fs.mkdtempSync(path.join(base, 'cgv2-'));
    fs.writeFileSync(path.join(root, 'cgroup.controllers'), 'cpu memory pids\n');
    const support2 = detectCgroups(root)!;
    await limitSubtree(support2, ['b1', 'app-12'], { pidsMax: 300, cpuShares: 1024, cpuCores: 1.5 });
    const app = path.join(root, 'berth', 'b1', 'app-12');
    expect(fs.readFileSync(path.join(app, 'pids.max'), 'utf8')).toBe('300');
    expect(fs.readFileSync(path.join(app, 'cpu.weight'), 'utf8')).toBe('40');
    expect(fs.readFileSync(path.join(app, 'cpu.max'), 'utf8')).toBe('150000 100000');
    for (const parent of [root, path.join(root, 'berth'), path.join(root, 'berth', 'b1')]) {
      expect(fs.readFileSync(path.join(parent, 'cgroup.subtree_control'), 'utf8'), parent).toBe('+pids +cpu');
    }
    await limitSubtree(support2, ['b1', 'app-12'], { pidsMax: 300, cpuShares: 1024, cpuCores: undefined });
    expect(fs.readFileSync(path.join(app, 'cpu.max'), 'utf8')).toBe('max 100000');
    // One directory in v2: the group's processes join one procs file.
    const group = await createMemoryGroup(support2, ['b1', 'app-12', 'web-1'], 64 * 1024 * 1024, {
      tasks: true,
    });
    expect(group.procsFiles).toEqual([path.join(app, 'web-1', 'cgroup.procs')]);
  });

  it('v1: the group sits at <memory>/berth/<path>, and path segments cannot leave it', () => {
    const v1 = { version: 1 as const, root: '/sys/fs/cgroup/memory' };
    expect(groupDir(v1, ['app-12', 'web-5-0'])).toBe('/sys/fs/cgroup/memory/berth/app-12/web-5-0');
    for (const segment of ['..', 'App', '', '-x', 'a/b', 'a'.repeat(64)]) {
      expect(() => groupDir(v1, ['app-12', segment]), segment).toThrow(/segment/);
    }
    expect(groupDir(v1, ['a'.repeat(63)])).toBe(`/sys/fs/cgroup/memory/berth/${'a'.repeat(63)}`);
  });
});

describe.skipIf(!isRoot())('application accounts', () => {
  it('creates berth-app-<id> once and removes it with its group, idempotently', () => {
    const id = TEST_APP_ID + 1;
    const created = ensureAppAccount(id)!;
    expect(created.name).toBe(`berth-app-${id}`);
    expect(created.uid).toBeGreaterThan(0);
    expect(ensureAppAccount(id)).toEqual(created);
    removeAppAccount(id);
    expect(findAccount(`berth-app-${id}`)).toBeUndefined();
    expect(() => execFileSync('getent', ['group', `berth-app-${id}`], { stdio: 'ignore' })).toThrow();
    removeAppAccount(id);
    expect(() => ensureAppAccount(0)).toThrow(/application id/);
  });
});

/** Every descendant of `pid` now (to check later that none survived). */
function descendantsOf(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // exited meanwhile
    }
  }
  const found = [pid];
  for (let index = 0; index < found.length; index++) {
    for (const [child, parent] of parents) if (parent === found[index]) found.push(child);
  }
  return found.slice(1);
}
