// Real git repositories for tests: made with the git command in a temporary directory and served over
// smart HTTP by `git http-backend` behind a Node server on a free loopback port.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Berth Test',
  GIT_AUTHOR_EMAIL: 'test@example.com',
  GIT_COMMITTER_NAME: 'Berth Test',
  GIT_COMMITTER_EMAIL: 'test@example.com',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: os.tmpdir(),
};

const git = (cwd: string, ...args: string[]): string =>
  execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' }).trim();

export interface TestRepository {
  /** The working copy's directory (the repository served is its .git). */
  dir: string;
  /** Writes the files and commits them; returns the commit SHA. */
  commit(files: Record<string, string>, message?: string): string;
  /** The same on `branch` (made from the current one when new); the working copy returns to `main`'s branch after. */
  commitOn(branch: string, files: Record<string, string>): string;
}

export function createRepository(root: string, name: string, branch = 'main'): TestRepository {
  const dir = path.join(root, name);
  fs.mkdirSync(dir, { recursive: true });
  git(dir, 'init', '--quiet', '--initial-branch', branch);
  return {
    dir,
    commit(files, message = 'change') {
      for (const [file, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
        fs.writeFileSync(path.join(dir, file), content);
      }
      git(dir, 'add', '--all');
      git(dir, 'commit', '--quiet', '-m', message);
      return git(dir, 'rev-parse', 'HEAD');
    },
    commitOn(other, files) {
      git(dir, 'checkout', '--quiet', '-B', other);
      try {
        return this.commit(files, `change on ${other}`);
      } finally {
        git(dir, 'checkout', '--quiet', branch);
      }
    },
  };
}

export interface GitServer {
  /** `http://127.0.0.1:<port>/<name>/.git` serves the repository made as `<root>/<name>`. */
  url(name: string): string;
  /** Requests received, for tests that prove nothing was fetched. */
  requests: number;
  close(): Promise<void>;
}

/** Serves every repository under `root` read-only over smart HTTP. */
export async function serveRepositories(root: string): Promise<GitServer> {
  const state = { requests: 0 };
  const server = http.createServer((request, response) => {
    state.requests += 1;
    const url = new URL(request.url ?? '/', 'http://localhost');
    const backend = spawn('/usr/lib/git-core/git-http-backend', [], {
      env: {
        ...GIT_ENV,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: '1',
        REQUEST_METHOD: request.method ?? 'GET',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: request.headers['content-type'] ?? '',
        REMOTE_ADDR: '127.0.0.1',
        HTTP_GIT_PROTOCOL: String(request.headers['git-protocol'] ?? ''),
      },
    });
    request.pipe(backend.stdin);
    // CGI output: headers, a blank line, then the body.
    let head = Buffer.alloc(0);
    let headersDone = false;
    backend.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        response.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString().split('\r\n')) {
        const colon = line.indexOf(':');
        const key = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (key.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else response.setHeader(key, value);
      }
      response.statusCode = status;
      response.write(head.subarray(end + 4));
    });
    backend.on('close', () => response.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (name) => `http://127.0.0.1:${port}/${name}/.git`,
    get requests() {
      return state.requests;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
