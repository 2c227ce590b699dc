// Berth's edge proxy: routes each request by Host to one replica of an application, every replica
// serving HTTP on a loopback port. The route table lives in memory and a switch is one Map write, so a
// cutover under keep-alive load resets no connection (Caddy and nginx reloads do; runtime notes B.5).
// Requests already sent finish on the old replica; `drained` tells the driver when it may stop it.
// Framing is left to Node's parsers (no lenient parsing): the proxy re-frames every body itself and
// never forwards Transfer-Encoding together with Content-Length.
import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import type { Socket, SocketConstructorOpts } from 'node:net';
import type { Duplex } from 'node:stream';
import type tls from 'node:tls';

export interface Upstream {
  host: string;
  port: number;
}

export interface EdgeOptions {
  host: string;
  /** 0: any free port. */
  port: number;
  /** A second listener for HTTPS; the certificate is chosen per SNI server name (none: handshake fails). */
  tls?: { port: number; certificate(servername: string): tls.SecureContext | undefined };
  logger?: { warn(obj: object, msg: string): void };
  /** How long a replica may take to send its response headers before the client gets a 504. */
  upstreamHeadersTimeoutMs?: number;
  /** How long `close()` waits for requests in flight before cutting them. */
  closeTimeoutMs?: number;
}

export interface EdgeProxy {
  readonly port: number;
  readonly tlsPort: number | undefined;
  /**
   * Replaces the upstreams of the host names (lower-case, no port); an empty list = known host, no
   * healthy replica (503). Atomic: requests in flight finish on the old upstream, new ones go to the
   * new set. Resolves once the data plane applies it: at once in this Node edge, after the runtime API
   * calls in edge-haproxy.ts (which applies changes in the order they were made, and lets `drained`
   * wait for those made before it).
   */
  setRoute(hostnames: string[], upstreams: Upstream[]): Promise<void>;
  removeRoute(hostnames: string[]): Promise<void>;
  routes(): Map<string, Upstream[]>;
  /**
   * Resolves once no request (or WebSocket) is in flight to `upstream`, true, or after `timeoutMs`,
   * false. An upstream no route names also loses its idle keep-alive sockets then.
   */
  drained(upstream: Upstream, timeoutMs: number): Promise<boolean>;
  /**
   * Requests the edge answered per routed host name since it started, and how many of those were
   * errors (5xx); host names no route knows are not counted (anyone can send any Host). For metrics.
   */
  traffic(): Promise<Map<string, EdgeTraffic>>;
  /**
   * Stops accepting, ends idle keep-alive sockets, waits for in-flight requests (bounded). With
   * `keepRunning` an edge that runs apart from Berth (HAProxy) serves on for the next Berth to adopt;
   * this Node edge lives in Berth's process and stops either way.
   */
  close(options?: { keepRunning?: boolean }): Promise<void>;
}

export interface EdgeTraffic {
  requests: number;
  errors: number;
}

const DEFAULT_UPSTREAM_HEADERS_TIMEOUT_MS = 60_000;
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
/** Longer than browsers keep an idle connection, so the client, not the edge, closes it. */
const CLIENT_KEEP_ALIVE_MS = 65_000;
/** Per replica; beyond it requests queue in the agent (and count against the headers timeout). */
const MAX_SOCKETS_PER_UPSTREAM = 256;
const MAX_IDLE_SOCKETS_PER_UPSTREAM = 64;

/** Methods whose repetition is harmless, so a request that never reached a replica may go to another. */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
/** Failures that mean the request was not processed: no connection, or it died before any answer. */
const CONNECTION_FAILURES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ECONNABORTED']);

/** Hop-by-hop headers (RFC 9110 7.6.1), which describe one connection and never cross the proxy. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'transfer-encoding',
  'upgrade',
]);
/**
 * Request headers the edge does not pass on: what a client claims about the path it came by (the
 * edge states it itself), Expect (the client already got its 100 Continue from Node) and Trailer
 * (request trailers are not forwarded).
 */
const NOT_FROM_CLIENT = new Set(['forwarded', 'x-real-ip', 'expect', 'trailer']);

interface Route {
  upstreams: readonly Upstream[];
  /** Round-robin position, shared by the host names of one setRoute call. */
  next: number;
}

interface UpstreamLoad {
  upstream: Upstream;
  inFlight: number;
  whenIdle: Array<() => void>;
}

/** Where a request goes: the route key, and the authority the client asked for (Host as written). */
interface Target {
  hostname: string;
  authority: string;
  path: string;
}

/** One client request on its way through the edge, across at most two attempts. */
interface Exchange {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  target: Target;
  headers: http.OutgoingHttpHeaders;
  hasBody: boolean;
  retryable: boolean;
  current: http.ClientRequest | undefined;
  /** The client closed its connection before the whole response was written. */
  clientGone: boolean;
}

export async function startEdgeProxy(options: EdgeOptions): Promise<EdgeProxy> {
  const headersTimeoutMs = options.upstreamHeadersTimeoutMs ?? DEFAULT_UPSTREAM_HEADERS_TIMEOUT_MS;
  const closeTimeoutMs = options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
  const table = new Map<string, Route>();
  const loads = new Map<string, UpstreamLoad>();
  let routedKeys = new Set<string>();
  const tunnels = new Set<Duplex>();
  let clientsInFlight = 0;
  let whenClientsIdle: Array<() => void> = [];
  let closing: Promise<void> | undefined;
  /** Per routed host name: requests answered and 5xx among them (traffic()). */
  const counted = new Map<string, EdgeTraffic>();

  // The agent hands its options to net.createConnection, which takes noDelay (a socket option, not
  // in AgentOptions' type since @types/node 24).
  const agentOptions: http.AgentOptions & Pick<SocketConstructorOpts, 'noDelay'> = {
    keepAlive: true,
    maxSockets: MAX_SOCKETS_PER_UPSTREAM,
    maxFreeSockets: MAX_IDLE_SOCKETS_PER_UPSTREAM,
    // The most recently used socket is the least likely to have been closed by the replica.
    scheduling: 'lifo',
    noDelay: true,
  };
  const agent = new http.Agent(agentOptions);
  // The agent pools a socket only after its request's 'close', where finishOn retires an upstream that
  // left every route: the socket of that last request would stay open to it, so it is closed here.
  agent.on('free', (socket: Socket, freed: { host?: string | null; port?: number | string | null }) => {
    const key = upstreamKey({ host: freed.host ?? '', port: Number(freed.port) });
    if (!routedKeys.has(key) && !loads.has(key)) socket.destroy();
  });

  // ---- accounting: what is in flight to each upstream, and to the clients ----

  function startOn(upstream: Upstream): UpstreamLoad {
    const key = upstreamKey(upstream);
    let load = loads.get(key);
    if (!load) {
      load = { upstream, inFlight: 0, whenIdle: [] };
      loads.set(key, load);
    }
    load.inFlight += 1;
    return load;
  }

  function finishOn(load: UpstreamLoad): void {
    load.inFlight -= 1;
    if (load.inFlight > 0) return;
    for (const resolve of load.whenIdle.splice(0)) resolve();
    retireIfUnrouted(load.upstream);
  }

  /** An upstream that left every route and has nothing in flight keeps no idle socket open to it. */
  function retireIfUnrouted(upstream: Upstream): void {
    const key = upstreamKey(upstream);
    if (routedKeys.has(key) || (loads.get(key)?.inFlight ?? 0) > 0) return;
    loads.delete(key);
    const idle = agent.freeSockets[agent.getName({ host: upstream.host, port: upstream.port })];
    for (const socket of [...(idle ?? [])]) socket.destroy();
  }

  function routesChanged(): void {
    routedKeys = new Set();
    for (const route of table.values()) for (const u of route.upstreams) routedKeys.add(upstreamKey(u));
    // Every upstream that ever had a socket has a load entry until it is retired.
    for (const load of [...loads.values()]) retireIfUnrouted(load.upstream);
  }

  function clientFinished(): void {
    clientsInFlight -= 1;
    if (closing) for (const server of servers) server.closeIdleConnections();
    if (clientsInFlight === 0) for (const resolve of whenClientsIdle.splice(0)) resolve();
  }

  // ---- choosing an upstream ----

  function pick(route: Route): Upstream | undefined {
    const count = route.upstreams.length;
    if (count === 0) return undefined;
    const upstream = route.upstreams[route.next % count];
    route.next = (route.next + 1) % count;
    return upstream;
  }

  /** The retry goes to the upstream after the failed one in the route as it is now (it may have switched). */
  function retryTarget(hostname: string, failed: Upstream): Upstream | undefined {
    const route = table.get(hostname);
    if (!route || route.upstreams.length === 0) return undefined;
    const index = route.upstreams.findIndex((u) => u.host === failed.host && u.port === failed.port);
    if (index < 0) return pick(route);
    return route.upstreams[(index + 1) % route.upstreams.length];
  }

  // ---- plain requests ----

  function onRequest(req: http.IncomingMessage, res: http.ServerResponse, secure: boolean): void {
    clientsInFlight += 1;
    // Assigned once the request is routed; the close handler must see it from the start.
    let exchange: Exchange | undefined = undefined;
    res.once('close', () => {
      clientFinished();
      if (res.writableFinished || !exchange) return;
      exchange.clientGone = true;
      exchange.current?.destroy();
    });

    const target = requestTarget(req);
    if (!target) return reply(res, 400, 'Bad request: missing or malformed Host header.\n');
    const route = table.get(target.hostname);
    if (!route) return reply(res, 404, `The host ${target.hostname} is unknown here.\n`);
    const hostname = target.hostname;
    res.once('finish', () => {
      const traffic = counted.get(hostname) ?? { requests: 0, errors: 0 };
      traffic.requests += 1;
      if (res.statusCode >= 500) traffic.errors += 1;
      counted.set(hostname, traffic);
    });
    const upstream = pick(route);
    if (!upstream) {
      return reply(res, 503, `No replica of ${target.hostname} is ready; retry shortly.\n`, {
        'retry-after': '5',
      });
    }
    const method = req.method ?? 'GET';
    const hasBody =
      req.headers['transfer-encoding'] !== undefined ||
      (req.headers['content-length'] !== undefined && req.headers['content-length'] !== '0');
    exchange = {
      req,
      res,
      target,
      headers: upstreamRequestHeaders(req, target, secure, false),
      hasBody,
      retryable: IDEMPOTENT_METHODS.has(method),
      current: undefined,
      clientGone: false,
    };
    send(exchange, upstream, 0);
  }

  function send(exchange: Exchange, upstream: Upstream, attempt: number): void {
    const { req, res } = exchange;
    const load = startOn(upstream);
    const upstreamReq = http.request({
      host: upstream.host,
      port: upstream.port,
      method: req.method,
      path: exchange.target.path,
      headers: exchange.headers,
      agent,
      setHost: false,
    });
    exchange.current = upstreamReq;
    let answered = false;
    let timedOut = false;
    let bodyStarted = false;
    let socket: Socket | undefined;
    let bytesReadBefore = 0;

    const headersTimer = setTimeout(() => {
      timedOut = true;
      options.logger?.warn(
        { host: exchange.target.hostname, upstream: upstreamKey(upstream), timeoutMs: headersTimeoutMs },
        'edge: upstream sent no response headers in time',
      );
      reply(res, 504, 'Gateway timeout: the application did not answer in time.\n');
      upstreamReq.destroy();
    }, headersTimeoutMs);

    upstreamReq.once('socket', (assigned: Socket) => {
      socket = assigned;
      bytesReadBefore = assigned.bytesRead;
      if (!exchange.hasBody) return;
      // The body waits for the connection: a refused connection has consumed none of it, so a PUT
      // may still be retried on another replica.
      const startBody = () => {
        bodyStarted = true;
        req.pipe(upstreamReq);
      };
      if (assigned.connecting) assigned.once('connect', startBody);
      else startBody();
    });
    if (!exchange.hasBody) upstreamReq.end();

    upstreamReq.once('response', (upstreamRes) => {
      answered = true;
      clearTimeout(headersTimer);
      if (timedOut) return;
      relayResponse(upstreamRes, res);
    });

    upstreamReq.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(headersTimer);
      if (timedOut || exchange.clientGone) return;
      // Cut the client too: a response that stops half-way must not look complete.
      if (answered) return void res.destroy();
      const nothingReceived = socket === undefined || socket.bytesRead === bytesReadBefore;
      const connectionFailed = CONNECTION_FAILURES.has(error.code ?? '') && nothingReceived;
      if (attempt === 0 && exchange.retryable && !bodyStarted && connectionFailed) {
        const next = retryTarget(exchange.target.hostname, upstream);
        if (next) return send(exchange, next, 1);
      }
      options.logger?.warn(
        { host: exchange.target.hostname, upstream: upstreamKey(upstream), code: error.code, attempt },
        'edge: upstream connection failed',
      );
      reply(res, 502, 'Bad gateway: the application could not be reached.\n');
    });

    upstreamReq.once('close', () => {
      clearTimeout(headersTimer);
      finishOn(load);
    });
  }

  // ---- WebSocket and other upgrades: after the upstream's 101 the two sockets are piped ----

  function onUpgrade(req: http.IncomingMessage, client: Duplex, head: Buffer, secure: boolean): void {
    client.on('error', () => client.destroy());
    const target = requestTarget(req);
    if (!target) return rawReply(client, 400, 'Bad request: missing or malformed Host header.\n');
    const route = table.get(target.hostname);
    if (!route) return rawReply(client, 404, `The host ${target.hostname} is unknown here.\n`);
    const upstream = pick(route);
    if (!upstream) {
      return rawReply(client, 503, `No replica of ${target.hostname} is ready; retry shortly.\n`, [
        'retry-after: 5',
      ]);
    }
    const headers = upstreamRequestHeaders(req, target, secure, true);
    sendUpgrade(req, client, head, target, headers, upstream, 0);
  }

  function sendUpgrade(
    req: http.IncomingMessage,
    client: Duplex,
    head: Buffer,
    target: Target,
    headers: http.OutgoingHttpHeaders,
    upstream: Upstream,
    attempt: number,
  ): void {
    const load = startOn(upstream);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      finishOn(load);
    };
    // A tunnel is not pooled: it lives as long as the WebSocket.
    const upstreamReq = http.request({
      host: upstream.host,
      port: upstream.port,
      method: req.method,
      path: target.path,
      headers,
      agent: false,
      setHost: false,
    });
    let answered = false;
    const headersTimer = setTimeout(() => {
      answered = true;
      rawReply(client, 504, 'Gateway timeout: the application did not answer in time.\n');
      upstreamReq.destroy();
    }, headersTimeoutMs);
    const onClientGone = () => upstreamReq.destroy();
    client.once('close', onClientGone);
    upstreamReq.end();

    upstreamReq.once('upgrade', (upstreamRes, upstreamSocket, upstreamHead) => {
      answered = true;
      clearTimeout(headersTimer);
      client.off('close', onClientGone);
      if (client.destroyed) return void upstreamSocket.destroy();
      client.write(statusLine(upstreamRes) + rawHeaderLines(upstreamRes.rawHeaders) + '\r\n');
      if (upstreamHead.length > 0) client.write(upstreamHead);
      if (head.length > 0) upstreamSocket.write(head);
      tunnels.add(client);
      const end = () => {
        client.destroy();
        upstreamSocket.destroy();
        tunnels.delete(client);
        release();
      };
      upstreamSocket.on('error', end).on('close', end);
      client.on('close', end);
      upstreamSocket.pipe(client).pipe(upstreamSocket);
    });

    // The replica declined the upgrade: relay its answer and close, the body delimited by the close.
    upstreamReq.once('response', (upstreamRes) => {
      answered = true;
      clearTimeout(headersTimer);
      const lines = headerLines(responseHeaders(upstreamRes, true));
      client.write(statusLine(upstreamRes) + lines + 'connection: close\r\n\r\n');
      upstreamRes.pipe(client);
      upstreamRes.on('error', () => client.destroy());
    });

    upstreamReq.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(headersTimer);
      release();
      if (answered || client.destroyed) return;
      if (attempt === 0 && CONNECTION_FAILURES.has(error.code ?? '')) {
        const next = retryTarget(target.hostname, upstream);
        if (next) {
          client.off('close', onClientGone);
          return sendUpgrade(req, client, head, target, headers, next, 1);
        }
      }
      options.logger?.warn(
        { host: target.hostname, upstream: upstreamKey(upstream), code: error.code, attempt },
        'edge: upstream connection failed (upgrade)',
      );
      rawReply(client, 502, 'Bad gateway: the application could not be reached.\n');
    });

    upstreamReq.once('close', () => {
      clearTimeout(headersTimer);
      // An established tunnel is released when its sockets close, not with the request.
      if (!tunnels.has(client)) release();
    });
  }

  // ---- listeners ----

  const plain = http.createServer({ keepAliveTimeout: CLIENT_KEEP_ALIVE_MS });
  plain.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest(req, res, false));
  plain.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
    onUpgrade(req, socket, head, false),
  );
  const servers: Array<http.Server | https.Server> = [plain];

  let secure: https.Server | undefined;
  if (options.tls) {
    const certificate = options.tls.certificate.bind(options.tls);
    secure = https.createServer({
      keepAliveTimeout: CLIENT_KEEP_ALIVE_MS,
      SNICallback: (servername, callback) => {
        const context = certificate(servername.toLowerCase());
        if (context) callback(null, context);
        else callback(new Error(`no certificate for ${servername}`));
      },
    });
    secure.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => onRequest(req, res, true));
    secure.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
      onUpgrade(req, socket, head, true),
    );
    servers.push(secure);
  }

  const port = await listen(plain, options.port, options.host);
  let tlsPort: number | undefined;
  if (secure && options.tls) {
    try {
      tlsPort = await listen(secure, options.tls.port, options.host);
    } catch (error) {
      await new Promise((resolve) => plain.close(resolve));
      // Which port was taken, for the message that names its setting (src/lifecycle.ts).
      throw Object.assign(error as Error, { listener: 'tls' });
    }
  }

  return {
    port,
    tlsPort,

    setRoute(hostnames, upstreams) {
      const route: Route = { upstreams: upstreams.map((u) => ({ host: u.host, port: u.port })), next: 0 };
      for (const hostname of hostnames) table.set(hostname.toLowerCase(), route);
      routesChanged();
      return Promise.resolve();
    },

    removeRoute(hostnames) {
      for (const hostname of hostnames) {
        table.delete(hostname.toLowerCase());
        // Counted for routed names only: what a removed route counted goes with it (bounded memory).
        counted.delete(hostname.toLowerCase());
      }
      routesChanged();
      return Promise.resolve();
    },

    routes() {
      return new Map(
        [...table].map(([hostname, route]) => [hostname, route.upstreams.map((u) => ({ ...u }))]),
      );
    },

    traffic() {
      return Promise.resolve(new Map([...counted].map(([hostname, t]) => [hostname, { ...t }])));
    },

    drained(upstream, timeoutMs) {
      const load = loads.get(upstreamKey(upstream));
      if (!load || load.inFlight === 0) {
        retireIfUnrouted(upstream);
        return Promise.resolve(true);
      }
      return new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), timeoutMs);
        load.whenIdle.push(() => {
          clearTimeout(timer);
          resolve(true);
        });
      });
    },

    close() {
      closing ??= (async () => {
        const stopped = servers.map((server) => new Promise((resolve) => server.close(resolve)));
        for (const server of servers) server.closeIdleConnections();
        if (clientsInFlight > 0) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, closeTimeoutMs);
            whenClientsIdle.push(() => {
              clearTimeout(timer);
              resolve();
            });
          });
        }
        whenClientsIdle = [];
        for (const server of servers) server.closeAllConnections();
        for (const tunnel of tunnels) tunnel.destroy();
        await Promise.all(stopped);
        agent.destroy();
      })();
      return closing;
    },
  };
}

// ---- helpers without state ----

async function listen(server: http.Server | https.Server, port: number, host: string): Promise<number> {
  server.listen(port, host);
  await once(server, 'listening'); // rejects with the 'error' of a port that cannot be had
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}

function upstreamKey(upstream: Upstream): string {
  return `${upstream.host}|${upstream.port}`;
}

const HOSTNAME = /^[a-z0-9_-]+(?:\.[a-z0-9_-]+)*$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]+\]$/;
const PORT_SUFFIX = /^:\d{0,5}$/;

/**
 * The route key of a Host value: lower-case, port and trailing dot stripped; an IPv6 literal keeps
 * its brackets (`[::1]`). undefined when the value is no valid host.
 */
export function routeKeyOfHost(value: string | undefined): string | undefined {
  if (!value) return undefined;
  const host = value.toLowerCase();
  if (host.startsWith('[')) {
    const end = host.indexOf(']') + 1;
    if (end === 0) return undefined;
    const literal = host.slice(0, end);
    const rest = host.slice(end);
    if (!IPV6_LITERAL.test(literal) || (rest !== '' && !PORT_SUFFIX.test(rest))) return undefined;
    return literal;
  }
  const colon = host.indexOf(':');
  if (colon >= 0 && !PORT_SUFFIX.test(host.slice(colon))) return undefined;
  let name = colon >= 0 ? host.slice(0, colon) : host;
  if (name.endsWith('.')) name = name.slice(0, -1);
  if (name.length === 0 || name.length > 253 || !HOSTNAME.test(name)) return undefined;
  return name;
}

/** Host and path of a request; an absolute-form target wins over the Host header (RFC 9112 3.2.2). */
function requestTarget(req: http.IncomingMessage): Target | undefined {
  const url = req.url ?? '/';
  if (url.startsWith('/') || url === '*') {
    const authority = req.headers.host;
    const hostname = routeKeyOfHost(authority);
    return hostname && authority ? { hostname, authority, path: url } : undefined;
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return undefined;
  const hostname = routeKeyOfHost(parsed.host);
  return hostname ? { hostname, authority: parsed.host, path: parsed.pathname + parsed.search } : undefined;
}

/** Header names a Connection header lists: hop-by-hop for this message only. */
function listedInConnection(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined) return undefined;
  const names = (Array.isArray(value) ? value.join(',') : value).split(',');
  return new Set(names.map((name) => name.trim().toLowerCase()).filter((name) => name !== ''));
}

function upstreamRequestHeaders(
  req: http.IncomingMessage,
  target: Target,
  secure: boolean,
  upgrade: boolean,
): http.OutgoingHttpHeaders {
  const listed = listedInConnection(req.headers.connection);
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || NOT_FROM_CLIENT.has(name)) continue;
    if (name.startsWith('x-forwarded-') || listed?.has(name)) continue;
    headers[name] = value;
  }
  headers.host = target.authority;
  // What the client sent in these is not trusted: the edge is the first hop Berth controls.
  headers['x-forwarded-for'] = clientAddress(req.socket.remoteAddress);
  headers['x-forwarded-proto'] = secure ? 'https' : 'http';
  headers['x-forwarded-host'] = target.authority;
  // Node's parser guarantees a Transfer-Encoding ends in chunked and never comes with Content-Length;
  // re-framing as chunked keeps a body of a GET (which Node does not chunk by default) framed.
  if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
  if (upgrade && req.headers.upgrade !== undefined) {
    headers.connection = 'upgrade';
    headers.upgrade = req.headers.upgrade;
  }
  return headers;
}

function clientAddress(address: string | undefined): string {
  if (!address) return 'unknown';
  return address.startsWith('::ffff:') ? address.slice('::ffff:'.length) : address;
}

/** The upstream's response headers without its hop-by-hop ones; the edge frames the body itself. */
function responseHeaders(upstreamRes: http.IncomingMessage, keepLength: boolean): http.OutgoingHttpHeaders {
  const listed = listedInConnection(upstreamRes.headers.connection);
  const headers: http.OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstreamRes.headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || listed?.has(name)) continue;
    headers[name] = value;
  }
  if (upstreamRes.headers['transfer-encoding'] !== undefined || !keepLength) delete headers['content-length'];
  return headers;
}

function relayResponse(upstreamRes: http.IncomingMessage, res: http.ServerResponse): void {
  if (res.destroyed) return void upstreamRes.destroy();
  try {
    res.writeHead(upstreamRes.statusCode ?? 502, responseHeaders(upstreamRes, true));
  } catch {
    // A header value Node refuses to write: the replica's answer cannot be relayed as is.
    upstreamRes.destroy();
    return reply(res, 502, 'Bad gateway: the application sent an invalid response.\n');
  }
  upstreamRes.on('error', () => res.destroy());
  upstreamRes.once('close', () => {
    if (!upstreamRes.complete) res.destroy();
  });
  upstreamRes.once('end', () => {
    const trailers = upstreamRes.trailers;
    if (Object.keys(trailers).length > 0) res.addTrailers(trailers);
  });
  // Headers go out with the first body chunk when it came in the same read; a slow body (a stream of
  // events) must not hold them back. (headersSent is true from writeHead on, before anything is sent.)
  let bodyStarted = false;
  upstreamRes.once('data', () => (bodyStarted = true));
  upstreamRes.pipe(res);
  setImmediate(() => {
    if (!bodyStarted && !res.writableEnded && !res.destroyed) res.flushHeaders();
  });
}

function reply(
  res: http.ServerResponse,
  status: number,
  body: string,
  extra: http.OutgoingHttpHeaders = {},
): void {
  if (res.headersSent || res.destroyed) return void res.destroy();
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'x-content-type-options': 'nosniff',
    ...extra,
  });
  res.end(body);
}

function rawReply(socket: Duplex, status: number, body: string, extra: string[] = []): void {
  if (socket.destroyed || !socket.writable) return void socket.destroy();
  const head = [
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}`,
    'content-type: text/plain; charset=utf-8',
    `content-length: ${Buffer.byteLength(body)}`,
    'x-content-type-options: nosniff',
    'connection: close',
    ...extra,
  ];
  socket.end(head.join('\r\n') + '\r\n\r\n' + body);
}

function statusLine(res: http.IncomingMessage): string {
  const status = res.statusCode ?? 502;
  return `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\n`;
}

function rawHeaderLines(raw: string[]): string {
  let lines = '';
  for (let i = 0; i + 1 < raw.length; i += 2) lines += `${raw[i]}: ${raw[i + 1]}\r\n`;
  return lines;
}

function headerLines(headers: http.OutgoingHttpHeaders): string {
  let lines = '';
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) lines += `${name}: ${one}\r\n`;
  }
  return lines;
}
