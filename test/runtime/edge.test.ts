// Berth's edge proxy with real sockets on loopback, every port chosen by the kernel: routing by Host
// with round-robin over a route's replicas; the 400, 404 and 503 answers; one retry of an idempotent
// request on another replica when its connection fails (and none for a POST); the X-Forwarded-*
// headers the edge states itself; WebSocket tunnels; bodies streamed both ways without buffering; a
// route switch under keep-alive load that loses no request; `drained`; the TLS listener with
// certificates per SNI name (a throwaway CA made with openssl at test time); and close().
import { execFile, spawn } from 'node:child_process';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  startEdgeProxy,
  type EdgeOptions,
  type EdgeProxy,
  type Upstream,
} from '../../src/drivers/runtime/local/edge.js';
import { startHaproxyEdge, type HaproxyEdgeOptions } from '../../src/drivers/runtime/local/edge-haproxy.js';
import { loadCertificateStore } from '../../src/drivers/runtime/local/edge-tls.js';
import { findAccount, SHARED_ACCOUNTS } from '../../src/drivers/os/users.js';
import { explainListenError } from '../../src/lifecycle.js';

const run = promisify(execFile);
const LOOPBACK = '127.0.0.1';
/** What a backend answers by default: who it is and what it was sent. */
interface Echo {
  backend: string;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Undone after each test, last first. */
let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

// ---- helpers ----

/** Fails with a clear message, rather than the test timeout, when something never happens. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function readBody(stream: NodeJS.ReadableStream): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    stream.on('data', (chunk: Buffer) => (text += chunk.toString()));
    stream.on('end', () => resolve(text));
    stream.on('error', reject);
  });
}

/** Everything a stream has sent so far (after `initial`), and a wait for a given part of it. */
function collect(
  stream: Duplex | http.IncomingMessage,
  initial = '',
): { text(): string; until(part: string): Promise<void> } {
  let text = initial;
  const waiters = new Map<string, Array<() => void>>();
  stream.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    for (const [part, resolvers] of waiters) {
      if (!text.includes(part)) continue;
      waiters.delete(part);
      for (const resolve of resolvers) resolve();
    }
  });
  return {
    text: () => text,
    until(part) {
      if (text.includes(part)) return Promise.resolve();
      return new Promise((resolve) => waiters.set(part, [...(waiters.get(part) ?? []), resolve]));
    },
  };
}

interface Backend {
  name: string;
  upstream: Upstream;
  server: http.Server;
  /** Every request it received, as it arrived. */
  requests: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }>;
  /** Resolves once it has received `count` requests in all. */
  received(count: number): Promise<void>;
  /** Resolves once no connection is open to it. */
  unconnected(): Promise<void>;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** Answers every request with an Echo as JSON. */
const echo =
  (name: string): Handler =>
  (req, res) => {
    void readBody(req).then((body) => {
      const answer: Echo = {
        backend: name,
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body,
      };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  };

/** An application replica: an HTTP server on a loopback port. */
async function backend(name: string, handler: Handler = echo(name)): Promise<Backend> {
  const requests: Backend['requests'] = [];
  let waiters: Array<{ count: number; resolve: () => void }> = [];
  const sockets = new Set<net.Socket>();
  const whenUnconnected: Array<() => void> = [];
  // Longer than any test, so an idle connection the edge keeps open stays open until the edge ends it.
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    for (const waiter of waiters.filter((w) => requests.length >= w.count)) waiter.resolve();
    waiters = waiters.filter((w) => requests.length < w.count);
    handler(req, res);
  });
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      if (sockets.size === 0) for (const resolve of whenUnconnected.splice(0)) resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => server.close(resolve));
  });
  return {
    name,
    upstream: { host: LOOPBACK, port: (server.address() as net.AddressInfo).port },
    server,
    requests,
    received(count) {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve) => waiters.push({ count, resolve }));
    },
    unconnected() {
      if (sockets.size === 0) return Promise.resolve();
      return new Promise((resolve) => whenUnconnected.push(resolve));
    },
  };
}

/** A loopback port nothing listens on (the kernel chose it, then it was closed again). */
async function closedPort(): Promise<Upstream> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, LOOPBACK, resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return { host: LOOPBACK, port };
}

/** The two data planes of the edge (BERTH_EDGE_PROXY): Node's http in Berth's process, and HAProxy. */
type EdgeKind = 'node' | 'haproxy';
const EDGES: readonly EdgeKind[] = ['node', 'haproxy'];
/** Which one `edge()` starts: set by each block of tests. */
let kind: EdgeKind = 'node';

/** `certificatesDir`: where the HAProxy edge reads the pairs the Node edge's `tls.certificate` was loaded from. */
async function edge(
  options: Partial<EdgeOptions> & Pick<HaproxyEdgeOptions, 'slots' | 'maxSlots' | 'slotReuseAfterMs'> = {},
  certificatesDir?: string,
): Promise<EdgeProxy> {
  let proxy: EdgeProxy;
  if (kind === 'haproxy') {
    const { tls: nodeTls, ...rest } = options;
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-haproxy-'));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const tlsOption = nodeTls && certificatesDir ? { tls: { port: nodeTls.port, certificatesDir } } : {};
    proxy = await startHaproxyEdge({ host: LOOPBACK, port: 0, ...rest, ...tlsOption, dir });
  } else {
    const { slots: _slots, maxSlots: _max, slotReuseAfterMs: _reuse, ...nodeOptions } = options;
    proxy = await startEdgeProxy({ host: LOOPBACK, port: 0, ...nodeOptions });
  }
  cleanups.push(() => proxy.close());
  return proxy;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

interface RequestOptions {
  method?: string;
  path?: string;
  headers?: http.OutgoingHttpHeaders;
  body?: string;
  agent?: http.Agent;
}

function request(port: number, host: string, options: RequestOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: LOOPBACK,
      port,
      method: options.method ?? 'GET',
      path: options.path ?? '/',
      headers: { host, ...options.headers },
      agent: options.agent ?? false,
    });
    req.on('error', reject);
    req.on('response', (res) => {
      readBody(res).then(
        (body) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }),
        reject,
      );
    });
    req.end(options.body);
  });
}

/** Resolves once a connection to `port` is refused; a connection still accepted is closed again. */
async function refused(port: number): Promise<void> {
  for (;;) {
    const outcome = await new Promise<string>((resolve) => {
      const socket = net.connect(port, LOOPBACK, () => {
        socket.destroy();
        resolve('accepted');
      });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    if (outcome === 'ECONNREFUSED') return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const echoOf = (reply: Reply): Echo => JSON.parse(reply.body) as Echo;

/** Sends `text` as is on a new connection and returns all the edge answers until it closes. */
function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, LOOPBACK, () => socket.end(text));
    socket.on('error', reject);
    readBody(socket).then(resolve, reject);
  });
}

// ---- the behaviours both edges have (edge.ts in Berth's process, edge-haproxy.ts) ----

describe.each(EDGES)('the %s edge', (which) => {
  beforeAll(() => {
    kind = which;
  });

  // ---- routing ----

  describe('routing', () => {
    it('routes by Host, whatever its case and port, and passes the Host on as the client wrote it', async () => {
      const shop = await backend('shop');
      const blog = await backend('blog');
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [shop.upstream]);
      await proxy.setRoute(['Blog.Test'], [blog.upstream]);

      const toShop = await request(proxy.port, 'SHOP.Test:8080', { path: '/cart?items=2' });
      expect(toShop.status).toBe(200);
      expect(echoOf(toShop)).toMatchObject({ backend: 'shop', url: '/cart?items=2' });
      expect(echoOf(toShop).headers.host).toBe('SHOP.Test:8080');
      // A trailing dot names the same host; route names are stored lower-case.
      expect(echoOf(await request(proxy.port, 'blog.test.')).backend).toBe('blog');
      expect([...proxy.routes().keys()].sort()).toEqual(['blog.test', 'shop.test']);
    });

    it('spreads requests round-robin over the upstreams of a route, shared by its host names', async () => {
      const replicas = [await backend('r0'), await backend('r1'), await backend('r2')];
      const proxy = await edge();
      await proxy.setRoute(
        ['app.test', 'www.app.test'],
        replicas.map((r) => r.upstream),
      );
      const served: string[] = [];
      for (const host of ['app.test', 'www.app.test', 'app.test', 'app.test', 'www.app.test', 'app.test']) {
        served.push(echoOf(await request(proxy.port, host)).backend);
      }
      expect(served).toEqual(['r0', 'r1', 'r2', 'r0', 'r1', 'r2']);
    });

    it('answers 404 for an unknown host, also once its route is removed', async () => {
      const shop = await backend('shop');
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [shop.upstream]);
      expect((await request(proxy.port, 'elsewhere.test')).status).toBe(404);
      await proxy.removeRoute(['shop.test']);
      expect((await request(proxy.port, 'shop.test')).status).toBe(404);
      expect(shop.requests).toHaveLength(0);
    });

    it('counts requests and 5xx answers per routed host name, for metrics; unknown hosts are not counted', async () => {
      const shop = await backend('shop', (req, res) => {
        res.writeHead(req.url === '/broken' ? 500 : 200).end('answered');
      });
      const proxy = await edge();
      await proxy.setRoute(['shop.test', 'www.shop.test'], [shop.upstream]);
      await proxy.setRoute(['empty.test'], []);
      expect((await request(proxy.port, 'shop.test')).status).toBe(200);
      expect((await request(proxy.port, 'SHOP.test:8000', { path: '/broken' })).status).toBe(500);
      expect((await request(proxy.port, 'www.shop.test')).status).toBe(200);
      // A known host without a replica: a 503, an error of that route.
      expect((await request(proxy.port, 'empty.test')).status).toBe(503);
      expect((await request(proxy.port, 'elsewhere.test')).status).toBe(404);
      const traffic = await proxy.traffic();
      expect(Object.fromEntries(traffic)).toEqual({
        'shop.test': { requests: 2, errors: 1 },
        'www.shop.test': { requests: 1, errors: 0 },
        'empty.test': { requests: 1, errors: 1 },
      });
    });

    it("counts the edge's own 502 for a replica that cannot be reached, once, as an error of its host", async () => {
      // HAProxy runs no http-response rule on an answer it makes itself: this one is counted by
      // http-after-response, which also runs on a replica's answers (a 500 still counts once).
      const shop = await backend('shop', (req, res) => {
        res.writeHead(req.url === '/broken' ? 500 : 200).end('answered');
      });
      const proxy = await edge();
      await proxy.setRoute(['down.test'], [await closedPort()]);
      await proxy.setRoute(['shop.test'], [shop.upstream]);
      expect((await request(proxy.port, 'down.test')).status).toBe(502);
      expect((await request(proxy.port, 'down.test', { path: '/again' })).status).toBe(502);
      expect((await request(proxy.port, 'shop.test', { path: '/broken' })).status).toBe(500);
      expect(Object.fromEntries(await proxy.traffic())).toEqual({
        'down.test': { requests: 2, errors: 2 },
        'shop.test': { requests: 1, errors: 1 },
      });
    });

    it('answers 400 for a missing or malformed Host', async () => {
      const proxy = await edge();
      // HTTP/1.0 may omit Host, so the edge itself sees none; HTTP/1.1 without one Node refuses first.
      const statusOf = async (text: string) => (await rawExchange(proxy.port, text)).split('\r\n')[0];
      expect(await statusOf('GET / HTTP/1.0\r\n\r\n')).toBe('HTTP/1.1 400 Bad Request');
      expect(await statusOf('GET / HTTP/1.1\r\nconnection: close\r\n\r\n')).toBe('HTTP/1.1 400 Bad Request');
      for (const host of ['shop.test:http', 'shop test', 'shop..test', '[::1', 'shop.test/x']) {
        expect(await statusOf(`GET / HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`)).toBe(
          'HTTP/1.1 400 Bad Request',
        );
      }
    });

    it('answers 503 with Retry-After for a known host without any upstream', async () => {
      const proxy = await edge();
      await proxy.setRoute(['starting.test'], []);
      const reply = await request(proxy.port, 'starting.test');
      expect(reply.status).toBe(503);
      expect(Number(reply.headers['retry-after'])).toBeGreaterThan(0);
    });
  });

  // ---- retries ----

  describe('retry on a failed connection', () => {
    it('retries a GET once on the next upstream when the connection is refused', async () => {
      const down = await closedPort();
      const up = await backend('up');
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [down, up.upstream]);
      const reply = await request(proxy.port, 'shop.test');
      expect(reply.status).toBe(200);
      expect(echoOf(reply).backend).toBe('up');
      expect(up.requests).toHaveLength(1);
    });

    it('retries a PUT with a body, which the refused connection never consumed', async () => {
      const down = await closedPort();
      const up = await backend('up');
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [down, up.upstream]);
      const reply = await request(proxy.port, 'shop.test', { method: 'PUT', body: 'the whole body' });
      expect(reply.status).toBe(200);
      expect(echoOf(reply)).toMatchObject({ backend: 'up', method: 'PUT', body: 'the whole body' });
    });

    it('retries a GET whose connection the replica resets before answering', async () => {
      const resetting = net.createServer((socket) => socket.resetAndDestroy());
      await new Promise<void>((resolve) => resetting.listen(0, LOOPBACK, resolve));
      cleanups.push(() => new Promise<void>((resolve) => resetting.close(() => resolve())));
      const up = await backend('up');
      const proxy = await edge();
      await proxy.setRoute(
        ['shop.test'],
        [{ host: LOOPBACK, port: (resetting.address() as net.AddressInfo).port }, up.upstream],
      );
      const reply = await request(proxy.port, 'shop.test');
      expect(reply.status).toBe(200);
      expect(echoOf(reply).backend).toBe('up');
    });

    it('does not retry a POST whose connection the replica reset before answering: 502, no other replica sees it', async () => {
      const resetting = net.createServer((socket) => socket.once('data', () => socket.resetAndDestroy()));
      await new Promise<void>((resolve) => resetting.listen(0, LOOPBACK, resolve));
      cleanups.push(() => new Promise<void>((resolve) => resetting.close(() => resolve())));
      const up = await backend('up');
      const proxy = await edge();
      await proxy.setRoute(
        ['shop.test'],
        [{ host: LOOPBACK, port: (resetting.address() as net.AddressInfo).port }, up.upstream],
      );
      const reply = await request(proxy.port, 'shop.test', { method: 'POST', body: 'order=1' });
      expect(reply.status).toBe(502);
      expect(up.requests).toHaveLength(0);
    });

    it('gives up after one retry: 502 when both upstreams refuse', async () => {
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [await closedPort(), await closedPort()]);
      expect((await request(proxy.port, 'shop.test')).status).toBe(502);
    });
  });

  // ---- headers ----

  describe('forwarding headers', () => {
    it('states X-Forwarded-For/-Proto/-Host itself and drops what the client claimed', async () => {
      const app = await backend('app');
      const proxy = await edge();
      await proxy.setRoute(['shop.test'], [app.upstream]);
      const reply = await request(proxy.port, 'Shop.Test:80', {
        headers: {
          'x-forwarded-for': '203.0.113.9',
          'x-forwarded-proto': 'https',
          'x-forwarded-host': 'bank.test',
          'x-forwarded-port': '443',
          forwarded: 'for=203.0.113.9;proto=https',
          'x-real-ip': '203.0.113.9',
          'x-app': 'kept',
        },
      });
      const { headers } = echoOf(reply);
      expect(headers['x-forwarded-for']).toBe('127.0.0.1');
      expect(headers['x-forwarded-proto']).toBe('http');
      expect(headers['x-forwarded-host']).toBe('Shop.Test:80');
      expect(headers.host).toBe('Shop.Test:80');
      expect(headers['x-forwarded-port']).toBeUndefined();
      expect(headers.forwarded).toBeUndefined();
      expect(headers['x-real-ip']).toBeUndefined();
      expect(headers['x-app']).toBe('kept');
    });
  });

  // ---- WebSockets ----

  const WEBSOCKET_GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
  const acceptOf = (key: string) =>
    createHash('sha1')
      .update(key + WEBSOCKET_GUID)
      .digest('base64');

  /** A replica that completes a WebSocket handshake, greets, then echoes every byte back. */
  async function webSocketBackend(): Promise<Backend & { upgrades: http.IncomingMessage[] }> {
    const upgrades: http.IncomingMessage[] = [];
    const app = await backend('ws');
    app.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
      upgrades.push(req);
      const key = String(req.headers['sec-websocket-key']);
      socket.write(
        'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
          `Sec-WebSocket-Accept: ${acceptOf(key)}\r\n\r\nhello from upstream;`,
      );
      socket.on('data', (chunk: Buffer) => socket.write(`echo:${chunk.toString()};`));
      // As WebSocket servers do (ws among them): the client's end of the connection ends the server's.
      socket.on('end', () => socket.end());
      socket.on('error', () => socket.destroy());
    });
    return Object.assign(app, { upgrades });
  }

  /** A WebSocket handshake through the edge; resolves with the tunnel once the 101 arrived. */
  function openWebSocket(
    port: number,
    host: string,
  ): Promise<{ res: http.IncomingMessage; socket: Duplex; received: ReturnType<typeof collect> }> {
    return new Promise((resolve, reject) => {
      const req = http.request({
        host: LOOPBACK,
        port,
        path: '/socket',
        headers: {
          host,
          connection: 'Upgrade',
          upgrade: 'websocket',
          'sec-websocket-key': randomBytes(16).toString('base64'),
          'sec-websocket-version': '13',
        },
        agent: false,
      });
      req.on('error', reject);
      req.on('response', (res) => reject(new Error(`no upgrade: ${res.statusCode}`)));
      req.on('upgrade', (res, socket, head) => {
        const received = collect(socket, head.toString());
        resolve({ res, socket, received });
      });
      req.end();
    });
  }

  describe('WebSockets', () => {
    it('passes the upgrade to the replica and bytes both ways after the 101', async () => {
      const app = await webSocketBackend();
      const proxy = await edge();
      await proxy.setRoute(['chat.test'], [app.upstream]);
      const { res, socket, received } = await within(
        openWebSocket(proxy.port, 'chat.test'),
        5000,
        'handshake',
      );
      cleanups.push(() => void socket.destroy());
      expect(res.statusCode).toBe(101);
      expect(res.headers['sec-websocket-accept']).toBe(
        acceptOf(String(app.upgrades[0]?.headers['sec-websocket-key'])),
      );
      expect(app.upgrades[0]?.headers).toMatchObject({
        upgrade: 'websocket',
        'x-forwarded-proto': 'http',
        'x-forwarded-host': 'chat.test',
      });
      expect(app.upgrades[0]?.url).toBe('/socket');

      await within(received.until('hello from upstream;'), 5000, 'upstream to client');
      socket.write('ping');
      await within(received.until('echo:ping;'), 5000, 'client to upstream and back');
      socket.write('pong');
      await within(received.until('echo:pong;'), 5000, 'second round trip');
    });

    it('counts an open tunnel as in flight until it closes', async () => {
      const app = await webSocketBackend();
      const proxy = await edge();
      await proxy.setRoute(['chat.test'], [app.upstream]);
      const { socket, received } = await within(openWebSocket(proxy.port, 'chat.test'), 5000, 'handshake');
      await within(received.until('hello from upstream;'), 5000, 'greeting');
      expect(await proxy.drained(app.upstream, 20)).toBe(false);
      const drained = proxy.drained(app.upstream, 5000);
      socket.destroy();
      expect(await drained).toBe(true);
    });

    it('answers an upgrade for an unknown host with 404 and closes', async () => {
      const proxy = await edge();
      const answer = await rawExchange(
        proxy.port,
        // A complete handshake request: HAProxy refuses one without its key with 400 before routing.
        'GET / HTTP/1.1\r\nhost: nobody.test\r\nconnection: Upgrade\r\nupgrade: websocket\r\n' +
          `sec-websocket-key: ${randomBytes(16).toString('base64')}\r\nsec-websocket-version: 13\r\n\r\n`,
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 404 Not Found');
    });
  });

  // ---- streaming ----

  describe('streamed bodies', () => {
    it('passes a chunked request body on as it is sent', async () => {
      const firstChunk = deferred<string>();
      const app = await backend('app', (req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => {
          if (body === '') firstChunk.resolve(chunk.toString());
          body += chunk.toString();
        });
        req.on('end', () => res.end(`got ${body}`));
      });
      const proxy = await edge();
      await proxy.setRoute(['upload.test'], [app.upstream]);

      const replied = deferred<Reply>();
      const req = http.request({
        host: LOOPBACK,
        port: proxy.port,
        method: 'POST',
        headers: { host: 'upload.test', 'transfer-encoding': 'chunked' },
        agent: false,
      });
      req.on('error', (error) => replied.resolve({ status: 0, headers: {}, body: String(error) }));
      req.on('response', (res) => {
        void readBody(res).then((body) =>
          replied.resolve({ status: res.statusCode ?? 0, headers: res.headers, body }),
        );
      });
      req.write('first|');
      // The second chunk waits for the replica to have the first: a buffering edge never gets there.
      expect(await within(firstChunk.promise, 5000, 'first chunk at the replica')).toBe('first|');
      expect(app.requests[0]?.headers['transfer-encoding']).toBe('chunked');
      req.end('second');
      const reply = await within(replied.promise, 5000, 'response');
      expect(reply).toMatchObject({ status: 200, body: 'got first|second' });
    });

    it('passes a streamed response (server-sent events) on chunk by chunk', async () => {
      const clientGot = [deferred(), deferred(), deferred()];
      const app = await backend('events', (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        // Each event waits until the client has the one before (the headers, first).
        void (async () => {
          for (const [i, got] of clientGot.entries()) {
            await got.promise;
            res.write(`data: event ${i}\n\n`);
          }
          res.end();
        })();
      });
      const proxy = await edge();
      await proxy.setRoute(['events.test'], [app.upstream]);

      const res = await within(
        new Promise<http.IncomingMessage>((resolve, reject) => {
          http
            .get(
              { host: LOOPBACK, port: proxy.port, headers: { host: 'events.test' }, agent: false },
              resolve,
            )
            .on('error', reject);
        }),
        5000,
        'response headers before any event',
      );
      expect(res.headers['content-type']).toBe('text/event-stream');
      const received = collect(res);
      const ended = new Promise((resolve) => res.once('end', resolve));
      clientGot[0]?.resolve();
      await within(received.until('data: event 0\n\n'), 5000, 'event 0');
      clientGot[1]?.resolve();
      await within(received.until('data: event 1\n\n'), 5000, 'event 1');
      clientGot[2]?.resolve();
      await within(ended, 5000, 'end of the stream');
      expect(received.text()).toBe('data: event 0\n\ndata: event 1\n\ndata: event 2\n\n');
    });
  });

  // ---- switching routes and draining ----

  describe('route switch and drained', () => {
    it('switches a route under keep-alive load without failing a request, then drains the old upstream', async () => {
      const a = await backend('a');
      const b = await backend('b');
      const proxy = await edge();
      await proxy.setRoute(['load.test'], [a.upstream]);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
      cleanups.push(() => agent.destroy());

      let stop = false;
      const failures: string[] = [];
      const loop = async () => {
        while (!stop) {
          try {
            const reply = await request(proxy.port, 'load.test', { agent });
            if (reply.status !== 200) failures.push(`status ${reply.status}: ${reply.body}`);
          } catch (error) {
            failures.push(String(error));
          }
        }
      };
      const loops = Array.from({ length: 8 }, () => loop());
      await within(a.received(150), 10_000, 'load on a');
      await proxy.setRoute(['load.test'], [b.upstream]);
      await within(b.received(150), 10_000, 'load on b');
      stop = true;
      await Promise.all(loops);

      expect(failures).toEqual([]);
      expect(await proxy.drained(a.upstream, 5000)).toBe(true);
      const servedByA = a.requests.length;
      for (let i = 0; i < 20; i++)
        expect(echoOf(await request(proxy.port, 'load.test', { agent })).backend).toBe('b');
      expect(a.requests).toHaveLength(servedByA);
      // The edge keeps no idle connection to an upstream that left every route.
      await within(a.unconnected(), 5000, 'connections to a closed');
    });

    it('resolves drained false while a slow request is in flight past the timeout, true once it finished', async () => {
      const release = deferred();
      const slow = await backend('slow', (_req, res) => void release.promise.then(() => res.end('late')));
      const proxy = await edge();
      await proxy.setRoute(['slow.test'], [slow.upstream]);
      const reply = request(proxy.port, 'slow.test');
      await within(slow.received(1), 5000, 'request at the replica');

      expect(await proxy.drained(slow.upstream, 30)).toBe(false);
      const drained = proxy.drained(slow.upstream, 5000);
      release.resolve();
      expect(await drained).toBe(true);
      expect(await reply).toMatchObject({ status: 200, body: 'late' });
      // An upstream that never had a request is drained at once.
      expect(await proxy.drained(await closedPort(), 1)).toBe(true);
    });

    it('closes the idle connection of the last request to an upstream switched away from', async () => {
      const release = deferred();
      const old = await backend('old', (_req, res) => void release.promise.then(() => res.end('old')));
      const next = await backend('next');
      const proxy = await edge();
      await proxy.setRoute(['app.test'], [old.upstream]);
      const reply = request(proxy.port, 'app.test');
      await within(old.received(1), 5000, 'request at the old replica');
      await proxy.setRoute(['app.test'], [next.upstream]);

      const drained = proxy.drained(old.upstream, 5000);
      release.resolve();
      expect(await drained).toBe(true);
      expect((await reply).body).toBe('old');
      await within(old.unconnected(), 5000, 'connections to old closed');
    });
  });

  // ---- close ----

  describe('close', () => {
    it('stops accepting at once and waits for the requests in flight', async () => {
      const release = deferred();
      const slow = await backend('slow', (_req, res) => void release.promise.then(() => res.end('finished')));
      const proxy = await edge();
      await proxy.setRoute(['slow.test'], [slow.upstream]);
      const reply = request(proxy.port, 'slow.test');
      await within(slow.received(1), 5000, 'request at the replica');

      let closed = false;
      const closing = proxy.close().then(() => (closed = true));
      // The Node edge refuses the next connection at once; HAProxy once it has handled its stop signal.
      await within(refused(proxy.port), 2000, 'new connections refused');
      expect(closed).toBe(false);
      release.resolve();
      expect(await reply).toMatchObject({ status: 200, body: 'finished' });
      await within(closing, 5000, 'close');
    });

    it('ends idle keep-alive connections', async () => {
      const app = await backend('app');
      const proxy = await edge();
      await proxy.setRoute(['app.test'], [app.upstream]);
      const agent = new http.Agent({ keepAlive: true });
      cleanups.push(() => agent.destroy());
      expect((await request(proxy.port, 'app.test', { agent })).status).toBe(200);
      const idle = Object.values(agent.freeSockets).flat()[0];
      expect(idle).toBeDefined();
      const socketClosed = new Promise((resolve) => idle?.once('close', resolve));
      await within(proxy.close(), 5000, 'close');
      await within(socketClosed, 5000, 'idle client connection closed');
    });

    it('cuts requests still in flight after closeTimeoutMs', async () => {
      const never = await backend('never', () => undefined);
      const proxy = await edge({ closeTimeoutMs: 100 });
      await proxy.setRoute(['never.test'], [never.upstream]);
      const reply = request(proxy.port, 'never.test');
      // Handled at once, so the rejection of a cut request is never unhandled.
      const outcome = reply.then(
        () => 'answered',
        (error: NodeJS.ErrnoException) => error.code ?? error.message,
      );
      await within(never.received(1), 5000, 'request at the replica');
      await within(proxy.close(), 5000, 'close');
      expect(await outcome).toBe('ECONNRESET');
    });
  });
});

// ---- what only one of the two edges does ----

// The Node edge only. HAProxy 2.6 differs here: it retries any request whose connection was refused
// (the request never left the edge; `retry-on conn-failure`), and it passes on headers a Connection
// header names (RFC 9110 7.6.1 says a proxy removes them; HAProxy removes only the standard hop-by-hop
// ones, and dropping arbitrary names would need Lua). The Node edge's logger is its own.
describe('the node edge only', () => {
  beforeAll(() => {
    kind = 'node';
  });

  it('does not retry a POST on a refused connection: the client gets 502 and no other replica sees it', async () => {
    const down = await closedPort();
    const up = await backend('up');
    const warnings: string[] = [];
    const proxy = await edge({ logger: { warn: (_obj, msg) => warnings.push(msg) } });
    await proxy.setRoute(['shop.test'], [down, up.upstream]);
    const reply = await request(proxy.port, 'shop.test', { method: 'POST', body: 'order=1' });
    expect(reply.status).toBe(502);
    expect(up.requests).toHaveLength(0);
    expect(warnings).toEqual(['edge: upstream connection failed']);
  });

  it("drops request headers the client's Connection header names", async () => {
    const app = await backend('app');
    const proxy = await edge();
    await proxy.setRoute(['shop.test'], [app.upstream]);
    const reply = await request(proxy.port, 'shop.test', {
      headers: { connection: 'x-hop', 'x-hop': 'secret', 'x-app': 'kept' },
    });
    expect(echoOf(reply).headers['x-hop']).toBeUndefined();
    expect(echoOf(reply).headers['x-app']).toBe('kept');
  });

  it('keeps hop-by-hop headers of the response from the client', async () => {
    const app = await backend('app', (_req, res) => {
      res.writeHead(200, {
        connection: 'keep-alive, x-upstream-hop',
        'x-upstream-hop': '1',
        'x-app': 'yes',
      });
      res.end('ok');
    });
    const proxy = await edge();
    await proxy.setRoute(['shop.test'], [app.upstream]);
    const reply = await request(proxy.port, 'shop.test');
    expect(reply.body).toBe('ok');
    expect(reply.headers['x-upstream-hop']).toBeUndefined();
    expect(reply.headers['x-app']).toBe('yes');
  });
});

describe('the haproxy edge only', () => {
  beforeAll(() => {
    kind = 'haproxy';
  });

  it('retries a POST on a refused connection, which never carried the request', async () => {
    const down = await closedPort();
    const up = await backend('up');
    const proxy = await edge();
    await proxy.setRoute(['shop.test'], [down, up.upstream]);
    const reply = await request(proxy.port, 'shop.test', { method: 'POST', body: 'order=1' });
    expect(reply.status).toBe(200);
    expect(echoOf(reply)).toMatchObject({ backend: 'up', method: 'POST', body: 'order=1' });
  });

  it('refuses a host name or an upstream that is not of the strict form, before any command', async () => {
    const proxy = await edge();
    const app = await backend('app');
    for (const hostname of ['shop.test show stat', 'shop.test;shutdown', 'a\nb', '', 'ex ample.test'])
      expect(() => proxy.setRoute([hostname], [app.upstream])).toThrow(/invalid host name/);
    expect(() => proxy.setRoute(['shop.test'], [{ host: '127.0.0.1 port 1', port: 80 }])).toThrow(/IPv4/);
    expect(() => proxy.setRoute(['shop.test'], [{ host: LOOPBACK, port: 70_000 }])).toThrow(/port/);
    expect(proxy.routes().size).toBe(0);
    await proxy.setRoute(['shop.test'], [app.upstream]);
    expect((await request(proxy.port, 'shop.test')).status).toBe(200);
  });

  it('restarts HAProxy when it dies, says so, and serves the same routes again', async () => {
    const app = await backend('app');
    const messages: string[] = [];
    const logger = {
      warn: (_obj: object, msg: string) => messages.push(msg),
      info: (_obj: object, msg: string) => messages.push(msg),
    };
    const proxy = await edge({ logger });
    await proxy.setRoute(['shop.test'], [app.upstream]);
    await proxy.setRoute(['down.test'], []);
    const pidOf = async () =>
      Number(
        (await run('pgrep', ['-f', `haproxy -db -f .*berth-edge-haproxy-`])).stdout.trim().split('\n')[0],
      );
    process.kill(await pidOf(), 'SIGKILL');
    await within(
      (async () => {
        while (!messages.includes('edge: haproxy restarted'))
          await new Promise((resolve) => setTimeout(resolve, 50));
      })(),
      10_000,
      'restart',
    );
    expect(messages).toContain('edge: haproxy exited; restarting it');
    expect(echoOf(await request(proxy.port, 'shop.test')).backend).toBe('app');
    expect((await request(proxy.port, 'down.test')).status).toBe(503);
    // Later changes reach the restarted process.
    await proxy.removeRoute(['shop.test']);
    expect((await request(proxy.port, 'shop.test')).status).toBe(404);
  });

  it('reuses a retired route slot for another replica, and never sends to the replica it had before', async () => {
    const [a, b, c] = [await backend('a'), await backend('b'), await backend('c')];
    const proxy = await edge({ slots: 2, maxSlots: 2, slotReuseAfterMs: 2500 });
    const agent = new http.Agent({ keepAlive: true, maxSockets: 2 });
    cleanups.push(() => agent.destroy());
    await proxy.setRoute(['app.test'], [a.upstream]);
    expect(echoOf(await request(proxy.port, 'app.test', { agent })).backend).toBe('a');
    await proxy.setRoute(['app.test'], [b.upstream]);
    expect(echoOf(await request(proxy.port, 'app.test', { agent })).backend).toBe('b');
    // Both slots taken (a's retired moments ago): no third route yet.
    await expect(proxy.setRoute(['other.test'], [c.upstream])).rejects.toThrow(/more than 2 routes/);
    await new Promise((resolve) => setTimeout(resolve, 2600));
    // a's slot again, now with c's address: a, still up and keeping connections, gets nothing more.
    await proxy.setRoute(['app.test'], [c.upstream]);
    const served = a.requests.length;
    for (let i = 0; i < 10; i++)
      expect(echoOf(await request(proxy.port, 'app.test', { agent })).backend).toBe('c');
    expect(a.requests).toHaveLength(served);
  });

  it('doubles its route slots by a seamless reload when all are taken, losing no request of a steady load', async () => {
    const [a, b, c] = [await backend('a'), await backend('b'), await backend('c')];
    const messages: string[] = [];
    const warnings: object[] = [];
    const logger = {
      warn: (obj: object) => warnings.push(obj),
      info: (_obj: object, msg: string) => messages.push(msg),
    };
    const proxy = await edge({ slots: 1, logger });
    await proxy.setRoute(['a.test'], [a.upstream]);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    cleanups.push(() => agent.destroy());
    let stop = false;
    let served = 0;
    const failures: string[] = [];
    const client = async () => {
      while (!stop) {
        const reply = await request(proxy.port, 'a.test', { agent }).catch((error: Error) => error);
        if (reply instanceof Error) failures.push(reply.message);
        else if (echoOf(reply).backend !== 'a') failures.push(`${reply.status} ${reply.body}`);
        else served += 1;
      }
    };
    const servedAtLeast = async (count: number) => {
      while (served < count && failures.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    const clients = [client(), client(), client(), client()];
    try {
      await servedAtLeast(20);
      await proxy.setRoute(['b.test'], [b.upstream]); // 1 → 2 slots
      await proxy.setRoute(['c.test'], [c.upstream]); // 2 → 4 slots
      await servedAtLeast(served + 40);
    } finally {
      stop = true;
      await Promise.all(clients);
    }
    expect(failures).toEqual([]);
    expect(messages.filter((m) => m === 'edge: haproxy reloaded with more route slots')).toHaveLength(2);
    // Slot switches and the old processes' stops are Berth's doing: nothing for an operator to look at.
    expect(warnings).toEqual([]);
    for (const name of ['a', 'b', 'c'])
      expect(echoOf(await request(proxy.port, `${name}.test`)).backend).toBe(name);
  });

  it('fails every TLS handshake when no certificate is there, and still serves plain HTTP', async () => {
    const app = await backend('app');
    const proxy = await edge({ tls: { port: 0, certificate: () => undefined } }, '/nonexistent/certs');
    await proxy.setRoute(['shop.test'], [app.upstream]);
    const handshake = new Promise<string>((resolve) => {
      const socket = tls.connect({ host: LOOPBACK, port: proxy.tlsPort ?? 0, servername: 'shop.test' }, () =>
        resolve('connected'),
      );
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    });
    expect(await handshake).not.toBe('connected');
    expect((await request(proxy.port, 'shop.test')).status).toBe(200);
  });

  it('fails to start at once, saying why, when HAProxy is not installed', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-haproxy-none-'));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const started = Date.now();
    await expect(
      startHaproxyEdge({
        host: LOOPBACK,
        port: 0,
        dir: path.join(dir, 'edge'),
        binary: path.join(dir, 'no-haproxy'),
      }),
    ).rejects.toThrow(/did not start: .*ENOENT.*BERTH_EDGE_PROXY=node/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('leaves no HAProxy process running after close, and its socket is private', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-haproxy-own-'));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const proxy = await startHaproxyEdge({ host: LOOPBACK, port: 0, dir: path.join(dir, 'edge') });
    expect((await fs.stat(path.join(dir, 'edge'))).mode & 0o777).toBe(0o700);
    expect((await fs.stat(path.join(dir, 'edge', 'admin.sock'))).mode & 0o777).toBe(0o600);
    const pid = Number(await fs.readFile(path.join(dir, 'edge', 'haproxy.pid'), 'utf8'));
    expect(() => process.kill(pid, 0)).not.toThrow();
    await proxy.close();
    expect(() => process.kill(pid, 0)).toThrow();
  });
});

// ---- a port already taken ----

/** A loopback port a plain server holds until the test ends. */
async function takenPort(): Promise<number> {
  const holder = net.createServer();
  await new Promise<void>((resolve) => holder.listen(0, LOOPBACK, resolve));
  cleanups.push(() => new Promise<void>((resolve) => holder.close(() => resolve())));
  return (holder.address() as net.AddressInfo).port;
}

/** What `berth serve` says for the edge's start failure (src/lifecycle.ts). */
const explainEdge = (error: unknown, port: number) =>
  (explainListenError(error, 'the edge proxy (applications)', 'edgePort', port) as Error).message;

describe.each(EDGES)('a taken port on the %s edge', (which) => {
  beforeAll(() => {
    kind = which;
  });

  it('fails the start with EADDRINUSE, which Berth explains naming BERTH_EDGE_PORT', async () => {
    const port = await takenPort();
    const error = await edge({ port }).then(
      () => new Error('the edge started on a taken port'),
      (failure: unknown) => failure,
    );
    expect(error).toMatchObject({ code: 'EADDRINUSE' });
    expect(explainEdge(error, port)).toBe(
      `port ${port} for the edge proxy (applications) is already in use (another Berth?); choose another with --edge-port or BERTH_EDGE_PORT (0 picks a free port)`,
    );
  });

  it('says it is the TLS port when that one is taken', async () => {
    const port = await takenPort();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-taken-'));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    const started =
      which === 'haproxy'
        ? startHaproxyEdge({
            host: LOOPBACK,
            port: 0,
            dir: path.join(dir, 'edge'),
            tls: { port, certificatesDir: dir },
          })
        : startEdgeProxy({ host: LOOPBACK, port: 0, tls: { port, certificate: () => undefined } });
    await expect(started).rejects.toMatchObject({ code: 'EADDRINUSE', listener: 'tls' });
  });
});

describe('a second HAProxy edge on the port of a first', () => {
  beforeAll(() => {
    kind = 'haproxy';
  });

  it('does not start beside it: the first keeps every connection', async () => {
    const app = await backend('first');
    const first = await edge();
    await first.setRoute(['shop.test'], [app.upstream]);
    const error = await edge({ port: first.port }).then(
      () => new Error('a second HAProxy shares the port'),
      (failure: unknown) => failure,
    );
    expect(explainEdge(error, first.port)).toContain('--edge-port or BERTH_EDGE_PORT');
    for (let i = 0; i < 20; i++) expect(echoOf(await request(first.port, 'shop.test')).backend).toBe('first');
  });

  it('binds without SO_REUSEPORT: a HAProxy that would share the port cannot bind it', async () => {
    const first = await edge();
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-reuse-'));
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
    // HAProxy's defaults (SO_REUSEPORT on), as another program or an older Berth would bind.
    const config = path.join(dir, 'haproxy.cfg');
    const socket = path.join(dir, 'admin.sock');
    await fs.writeFile(
      config,
      `global\n  stats socket ${socket} mode 600 level admin\ndefaults\n  mode http\n  timeout connect 1s\n  timeout client 1s\n  timeout server 1s\nfrontend other\n  bind ${LOOPBACK}:${first.port}\n`,
    );
    const other = spawn('haproxy', ['-db', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    other.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => other.once('exit', (code) => resolve(code)));
    cleanups.push(() => {
      other.kill('SIGKILL');
    });
    // It either gives up on the bind (exits) or serves (its runtime API answers), whichever comes first.
    const answers = () =>
      new Promise<boolean>((resolve) => {
        const connection = net.connect(socket);
        let text = '';
        connection.on('data', (chunk: Buffer) => (text += chunk.toString()));
        connection.on('end', () => resolve(/^Pid: /m.test(text)));
        connection.on('error', () => resolve(false));
        connection.end('show info\n');
      });
    const outcome = await within(
      Promise.race([
        exited.then(() => 'exited'),
        (async () => {
          while (!(await answers())) await new Promise((resolve) => setTimeout(resolve, 20));
          return 'serving';
        })(),
      ]),
      10_000,
      'the other HAProxy',
    );
    expect(outcome).toBe('exited');
    expect(stderr).toMatch(/cannot bind socket|Address already in use/);
  });

  it.skipIf(process.getuid?.() !== 0)(
    'serves as the unprivileged berth-edge account, also after a reload, and Berth still drives it',
    async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-account-'));
      cleanups.push(() => fs.rm(dir, { recursive: true, force: true }));
      const proxy = await startHaproxyEdge({
        host: LOOPBACK,
        port: 0,
        dir: path.join(dir, 'edge'),
        slots: 1,
      });
      cleanups.push(() => proxy.close());
      const account = findAccount(SHARED_ACCOUNTS.edge)!;
      expect(account.uid).toBeGreaterThan(0);
      const idsOf = async () => {
        const pid = Number(await fs.readFile(path.join(dir, 'edge', 'haproxy.pid'), 'utf8'));
        const status = await fs.readFile(`/proc/${pid}/status`, 'utf8');
        return {
          pid,
          uid: /^Uid:\s+(.*)$/m.exec(status)![1]!.split(/\s+/).map(Number),
          gid: /^Gid:\s+(.*)$/m.exec(status)![1]!.split(/\s+/).map(Number),
          capabilities: /^CapEff:\s+(\S+)$/m.exec(status)![1],
        };
      };
      const before = await idsOf();
      expect(before.uid).toEqual([account.uid, account.uid, account.uid, account.uid]);
      expect(before.gid).toEqual([account.gid, account.gid, account.gid, account.gid]);
      expect(before.capabilities).toBe('0000000000000000');
      // Its runtime socket stays Berth's (root's), and a reload (two routes on one slot) works.
      expect((await fs.stat(path.join(dir, 'edge', 'admin.sock'))).uid).toBe(0);
      const [a, b] = [await backend('a'), await backend('b')];
      await proxy.setRoute(['a.test'], [a.upstream]);
      await proxy.setRoute(['b.test'], [b.upstream]);
      const after = await idsOf();
      expect(after.pid).not.toBe(before.pid);
      expect(after.uid).toEqual(before.uid);
      expect(echoOf(await request(proxy.port, 'a.test')).backend).toBe('a');
      expect(echoOf(await request(proxy.port, 'b.test')).backend).toBe('b');
    },
  );
});

// ---- TLS ----

describe.each(EDGES)('TLS on the %s edge', (which) => {
  beforeAll(() => {
    kind = which;
  });
  let root: string;
  let certs: string;
  let ca: string;
  /** Fingerprint of the certificate each file pair holds, by pair name. */
  const fingerprints = new Map<string, string>();

  const openssl = (...args: string[]) => run('openssl', args, { cwd: root });
  const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

  /** A leaf certificate for `dnsName` signed by the test CA, as `<certs>/<pair>.crt` + `.key`. */
  async function leaf(pair: string, dnsName: string, days: number): Promise<void> {
    await openssl(
      'req',
      '-x509',
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      ...EC,
      '-keyout',
      path.join(certs, `${pair}.key`),
      '-out',
      path.join(certs, `${pair}.crt`),
      '-days',
      String(days),
      '-subj',
      `/CN=${dnsName}`,
      '-addext',
      `subjectAltName=DNS:${dnsName}`,
      '-addext',
      'basicConstraints=critical,CA:FALSE',
    );
    const pem = await fs.readFile(path.join(certs, `${pair}.crt`), 'utf8');
    fingerprints.set(pair, new X509Certificate(pem).fingerprint256);
  }

  beforeAll(async () => {
    root = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-edge-tls-'));
    certs = path.join(root, 'certs');
    await fs.mkdir(certs);
    await openssl(
      'req',
      '-x509',
      ...EC,
      '-keyout',
      'ca.key',
      '-out',
      'ca.crt',
      '-days',
      '3',
      '-subj',
      '/CN=Berth Test CA',
    );
    ca = await fs.readFile(path.join(root, 'ca.crt'), 'utf8');
    // Sorted, `shop-renewed` loads before `shop`: the longer-valid one must win whatever the order.
    await leaf('shop-renewed', 'shop.test', 30);
    await leaf('shop', 'shop.test', 2);
    await leaf('wildcard', '*.apps.test', 2);
    // A certificate beside a key of another pair.
    await leaf('mismatched', 'mismatched.test', 2);
    await fs.copyFile(path.join(certs, 'shop.key'), path.join(certs, 'mismatched.key'));
    // A certificate without its key.
    await leaf('orphan', 'orphan.test', 2);
    await fs.rm(path.join(certs, 'orphan.key'));
  });

  afterAll(async () => {
    await fs.rm(root, { recursive: true, force: true });
  });

  async function secureEdge(): Promise<{ proxy: EdgeProxy; app: Backend; tlsPort: number }> {
    const app = await backend('app');
    const proxy = await edge({ tls: { port: 0, certificate: await loadCertificateStore(certs) } }, certs);
    await proxy.setRoute(['shop.test', 'x.apps.test'], [app.upstream]);
    expect(proxy.tlsPort).toBeGreaterThan(0);
    return { proxy, app, tlsPort: proxy.tlsPort ?? 0 };
  }

  function httpsGet(port: number, servername: string): Promise<Reply & { fingerprint: string }> {
    return new Promise((resolve, reject) => {
      const req = https.request({
        host: LOOPBACK,
        port,
        servername,
        ca,
        headers: { host: servername },
        agent: false,
      });
      req.on('error', reject);
      req.on('response', (res) => {
        const fingerprint = (res.socket as tls.TLSSocket).getPeerCertificate().fingerprint256;
        readBody(res).then(
          (body) => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, fingerprint }),
          reject,
        );
      });
      req.end();
    });
  }

  it('validates against the CA and routes an exact name, with the longer-valid certificate', async () => {
    const { tlsPort } = await secureEdge();
    const reply = await httpsGet(tlsPort, 'shop.test');
    expect(reply.status).toBe(200);
    expect(echoOf(reply)).toMatchObject({ backend: 'app' });
    expect(echoOf(reply).headers['x-forwarded-proto']).toBe('https');
    expect(reply.fingerprint).toBe(fingerprints.get('shop-renewed'));
  });

  it('serves a name one label under a wildcard with the wildcard certificate', async () => {
    const { tlsPort } = await secureEdge();
    const reply = await httpsGet(tlsPort, 'x.apps.test');
    expect(reply.status).toBe(200);
    expect(reply.fingerprint).toBe(fingerprints.get('wildcard'));
  });

  it('fails the handshake for a name no certificate covers', async () => {
    const { tlsPort } = await secureEdge();
    for (const servername of ['unknown.test', 'a.b.apps.test', 'apps.test', 'mismatched.test']) {
      await expect(httpsGet(tlsPort, servername), servername).rejects.toThrow();
    }
  });

  it('skips a pair whose key does not match, or is missing, and reports it', async () => {
    const invalid: string[] = [];
    const lookup = await loadCertificateStore(certs, (file) => invalid.push(path.basename(file)));
    expect(invalid.sort()).toEqual(['mismatched.crt', 'orphan.crt']);
    expect(lookup('mismatched.test')).toBeUndefined();
    expect(lookup('orphan.test')).toBeUndefined();
    expect(lookup('SHOP.test.')).toBeDefined();
  });

  it('serves no name from a missing directory', async () => {
    const lookup = await loadCertificateStore(path.join(root, 'no-such-dir'));
    expect(lookup('shop.test')).toBeUndefined();
  });
});
