// Fetching a tenant's repository with real git: over file:// (only when allowed), over smart HTTP
// (git http-backend behind a small Node server on port 0) and over git:// (git daemon). The servers
// count requests, so a refusal can be shown to happen before git connects at all.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAddressGuard } from '../../src/drivers/net/guard.js';
import { repositoryUrlProblem } from '../../src/domain/repository-urls.js';
import {
  fetchGitCommit,
  fetchGitSource,
  redactUrl,
  repositoryUrl,
  SourceError,
  type GitFetchOptions,
} from '../../src/drivers/runtime/local/source.js';
import { freePort, isRoot, waitFor } from '../helpers/processes.js';

const run = promisify(execFile);
const git = (cwd: string, ...args: string[]) =>
  run('git', ['-c', 'user.email=t@example.test', '-c', 'user.name=Test', ...args], { cwd });

let root: string;
let reposDir: string;
let appRepo: string;
const commits = { first: '', main: '', feature: '' };

interface GitHttpServer {
  url: string;
  requests: string[];
  /** Sockets of requests to /hang/, held open without an answer. */
  hanging: net.Socket[];
  close(): Promise<void>;
}

const USER = 'alice';
const PASSWORD = 'pa55-w0rd-s3cret';

/**
 * git http-backend as CGI. `/private/…` wants basic auth (alice); `/hang/…` never answers; `/v0/…`
 * drops the Git-Protocol header, so upload-pack speaks protocol v0 (which refuses unadvertised
 * commits); `/redirect/…` answers 302 to the same path without the prefix.
 */
async function startGitHttpServer(projectRoot: string): Promise<GitHttpServer> {
  const requests: string[] = [];
  const hanging: net.Socket[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    requests.push(`${req.method} ${url.pathname}${url.search}`);
    let pathInfo = url.pathname;
    if (pathInfo.startsWith('/hang/')) {
      hanging.push(req.socket);
      return;
    }
    if (pathInfo.startsWith('/redirect/')) {
      res.writeHead(302, { Location: `${pathInfo.slice('/redirect'.length)}${url.search}` }).end();
      return;
    }
    if (pathInfo.startsWith('/private/')) {
      const expected = `Basic ${Buffer.from(`${USER}:${PASSWORD}`).toString('base64')}`;
      if (req.headers.authorization !== expected) {
        res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' }).end();
        return;
      }
      pathInfo = pathInfo.slice('/private'.length);
    }
    const v0 = pathInfo.startsWith('/v0/');
    if (v0) pathInfo = pathInfo.slice('/v0'.length);
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: projectRoot,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: pathInfo,
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method,
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        GIT_PROTOCOL: v0 ? '' : String(req.headers['git-protocol'] ?? ''),
        REMOTE_ADDR: req.socket.remoteAddress ?? '',
        GIT_CONFIG_NOSYSTEM: '1',
        HOME: projectRoot,
      },
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      headDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split('\r\n')) {
        const colon = line.indexOf(':');
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else res.setHeader(name, value);
      }
      res.writeHead(status);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    hanging,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let httpServer: GitHttpServer;
let daemon: ChildProcess;
let daemonPort: number;

/** A loopback guard that allows 127.0.0.1 (the operator's allow-list), and maps test names to it. */
const loopbackGuard = createAddressGuard({
  allow: ['127.0.0.1'],
  lookup: (host) =>
    host.endsWith('.berth-test.invalid')
      ? Promise.resolve([{ address: '127.0.0.1', family: 4 }])
      : Promise.reject(new Error(`no such host ${host}`)),
});
const strictGuard = createAddressGuard({ allow: [] });

beforeAll(async () => {
  root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-source-test-'));
  await fs.chmod(root, 0o755);
  reposDir = path.join(root, 'repos');
  appRepo = path.join(reposDir, 'app');
  await fs.mkdir(appRepo, { recursive: true });
  await git(appRepo, 'init', '-q', '-b', 'main');
  await fs.writeFile(path.join(appRepo, 'package.json'), '{"name":"app","version":"1.0.0"}\n');
  await git(appRepo, 'add', '.');
  await git(appRepo, 'commit', '-q', '-m', 'first');
  commits.first = (await git(appRepo, 'rev-parse', 'HEAD')).stdout.trim();
  await fs.writeFile(path.join(appRepo, 'package.json'), '{"name":"app","version":"1.1.0"}\n');
  await fs.symlink('package.json', path.join(appRepo, 'manifest.json'));
  await git(appRepo, 'add', '.');
  await git(appRepo, 'commit', '-q', '-m', 'second');
  commits.main = (await git(appRepo, 'rev-parse', 'HEAD')).stdout.trim();
  await git(appRepo, 'checkout', '-q', '-b', 'feature');
  await fs.writeFile(path.join(appRepo, 'feature.txt'), 'feature\n');
  await git(appRepo, 'add', '.');
  await git(appRepo, 'commit', '-q', '-m', 'feature');
  commits.feature = (await git(appRepo, 'rev-parse', 'HEAD')).stdout.trim();
  await git(appRepo, 'checkout', '-q', 'main');

  // A repository whose symbolic link leaves it.
  const leaky = path.join(reposDir, 'leaky');
  await fs.mkdir(leaky);
  await git(leaky, 'init', '-q', '-b', 'main');
  await fs.symlink('/etc/passwd', path.join(leaky, 'passwd'));
  await git(leaky, 'add', '.');
  await git(leaky, 'commit', '-q', '-m', 'leak');

  httpServer = await startGitHttpServer(reposDir);
  daemonPort = await freePort();
  daemon = spawn(
    'git',
    [
      'daemon',
      '--export-all',
      '--reuseaddr',
      `--base-path=${reposDir}`,
      '--listen=127.0.0.1',
      `--port=${daemonPort}`,
      reposDir,
    ],
    { stdio: 'ignore' },
  );
  await waitFor(
    () =>
      new Promise<true | undefined>((resolve) => {
        const socket = net.connect(daemonPort, '127.0.0.1', () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(undefined));
      }),
  );
});

afterAll(async () => {
  daemon?.kill();
  await httpServer?.close();
  await fs.rm(root, { recursive: true, force: true });
});

let destCount = 0;
const freshDest = () => path.join(root, `dest-${++destCount}`);

function options(url: string, extra: Partial<GitFetchOptions> = {}): GitFetchOptions & { lines: string[] } {
  const lines: string[] = [];
  return {
    source: { url },
    dest: freshDest(),
    guard: loopbackGuard,
    allowFileUrls: false,
    signal: new AbortController().signal,
    log: (line) => lines.push(line),
    timeoutMs: 30_000,
    ...extra,
    lines,
  };
}

async function failure(promise: Promise<unknown>): Promise<SourceError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(SourceError);
  return error as SourceError;
}

const exists = (file: string) =>
  fs.lstat(file).then(
    () => true,
    () => false,
  );

describe('fetchGitSource', () => {
  it('clones the default branch over smart HTTP; the commit is the remote head', async () => {
    const opts = options(`${httpServer.url}/app`);
    const fetched = await fetchGitSource(opts);
    expect(fetched).toEqual({ commit: commits.main, branch: 'main' });
    expect(await fs.readFile(path.join(opts.dest, 'package.json'), 'utf8')).toContain('1.1.0');
    expect(await fs.readlink(path.join(opts.dest, 'manifest.json'))).toBe('package.json');
    // Shallow: one commit only.
    expect((await git(opts.dest, 'rev-list', '--count', 'HEAD')).stdout.trim()).toBe('1');
  });

  it('clones a named branch, through a host name pinned to the address the guard checked', async () => {
    // The name does not exist in DNS: only the pinned address (curl's resolve list) can reach the server.
    const port = new URL(httpServer.url).port;
    const opts = options(`http://git.berth-test.invalid:${port}/app`, {});
    opts.source.branch = 'feature';
    expect(await fetchGitSource(opts)).toEqual({ commit: commits.feature, branch: 'feature' });
    expect(await exists(path.join(opts.dest, 'feature.txt'))).toBe(true);
    expect(opts.lines.length).toBeGreaterThan(0);
  });

  it('clones over git:// through the pinning proxy (git daemon)', async () => {
    const opts = options(`git://git.berth-test.invalid:${daemonPort}/app`);
    expect(await fetchGitSource(opts)).toEqual({ commit: commits.main, branch: 'main' });
  });

  it('accepts file:// only when the operator allows it', async () => {
    const url = `file://${appRepo}`;
    const refused = await failure(fetchGitSource(options(url)));
    expect(refused).toMatchObject({ code: 'invalid-url', permanent: true });
    const opts = options(url, { allowFileUrls: true });
    opts.source.branch = 'feature';
    expect(await fetchGitSource(opts)).toEqual({ commit: commits.feature, branch: 'feature' });
  });

  it('an unknown branch fails permanently and leaves no destination', async () => {
    const opts = options(`${httpServer.url}/app`);
    opts.source.branch = 'no-such-branch';
    const error = await failure(fetchGitSource(opts));
    expect(error).toMatchObject({ code: 'unknown-branch', permanent: true });
    expect(error.message).toContain('"no-such-branch"');
    expect(await exists(opts.dest)).toBe(false);
  });

  it('an unknown repository fails permanently', async () => {
    const error = await failure(fetchGitSource(options(`${httpServer.url}/nothing-here`)));
    expect(error).toMatchObject({ code: 'not-found', permanent: true });
  });

  it('does not follow a redirect, even to the same server', async () => {
    const opts = options(`${httpServer.url}/redirect/app`);
    const before = httpServer.requests.length;
    const error = await failure(fetchGitSource(opts));
    expect(error.code).not.toBe('aborted');
    expect(httpServer.requests.slice(before).every((line) => line.includes('/redirect/'))).toBe(true);
    // Nor is Berth's own path shown to the tenant.
    for (const text of [error.message, ...opts.lines]) expect(text).not.toContain(opts.dest);
  });

  it('credentials reach the server, but never a log line or an error message', async () => {
    const good = options(`http://${USER}:${PASSWORD}@127.0.0.1:${new URL(httpServer.url).port}/private/app`);
    expect((await fetchGitSource(good)).commit).toBe(commits.main);
    // Nor the clone's config: the remote URL git keeps is credential-free.
    expect((await fs.readFile(path.join(good.dest, '.git', 'config'), 'utf8')).includes(PASSWORD)).toBe(
      false,
    );

    const bad = options(
      `http://${USER}:wrong-${PASSWORD}@127.0.0.1:${new URL(httpServer.url).port}/private/app`,
    );
    const error = await failure(fetchGitSource(bad));
    expect(error).toMatchObject({ code: 'auth', permanent: true });
    expect(error.message).toContain('http://***@127.0.0.1');
    for (const text of [error.message, ...good.lines, ...bad.lines]) {
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain(Buffer.from(`${USER}:${PASSWORD}`).toString('base64'));
    }
  });

  it('a private address is refused before git runs: the server never sees a request', async () => {
    const before = httpServer.requests.length;
    for (const url of [`${httpServer.url}/app`, `http://localhost:${new URL(httpServer.url).port}/app`]) {
      const opts = options(url, { guard: strictGuard });
      const error = await failure(fetchGitSource(opts));
      expect(error).toMatchObject({ code: 'refused-address', permanent: true });
      expect(await exists(opts.dest)).toBe(false);
    }
    expect(httpServer.requests.length).toBe(before);

    // git:// too: a listener that counts connections gets none.
    let connections = 0;
    const listener = net.createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const { port } = listener.address() as net.AddressInfo;
    const error = await failure(
      fetchGitSource(options(`git://127.0.0.1:${port}/app`, { guard: strictGuard })),
    );
    expect(error.code).toBe('refused-address');
    await new Promise((resolve) => listener.close(resolve));
    expect(connections).toBe(0);
  });

  it('refuses a branch that could be an option or a revision expression, without running git', async () => {
    const marker = path.join(root, 'pwned');
    const before = httpServer.requests.length;
    for (const branch of [
      `--upload-pack=touch ${marker}`,
      '-b',
      'a..b',
      'main@{1}',
      'with space',
      'ctl\u0001x',
      'x.lock',
    ]) {
      const opts = options(`${httpServer.url}/app`);
      opts.source.branch = branch;
      const error = await failure(fetchGitSource(opts));
      expect(error).toMatchObject({ code: 'invalid-branch', permanent: true });
    }
    expect(httpServer.requests.length).toBe(before);
    expect(await exists(marker)).toBe(false);
  });

  it('refuses ssh, scp-style and remote-helper addresses', async () => {
    for (const url of [
      'ssh://git@127.0.0.1/app',
      'git@github.com:owner/app.git',
      'ext::sh -c touch% /tmp/x',
      'ftp://127.0.0.1/app',
    ]) {
      const error = await failure(fetchGitSource(options(url)));
      expect(error).toMatchObject({ code: 'invalid-url', permanent: true });
      // The reason is the shared rule's, the one apply answers 422 with (domain/repository-urls.ts).
      expect(error.message).toContain(repositoryUrlProblem(url, { allowFileUrls: false }));
    }
  });

  it('refuses a repository whose symbolic link leaves it', async () => {
    const opts = options(`${httpServer.url}/leaky`);
    const error = await failure(fetchGitSource(opts));
    expect(error).toMatchObject({ code: 'unsafe-link', permanent: true });
    expect(error.message).toContain('passwd -> /etc/passwd');
    expect(await exists(opts.dest)).toBe(false);
  });

  it('an abort kills git (its connection closes) and is not permanent', async () => {
    const controller = new AbortController();
    const opts = options(`${httpServer.url}/hang/app`, { signal: controller.signal });
    const pending = fetchGitSource(opts);
    await waitFor(() => Promise.resolve(httpServer.hanging.length > 0 ? true : undefined));
    const socket = httpServer.hanging.at(-1) as net.Socket;
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    controller.abort();
    const error = await failure(pending);
    expect(error).toMatchObject({ code: 'aborted', permanent: false });
    await closed;
    expect(await gitProcessesMentioning(opts.dest)).toEqual([]);
    expect(await exists(opts.dest)).toBe(false);
  });

  it('a timeout kills git and is retryable', async () => {
    const hangingBefore = httpServer.hanging.length;
    const opts = options(`${httpServer.url}/hang/app`, { timeoutMs: 1500 });
    const error = await failure(fetchGitSource(opts));
    expect(httpServer.hanging.length).toBeGreaterThan(hangingBefore);
    expect(error).toMatchObject({ code: 'timeout', permanent: false });
    expect(await gitProcessesMentioning(opts.dest)).toEqual([]);
  });

  it.runIf(isRoot())('runs git as the account it is given', async () => {
    const opts = options(`${httpServer.url}/app`, { runAs: { uid: 65534, gid: 65534 } });
    expect((await fetchGitSource(opts)).commit).toBe(commits.main);
    const stat = await fs.stat(path.join(opts.dest, 'package.json'));
    expect([stat.uid, stat.gid]).toEqual([65534, 65534]);
  });
});

describe('fetchGitCommit', () => {
  it('fetches an older commit by its id (protocol v2 hands it out directly)', async () => {
    const opts = options(`${httpServer.url}/app`);
    expect(await fetchGitCommit({ ...opts, commit: commits.first })).toEqual({ commit: commits.first });
    expect(await fs.readFile(path.join(opts.dest, 'package.json'), 'utf8')).toContain('1.0.0');
  });

  it('falls back to a full fetch when the server refuses unadvertised commits (protocol v0)', async () => {
    const opts = options(`${httpServer.url}/v0/app`);
    expect(await fetchGitCommit({ ...opts, commit: commits.first })).toEqual({ commit: commits.first });
    expect(opts.lines.join('\n')).toContain('does not hand out single commits');
  });

  it('an unknown commit fails permanently; a malformed id is refused before git runs', async () => {
    const opts = options(`${httpServer.url}/v0/app`);
    const unknown = await failure(fetchGitCommit({ ...opts, commit: 'f'.repeat(40) }));
    expect(unknown).toMatchObject({ code: 'unknown-commit', permanent: true });
    expect(await exists(opts.dest)).toBe(false);
    const malformed = await failure(
      fetchGitCommit({ ...options(`${httpServer.url}/app`), commit: '--upload-pack=x' }),
    );
    expect(malformed).toMatchObject({ code: 'invalid-commit', permanent: true });
  });
});

describe('URLs', () => {
  it('redactUrl hides credentials', () => {
    expect(redactUrl('https://user:secret@example.com/a.git')).toBe('https://***@example.com/a.git');
    expect(redactUrl('https://token@example.com/a.git')).toBe('https://***@example.com/a.git');
    expect(redactUrl('https://u:p@ss@example.com/a.git')).not.toContain('ss@example');
    expect(redactUrl('not a url https://u:secret@host/x')).toBe('not a url https://***@host/x');
    expect(redactUrl('https://example.com/a.git')).toBe('https://example.com/a.git');
  });

  it('repositoryUrl takes a URL as it is, or owner/name against the base', () => {
    expect(repositoryUrl({ url: 'https://example.com/x.git' }, 'https://github.com')).toBe(
      'https://example.com/x.git',
    );
    expect(repositoryUrl({ owner: 'acme', name: 'shop' }, 'https://github.com/')).toBe(
      'https://github.com/acme/shop.git',
    );
    expect(repositoryUrl({ owner: 'acme' }, 'https://github.com')).toBeUndefined();
    expect(() => repositoryUrl({ owner: '..', name: 'x' }, 'https://github.com')).toThrow(SourceError);
    expect(() => repositoryUrl({ owner: 'a/b', name: 'x' }, 'https://github.com')).toThrow(SourceError);
  });
});

/** Processes whose command line names `needle` (a unique destination): none once git is killed. */
async function gitProcessesMentioning(needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const pid of await fs.readdir('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes(needle)) found.push(`${pid}: ${cmdline.replace(/\0/g, ' ')}`);
  }
  return found;
}
