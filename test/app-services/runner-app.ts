// A Node.js application that uses its services through nothing but the environment Berth injects: a
// postgresql service with an extension (`pg`, copied like `ws`), a chrome-headless service over the DevTools protocol (`ws`, copied from
// Berth's node_modules into the repository) with BROWSER_WS_ENDPOINT, a gotenberg service with
// GOTENBERG_URL and fetch, the files an sftp service wrote to its volume, and a worker service that
// says it runs in the volume.
import { packageFiles } from './service-app.js';

export const RUNNER_SERVER_JS = `
const http = require('node:http');
const fs = require('node:fs');
const WebSocket = require('ws');
const { Client } = require('pg');

/** citext, from the service's settings.extensions, makes an upper-cased lookup find the row. */
async function citext(value) {
  const client = new Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query('CREATE TABLE IF NOT EXISTS tags (name citext PRIMARY KEY)');
    await client.query('INSERT INTO tags (name) VALUES ($1) ON CONFLICT DO NOTHING', [value]);
    const found = await client.query('SELECT name FROM tags WHERE name = $1', [value.toUpperCase()]);
    return { found: found.rows.length > 0 ? found.rows[0].name : null };
  } finally {
    await client.end();
  }
}

/** The title of \`url\` as the chrome-headless service renders it, over its browser endpoint. */
async function renderTitle(endpoint, url) {
  const ws = new WebSocket(endpoint);
  await new Promise((resolve, reject) => { ws.once('open', resolve); ws.once('error', reject); });
  let id = 0;
  const pending = new Map();
  ws.on('message', (data) => {
    const message = JSON.parse(String(data));
    if (message.id && pending.has(message.id)) { pending.get(message.id)(message); pending.delete(message.id); }
  });
  const send = (method, params = {}, sessionId) => new Promise((resolve) => {
    id += 1;
    pending.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
  });
  try {
    const created = await send('Target.createTarget', { url: 'about:blank' });
    const attached = await send('Target.attachToTarget', { targetId: created.result.targetId, flatten: true });
    const session = attached.result.sessionId;
    await send('Page.navigate', { url }, session);
    for (let i = 0; i < 100; i += 1) {
      const r = await send('Runtime.evaluate', { expression: 'document.readyState + "|" + document.title', returnByValue: true }, session);
      const [state, title] = String(r.result.result.value).split('|');
      if (state === 'complete' && title) return title;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return null;
  } finally {
    ws.close();
  }
}

/** A PDF of an HTML page from the gotenberg service, as any Gotenberg client asks for one. */
async function convert() {
  const form = new FormData();
  form.append('files', new Blob(['<html><head><title>t</title></head><body><h1>Made by gotenberg</h1></body></html>'], { type: 'text/html' }), 'index.html');
  form.append('paperWidth', '8.27');
  const response = await fetch(process.env.GOTENBERG_URL + '/forms/chromium/convert/html', { method: 'POST', body: form });
  const body = Buffer.from(await response.arrayBuffer());
  return { status: response.status, type: response.headers.get('content-type'), magic: body.subarray(0, 5).toString('latin1'), bytes: body.length };
}

http.createServer((req, res) => {
  const url = new URL(req.url, 'http://app');
  const reply = (value) => { res.setHeader('content-type', 'application/json'); res.end(JSON.stringify(value)); };
  const fail = (error) => { res.statusCode = 500; res.end(String(error && error.message || error)); };
  if (url.pathname === '/health') return res.end('ok');
  if (url.pathname === '/page') return res.end('<html><head><title>Rendered for ' + process.env.BERTH_APP_NAME + '</title></head><body>hi</body></html>');
  if (url.pathname === '/chrome') {
    // The service runs outside the application's network: it reaches the replica at the application's
    // own address (eth0's; 127.0.0.1 where there is no network of its own), never at loopback.
    const self = Object.values(require('node:os').networkInterfaces()).flat()
      .find((a) => a.family === 'IPv4' && !a.internal);
    const at = self ? self.address : '127.0.0.1';
    return renderTitle(process.env.BROWSER_WS_ENDPOINT, 'http://' + at + ':' + process.env.PORT + '/page').then((title) => reply({ title }), fail);
  }
  if (url.pathname === '/gotenberg') return convert().then(reply, fail);
  if (url.pathname === '/pg') return citext(url.searchParams.get('value') || 'x').then(reply, fail);
  if (url.pathname === '/file') {
    const name = url.searchParams.get('name') || '';
    if (!/^[a-z0-9.]+$/.test(name)) { res.statusCode = 400; return res.end('bad name'); }
    return reply({ content: fs.existsSync('/data/' + name) ? fs.readFileSync('/data/' + name, 'utf8') : null });
  }
  if (url.pathname === '/env') return reply({ keys: Object.keys(process.env).sort() });
  res.statusCode = 404;
  res.end('not found');
}).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

/** The worker service's command: it writes its pid where the test finds it, and ticks. */
export const RUNNER_WORKER_JS = `
const fs = require('node:fs');
fs.writeFileSync('/data/worker.pid', String(process.pid));
fs.appendFileSync('/data/worker.log', 'started ' + process.pid + ' with ' + (process.env.APP_SECRET ? 'secrets' : 'none') + '\\n');
setInterval(() => undefined, 1000);
process.on('SIGTERM', () => process.exit(0));
`;

export function runnerAppFiles(): Record<string, string> {
  return {
    ...packageFiles('ws'),
    ...packageFiles('pg'),
    'server.js': RUNNER_SERVER_JS,
    'worker.js': RUNNER_WORKER_JS,
    'package.json': JSON.stringify({
      name: 'runner-app',
      version: '1.0.0',
      scripts: { start: 'node server.js' },
    }),
  };
}
