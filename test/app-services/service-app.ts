// A Node.js application that uses its services through nothing but the environment Berth injects:
// PostgreSQL through the `pg` package (copied from Berth's own node_modules into the repository, so
// nothing is downloaded) with DATABASE_URL, Redis through a few lines of RESP with REDIS_URL.
import fs from 'node:fs';
import path from 'node:path';

export const SERVICE_SERVER_JS = `
const http = require('node:http');
const net = require('node:net');
const { Client } = require('pg');

/** Replies to the commands sent on one connection (RESP), once all have come. */
function redis(url, commands) {
  const u = new URL(url);
  const encode = (args) => '*' + args.length + '\\r\\n' +
    args.map((a) => '$' + Buffer.byteLength(String(a)) + '\\r\\n' + a + '\\r\\n').join('');
  const all = [['AUTH', decodeURIComponent(u.username), decodeURIComponent(u.password)], ...commands];
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let buffer = '';
    socket.setEncoding('latin1');
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      buffer += chunk;
      const replies = [];
      let i = 0;
      while (replies.length < all.length) {
        const end = buffer.indexOf('\\r\\n', i);
        if (end < 0) return;
        const type = buffer[i];
        const line = buffer.slice(i + 1, end);
        if (type === '$') {
          const n = Number(line);
          if (n < 0) { replies.push(null); i = end + 2; continue; }
          if (buffer.length < end + 2 + n + 2) return;
          replies.push(buffer.slice(end + 2, end + 2 + n));
          i = end + 2 + n + 2;
        } else {
          replies.push(type === '-' ? { error: line } : line);
          i = end + 2;
        }
      }
      socket.end();
      resolve(replies);
    });
    socket.write(all.map(encode).join(''));
  });
}

async function pgRoundTrip(url, value) {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    // citext comes from the service's settings.extensions: the lookup below ignores case only with it.
    await client.query('CREATE TABLE IF NOT EXISTS notes (id serial PRIMARY KEY, body citext NOT NULL)');
    await client.query('INSERT INTO notes (body) VALUES ($1)', [value]);
    const found = await client.query('SELECT body FROM notes WHERE body = $1', [value.toUpperCase()]);
    const who = await client.query('SELECT current_user AS u, current_database() AS d');
    return { body: found.rows[0] ? found.rows[0].body : null, user: who.rows[0].u, database: who.rows[0].d };
  } finally {
    await client.end();
  }
}

/** Connects with this application's own DATABASE_URL credentials to another port. */
async function pgProbe(port) {
  const url = new URL(process.env.DATABASE_URL);
  url.port = String(port);
  const client = new Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.end();
    return 'connected';
  } catch (error) {
    return 'refused: ' + error.message;
  }
}

http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://app');
  res.setHeader('content-type', 'application/json');
  try {
    if (url.pathname === '/health') return res.end('"ok"');
    if (url.pathname === '/env') {
      return res.end(JSON.stringify({
        keys: Object.keys(process.env).sort(),
        redisUrl: process.env.REDIS_URL ?? null,
        initRan: require('node:fs').existsSync('/data/init.txt')
          ? require('node:fs').readFileSync('/data/init.txt', 'utf8').trim() : null,
      }));
    }
    if (url.pathname === '/roundtrip') {
      const value = url.searchParams.get('value');
      const pg = await pgRoundTrip(process.env.DATABASE_URL, value);
      const [auth, set, got] = await redis(process.env.REDIS_URL, [['SET', 'note', value], ['GET', 'note']]);
      return res.end(JSON.stringify({ pg, redis: { auth, set, got } }));
    }
    if (url.pathname === '/redis') {
      const [auth, got] = await redis(process.env.REDIS_URL, [['GET', 'note']]);
      return res.end(JSON.stringify({ auth, got }));
    }
    if (url.pathname === '/probe') {
      return res.end(JSON.stringify({ result: await pgProbe(Number(url.searchParams.get('port'))) }));
    }
    res.statusCode = 404;
    res.end('{}');
  } catch (error) {
    res.statusCode = 500;
    res.end(JSON.stringify({ error: error.message }));
  }
}).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`;

/** The init command: proves init commands get the services (it reads PostgreSQL before any replica). */
export const SERVICE_INIT_JS = `
const { Client } = require('pg');
const client = new Client({ connectionString: process.env.DATABASE_URL });
client.connect()
  .then(() => client.query("SELECT extname FROM pg_extension WHERE extname = 'citext'"))
  .then((r) => { require('node:fs').writeFileSync('/data/init.txt', 'citext:' + r.rowCount); return client.end(); })
  .catch((e) => { console.error(e.message); process.exit(1); });
`;

/** An npm package and what it requires, from Berth's node_modules, as files of the repository. */
export function packageFiles(name: string): Record<string, string> {
  const root = path.resolve('node_modules');
  const files: Record<string, string> = {};
  const seen = new Set<string>();
  const add = (name: string) => {
    if (seen.has(name)) return;
    seen.add(name);
    const dir = path.join(root, name);
    const walk = (at: string) => {
      for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
        const full = path.join(at, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'node_modules') walk(full);
        } else if (/\.(js|cjs|mjs|json)$/.test(entry.name)) {
          files[path.join('node_modules', path.relative(root, full))] = fs.readFileSync(full, 'utf8');
        }
      }
    };
    walk(dir);
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
      dependencies?: Record<string, string>;
    };
    for (const dependency of Object.keys(manifest.dependencies ?? {})) add(dependency);
  };
  add(name);
  return files;
}

export function serviceAppFiles(): Record<string, string> {
  return {
    ...packageFiles('pg'),
    'server.js': SERVICE_SERVER_JS,
    'init.js': SERVICE_INIT_JS,
    'build.js': "require('node:fs').writeFileSync('built.txt', 'built');",
    'package.json': JSON.stringify({
      name: 'service-app',
      version: '1.0.0',
      scripts: { start: 'node server.js' },
    }),
  };
}
