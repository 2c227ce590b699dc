// A tenant's git repository fetched into a new release directory.
//
// The URL is the tenant's, so git gets it only after every check, and only as data:
// - schemes: https, http and git (file only when the operator allows it), the rule apply checks too
//   (domain/repository-urls.ts); ssh and scp-style addresses, `ext::` and other remote helpers are
//   refused, and GIT_ALLOW_PROTOCOL holds git to the one scheme;
// - the host's addresses pass the private-address guard BEFORE git runs, and git is pinned to the
//   address that was checked: for http(s) through curl's resolve list (`http.curloptResolve`, git ≥ 2.37),
//   for git:// through `core.gitProxy`, a small proxy that connects to the checked address itself and
//   ignores the host git hands it. Redirects (and with them dumb-http alternates) are off, so git never
//   reaches a host that was not checked. No DNS rebinding between check and connect either way;
// - the URL git sees is re-serialised (WHATWG) without credentials, after `--`; credentials travel in
//   the environment as an Authorization header, never in argv (which `ps` shows), and every log line and
//   error message is redacted anyway;
// - a branch is refused if it could be read as an option or a revision expression, then checked by
//   `git check-ref-format refs/heads/<branch>` (prefixed, so it is always data);
// - git runs with no system or global config, an empty HOME, no hooks, no prompts, no submodules, in
//   its own process group that an abort or the deadline kills whole, with a parent-death signal.
// A checked-out symbolic link that leaves the tree is refused, as for archives (archive.ts): Berth
// reads files of a release as root and must not be led to /etc or another tenant's files.
import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { acceptedRepositoryUrls, repositoryUrlProblem } from '../../../domain/repository-urls.js';
import { BlockedAddressError, type AddressGuard } from '../../net/guard.js';
import { findEscapingLink } from './archive.js';

export { packDirectory } from './archive.js';

const execFileAsync = promisify(execFile);

export interface GitSource {
  url: string;
  branch?: string;
}

export type SourceErrorCode =
  | 'invalid-url'
  | 'invalid-branch'
  | 'invalid-commit'
  | 'refused-address'
  | 'unknown-branch'
  | 'unknown-commit'
  | 'not-found'
  | 'auth'
  | 'empty'
  | 'unsafe-link'
  | 'timeout'
  | 'aborted'
  | 'network'
  | 'failed';

export class SourceError extends Error {
  constructor(
    message: string,
    readonly code: SourceErrorCode,
    /** True when fetching again cannot help (bad URL, refused address, unknown branch, auth). */
    readonly permanent: boolean,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'SourceError';
  }
}

export interface GitFetchOptions {
  source: GitSource;
  /** Must not exist yet; created, and removed again on failure. */
  dest: string;
  guard: AddressGuard;
  allowFileUrls: boolean;
  signal: AbortSignal;
  /** git's progress, one line at a time, free of credentials. */
  log(line: string): void;
  timeoutMs: number;
  /** Run git as this account (only when Berth is root; ignored otherwise, like exec.ts). */
  runAs?: { uid: number; gid: number };
}

export interface FetchedSource {
  commit: string;
  branch: string;
}

export type GitCommitOptions = Omit<GitFetchOptions, 'source'> & { source: { url: string }; commit: string };

/** curl's resolve list (`http.curloptResolve`) came with git 2.37; older gits ignore the key silently. */
const MIN_GIT_VERSION: readonly [number, number] = [2, 37];
const DEFAULT_PORTS = { https: 443, http: 80, git: 9418 } as const;
/** `\r`-refreshed progress lines are logged at most this often; final lines always. */
const PROGRESS_INTERVAL_MS = 1000;

/** The clone URL of a repository given as a URL, or as owner/name on a forge such as https://github.com. */
export function repositoryUrl(
  repo: { url?: string; owner?: string; name?: string },
  gitBaseUrl: string,
): string | undefined {
  if (repo.url) return repo.url;
  if (!repo.owner || !repo.name) return undefined;
  for (const part of [repo.owner, repo.name]) {
    if (!/^[A-Za-z0-9_.-]+$/.test(part) || part === '.' || part === '..' || part.startsWith('-')) {
      throw new SourceError(
        `${JSON.stringify(part.slice(0, 100))} is not a valid repository owner or name`,
        'invalid-url',
        true,
      );
    }
  }
  const name = repo.name.endsWith('.git') ? repo.name : `${repo.name}.git`;
  return `${gitBaseUrl.replace(/\/+$/, '')}/${repo.owner}/${name}`;
}

/** Credentials in URLs (`scheme://user:password@`) replaced by `***`, wherever they appear in text. */
function redactUserinfo(text: string): string {
  // Greedy up to the last `@` before the path: a raw `@` inside a password must not leak its tail.
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)[^\s/]*@/gi, '$1***@');
}

/** The URL with any `user:password@` replaced by `***@`; for every error and log line. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) {
      parsed.username = '***';
      parsed.password = '';
      return redactUserinfo(parsed.href);
    }
  } catch {
    // Not a URL: the pattern below still finds credentials.
  }
  return redactUserinfo(url);
}

interface GitTarget {
  scheme: 'https' | 'http' | 'git' | 'file';
  /** What git is given: canonical, without credentials. */
  href: string;
  /** What people are shown. */
  shown: string;
  /** WHATWG hostname (IPv6 in brackets); '' for file. */
  host: string;
  port: number;
  username: string;
  password: string;
  redact(text: string): string;
}

function invalidUrl(url: string, why: string): SourceError {
  return new SourceError(`The repository URL ${redactUrl(url).slice(0, 300)} ${why}`, 'invalid-url', true);
}

function parseGitUrl(raw: string, allowFileUrls: boolean): GitTarget {
  // The rule apply checks the document's URL with (domain/repository-urls.ts): the same URLs pass both.
  const problem = repositoryUrlProblem(raw, { allowFileUrls });
  if (problem !== undefined)
    throw invalidUrl(raw, `${problem}; expected ${acceptedRepositoryUrls({ allowFileUrls })}`);
  const url = new URL(raw);
  const scheme = url.protocol.slice(0, -1) as GitTarget['scheme'];
  const [rawUsername, rawPassword] = [url.username, url.password];
  // Decodable: the rule checked them.
  const username = decodeURIComponent(rawUsername);
  const password = decodeURIComponent(rawPassword);
  url.username = '';
  url.password = '';
  const host = url.hostname;
  const secrets = [password, rawPassword, ...(password ? [] : [username, rawUsername])].filter(
    (s) => s.length > 0,
  );
  if (username || password) {
    secrets.push(Buffer.from(`${username}:${password}`).toString('base64'));
  }
  const redact = (text: string) => {
    let out = redactUserinfo(text);
    for (const secret of secrets) out = out.split(secret).join('***');
    return out;
  };
  const port = scheme === 'file' ? 0 : url.port ? Number(url.port) : DEFAULT_PORTS[scheme];
  return { scheme, href: url.href, shown: redact(redactUrl(raw)), host, port, username, password, redact };
}

/** Refuses a branch that git could read as an option or a revision expression, before git sees it. */
async function checkBranch(branch: string): Promise<void> {
  const refuse = (why: string) =>
    new SourceError(
      `The branch ${JSON.stringify(branch.slice(0, 200))} is not allowed: ${why}`,
      'invalid-branch',
      true,
    );
  if (branch.length === 0 || branch.length > 255) throw refuse('it must have 1 to 255 characters');
  if (branch.startsWith('-')) throw refuse('it starts with "-"');
  if (/[\u0000-\u0020\u007f]/.test(branch)) throw refuse('it contains spaces or control characters');
  if (branch.includes('..') || branch.includes('@{')) throw refuse('it contains ".." or "@{"');
  try {
    // Prefixed with refs/heads/, the value can never be taken for an option.
    await execFileAsync('git', ['check-ref-format', `refs/heads/${branch}`], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1' },
      cwd: os.tmpdir(),
    });
  } catch {
    throw refuse('it is not a valid git branch name');
  }
}

let gitVersion: Promise<[number, number]> | undefined;

async function checkGitVersion(): Promise<void> {
  gitVersion ??= execFileAsync('git', ['--version']).then(({ stdout }) => {
    const match = /(\d+)\.(\d+)/.exec(stdout);
    return [Number(match?.[1] ?? 0), Number(match?.[2] ?? 0)];
  });
  const [major, minor] = await gitVersion;
  const [needMajor, needMinor] = MIN_GIT_VERSION;
  if (major < needMajor || (major === needMajor && minor < needMinor)) {
    throw new SourceError(
      `git ${needMajor}.${needMinor} or newer is needed to fetch over http(s) (found ${major}.${minor})`,
      'failed',
      true,
    );
  }
}

interface Pin {
  address: string;
  family: 4 | 6;
}

/** Checks every address of the host with the guard; the address returned is the one git connects to. */
async function checkAddress(target: GitTarget, guard: AddressGuard): Promise<Pin | undefined> {
  if (target.scheme === 'file') return undefined;
  // The guard speaks http(s) URLs; a git:// host is checked as the same host and port over http.
  const probe = new URL(`${target.scheme === 'https' ? 'https' : 'http'}://${target.host}:${target.port}/`);
  try {
    return await guard.resolve(probe);
  } catch (error) {
    if (!(error instanceof BlockedAddressError)) throw error;
    // A name that does not resolve may resolve later; an address that is refused stays refused.
    const transient = error.reason === 'the host name does not resolve';
    throw new SourceError(`Refused to fetch ${target.shown}: ${error.reason}`, 'refused-address', !transient);
  }
}

/** The -c options every git run gets, pinning the connection to `pin`. */
function gitConfig(target: GitTarget, pin: Pin | undefined, proxyScript: string | undefined): string[] {
  const config = [
    'core.hooksPath=/dev/null',
    'core.fsmonitor=false',
    'credential.helper=',
    'http.followRedirects=false',
    'submodule.recurse=false',
    'fetch.recurseSubmodules=false',
    'init.defaultBranch=main',
    'advice.detachedHead=false',
  ];
  if ((target.scheme === 'https' || target.scheme === 'http') && pin && !net.isIP(target.host)) {
    const address = pin.family === 6 ? `[${pin.address}]` : pin.address;
    config.push(`http.curloptResolve=${target.host}:${target.port}:${address}`);
  }
  if (proxyScript) config.push(`core.gitProxy=${proxyScript}`);
  return config.flatMap((entry) => ['-c', entry]);
}

/**
 * git:// has no resolve list, so git gets a proxy command instead: git runs it with the host and port
 * it parsed, and it ignores them and connects to the checked address and port.
 */
async function writeGitProxy(home: string, pin: Pin, port: number): Promise<string> {
  const script = path.join(home, 'git-proxy.mjs');
  const body = [
    `#!${process.execPath}`,
    "import net from 'node:net';",
    `const socket = net.connect({ host: ${JSON.stringify(pin.address)}, port: ${port} });`,
    "socket.on('error', (error) => { process.stderr.write(`fatal: unable to connect: ${error.message}\\n`); process.exit(1); });",
    'process.stdin.pipe(socket);',
    'socket.pipe(process.stdout);',
    '',
  ].join('\n');
  await fs.writeFile(script, body, { mode: 0o755 });
  return script;
}

function gitEnvironment(target: GitTarget, home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: home,
    XDG_CONFIG_HOME: home,
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_CONFIG_GLOBAL: '/dev/null',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
    SSH_ASKPASS: '/bin/false',
    GIT_SSH_COMMAND: '/bin/false',
    GIT_ALLOW_PROTOCOL: target.scheme,
    GIT_LFS_SKIP_SMUDGE: '1',
    // English messages: failures are classified by them.
    LC_ALL: 'C',
    LANG: 'C',
  };
  if ((target.scheme === 'https' || target.scheme === 'http') && (target.username || target.password)) {
    const basic = Buffer.from(`${target.username}:${target.password}`).toString('base64');
    env.GIT_CONFIG_COUNT = '1';
    env.GIT_CONFIG_KEY_0 = 'http.extraHeader';
    env.GIT_CONFIG_VALUE_0 = `Authorization: Basic ${basic}`;
  }
  return env;
}

/** One fetch: the checked target, its private HOME, the deadline, and how git is started. */
interface Session {
  target: GitTarget;
  dest: string;
  home: string;
  config: string[];
  env: NodeJS.ProcessEnv;
  deadline: number;
  options: Omit<GitFetchOptions, 'source'>;
}

interface GitResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const isRoot = () => process.getuid?.() === 0;

/**
 * Runs git in its own process group (setpriv execs it, so the group leader is git), killing the whole
 * group on abort or at the deadline: git's helpers (remote-https, index-pack) die with it.
 */
function runGit(session: Session, args: string[], cwd: string, streamProgress: boolean): Promise<GitResult> {
  const { options, target } = session;
  if (options.signal.aborted) return Promise.reject(abortError(target));
  const remaining = session.deadline - Date.now();
  if (remaining <= 0) return Promise.reject(timeoutError(target, options.timeoutMs));
  const user =
    options.runAs && isRoot()
      ? [`--reuid=${options.runAs.uid}`, `--regid=${options.runAs.gid}`, '--clear-groups']
      : [];
  const child = spawn('setpriv', [...user, '--pdeathsig', 'KILL', '--', 'git', ...session.config, ...args], {
    cwd,
    env: session.env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stopped: 'aborted' | 'timeout' | undefined;
  let exited = false;
  const killGroup = (reason: 'aborted' | 'timeout') => {
    stopped ??= reason;
    if (exited || child.pid === undefined) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  };
  const onAbort = () => killGroup('aborted');
  options.signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => killGroup('timeout'), remaining);

  let stdout = '';
  let stderr = '';
  let pending = '';
  let lastProgress = 0;
  const emit = (line: string) => {
    if (line.trim()) options.log(tidy(session, line));
  };
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => {
    stdout = (stdout + chunk).slice(-65536);
  });
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-16384);
    if (!streamProgress) return;
    pending += chunk;
    for (let at = pending.search(/[\r\n]/); at !== -1; at = pending.search(/[\r\n]/)) {
      const line = pending.slice(0, at);
      const refreshed = pending[at] === '\r';
      pending = pending.slice(at + 1);
      if (refreshed) {
        if (Date.now() - lastProgress < PROGRESS_INTERVAL_MS) continue;
        lastProgress = Date.now();
      }
      emit(line);
    }
    pending = pending.slice(-4096);
  });

  return new Promise((resolve, reject) => {
    child.on('exit', () => {
      exited = true;
    });
    child.on('error', (error) => {
      exited = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      reject(new SourceError(`Could not run git: ${error.message}`, 'failed', false));
    });
    child.on('close', (code) => {
      exited = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      if (streamProgress) emit(pending);
      if (stopped === 'aborted') reject(abortError(target));
      else if (stopped === 'timeout') reject(timeoutError(target, options.timeoutMs));
      else resolve({ code, stdout, stderr });
    });
  });
}

const abortError = (target: GitTarget) =>
  new SourceError(`Fetching ${target.shown} was cancelled`, 'aborted', false);
const timeoutError = (target: GitTarget, ms: number) =>
  new SourceError(`Fetching ${target.shown} timed out after ${Math.round(ms / 1000)} s`, 'timeout', false);

/** A line of git's for people: no credentials, no path of Berth's, no padding. */
function tidy(session: Session, line: string): string {
  return session.target.redact(line).split(session.dest).join('<release>').trimEnd();
}

/** The lines of git's stderr that explain a failure, redacted. */
function failureDetail(session: Session, stderr: string): string {
  const lines = stderr
    .split(/[\r\n]+/)
    .map((line) => line.trim())
    // git's complaint about GIT_ASKPASS is how a refused prompt looks, not the reason.
    .filter((line) => line.length > 0 && !line.includes('askpass'));
  const explaining = lines.filter((line) => /^(fatal|error|remote):/i.test(line));
  const chosen = (explaining.length > 0 ? explaining : lines.slice(-2)).slice(-3).join('; ');
  return tidy(session, chosen).slice(0, 500) || 'git failed without a message';
}

/** A failed git network command as a SourceError: permanent when asking again cannot help. */
function classifyFailure(session: Session, stderr: string, branch?: string): SourceError {
  const { target } = session;
  const detail = failureDetail(session, stderr);
  if (/Remote branch .* not found|Could not find remote branch/i.test(stderr)) {
    const name = JSON.stringify((branch ?? '').slice(0, 200));
    return new SourceError(`The branch ${name} does not exist in ${target.shown}`, 'unknown-branch', true);
  }
  if (/not our ref|unadvertised object|couldn't find remote ref|no such remote ref/i.test(stderr)) {
    return new SourceError(`Fetching ${target.shown} failed: ${detail}`, 'unknown-commit', true);
  }
  if (
    /Authentication failed|could not read (Username|Password)|terminal prompts disabled|returned error: 40[13]/i.test(
      stderr,
    )
  ) {
    return new SourceError(`Authentication to ${target.shown} failed: ${detail}`, 'auth', true);
  }
  if (
    /repository .*not found|does not appear to be a git repository|returned error: 404|not exported|no such repository/i.test(
      stderr,
    )
  ) {
    return new SourceError(`The repository ${target.shown} was not found: ${detail}`, 'not-found', true);
  }
  if (/returned error: 4\d\d|unable to access .*: URL using bad\/illegal format/i.test(stderr)) {
    return new SourceError(`Fetching ${target.shown} failed: ${detail}`, 'failed', true);
  }
  // Connection refused or reset, DNS, TLS, 5xx, early EOF: the next attempt may succeed.
  return new SourceError(`Fetching ${target.shown} failed: ${detail}`, 'network', false);
}

async function openSession(options: Omit<GitFetchOptions, 'source'>, target: GitTarget): Promise<Session> {
  if (options.signal.aborted) throw abortError(target);
  const deadline = Date.now() + options.timeoutMs;
  if (target.scheme === 'http' || target.scheme === 'https') await checkGitVersion();
  const pin = await checkAddress(target, options.guard);
  const dest = path.resolve(options.dest);
  try {
    // Another account may not read a source being fetched (a release of another application).
    await fs.mkdir(dest, { mode: 0o700 });
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code === 'EEXIST' ? 'already exists' : 'cannot be created';
    throw new SourceError(`The destination ${dest} ${why}`, 'failed', false, { cause: error });
  }
  const home = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-git-home-'));
  try {
    const proxy = target.scheme === 'git' && pin ? await writeGitProxy(home, pin, target.port) : undefined;
    if (options.runAs && isRoot()) {
      await fs.chown(dest, options.runAs.uid, options.runAs.gid);
      await fs.chown(home, options.runAs.uid, options.runAs.gid);
      if (proxy) await fs.chown(proxy, options.runAs.uid, options.runAs.gid);
    }
    return {
      target,
      dest,
      home,
      config: gitConfig(target, pin, proxy),
      env: gitEnvironment(target, home),
      deadline,
      options,
    };
  } catch (error) {
    await fs.rm(home, { recursive: true, force: true });
    await fs.rm(dest, { recursive: true, force: true });
    throw error;
  }
}

/** Runs `work` in a session; on any failure the destination is removed, the private HOME always. */
async function withSession<T>(
  options: Omit<GitFetchOptions, 'source'>,
  target: GitTarget,
  work: (session: Session) => Promise<T>,
): Promise<T> {
  const session = await openSession(options, target);
  try {
    return await work(session);
  } catch (error) {
    await fs.rm(session.dest, { recursive: true, force: true });
    throw error;
  } finally {
    await fs.rm(session.home, { recursive: true, force: true });
  }
}

async function headCommit(session: Session): Promise<string> {
  const head = await runGit(session, ['rev-parse', '--verify', '-q', 'HEAD^{commit}'], session.dest, false);
  const commit = head.stdout.trim();
  if (head.code !== 0 || !/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) {
    throw new SourceError(`The repository ${session.target.shown} has no commits`, 'empty', true);
  }
  return commit;
}

/** Symbolic links of the checked-out tree (not .git) must stay inside it. */
async function checkLinks(session: Session): Promise<void> {
  const links = new Map<string, string>();
  const pending = [''];
  while (pending.length > 0) {
    const dir = pending.pop() as string;
    for (const entry of await fs.readdir(path.join(session.dest, dir), { withFileTypes: true })) {
      const relative = dir ? `${dir}/${entry.name}` : entry.name;
      if (relative === '.git') continue;
      if (entry.isSymbolicLink()) links.set(relative, await fs.readlink(path.join(session.dest, relative)));
      else if (entry.isDirectory()) pending.push(relative);
    }
  }
  const escaping = findEscapingLink(links);
  if (escaping) {
    throw new SourceError(
      `The repository ${session.target.shown} has a link that points outside it: ${escaping.path} -> ${escaping.target}`,
      'unsafe-link',
      true,
    );
  }
}

/**
 * A shallow clone of one branch (the remote's default when none is given) into `dest`. Returns the
 * commit checked out and the branch it came from.
 */
export async function fetchGitSource(options: GitFetchOptions): Promise<FetchedSource> {
  const target = parseGitUrl(options.source.url, options.allowFileUrls);
  const branch = options.source.branch;
  if (branch !== undefined) await checkBranch(branch);
  return withSession(options, target, async (session) => {
    const clone = [
      'clone',
      '--progress',
      '--template=',
      '--depth',
      '1',
      '--single-branch',
      '--no-tags',
      ...(branch !== undefined ? ['--branch', branch] : []),
      '--',
      target.href,
      session.dest,
    ];
    const result = await runGit(session, clone, session.home, true);
    if (result.code !== 0) throw classifyFailure(session, result.stderr, branch);
    const commit = await headCommit(session);
    let fetchedBranch = branch;
    if (fetchedBranch === undefined) {
      const head = await runGit(session, ['symbolic-ref', '--short', '-q', 'HEAD'], session.dest, false);
      fetchedBranch = head.code === 0 ? head.stdout.trim() : '';
    }
    await checkLinks(session);
    return { commit, branch: fetchedBranch };
  });
}

/**
 * The tree of one exact commit (a rollback). Asks for that commit alone first (protocol v2 servers and
 * those with uploadpack.allowReachableSHA1InWant allow it); a server that refuses gets a full fetch of
 * its branches and tags, and the commit is checked out from there.
 */
export async function fetchGitCommit(options: GitCommitOptions): Promise<{ commit: string }> {
  const target = parseGitUrl(options.source.url, options.allowFileUrls);
  const commit = options.commit.toLowerCase();
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(commit)) {
    throw new SourceError(
      `${JSON.stringify(options.commit.slice(0, 100))} is not a full commit id`,
      'invalid-commit',
      true,
    );
  }
  return withSession(options, target, async (session) => {
    const init = await runGit(
      session,
      ['init', '-q', '--template=', '--', session.dest],
      session.home,
      false,
    );
    if (init.code !== 0) throw classifyFailure(session, init.stderr);
    const exact = ['fetch', '--progress', '--no-tags', '--depth', '1', '--', target.href, commit];
    const first = await runGit(session, exact, session.dest, true);
    if (first.code !== 0) {
      const failure = classifyFailure(session, first.stderr);
      if (failure.code !== 'unknown-commit') throw failure;
      options.log('The server does not hand out single commits; fetching all branches and tags');
      const everything = ['+refs/heads/*:refs/remotes/origin/*', '+refs/tags/*:refs/tags/*'];
      const full = await runGit(
        session,
        ['fetch', '--progress', '--no-tags', '--', target.href, ...everything],
        session.dest,
        true,
      );
      if (full.code !== 0) throw classifyFailure(session, full.stderr);
    }
    // The id is validated hex, so it cannot be an option; `--` ends the revisions.
    const checkout = await runGit(session, ['checkout', '-q', '--detach', commit, '--'], session.dest, false);
    if (checkout.code !== 0) {
      throw new SourceError(`The commit ${commit} is not in ${target.shown}`, 'unknown-commit', true);
    }
    if ((await headCommit(session)) !== commit) {
      throw new SourceError(`The commit ${commit} is not in ${target.shown}`, 'unknown-commit', true);
    }
    await checkLinks(session);
    return { commit };
  });
}
