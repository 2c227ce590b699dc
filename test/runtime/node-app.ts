// The Node.js application the runtime tests deploy: what it answers shows what it got (its build's
// output, its secrets, its volume, its port), and a few paths misbehave on request.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { stringify } from 'yaml';
export const SERVER_JS = `
const http = require('node:http');
const fs = require('node:fs');
const version = fs.readFileSync('version.txt', 'utf8').trim();
const built = fs.existsSync('built.txt') ? fs.readFileSync('built.txt', 'utf8').trim() : null;
const mode = fs.existsSync('mode.txt') ? fs.readFileSync('mode.txt', 'utf8').trim() : 'ok';
let hung = false;
let hiccups = 0;
let churning;
const hold = [];
http.createServer((req, res) => {
  if (req.url === '/health') {
    if (mode === 'unhealthy') { res.statusCode = 500; return res.end('no'); }
    if (hung) return; // never answers
    if (hiccups > 0) { hiccups -= 1; res.statusCode = 500; return res.end('hiccup'); }
    return res.end('ok');
  }
  if (req.url === '/hang') { hung = true; return res.end('hanging'); }
  if (req.url === '/hiccup') { hiccups = 1; return res.end('next check fails'); }
  if (req.url === '/say') { console.log('said by ' + version); return res.end('said'); }
  if (req.url === '/eat') {
    const timer = setInterval(() => hold.push(Buffer.alloc(16 * 1024 * 1024, 1)), 5);
    return res.end('eating');
  }
  if (req.url === '/churn') {
    // Every millisecond the next n into a.txt, then into c.txt (one write each, in place): the volume
    // at any one moment holds c = a or c = a - 1.
    const a = fs.openSync('/data/a.txt', 'w');
    const c = fs.openSync('/data/c.txt', 'w');
    let n = 0;
    churning = setInterval(() => {
      n += 1;
      const text = String(n).padStart(12, '0');
      fs.writeSync(a, text, 0);
      fs.writeSync(c, text, 0);
    }, 1);
    return res.end('churning');
  }
  if (req.url === '/churn-stop') { clearInterval(churning); return res.end('stopped'); }
  if (req.url === '/write') {
    fs.writeFileSync('/data/note.txt', 'written by ' + version);
    return res.end('written');
  }
  if (req.url === '/whoami') {
    return res.end(JSON.stringify({ uid: process.getuid(), pid: process.pid, cwd: process.cwd() }));
  }
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({
    version, built, secret: process.env.APP_SECRET ?? null, port: process.env.PORT,
    host: req.headers.host, forwarded: req.headers['x-forwarded-for'] ?? null,
  }));
}).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

export const PACKAGE_JSON = JSON.stringify({
  name: 'fixture',
  version: '1.0.0',
  scripts: { start: 'node server.js' },
});

/** The files of one version of the application. */
export function nodeAppFiles(version: string, mode: 'ok' | 'unhealthy' = 'ok'): Record<string, string> {
  return {
    'server.js': SERVER_JS,
    'package.json': PACKAGE_JSON,
    'version.txt': version,
    'mode.txt': mode,
    'build.js':
      "require('node:fs').writeFileSync('built.txt', 'built ' + require('node:fs').readFileSync('version.txt', 'utf8').trim() + ' secret=' + (process.env.APP_SECRET ?? 'none'));",
  };
}

/** The Infrastructure document of a nodejs application from `repositoryUrl` (the runtime tests' and the browser harness's). */
export function nodeDocument(
  team: string,
  name: string,
  repositoryUrl: string,
  extra: {
    settings?: Record<string, unknown>;
    application?: Record<string, unknown>;
    spec?: Record<string, unknown>;
  } = {},
): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: repositoryUrl, branch: 'main' },
        commands: { build: ['node build.js'], start: 'npm start' },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi', ...extra.settings },
        ...extra.application,
      },
      domains: [{ domain: `${name}.test` }],
      secrets: [{ key: 'APP_SECRET', value: `secret-of-${name}` }],
      volumes: [{ name: 'data', mount_path: '/data', volume_size: 1 }],
      ...extra.spec,
    },
  });
}

/** The application's files as a tar.gz, under one top-level directory as GitHub's archives have them. */
export function archiveOf(files: Record<string, string>, top = 'app-main'): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-archive-'));
  try {
    fs.mkdirSync(path.join(dir, top));
    for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, top, name), content);
    return execFileSync('tar', ['-czf', '-', '-C', dir, top]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
