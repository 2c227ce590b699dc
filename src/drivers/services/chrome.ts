// The `chrome-headless` service: one headless Chromium per instance, private to its application.
//
// - Chromium runs with `--remote-debugging-pipe` (fds 3 and 4) and listens on no port; the application
//   reaches it through Berth's DevTools proxy (devtools-proxy.ts) on a loopback port, every path under
//   `/<token>` (the service's password).
// - It runs as an OS account of its own (`berth-ch-<20 hex of its uuid>`, when Berth is root), with its
//   profile and home under `<data dir>/services/<uuid>/browser/` (0700, that account's), with Chromium's
//   own sandbox when the host allows it (else `--no-sandbox`, said in the log).
// - It runs in a bubblewrap jail (issue 24): new user, PID, IPC and UTS namespaces, a read-only /usr,
//   the few /etc entries it needs (DNS, fonts, TLS roots), fresh /proc and /dev, a private /tmp, and
//   only its own `browser/` directory writable. Nothing else of the host is there: not Berth's data dir,
//   not other applications' releases, not /etc/passwd or /home. Nested user namespaces stay allowed:
//   Chromium's own sandbox is made of them. The network is the host's (pages and the application are
//   reached over it).
// - `file:` and the other local schemes are refused twice: a managed policy of its own (URLBlocklist,
//   bound at /etc/chromium/policies/managed inside the jail only), and the DevTools proxy, which refuses
//   `Page.navigate`, `Target.createTarget` and `Network.loadNetworkResource` of them. The jail is what
//   makes them harmless (`DOM.setFileInputFiles` hands a page any file the browser can open).
// - Its memory is capped by a cgroup, `berth/services/<uuid>`, at the spec's memory (swap included);
//   the renderers and helpers it forks are in the group too. Without cgroups it runs uncapped, and the
//   log and status say so.
// - It dies with Berth (a parent-death signal); `status()` reads it not running once it exited, and the
//   supervisor's `start()` launches it again on the same port, closing the clients of the dead one.
// - Its stderr goes to `<data dir>/services/<uuid>/chromium.log` (Berth's, 0600, rotated at 512 KiB),
//   which `logs()` reads with the token blanked.
import { execFile } from 'node:child_process';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import type { Logger } from 'pino';
import { createKeyedLock } from '../../domain/keyed-lock.js';
import { CHROMIUM_PATH } from '../chromium/engine.js';
import {
  BWRAP_PATH,
  DIE_WITH_BERTH,
  ISOLATION_ARGS_NESTED_USERNS,
  PRIVATE_KERNEL_MOUNTS,
  readOnlySystemArgs,
} from '../os/bwrap.js';
import { dropPrivileges, ensureSystemAccount, isRoot, removeSystemAccount } from '../os/users.js';
import { descendants, processesOfUser, processTree } from '../os/processes.js';
import { establishedConnections } from '../os/sockets.js';
import {
  createMemoryGroup,
  detectCgroups,
  removeTree,
  type CgroupSupport,
  type MemoryGroup,
} from '../os/cgroups.js';
import { BrowserLink, DevToolsProxy, type BrowserVersion } from './devtools-proxy.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from './types.js';

const execFileAsync = promisify(execFile);

export interface ChromeRunnerDeps {
  /** Berth's data directory: instances live in `<dataDir>/services/<uuid>/`. */
  dataDir: string;
  logger: Logger;
  /** The memory controller; detected when omitted, `null` for none (memory is then not capped). */
  cgroups?: CgroupSupport | null;
  /** Chromium's binary (Debian's, as the tools use). */
  executablePath?: string;
  /** How long Chromium may take to answer its first call. */
  startTimeoutMs?: number;
}

/** status() with why it is not what it should be (an uncapped memory, the last exit). */
export interface ChromeStatus {
  running: boolean;
  pid: number | null;
  reason?: string;
}

const INSTANCE_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const BASH_PATH = '/bin/bash';
const MIB = 1024 * 1024;
/** Below this Chromium cannot even start its first renderer. */
const MIN_MEMORY_MIB = 128;
const LOG_ROTATE_BYTES = 512 * 1024;
const STOP_GRACE_MS = 3_000;

/**
 * As root: closes every descriptor above the DevTools pipe's (3 and 4) that Berth inherited without
 * close-on-exec, joins the memory group (when one is named) before anything of Chromium runs, then
 * becomes the rest of argv (the privilege drop, then bwrap). bash: dash cannot name a descriptor above 9.
 */
const JOIN_AND_EXEC = [
  'for fd in /proc/self/fd/*; do n=${fd##*/}; if [ "$n" -gt 4 ]; then exec {n}>&-; fi; done',
  'if [ -n "$1" ]; then echo $$ > "$1" || exit 125; fi',
  'shift',
  'exec "$@"',
].join('\n');

/** What Chromium needs of /etc in its jail: DNS, fonts, TLS roots, the loader's cache, the time zone. */
const JAIL_ETC = [
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/host.conf',
  '/etc/nsswitch.conf',
  '/etc/gai.conf',
  '/etc/ssl/certs',
  '/etc/alternatives',
  '/etc/fonts',
  '/etc/ld.so.cache',
  '/etc/localtime',
  '/etc/timezone',
  '/etc/mime.types',
];

/** Where Chromium reads managed policies; inside the jail it is the instance's own directory. */
const POLICY_DIR = '/etc/chromium/policies/managed';

/**
 * The instance's managed policy: no local scheme is ever loaded (`file:`, and `filesystem:` and
 * `view-source:` that can show one), whatever a client navigates to or a page links.
 */
export const CHROME_POLICY = {
  URLBlocklist: ['file://*', 'filesystem:*', 'view-source:*'],
};

/** Chromium's switches; no proxy: the application's pages load from the network and from loopback. */
const CHROME_ARGS = [
  '--headless',
  '--remote-debugging-pipe',
  '--disable-gpu',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-dev-shm-usage',
  '--disable-default-apps',
  '--disable-extensions',
  '--disable-breakpad',
  '--disable-crash-reporter',
  '--mute-audio',
  '--password-store=basic',
  '--use-mock-keychain',
  '--disable-features=Translate,MediaRouter,OptimizationHints',
];

/** Lines of Chromium's stderr that say nothing (there is no D-Bus in a service's world). */
const NOISE = /:ERROR:dbus\/|Failed to connect to the bus/;

interface Browser {
  child: ChildProcess;
  /** The spawned chain's pid (bwrap once it has exec'd), leader of its process group. */
  leader: number;
  /** Chromium's browser process, inside the jail. */
  pid: number;
  link: BrowserLink;
  version: BrowserVersion;
  group: MemoryGroup | undefined;
  oomBefore: number;
  memoryMiB: number;
  /** The instance's own account, when it has one: nothing else runs as it. */
  uid: number | undefined;
  exited: boolean;
  exit: Promise<void>;
  /** Berth asked it to stop: its exit is not a crash. */
  stopping: boolean;
}

interface Instance {
  id: string;
  proxy: DevToolsProxy;
  browser: Browser | undefined;
  log: LogFile;
  /** Why the instance is not as asked (memory not capped, the last exit). */
  reason: string | undefined;
}

/** A ServiceRunner whose status also says why (memory not capped, how the browser last ended). */
export interface ChromeRunner extends ServiceRunner {
  status(ref: ServiceRef): Promise<ChromeStatus>;
}

export function createChromeRunner(deps: ChromeRunnerDeps): ChromeRunner {
  const support = deps.cgroups === undefined ? detectCgroups() : (deps.cgroups ?? undefined);
  const executable = deps.executablePath ?? CHROMIUM_PATH;
  const startTimeoutMs = deps.startTimeoutMs ?? 30_000;
  const instances = new Map<string, Instance>();
  const locks = createKeyedLock();
  /** Set once a sandboxed start failed for want of a usable sandbox: later ones go without. */
  let sandboxUnusable = false;

  const layout = (id: string) => {
    const root = path.join(deps.dataDir, 'services', id);
    return {
      root,
      browser: path.join(root, 'browser'),
      log: path.join(root, 'chromium.log'),
      policies: path.join(root, 'policies'),
    };
  };

  /** One operation per instance at a time: a supervisor's start never races a stop or a delete. */
  function serial<T>(id: string, work: () => Promise<T>): Promise<T> {
    if (!INSTANCE_ID.test(id)) return Promise.reject(new Error(`invalid service instance id '${id}'`));
    return locks.run(id, work);
  }

  function instanceOf(id: string): Instance {
    let instance = instances.get(id);
    if (!instance) {
      instance = {
        id,
        proxy: new DevToolsProxy(id),
        browser: undefined,
        log: new LogFile(layout(id).log),
        reason: undefined,
      };
      instances.set(id, instance);
    }
    return instance;
  }

  const running = (browser: Browser | undefined): browser is Browser =>
    !!browser && !browser.exited && !browser.link.closed && alive(browser.pid);

  function runtime(instance: Instance, browser: Browser): ServiceRuntime {
    return {
      host: '127.0.0.1',
      port: instance.proxy.port!,
      pid: browser.pid,
      version: browser.version.product.replace(/^[A-Za-z]+\//, ''),
      location: layout(instance.id).root,
      extra: { path: instance.proxy.basePath, websocketPath: instance.proxy.browserPath },
    };
  }

  async function start(spec: ServiceSpec): Promise<ServiceRuntime> {
    if (spec.password.length < 16)
      throw new Error('a chrome-headless service needs a token of 16 characters or more');
    const instance = instanceOf(spec.id);
    instance.proxy.setToken(spec.password);
    instance.log.secret = spec.password;
    if (running(instance.browser)) return runtime(instance, instance.browser);
    if (instance.browser) await stopBrowser(instance);
    await instance.proxy.listen(spec.port);
    let browser: Browser;
    try {
      browser = await launch(spec, instance, sandboxUnusable);
    } catch (error) {
      if (sandboxUnusable || !(error instanceof SandboxError)) throw error;
      sandboxUnusable = true;
      deps.logger.warn(
        { service: spec.id },
        "chrome-headless: Chromium's sandbox is not usable on this host; running with --no-sandbox",
      );
      instance.log.note("Chromium's sandbox is not usable on this host: running with --no-sandbox");
      browser = await launch(spec, instance, true);
    }
    instance.browser = browser;
    instance.proxy.setBrowser(browser.link, browser.version);
    return runtime(instance, browser);
  }

  async function launch(spec: ServiceSpec, instance: Instance, noSandbox: boolean): Promise<Browser> {
    const dirs = layout(spec.id);
    const account = isRoot() ? ensureSystemAccount(accountName(spec.id)) : undefined;
    await fsp.mkdir(dirs.root, { recursive: true, mode: 0o711 });
    // Searchable, not listable, by the instance's account, which needs to reach its own directory.
    await fsp.chmod(path.dirname(dirs.root), 0o711);
    await fsp.chmod(dirs.root, 0o711);
    await fsp.mkdir(dirs.browser, { recursive: true, mode: 0o700 });
    if (account && (await fsp.stat(dirs.browser)).uid !== account.uid) {
      await execFileAsync('chown', ['-R', `${account.uid}:${account.gid}`, '--', dirs.browser]);
    }
    const home = path.join(dirs.browser, 'home');
    const profile = path.join(dirs.browser, 'profile');
    for (const dir of [home, profile]) {
      await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
      if (account) await fsp.chown(dir, account.uid, account.gid);
    }
    // Berth's (root's) and read-only in the jail: Chromium cannot change what it is allowed.
    await fsp.mkdir(dirs.policies, { recursive: true, mode: 0o755 });
    await fsp.writeFile(path.join(dirs.policies, 'berth.json'), `${JSON.stringify(CHROME_POLICY)}\n`, {
      mode: 0o644,
    });
    // Temporary files were in /tmp/berth-ch-<hex> before the jail (which has a /tmp of its own).
    await fsp.rm(tmpDir(spec.id), { recursive: true, force: true });
    // A profile left by a browser that was killed holds its lock: this instance is the only user.
    for (const lock of ['SingletonLock', 'SingletonSocket', 'SingletonCookie'])
      await fsp.rm(path.join(profile, lock), { force: true });

    const memoryMiB = Math.max(MIN_MEMORY_MIB, Math.floor(spec.memoryMiB));
    let group: MemoryGroup | undefined;
    if (support) {
      // Whatever a previous Berth left in the group goes first.
      await removeTree(support, ['services', spec.id]);
      group = await createMemoryGroup(support, ['services', spec.id], memoryMiB * MIB);
      instance.reason = undefined;
    } else {
      instance.reason = `memory not capped (${memoryMiB} MiB asked): no writable cgroup memory controller on this host`;
      deps.logger.warn({ service: spec.id }, `chrome-headless: ${instance.reason}`);
      instance.log.note(instance.reason);
    }
    const oomBefore = group ? await group.oomKills() : 0;

    const args = [
      ...CHROME_ARGS,
      ...(noSandbox ? ['--no-sandbox'] : []),
      `--user-data-dir=${profile}`,
      'about:blank',
    ];
    const child = spawn(
      BASH_PATH,
      [
        '-c',
        JOIN_AND_EXEC,
        'berth-chrome',
        group?.procsFile ?? '',
        ...(account ? dropPrivileges(account) : []),
        BWRAP_PATH,
        ...jailArgs(dirs),
        '--',
        executable,
        ...args,
      ],
      {
        // Its own process group: stop() reaches every process of it even without a cgroup.
        detached: true,
        cwd: dirs.browser,
        stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
        env: {
          PATH: '/usr/bin:/bin',
          HOME: home,
          TMPDIR: '/tmp',
          XDG_CONFIG_HOME: path.join(home, '.config'),
          XDG_CACHE_HOME: path.join(home, '.cache'),
          LANG: 'C.UTF-8',
          BERTH_SERVICE_ID: spec.id,
        },
      },
    );
    const leader = child.pid;
    if (leader === undefined) {
      await new Promise((resolve) => child.once('error', resolve));
      throw new Error(`Chromium could not be started (${executable})`);
    }
    const stderr: string[] = [];
    const lines = new LineSplitter((line) => {
      if (NOISE.test(line)) return;
      stderr.push(line);
      if (stderr.length > 50) stderr.shift();
      instance.log.line(line);
    });
    child.stderr!.on('data', (chunk: Buffer) => lines.push(chunk));
    const link = new BrowserLink(child.stdio[3] as Writable, child.stdio[4] as Readable);
    let exited = false;
    const exit = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        exited = true;
        lines.flush();
        link.close('Chromium exited; Berth starts it again');
        void onExit(instance, browserRef, ...jailedExit(code, signal)).finally(resolve);
      });
    });
    const browserRef: Browser = {
      child,
      leader,
      pid: leader,
      link,
      version: undefined as unknown as BrowserVersion,
      group,
      oomBefore,
      memoryMiB,
      uid: account?.uid,
      get exited() {
        return exited;
      },
      exit,
      stopping: false,
    };
    instance.log.note(
      `starting Chromium (pid ${leader}, memory ${group ? `${memoryMiB} MiB` : 'not capped'})`,
    );
    try {
      const version = await Promise.race([
        link.call('Browser.getVersion', {}, startTimeoutMs),
        exit.then(() => {
          throw new Error('Chromium exited while starting');
        }),
      ]);
      browserRef.version = version as unknown as BrowserVersion;
      // The pid said is Chromium's browser process, not bwrap's or the jail's init.
      browserRef.pid = (await browserProcess(leader, executable)) ?? leader;
      return browserRef;
    } catch (error) {
      browserRef.stopping = true;
      await killBrowser(browserRef);
      const detail = stderr.slice(-5).join(' | ');
      if (!noSandbox && /sandbox/i.test(detail)) throw new SandboxError(detail);
      throw new Error(
        `Chromium did not start: ${error instanceof Error ? error.message : String(error)}${detail ? `: ${detail}` : ''}`,
      );
    }
  }

  async function onExit(
    instance: Instance,
    browser: Browser,
    code: number | null,
    signal: NodeJS.Signals | null,
  ): Promise<void> {
    if (browser.stopping) {
      instance.log.note('Chromium stopped');
      return;
    }
    // Said at once (status() reads it the moment the exit is known), made precise below.
    let why = signal ? `killed by ${signal}` : `exited with ${code ?? 'no code'}`;
    instance.reason = `Chromium ${why}`;
    const oom = browser.group ? (await browser.group.oomKills().catch(() => 0)) > browser.oomBefore : false;
    if (oom) why = `killed: out of memory (limit ${Math.round(browser.memoryMiB)} MiB)`;
    instance.reason = `Chromium ${why}`;
    instance.log.note(instance.reason);
    deps.logger.warn({ service: instance.id, pid: browser.pid }, `chrome-headless: Chromium ${why}`);
    // What it forked dies with it: nothing of a dead browser keeps memory.
    await killRest(browser);
  }

  /** Kills every process of the browser: its cgroup, else its process group. */
  async function killRest(browser: Browser): Promise<void> {
    if (browser.group) {
      await browser.group.remove().catch(() => undefined);
      return;
    }
    // Without a group: its process group, then (crashpad's handlers leave that group) whatever else
    // runs as the instance's own account.
    const deadline = Date.now() + 5_000;
    for (;;) {
      // bwrap's group: its death ends the jail's init, and the kernel then ends the whole jail.
      const group = signalGroup(browser.leader, 'SIGKILL');
      const others = browser.uid !== undefined ? signalUid(browser.uid, 'SIGKILL') : false;
      if ((!group && !others) || Date.now() > deadline) return;
      await sleep(20);
    }
  }

  async function killBrowser(browser: Browser): Promise<void> {
    browser.stopping = true;
    browser.link.close('the service is stopping');
    await killRest(browser);
    if (!browser.exited) {
      browser.child.kill('SIGKILL');
      await Promise.race([browser.exit, sleep(5_000)]);
    }
  }

  async function stopBrowser(instance: Instance): Promise<void> {
    const browser = instance.browser;
    instance.browser = undefined;
    instance.proxy.setBrowser(undefined, undefined);
    if (!browser) return;
    browser.stopping = true;
    if (!browser.exited) {
      // Let it close its profile cleanly; then nothing of it may stay.
      await browser.link.call('Browser.close', {}, STOP_GRACE_MS).catch(() => undefined);
      await Promise.race([browser.exit, sleep(STOP_GRACE_MS)]);
    }
    await killBrowser(browser);
  }

  async function stop(ref: ServiceRef): Promise<void> {
    const instance = instances.get(ref.id);
    if (instance) {
      await stopBrowser(instance);
      await instance.proxy.close();
      instances.delete(ref.id);
    }
    // A previous Berth's processes, if any were left in the group.
    if (support) await removeTree(support, ['services', ref.id]);
  }

  return {
    types: ['chrome-headless'],
    provision: (spec) => serial(spec.id, () => start(spec)),
    start: (spec) => serial(spec.id, () => start(spec)),
    restart: (spec) =>
      serial(spec.id, async () => {
        const instance = instances.get(spec.id);
        if (instance) await stopBrowser(instance);
        return start(spec);
      }),
    stop: (ref) => serial(ref.id, () => stop(ref)),
    delete: (ref) =>
      serial(ref.id, async () => {
        await stop(ref);
        await fsp.rm(layout(ref.id).root, { recursive: true, force: true });
        await fsp.rm(tmpDir(ref.id), { recursive: true, force: true });
        if (isRoot()) removeSystemAccount(accountName(ref.id));
      }),
    async status(ref) {
      const instance = instances.get(ref.id);
      const browser = instance?.browser;
      // No longer running (dead, or its DevTools pipe closed as it dies) but its exit not handled yet
      // (the event comes a moment after the kill): wait for the reason.
      if (browser && !browser.exited && (browser.link.closed || !alive(browser.pid))) {
        await Promise.race([browser.exit, sleep(2000)]);
      }
      const reason = instance?.reason ? { reason: instance.reason } : {};
      if (instance && running(browser) && instance.proxy.listening) {
        return { running: true, pid: browser.pid, ...reason };
      }
      return { running: false, pid: null, ...reason };
    },
    async logs(ref, tail) {
      if (!INSTANCE_ID.test(ref.id)) throw new Error(`invalid service instance id '${ref.id}'`);
      const instance = instances.get(ref.id);
      const log = instance?.log ?? new LogFile(layout(ref.id).log);
      return log.tail(tail);
    },
    // Its DevTools proxy serves on a loopback port of its own: the kernel's socket table counts its clients.
    connections: (ports) => establishedConnections(ports),
  };
}

/** The OS account of instance `id`. */
export function accountName(id: string): string {
  return `berth-ch-${id.replace(/-/g, '').slice(0, 20)}`;
}

class SandboxError extends Error {}

/** Where Berths before the jail kept the instance's temporary files (removed when found). */
const tmpDir = (id: string): string => path.join(os.tmpdir(), accountName(id));

/** bubblewrap's options for the jail: only the instance's `browser/` directory is writable. */
function jailArgs(dirs: { browser: string; policies: string }): string[] {
  return [
    ...ISOLATION_ARGS_NESTED_USERNS,
    // Reached through a proxy in Berth's own process: it ends with Berth.
    ...DIE_WITH_BERTH,
    ...readOnlySystemArgs(),
    ...JAIL_ETC.flatMap((entry) => ['--ro-bind-try', entry, entry]),
    '--ro-bind',
    dirs.policies,
    POLICY_DIR,
    ...PRIVATE_KERNEL_MOUNTS,
    '--bind',
    dirs.browser,
    dirs.browser,
    '--remount-ro',
    '/',
    '--chdir',
    dirs.browser,
  ];
}

/**
 * How Chromium ended, from bwrap's exit: bwrap exits with 128 + the signal that killed its command.
 */
function jailedExit(
  code: number | null,
  signal: NodeJS.Signals | null,
): [number | null, NodeJS.Signals | null] {
  if (signal || code === null || code <= 128) return [code, signal];
  const name = Object.entries(os.constants.signals).find(([, number]) => number === code - 128)?.[0];
  return name ? [null, name as NodeJS.Signals] : [code, signal];
}

/** The first process under `root` (the jail's chain) that runs `executable`: Chromium's browser process. */
async function browserProcess(root: number, executable: string): Promise<number | undefined> {
  const target = await fsp.realpath(executable).catch(() => executable);
  for (const pid of descendants(processTree(), root)) {
    if ((await fsp.readlink(`/proc/${pid}/exe`).catch(() => '')) === target) return pid;
  }
  return undefined;
}

/** Alive and not a zombie. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

/** Signals a process group; false when it has no process left. */
function signalGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

/** Signals every process of user `uid` (never root's); false when there was none. */
function signalUid(uid: number, signal: NodeJS.Signals): boolean {
  if (uid < 1) return false;
  const found = processesOfUser(uid);
  for (const pid of found) {
    try {
      process.kill(pid, signal);
    } catch {
      // Exited meanwhile.
    }
  }
  return found.length > 0;
}

class LineSplitter {
  private rest = '';
  constructor(private readonly onLine: (line: string) => void) {}
  push(chunk: Buffer): void {
    const lines = (this.rest + chunk.toString('utf8')).split('\n');
    this.rest = lines.pop() ?? '';
    if (this.rest.length > 4096) {
      lines.push(this.rest);
      this.rest = '';
    }
    for (const line of lines) if (line.trim() !== '') this.onLine(line);
  }
  flush(): void {
    if (this.rest.trim() !== '') this.onLine(this.rest);
    this.rest = '';
  }
}

/**
 * An instance's log: Chromium's stderr and Berth's notes, in a file of Berth's (0600) rotated at
 * LOG_ROTATE_BYTES into `.1`. The token is blanked when written and again when read.
 */
class LogFile {
  secret = '';
  constructor(private readonly file: string) {}

  note(text: string): void {
    this.line(`[berth] ${text}`);
  }

  line(text: string): void {
    const line = `${new Date().toISOString()} ${this.redact(text).slice(0, 2000)}\n`;
    try {
      fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o711 });
      const size = fs.statSync(this.file, { throwIfNoEntry: false })?.size ?? 0;
      if (size > LOG_ROTATE_BYTES) fs.renameSync(this.file, `${this.file}.1`);
      fs.appendFileSync(this.file, line, { mode: 0o600 });
    } catch {
      // A log that cannot be written loses the line, never the browser.
    }
  }

  async tail(count: number): Promise<string[]> {
    const read = (file: string) => fsp.readFile(file, 'utf8').catch(() => '');
    const text = (await read(`${this.file}.1`)) + (await read(this.file));
    const lines = text.split('\n').filter((line) => line !== '');
    return count > 0 ? lines.slice(-count).map((line) => this.redact(line)) : [];
  }

  private redact(text: string): string {
    if (this.secret === '') return text;
    return text.split(this.secret).join('<token>').split(encodeURIComponent(this.secret)).join('<token>');
  }
}
