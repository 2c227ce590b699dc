// The DevTools endpoint of a `chrome-headless` service: HTTP and WebSocket on a loopback port, served
// by Berth's own process, relaying to a Chromium started with `--remote-debugging-pipe`. Chromium
// itself listens on no port: loopback ports are reachable from every application's sandbox on this
// host and the DevTools protocol has no authentication, so every path here is under a secret prefix
// (`/<token>/…`, compared in constant time; anything else is a 404).
//
// One pipe, several clients: each WebSocket client gets a DevTools session of its own on the browser
// target (`Target.attachToBrowserTarget`) or on one page (`Target.attachToTarget`, flatten), and the
// messages it sends without a `sessionId` go to that session. Sessions a client opens from there
// (flatten mode) are recorded from the `Target.attachedToTarget` events it receives, so every message
// Chromium sends is routed to the one client that owns its session. When a client leaves, its session
// is detached and the browser contexts and pages it created are closed; `Browser.close` from a client
// closes that client's connection only (the browser is Berth's, and other clients may use it).
// `Page.navigate`, `Target.createTarget` and `Network.loadNetworkResource` of a local URL (`file:`…)
// are refused here.
import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex, Readable, Writable } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';

/** What `Browser.getVersion` answers. */
export interface BrowserVersion {
  protocolVersion: string;
  product: string;
  revision: string;
  userAgent: string;
  jsVersion: string;
}

interface CdpMessage {
  id?: number;
  method?: string;
  params?: Record<string, unknown>;
  sessionId?: string;
  result?: Record<string, unknown>;
  error?: { code?: number; message?: string };
}

type Target = { kind: 'browser' } | { kind: 'page'; targetId: string };

/** Clients of one browser at once; one more is refused with close code 1013. */
export const MAX_CLIENTS = 32;
/** Largest message a client may send (a CDP message with a file's content can be big). */
const MAX_PAYLOAD = 256 * 1024 * 1024;
const CALL_TIMEOUT_MS = 30_000;
/** Methods whose answers name something the client made, closed when it leaves. */
const TRACKED = new Set(['Target.createTarget', 'Target.createBrowserContext']);

class Client {
  /** The session of the target the client connected to; undefined until Chromium attached it. */
  root: string | undefined;
  /** Every session the client may use: its root and those it opened from it. */
  readonly sessions = new Set<string>();
  /** Messages sent before the root session existed. */
  readonly queued: CdpMessage[] = [];
  /** `<sessionId> <id>` of tracked requests in flight → method. */
  readonly tracked = new Map<string, string>();
  readonly targets = new Set<string>();
  readonly contexts = new Set<string>();
  closed = false;

  constructor(
    readonly ws: WebSocket,
    readonly target: Target,
  ) {}
}

/**
 * One running Chromium's pipe: Berth's own calls on the root session, and the clients' sessions.
 * `close()` (or the pipe's end, when Chromium exits) closes every client.
 */
export class BrowserLink {
  private nextId = 1;
  private readonly pending = new Map<
    number,
    { resolve: (result: Record<string, unknown>) => void; reject: (error: Error) => void }
  >();
  private readonly clients = new Set<Client>();
  /** Session → the client that owns it. */
  private readonly owners = new Map<string, Client>();
  private partial: Buffer[] = [];
  private closedWith: string | undefined;

  constructor(
    private readonly toBrowser: Writable,
    fromBrowser: Readable,
  ) {
    toBrowser.on('error', () => this.close('the pipe to Chromium broke'));
    fromBrowser.on('error', () => this.close('the pipe from Chromium broke'));
    fromBrowser.on('data', (chunk: Buffer) => this.receive(chunk));
    fromBrowser.on('end', () => this.close('Chromium exited'));
  }

  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** A call of Berth's own on the browser's root session. */
  call(method: string, params: Record<string, unknown> = {}, timeoutMs = CALL_TIMEOUT_MS) {
    if (this.closedWith !== undefined) return Promise.reject(new Error(this.closedWith));
    const id = this.nextId++;
    return new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`Chromium did not answer ${method} within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      this.pending.set(id, {
        resolve: (result) => {
          clearTimeout(timer);
          resolve(result);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.write({ id, method, params });
    });
  }

  /** Serves one WebSocket client on a session of its own. */
  attach(ws: WebSocket, target: Target): void {
    if (this.closedWith !== undefined) {
      ws.close(1011, 'Chromium is not running');
      return;
    }
    if (this.clients.size >= MAX_CLIENTS) {
      ws.close(1013, `at most ${MAX_CLIENTS} DevTools clients at once`);
      return;
    }
    const client = new Client(ws, target);
    this.clients.add(client);
    ws.on('message', (data: RawData, isBinary: boolean) => this.fromClient(client, data, isBinary));
    ws.on('close', () => this.leave(client));
    ws.on('error', () => ws.terminate());
    const attached =
      target.kind === 'browser'
        ? this.call('Target.attachToBrowserTarget')
        : this.call('Target.attachToTarget', { targetId: target.targetId, flatten: true });
    attached.then(
      (result) => {
        const sessionId = typeof result.sessionId === 'string' ? result.sessionId : undefined;
        if (!sessionId) throw new Error('Chromium gave no session');
        if (client.closed) {
          this.call('Target.detachFromTarget', { sessionId }).catch(() => undefined);
          return;
        }
        client.root = sessionId;
        client.sessions.add(sessionId);
        this.owners.set(sessionId, client);
        for (const message of client.queued.splice(0)) this.forward(client, message);
      },
      () => {
        const reason = target.kind === 'page' ? 'no such target' : 'Chromium did not attach a session';
        if (!client.closed) ws.close(1011, reason);
      },
    );
  }

  /** Ends every client and every call in flight (Chromium exited or is being stopped). */
  close(reason: string): void {
    if (this.closedWith !== undefined) return;
    this.closedWith = reason;
    for (const { reject } of this.pending.values()) reject(new Error(reason));
    this.pending.clear();
    for (const client of this.clients) {
      client.closed = true;
      client.ws.close(1011, reason.slice(0, 120));
    }
    this.clients.clear();
    this.owners.clear();
  }

  private write(message: CdpMessage): void {
    if (this.closedWith !== undefined) return;
    this.toBrowser.write(`${JSON.stringify(message)}\0`);
  }

  /** Chromium's messages are JSON texts, each ended by a NUL byte. */
  private receive(chunk: Buffer): void {
    let start = 0;
    for (let end = chunk.indexOf(0); end !== -1; end = chunk.indexOf(0, start)) {
      const tail = chunk.subarray(start, end);
      const text = (this.partial.length > 0 ? Buffer.concat([...this.partial, tail]) : tail).toString('utf8');
      this.partial = [];
      start = end + 1;
      this.dispatch(text);
    }
    if (start < chunk.length) this.partial.push(chunk.subarray(start));
  }

  private dispatch(text: string): void {
    let message: CdpMessage;
    try {
      message = JSON.parse(text) as CdpMessage;
    } catch {
      return;
    }
    if (message.sessionId === undefined) {
      // The root session is Berth's: answers to its calls; its events (targets attached for clients) are not.
      if (typeof message.id !== 'number') return;
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.error) waiter.reject(new Error(message.error.message ?? 'DevTools error'));
      else waiter.resolve(message.result ?? {});
      return;
    }
    const client = this.owners.get(message.sessionId);
    if (!client || client.closed) return;
    const sessionId = message.sessionId;
    const childSession = typeof message.params?.sessionId === 'string' ? message.params.sessionId : undefined;
    if (message.method === 'Target.attachedToTarget' && childSession) {
      client.sessions.add(childSession);
      this.owners.set(childSession, client);
    } else if (message.method === 'Target.detachedFromTarget' && childSession) {
      client.sessions.delete(childSession);
      this.owners.delete(childSession);
    } else if (typeof message.id === 'number' && client.tracked.size > 0) {
      const key = `${sessionId} ${message.id}`;
      const method = client.tracked.get(key);
      if (method) {
        client.tracked.delete(key);
        const made = message.result;
        if (method === 'Target.createTarget' && typeof made?.targetId === 'string')
          client.targets.add(made.targetId);
        if (method === 'Target.createBrowserContext' && typeof made?.browserContextId === 'string')
          client.contexts.add(made.browserContextId);
      }
    }
    if (sessionId === client.root) {
      // The client knows its root session as "no session".
      delete message.sessionId;
      client.ws.send(JSON.stringify(message));
    } else {
      client.ws.send(text);
    }
  }

  private fromClient(client: Client, data: RawData, isBinary: boolean): void {
    if (client.closed) return;
    let message: CdpMessage;
    try {
      if (isBinary) throw new Error('binary');
      message = JSON.parse(rawText(data)) as CdpMessage;
      if (typeof message !== 'object' || message === null || typeof message.id !== 'number')
        throw new Error('no id');
    } catch {
      client.ws.close(1003, 'DevTools messages are JSON objects with an integer id');
      return;
    }
    if (client.root === undefined) client.queued.push(message);
    else this.forward(client, message);
  }

  private forward(client: Client, message: CdpMessage): void {
    const { id } = message;
    if (message.sessionId === undefined) {
      if (client.target.kind === 'browser' && message.method === 'Browser.close') {
        // The browser is Berth's and may serve other clients: this client's connection ends instead.
        client.ws.send(JSON.stringify({ id, result: {} }), () =>
          client.ws.close(1000, 'Browser.close ends this connection only'),
        );
        return;
      }
      message.sessionId = client.root;
    } else if (!client.sessions.has(message.sessionId)) {
      client.ws.send(
        JSON.stringify({
          id,
          sessionId: message.sessionId,
          error: { code: -32001, message: 'Session with given id not found.' },
        }),
      );
      return;
    }
    if (message.method && NAVIGATIONS.has(message.method) && isLocalUrl(message.params?.url)) {
      client.ws.send(
        JSON.stringify({
          id,
          ...(message.sessionId === client.root ? {} : { sessionId: message.sessionId }),
          error: { code: -32000, message: LOCAL_URL_REFUSED },
        }),
      );
      return;
    }
    if (message.method && TRACKED.has(message.method))
      client.tracked.set(`${message.sessionId} ${id}`, message.method);
    this.write(message);
  }

  private leave(client: Client): void {
    if (client.closed) return;
    client.closed = true;
    this.clients.delete(client);
    for (const session of client.sessions) this.owners.delete(session);
    if (this.closedWith !== undefined) return;
    const quietly = (method: string, params: Record<string, unknown>) =>
      this.call(method, params, 5_000).catch(() => undefined);
    for (const browserContextId of client.contexts)
      void quietly('Target.disposeBrowserContext', { browserContextId });
    for (const targetId of client.targets) void quietly('Target.closeTarget', { targetId });
    if (client.root) void quietly('Target.detachFromTarget', { sessionId: client.root });
  }
}

/** Methods that load a URL a client names. */
const NAVIGATIONS = new Set(['Page.navigate', 'Target.createTarget', 'Network.loadNetworkResource']);
/** Schemes that read the host's files rather than the network (`view-source:` can wrap `file:`). */
const LOCAL_SCHEME = /^(?:file|filesystem|view-source):/;
export const LOCAL_URL_REFUSED = 'Berth refuses file:, filesystem: and view-source: URLs in chrome-headless';

/**
 * Whether `url` has a local scheme, read as a URL parser reads it: leading C0 controls and spaces are
 * dropped, tabs and newlines anywhere too, and the scheme is case-insensitive. Chromium's policy refuses
 * them too, and the jail holds nothing of the host's to read: this is the first of three defences.
 */
export function isLocalUrl(url: unknown): boolean {
  if (typeof url !== 'string') return false;
  const normal = url
    .replace(/^[\u0000-\u0020]+/, '')
    .replace(/[\t\n\r]/g, '')
    .toLowerCase();
  return LOCAL_SCHEME.test(normal);
}

function rawText(data: RawData): string {
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  if (data instanceof ArrayBuffer) return Buffer.from(data).toString('utf8');
  return data.toString('utf8');
}

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/**
 * The HTTP and WebSocket listener of one instance. It outlives the browsers it serves: while Chromium
 * is down (crashed, being restarted) it answers 503, and it keeps its port.
 */
export class DevToolsProxy {
  private readonly server: http.Server;
  private readonly wss = new WebSocketServer({
    noServer: true,
    maxPayload: MAX_PAYLOAD,
    perMessageDeflate: false,
  });
  private tokenDigest = digest('');
  private encodedToken = '';
  private link: BrowserLink | undefined;
  private version: BrowserVersion | undefined;
  private listeningPort: number | undefined;

  /** `browserId` names the browser's WebSocket path (`/devtools/browser/<browserId>`). */
  constructor(private readonly browserId: string) {
    this.server = http.createServer((req, res) => {
      this.handle(req, res).catch(() => {
        if (!res.headersSent) send(res, 502, { error: 'Chromium did not answer' });
        else res.destroy();
      });
    });
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) =>
      this.upgrade(req, socket, head),
    );
    this.server.on('clientError', (_error, socket: Duplex) => socket.destroy());
  }

  get port(): number | undefined {
    return this.listeningPort;
  }

  get listening(): boolean {
    return this.server.listening;
  }

  /** The path prefix, `/<token>` (the token URL-encoded). */
  get basePath(): string {
    return `/${this.encodedToken}`;
  }

  get browserPath(): string {
    return `/devtools/browser/${this.browserId}`;
  }

  setToken(token: string): void {
    this.encodedToken = encodeURIComponent(token);
    this.tokenDigest = digest(this.encodedToken);
  }

  /** The running browser to relay to, or undefined while there is none. */
  setBrowser(link: BrowserLink | undefined, version: BrowserVersion | undefined): void {
    this.link = link;
    this.version = version;
  }

  /** Listens on 127.0.0.1:`port` when it is free, else on a port the kernel picks; no-op when listening. */
  async listen(port: number | undefined): Promise<number> {
    if (this.server.listening && this.listeningPort !== undefined) return this.listeningPort;
    const attempt = (wanted: number) =>
      new Promise<number>((resolve, reject) => {
        const onError = (error: Error) => reject(error);
        this.server.once('error', onError);
        this.server.listen(wanted, '127.0.0.1', () => {
          this.server.off('error', onError);
          resolve((this.server.address() as AddressInfo).port);
        });
      });
    try {
      this.listeningPort = await attempt(port ?? 0);
    } catch (error) {
      if (!port || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      this.listeningPort = await attempt(0);
    }
    return this.listeningPort;
  }

  async close(): Promise<void> {
    this.link?.close('the service is stopping');
    this.link = undefined;
    if (!this.server.listening) return;
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  /** The rest of the path after a valid `/<token>`, or undefined (no token, or not this one). */
  private authorize(url: string | undefined): string | undefined {
    const match = /^\/([^/?#]+)(\/[^?#]*)?(?:[?#].*)?$/.exec(url ?? '');
    if (!match || this.encodedToken === '') return undefined;
    if (!timingSafeEqual(digest(match[1]!), this.tokenDigest)) return undefined;
    return match[2] ?? '/';
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const rest = this.authorize(req.url);
    const route = rest?.replace(/\/$/, '');
    if (route === undefined || !['/json/version', '/json/list', '/json'].includes(route)) {
      send(res, 404, { error: 'not found' });
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      send(res, 405, { error: 'method not allowed' });
      return;
    }
    const link = this.link;
    const version = this.version;
    if (!link || link.closed || !version) {
      send(res, 503, { error: 'Chromium is not running; Berth restarts it' });
      return;
    }
    const ws = `ws://${hostOf(req, this.listeningPort)}${this.basePath}`;
    if (route === '/json/version') {
      send(res, 200, {
        Browser: version.product,
        'Protocol-Version': version.protocolVersion,
        'User-Agent': version.userAgent,
        'V8-Version': version.jsVersion,
        'WebKit-Version': `537.36 (${version.revision})`,
        webSocketDebuggerUrl: `${ws}${this.browserPath}`,
      });
      return;
    }
    const { targetInfos } = (await link.call('Target.getTargets')) as {
      targetInfos?: Array<{ targetId: string; type: string; title: string; url: string }>;
    };
    send(
      res,
      200,
      (targetInfos ?? [])
        .filter((info) => !['browser', 'browser_ui', 'tab'].includes(info.type))
        .map((info) => ({
          description: '',
          id: info.targetId,
          title: info.title,
          type: info.type,
          url: info.url,
          webSocketDebuggerUrl: `${ws}/devtools/page/${info.targetId}`,
        })),
    );
  }

  private upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const rest = this.authorize(req.url);
    let target: Target | undefined;
    if (rest === this.browserPath) target = { kind: 'browser' };
    else {
      const page = /^\/devtools\/page\/([A-Za-z0-9-]{1,64})$/.exec(rest ?? '');
      if (page) target = { kind: 'page', targetId: page[1]! };
    }
    if (!target) {
      refuse(socket, 404, 'Not Found');
      return;
    }
    // Like Chromium's own endpoint: a web page (which sends an Origin) may not drive the browser.
    if (req.headers.origin !== undefined) {
      refuse(socket, 403, 'Forbidden');
      return;
    }
    const link = this.link;
    if (!link || link.closed) {
      refuse(socket, 503, 'Service Unavailable');
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => link.attach(ws, target));
  }
}

function hostOf(req: http.IncomingMessage, port: number | undefined): string {
  const host = req.headers.host;
  return host && /^[A-Za-z0-9.\-[\]:]{1,255}$/.test(host) ? host : `127.0.0.1:${port ?? 0}`;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body, null, 2);
  res.writeHead(status, {
    'content-type': 'application/json; charset=UTF-8',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
  });
  res.end(text);
}

function refuse(socket: Duplex, status: number, text: string): void {
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
}
