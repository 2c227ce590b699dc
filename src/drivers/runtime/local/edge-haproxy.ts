// The edge on HAProxy 2.6 (BERTH_EDGE_PROXY=haproxy, docs/decisions/0005-edge-data-plane.md): the same
// EdgeProxy as edge.ts, with HAProxy as the data plane and Berth as its only controller. Berth starts
// one HAProxy process (in the foreground, one thread, its own process group) with its own configuration
// and runtime API socket in a private directory, and restarts it if it dies. Not master-worker: Berth
// is the master already, and HAProxy's master keeps the listening sockets open across a soft stop, so
// `close()` could not stop accepting while the requests in flight finish.
// HAProxy outlives Berth (`close({ keepRunning })`, a kill -9): the route table is saved beside it
// (edge-state.json) at every change, and the next Berth on this directory adopts the process as it
// runs, with its table, instead of starting another (the listening sockets never close).
//
// The route table changes without a reload:
// - Host → backend through a map file (`use_backend %[…,map(hosts.map,unknown)]`), changed with
//   `add map`/`set map`/`del map` on the runtime API and written to the file, so that a restart of HAProxy
//   starts from the same table.
// - Every route is one backend "slot" of server templates declared off (`server-template … disabled`);
//   a route's upstreams are given to a free slot's servers with `set server … addr … port …` and
//   `state ready`. A switch fills a new slot first, then points the host names at it in the map: one
//   lookup per request, so a request goes wholly to the old or wholly to the new set. The old slot's
//   servers go to maintenance (no new request; those in flight finish) and the slot is reused once none
//   of its servers has a session left. (`add server` would avoid the slots, but HAProxy 2.6 keeps no idle
//   connection to a server added at run time: one new upstream connection per request, measured in
//   bench/runtime/haproxy.ts.)
// - When every slot is taken, the slots double and HAProxy is reloaded the seamless way: the new process
//   takes the listening sockets over from the old one (`-x`, `expose-fd listeners`) and tells it to
//   finish what it serves and go (`-sf`). Rare by design: the table starts with `slots` routes.
// - `drained(upstream)` polls the runtime API's per-server current sessions (`show stat`).
// Every value that reaches the configuration or the runtime API (host names, addresses, ports, paths)
// is checked against a strict pattern first; nothing from a request is ever part of a command.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../../net/ports.js';
import { ensureSystemAccount, isRoot, SHARED_ACCOUNTS } from '../../os/users.js';
import type { EdgeOptions, EdgeProxy, Upstream } from './edge.js';
import { loadCertificatePairs } from './edge-tls.js';
import { processStartTime, watchAdoptedExit } from '../../os/processes.js';
import { OutputFollower } from './sandbox.js';

export interface HaproxyEdgeOptions extends Omit<EdgeOptions, 'tls'> {
  /**
   * A second listener for HTTPS (0: any free port) with the pairs of `certificatesDir` (edge-tls.ts),
   * chosen by SNI; a name no certificate covers fails the handshake. Read at every (re)start of
   * HAProxy, as the Node edge reads them at its start.
   */
  tls?: { port: number; certificatesDir: string };
  /** A private directory (created 0700) for the configuration, the map, the socket and the pid file. */
  dir: string;
  /** The HAProxy executable (default: `haproxy` on PATH). */
  binary?: string;
  /** Routes HAProxy starts with (backend slots; default 128). More are added by a reload. */
  slots?: number;
  /** The most routes at once (default 4096): the slots stop doubling there. */
  maxSlots?: number;
  /** How long a retired slot waits before it is reused (default 5 s; its idle connections go first). */
  slotReuseAfterMs?: number;
  /** Upstreams one route may have (servers per slot; default 16). */
  serversPerSlot?: number;
  logger?: { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };
}

const DEFAULT_UPSTREAM_HEADERS_TIMEOUT_MS = 60_000;
const DEFAULT_CLOSE_TIMEOUT_MS = 10_000;
const DEFAULT_SLOTS = 128;
const DEFAULT_MAX_SLOTS = 4096;
const DEFAULT_SERVERS_PER_SLOT = 16;
const START_TIMEOUT_MS = 10_000;
const DRAIN_POLL_MS = 50;
const RESTART_DELAY_MS = 500;
const SLOT_REUSE_AFTER_MS = 5000;
/** HAProxy's own account of a slot switch, a drain or a stop that Berth asked for. */
const ROUTINE_HAPROXY_LINES =
  /Server r\d+\/u\d+ is (UP\/READY|going DOWN for maintenance)|backend 'r\d+' has no server available|Proxy \S+ stopped|Stopping (frontend|backend|proxy)/;
/** Host names whose traffic HAProxy counts at once (its least recently used go beyond). */
const TRAFFIC_TABLE_SIZE = 65_536;
/** sun_path is 108 bytes on Linux. */
const MAX_SOCKET_PATH = 100;

/** A route key: lower-case DNS labels (what edge.ts's routeKeyOfHost produces for a name). */
const ROUTE_HOSTNAME = /^[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
/** Paths HAProxy reads or writes: no whitespace, quote, comma or anything HAProxy's parser treats specially. */
const SAFE_PATH = /^\/[A-Za-z0-9._/+-]+$/;
/**
 * A Host header the edge routes: a name (optional trailing dot) or an IPv6 literal, optional port; the
 * same values edge.ts's routeKeyOfHost accepts. HAProxy regex syntax (PCRE), matched case-insensitively.
 */
const HOST_HEADER = '^(([a-z0-9_-]+([.][a-z0-9_-]+)*[.]?)|([[][0-9a-f:.]+[]]))(:[0-9]{0,5})?$';

function checkHostname(hostname: string): string {
  if (hostname.length > 253 || !ROUTE_HOSTNAME.test(hostname))
    throw new Error(`edge: invalid host name '${hostname}'`);
  return hostname;
}

function checkUpstream(upstream: Upstream): Upstream {
  if (!IPV4.test(upstream.host))
    throw new Error(`edge: upstream address must be IPv4, got '${upstream.host}'`);
  if (!Number.isInteger(upstream.port) || upstream.port < 1 || upstream.port > 65_535)
    throw new Error(`edge: invalid upstream port ${upstream.port}`);
  return { host: upstream.host, port: upstream.port };
}

function checkPath(file: string): string {
  if (!SAFE_PATH.test(file)) throw new Error(`edge: unusable path for HAProxy '${file}'`);
  return file;
}

const upstreamKey = (u: Upstream) => `${u.host}:${u.port}`;

interface Slot {
  name: string;
  state: 'free' | 'live' | 'draining';
  /** When it last went to draining (its idle upstream connections are purged within ~2 s). */
  retiredAt: number;
  /** Server i (1-based in HAProxy) serves upstreams[i - 1]; the rest are off. */
  upstreams: Upstream[];
}

/** A HAProxy process: started by this Berth, or adopted from an earlier one (not its child). */
interface HaproxyProcess {
  pid: number;
  kill(signal: NodeJS.Signals): void;
  /** Resolves when it has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
}

/** What edge-state.json holds: the process and its route table, for the next Berth to adopt. */
interface EdgeState {
  pid: number;
  startTime: number;
  port: number;
  tlsPort: number | undefined;
  certificates: number;
  slots: Array<Pick<Slot, 'name' | 'state' | 'upstreams'>>;
  table: Array<[string, string | null]>;
}

/** One exchange with the runtime API: a command line, the whole answer. */
function ask(socket: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = net.connect(socket);
    let answer = '';
    connection.setEncoding('utf8');
    connection.on('data', (chunk: string) => (answer += chunk));
    connection.on('end', () => resolve(answer));
    connection.on('error', reject);
    connection.end(`${line}\n`);
  });
}

export async function startHaproxyEdge(options: HaproxyEdgeOptions): Promise<EdgeProxy> {
  const dir = checkPath(path.resolve(options.dir));
  const binary = options.binary ?? 'haproxy';
  const maxSlots = Math.max(options.maxSlots ?? DEFAULT_MAX_SLOTS, options.slots ?? DEFAULT_SLOTS);
  const perSlot = options.serversPerSlot ?? DEFAULT_SERVERS_PER_SLOT;
  const reuseAfterMs = options.slotReuseAfterMs ?? SLOT_REUSE_AFTER_MS;
  const headersTimeoutMs = options.upstreamHeadersTimeoutMs ?? DEFAULT_UPSTREAM_HEADERS_TIMEOUT_MS;
  const closeTimeoutMs = options.closeTimeoutMs ?? DEFAULT_CLOSE_TIMEOUT_MS;
  const listenHost = options.host === 'localhost' ? '127.0.0.1' : options.host;
  if (!IPV4.test(listenHost))
    throw new Error(`edge: the HAProxy edge listens on an IPv4 address, got '${options.host}'`);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.chmodSync(dir, 0o700);
  const files = {
    config: path.join(dir, 'haproxy.cfg'),
    map: path.join(dir, 'hosts.map'),
    socket: path.join(dir, 'admin.sock'),
    pid: path.join(dir, 'haproxy.pid'),
    bad: path.join(dir, '502.http'),
    crtList: path.join(dir, 'crt-list'),
    certs: path.join(dir, 'certs'),
    state: path.join(dir, 'edge-state.json'),
    log: path.join(dir, 'haproxy.log'),
  };
  if (files.socket.length > MAX_SOCKET_PATH)
    throw new Error(`edge: the data dir's path is too long for HAProxy's runtime socket (${files.socket})`);
  // The HAProxy an earlier Berth left serving on this directory, when it listens where asked.
  const left = await runningLeftover(files, options.port, options.tls?.port);
  if (!left) await stopLeftover(files.pid, files.config);

  const port = left?.state.port ?? (options.port === 0 ? await freePort() : options.port);
  const tlsPort =
    left?.state.tlsPort ??
    (options.tls ? (options.tls.port === 0 ? await freePort() : options.tls.port) : undefined);
  // A port something else holds is said at once, as the Node edge says it (HAProxy's own message names
  // no listener); `noreuseport` below keeps HAProxy from sharing it with a process that bound it since.
  if (!left) await probePort(listenHost, port, 'plain');
  if (!left && tlsPort !== undefined) await probePort(listenHost, tlsPort, 'tls');
  // HAProxy binds as root (a port below 1024 is the operator's choice), then serves as this account.
  const account = isRoot() ? ensureSystemAccount(SHARED_ACCOUNTS.edge) : undefined;
  /** Whether the crt-list has a certificate (HAProxy cannot start an ssl listener without one). */
  let certificates = 0;
  const slots: Slot[] = [];
  const addSlots = (count: number) => {
    for (let i = 0; i < count; i += 1)
      slots.push({ name: `r${slots.length}`, state: 'free', retiredAt: 0, upstreams: [] });
  };
  addSlots(options.slots ?? DEFAULT_SLOTS);
  /** hostname → the slot serving it, or null: known host, no upstream (503). */
  const table = new Map<string, Slot | null>();
  /** Host names HAProxy's map holds now (add vs set). */
  const mapped = new Set<string>();

  // ---- the configuration, for a start or a restart from the current table ----

  function configuration(): string {
    const lines = [
      '# Written by Berth (src/drivers/runtime/local/edge-haproxy.ts) on every start; do not edit.',
      'global',
      '  nbthread 1',
      // Without it HAProxy binds with SO_REUSEPORT, and a second HAProxy on the same port (another
      // Berth) would get half of the connections instead of an error. Reloads take the sockets over.
      '  noreuseport',
      ...(account ? [`  uid ${account.uid}`, `  gid ${account.gid}`] : []),
      // expose-fd: a reload's new process takes the listening sockets over from this one (launch()).
      `  stats socket ${files.socket} mode 600 level admin expose-fd listeners`,
      `  hard-stop-after ${Math.ceil(closeTimeoutMs / 1000) + 1}s`,
      'defaults',
      '  mode http',
      '  timeout connect 5s',
      '  timeout client 65s',
      '  timeout http-request 60s',
      '  timeout http-keep-alive 65s',
      `  timeout server ${Math.max(1, Math.round(headersTimeoutMs))}ms`,
      '  timeout tunnel 1h',
      // One retry on another replica when the connection failed (refused, or reset before any answer).
      // The old process of a reload (soft stop, -sf) answers the next request of an idle keep-alive
      // connection with `Connection: close` instead of closing it under a client that may be sending.
      '  option idle-close-on-response',
      '  retries 1',
      '  retry-on conn-failure empty-response',
      '  option redispatch 1',
      // HAProxy answers 503 when no replica could be reached; the Node edge says 502, and so does this.
      `  errorfile 503 ${files.bad}`,
      'frontend edge',
      `  bind ${listenHost}:${port}`,
      ...(tlsPort !== undefined && certificates > 0
        ? [`  bind ${listenHost}:${tlsPort} ssl crt-list ${files.crtList} strict-sni`]
        : []),
      `  http-request return status 400 content-type text/plain string "Bad request: missing or malformed Host header." unless { req.hdr_cnt(host) eq 1 } { req.hdr(host) -m reg -i ${HOST_HEADER} }`,
      // A request that reached a replica (the connection was up) is retried only when it is idempotent; a
      // refused connection never carried it, so that retry is for any method (retry-on conn-failure).
      '  http-request disable-l7-retry unless METH_GET or METH_OPTIONS or { method PUT DELETE }',
      '  http-request set-var(txn.route) req.hdr(host),lower,regsub(:[0-9]*$,),regsub([.]$,)',
      // What the client claims about the path it came by is dropped; the edge states it itself.
      ...[
        'x-forwarded-for',
        'x-forwarded-proto',
        'x-forwarded-host',
        'x-forwarded-port',
        'forwarded',
        'x-real-ip',
      ].map((name) => `  http-request del-header ${name}`),
      '  http-request set-header x-forwarded-proto https if { ssl_fc }',
      '  http-request set-header x-forwarded-proto http unless { ssl_fc }',
      '  http-request set-header x-forwarded-host %[req.hdr(host)]',
      '  option forwardfor',
      `  use_backend %[var(txn.route),map(${files.map},unknown)]`,
      '  default_backend unknown',
      // No certificate at all: the TLS port is open but every handshake fails, as with the Node edge.
      ...(tlsPort !== undefined && certificates === 0
        ? [
            'frontend edge_tls_none',
            '  mode tcp',
            `  bind ${listenHost}:${tlsPort}`,
            '  tcp-request connection reject',
          ]
        : []),
      // Requests and errors per routed host name, for metrics (traffic()): counted in the backends that
      // serve routes, so a Host no route knows adds no entry. gpc0 counts 5xx answers: a replica's, the
      // 503s of a route without one, and HAProxy's own 502/504 for a replica it cannot reach or that
      // does not answer in time (http-after-response, HAProxy ≥ 2.2: http-response skips those).
      'backend edge_routes',
      `  stick-table type string len 253 size ${TRAFFIC_TABLE_SIZE} store http_req_cnt,gpc0`,
      'backend unknown',
      '  http-request return status 404 content-type text/plain string "The host is unknown here."',
      'backend unavailable',
      '  http-request track-sc0 var(txn.route) table edge_routes',
      '  http-request sc-inc-gpc0(0)',
      '  http-request return status 503 content-type text/plain string "No replica is ready; retry shortly." hdr retry-after 5',
    ];
    for (const slot of slots) {
      lines.push(
        `backend ${slot.name}`,
        '  balance roundrobin',
        '  http-request track-sc0 var(txn.route) table edge_routes',
        // Each answer passes here once, the replica's and HAProxy's own alike: counted once. HAProxy 2.6
        // has no sc-inc-gpc0 action here, so the sample fetch that increments it is stored in a variable.
        '  http-after-response set-var(txn.edge_error) sc_inc_gpc0(0) if { status ge 500 }',
      );
      for (let i = 1; i <= perSlot; i += 1) {
        const upstream = slot.state === 'live' ? slot.upstreams[i - 1] : undefined;
        lines.push(
          // Idle connections to a server no request used for a while (one left for maintenance) are
          // closed within about two purge periods.
          upstream
            ? `  server u${i} ${upstream.host}:${upstream.port} pool-purge-delay 1s`
            : `  server u${i} 127.0.0.1:1 disabled pool-purge-delay 1s`,
        );
      }
    }
    return `${lines.join('\n')}\n`;
  }

  function mapFile(): string {
    return [...table].map(([hostname, slot]) => `${hostname} ${slot ? slot.name : 'unavailable'}\n`).join('');
  }

  function writeFiles(): void {
    fs.writeFileSync(files.config, configuration(), { mode: 0o600 });
    fs.writeFileSync(files.map, mapFile(), { mode: 0o600 });
    fs.writeFileSync(
      files.bad,
      'HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\ncache-control: no-store\r\nconnection: close\r\n\r\n' +
        'Bad gateway: the application could not be reached.\n',
      { mode: 0o600 },
    );
  }

  // ---- the process ----

  let child: HaproxyProcess | undefined;
  let closing = false;
  let exited: Promise<void> = Promise.resolve();
  /** Processes a reload replaced, finishing the requests they had (close() waits for them). */
  const retiring = new Map<HaproxyProcess, Promise<void>>();
  /** HAProxy's own messages (its stderr, a file so that it outlives Berth), read as it writes them. */
  let messages: OutputFollower | undefined;

  function followMessages(from: number): void {
    messages = new OutputFollower(files.log, from);
    let buffered = '';
    messages.on('data', (chunk: Buffer) => {
      buffered = (buffered + chunk.toString()).slice(-8000);
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (!/\[(ALERT|WARNING)\]/.test(line)) continue;
        // What Berth's own runtime commands and stops cause is news to no operator: info, not warn.
        if (ROUTINE_HAPROXY_LINES.test(line))
          options.logger?.info?.({ haproxy: line.trim() }, 'edge: haproxy says');
        else options.logger?.warn({ haproxy: line.trim() }, 'edge: haproxy says');
      }
    });
  }

  /** Saves the process and the table for the next Berth (written whole, then renamed). */
  function saveState(): void {
    if (!child) return;
    const startTime = processStartTime(child.pid);
    if (startTime === undefined) return;
    const state: EdgeState = {
      pid: child.pid,
      startTime,
      port,
      tlsPort,
      certificates,
      slots: slots.map(({ name, state: slotState, upstreams }) => ({ name, state: slotState, upstreams })),
      table: [...table].map(([hostname, slot]) => [hostname, slot ? slot.name : null]),
    };
    fs.writeFileSync(`${files.state}.tmp`, JSON.stringify(state), { mode: 0o600 });
    fs.renameSync(`${files.state}.tmp`, files.state);
  }

  /** The crt-list and one PEM (chain + key, 0600) per pair that serves a name, from the certificates. */
  async function writeCertificates(): Promise<void> {
    if (!options.tls) return;
    const byName = await loadCertificatePairs(options.tls.certificatesDir, (file, error) =>
      options.logger?.warn({ file, error: error.message }, 'edge: certificate pair skipped'),
    );
    fs.rmSync(files.certs, { recursive: true, force: true });
    fs.mkdirSync(files.certs, { mode: 0o700 });
    const pems = new Map<string, string>();
    const lines: string[] = [];
    for (const [name, pair] of byName) {
      // Names come from certificates: only DNS names (optionally one leading wildcard) reach the list.
      if (!/^(\*\.)?[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*$/.test(name)) continue;
      let pem = pems.get(pair.certFile);
      if (!pem) {
        pem = checkPath(path.join(files.certs, `${pems.size}.pem`));
        fs.writeFileSync(pem, `${pair.cert.trim()}\n${pair.key.trim()}\n`, { mode: 0o600 });
        pems.set(pair.certFile, pem);
      }
      lines.push(`${pem} ${name}`);
    }
    fs.writeFileSync(files.crtList, lines.map((line) => `${line}\n`).join(''), { mode: 0o600 });
    certificates = lines.length;
  }

  /**
   * Starts HAProxy from the current table. With `previous` (a reload), the new process takes its
   * listening sockets over and tells it to finish and exit: no connection is refused meanwhile.
   */
  async function launch(previous?: HaproxyProcess): Promise<void> {
    await writeCertificates();
    writeFiles();
    const takeover = previous?.pid ? ['-x', files.socket, '-sf', String(previous.pid)] : [];
    // Told to go by the new process as soon as that one serves, maybe before this loop sees it: its exit
    // is expected from now on, not a crash to restart from.
    if (previous) {
      retiring.set(
        previous,
        previous.exited.then(() => undefined),
      );
      void previous.exited.then(() => retiring.delete(previous));
    }
    if (takeover.length === 0) fs.rmSync(files.socket, { force: true });
    // Its messages go to a file (a pipe would break when Berth goes), from where this start's begin.
    const logFd = fs.openSync(files.log, 'a', 0o600);
    const logStart = fs.fstatSync(logFd).size;
    if (!messages) followMessages(logStart);
    let spawned;
    try {
      // Its own process group: a Ctrl-C meant for Berth (which keeps the edge up) does not reach it.
      spawned = spawn(binary, ['-db', '-f', files.config, ...takeover], {
        stdio: ['ignore', 'ignore', logFd],
        detached: true,
      });
    } finally {
      fs.closeSync(logFd);
    }
    let spawnError = '';
    const done = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      spawned.once('exit', (code, signal) => resolve({ code, signal }));
      // Not started at all (no haproxy installed: see scripts/install-system.sh).
      spawned.once('error', (error) => {
        spawnError = String(error);
        resolve({ code: null, signal: null });
      });
    });
    const started: HaproxyProcess = {
      pid: spawned.pid ?? 0,
      kill: (signal) => spawned.kill(signal),
      exited: done,
      hasExited: () => spawned.exitCode !== null || spawned.signalCode !== null,
    };
    if (spawned.pid) fs.writeFileSync(files.pid, `${spawned.pid}\n`, { mode: 0o600 });
    /** What it said since it was started (for the error when it does not start). */
    const said = () => {
      try {
        const text = fs.readFileSync(files.log, 'utf8');
        return Buffer.from(text).subarray(logStart).toString().slice(-4000) + spawnError;
      } catch {
        return spawnError;
      }
    };
    // Ready once the runtime API answers: HAProxy binds every listener before it serves any.
    const end = Date.now() + START_TIMEOUT_MS;
    let gone = false;
    void done.then(() => (gone = true));
    for (;;) {
      if (gone) {
        const stderr = said();
        const error = new Error(
          `edge: haproxy did not start: ${stderr.trim().split('\n').slice(-3).join(' | ')}`,
        );
        if (/Address already in use|cannot bind socket/i.test(stderr))
          Object.assign(error, { code: 'EADDRINUSE' });
        if (/ENOENT/.test(stderr))
          error.message +=
            ' (HAProxy is not installed: run scripts/install-system.sh, or set BERTH_EDGE_PROXY=node)';
        throw error;
      }
      if (Date.now() > end) {
        started.kill('SIGKILL');
        throw new Error('edge: haproxy did not start in time');
      }
      // The new process's own answer (on a reload, the old one answers on the socket until then).
      if (
        fs.existsSync(files.socket) &&
        new RegExp(`^Pid: ${started.pid}$`, 'm').test(await ask(files.socket, 'show info').catch(() => ''))
      )
        break;
      await sleep(20);
    }
    watchProcess(started);
  }

  /** Makes `process` the serving HAProxy; its exit, unless asked for, is a crash to restart from. */
  function watchProcess(process: HaproxyProcess): void {
    child = process;
    exited = process.exited.then(() => undefined);
    saveState();
    void process.exited.then(({ code, signal }) => {
      if (closing || child !== process || retiring.has(process)) return;
      child = undefined;
      options.logger?.warn({ code, signal }, 'edge: haproxy exited; restarting it');
      void restart();
    });
  }

  async function restart(): Promise<void> {
    while (!closing && !child) {
      try {
        await sleep(RESTART_DELAY_MS);
        if (closing) return;
        // No route change between writing the table and HAProxy answering: it would be lost.
        await serially(() => (closing ? Promise.resolve() : launch()));
        options.logger?.info?.({}, 'edge: haproxy restarted');
      } catch (error) {
        options.logger?.warn({ error: (error as Error).message }, 'edge: haproxy restart failed');
      }
    }
  }

  if (left) {
    // Adopted as it serves: the table it has is the one saved with it.
    certificates = left.state.certificates;
    const byName = new Map<string, Slot>();
    slots.length = 0;
    for (const saved of left.state.slots) {
      const slot: Slot = { name: saved.name, state: saved.state, retiredAt: 0, upstreams: saved.upstreams };
      slots.push(slot);
      byName.set(slot.name, slot);
    }
    for (const [hostname, slotName] of left.state.table) {
      table.set(hostname, slotName === null ? null : (byName.get(slotName) ?? null));
      mapped.add(hostname);
    }
    followMessages(fs.existsSync(files.log) ? fs.statSync(files.log).size : 0);
    watchProcess(left.process);
    options.logger?.info?.({ pid: left.process.pid, port }, 'edge: adopted the running haproxy');
  } else {
    await launch();
  }

  // ---- the runtime API, one change after the other ----

  let queue: Promise<unknown> = Promise.resolve();
  function serially<T>(work: () => Promise<T>): Promise<T> {
    const next = queue.then(work, work);
    queue = next.catch(() => undefined);
    return next;
  }

  async function command(line: string): Promise<void> {
    if (!child) return; // Not running: the restart writes the whole table.
    const answer = (await ask(files.socket, line)).trim();
    if (answer !== '' && !/^(Done\.|IP changed|port changed|no need to change)/i.test(answer))
      throw new Error(`edge: haproxy refused '${line}': ${answer}`);
  }

  /** Current sessions (and queued requests) per "backend/server". */
  async function sessions(): Promise<Map<string, number>> {
    const counts = new Map<string, number>();
    if (!child) return counts;
    const lines = (await ask(files.socket, 'show stat -1 4 -1')).split('\n');
    const header = (lines[0] ?? '').replace(/^# /, '').split(',');
    const [px, sv, qcur, scur] = ['pxname', 'svname', 'qcur', 'scur'].map((name) => header.indexOf(name));
    for (const line of lines.slice(1)) {
      const fields = line.split(',');
      if (fields.length < header.length - 1) continue;
      counts.set(`${fields[px!]}/${fields[sv!]}`, Number(fields[qcur!] || 0) + Number(fields[scur!] || 0));
    }
    return counts;
  }

  /** Requests and 5xx per routed host name, from the edge_routes table (configuration()). */
  async function traffic(): Promise<Map<string, { requests: number; errors: number }>> {
    const counts = new Map<string, { requests: number; errors: number }>();
    if (!child) return counts;
    for (const line of (await ask(files.socket, 'show table edge_routes')).split('\n')) {
      const key = / key=(\S+) /.exec(line)?.[1];
      if (key === undefined) continue;
      counts.set(key, {
        requests: Number(/ http_req_cnt=(\d+)/.exec(line)?.[1] ?? 0),
        errors: Number(/ gpc0=(\d+)/.exec(line)?.[1] ?? 0),
      });
    }
    return counts;
  }

  /** Requests HAProxy is handling (its streams, less the runtime API's own); 0 once it cannot answer. */
  async function requestsInFlight(): Promise<number> {
    const answer = await ask(files.socket, 'show sess').catch(() => '');
    return answer.split('\n').filter((line) => line.includes(' fe=') && !line.includes(' fe=GLOBAL ')).length;
  }

  async function mapSet(hostname: string, value: string): Promise<void> {
    if (mapped.has(hostname)) await command(`set map ${files.map} ${hostname} ${value}`);
    else await command(`add map ${files.map} ${hostname} ${value}`);
    mapped.add(hostname);
  }

  async function mapDelete(hostname: string): Promise<void> {
    if (!mapped.has(hostname)) return;
    await command(`del map ${files.map} ${hostname}`);
    mapped.delete(hostname);
  }

  /** A slot no host name points at any longer: its servers take no new request. */
  async function retire(slot: Slot): Promise<void> {
    slot.state = 'draining';
    slot.retiredAt = Date.now();
    for (let i = 1; i <= slot.upstreams.length; i += 1)
      await command(`set server ${slot.name}/u${i} state maint`);
  }

  async function retireUnreferenced(): Promise<void> {
    const referenced = new Set([...table.values()].filter((s): s is Slot => s !== null));
    for (const slot of slots) if (slot.state === 'live' && !referenced.has(slot)) await retire(slot);
  }

  /** A free slot, or a draining one whose servers have no session left. */
  async function freeSlot(): Promise<Slot> {
    const free = slots.find((s) => s.state === 'free');
    if (free) return free;
    const counts = await sessions();
    // The one retired longest ago, and not in the last few seconds: before a server is given another
    // address, its idle connections to the old one must be gone (pool-purge-delay).
    const idle = slots
      .filter((s) => s.state === 'draining' && Date.now() - s.retiredAt >= reuseAfterMs)
      .sort((a, b) => a.retiredAt - b.retiredAt)
      .find((s) => s.upstreams.every((_, i) => (counts.get(`${s.name}/u${i + 1}`) ?? 0) === 0));
    if (idle) return idle;
    if (slots.length >= maxSlots)
      throw new Error(`edge: more than ${slots.length} routes at once (slots of the HAProxy edge)`);
    return grow();
  }

  /** Doubles the slots (up to maxSlots) by a seamless reload; runs inside the change queue. */
  async function grow(): Promise<Slot> {
    const first = slots.length;
    addSlots(Math.min(first, maxSlots - first));
    const previous = child;
    try {
      await launch(previous);
    } catch (error) {
      // The old process still serves the table as it was: the new slots were never there.
      slots.splice(first);
      if (previous) {
        retiring.delete(previous);
        // Unless it was told to go before the new one failed: then it is restarted like a crash.
        if (previous.hasExited()) {
          child = undefined;
          void restart();
        }
      }
      throw error;
    }
    options.logger?.info?.({ slots: slots.length }, 'edge: haproxy reloaded with more route slots');
    return slots[first]!;
  }

  async function applyRoute(hostnames: string[], upstreams: Upstream[]): Promise<void> {
    let target: Slot | null = null;
    if (upstreams.length > 0) {
      // Unchanged upstreams keep their slot (and its connections).
      const current = table.get(hostnames[0]!);
      if (
        current &&
        hostnames.every((h) => table.get(h) === current) &&
        current.upstreams.length === upstreams.length &&
        current.upstreams.every((u, i) => upstreamKey(u) === upstreamKey(upstreams[i]!))
      ) {
        target = current;
      } else {
        const slot = await freeSlot();
        for (let i = 1; i <= perSlot; i += 1) {
          const upstream = upstreams[i - 1];
          if (upstream) {
            await command(`set server ${slot.name}/u${i} addr ${upstream.host} port ${upstream.port}`);
            await command(`set server ${slot.name}/u${i} state ready`);
          } else if (i <= slot.upstreams.length) {
            await command(`set server ${slot.name}/u${i} state maint`);
          }
        }
        slot.state = 'live';
        slot.upstreams = upstreams;
        target = slot;
      }
    }
    // The switch: each host name's map entry, one write each.
    for (const hostname of hostnames) {
      table.set(hostname, target);
      await mapSet(hostname, target ? target.name : 'unavailable');
    }
    await retireUnreferenced();
    fs.writeFileSync(files.map, mapFile(), { mode: 0o600 });
    saveState();
  }

  async function applyRemoval(hostnames: string[]): Promise<void> {
    for (const hostname of hostnames) {
      table.delete(hostname);
      await mapDelete(hostname);
    }
    await retireUnreferenced();
    fs.writeFileSync(files.map, mapFile(), { mode: 0o600 });
    saveState();
  }

  const failed = (what: string) => (error: unknown) => {
    options.logger?.warn({ error: (error as Error).message }, `edge: ${what} failed`);
    throw error;
  };

  return {
    port,
    tlsPort,
    setRoute(hostnames, upstreams) {
      const names = hostnames.map((h) => checkHostname(h.toLowerCase()));
      const checked = upstreams.map(checkUpstream);
      if (checked.length > perSlot) throw new Error(`edge: at most ${perSlot} upstreams per route`);
      if (names.length === 0) return Promise.resolve();
      return serially(() => applyRoute(names, checked)).catch(failed('route change'));
    },
    removeRoute(hostnames) {
      const names = hostnames.map((h) => checkHostname(h.toLowerCase()));
      return serially(() => applyRemoval(names)).catch(failed('route removal'));
    },
    routes() {
      return new Map(
        [...table].map(([hostname, slot]) => [hostname, slot ? slot.upstreams.map((u) => ({ ...u })) : []]),
      );
    },
    // An adopted HAProxy started with an older configuration has no such table: nothing is counted.
    traffic: () => traffic().catch(() => new Map()),
    async drained(upstream, timeoutMs) {
      const key = upstreamKey(checkUpstream(upstream));
      const end = Date.now() + timeoutMs;
      // After every change queued before this call.
      await serially(() => Promise.resolve());
      for (;;) {
        const counts = await sessions().catch(() => new Map<string, number>());
        let busy = 0;
        for (const slot of slots) {
          slot.upstreams.forEach((u, i) => {
            if (upstreamKey(u) === key) busy += counts.get(`${slot.name}/u${i + 1}`) ?? 0;
          });
        }
        if (busy === 0) return true;
        if (Date.now() >= end) return false;
        await sleep(Math.min(DRAIN_POLL_MS, Math.max(1, end - Date.now())));
      }
    },
    async close(closeOptions = {}) {
      closing = true;
      const running = child;
      await queue;
      if (closeOptions.keepRunning) {
        // It serves on for the next Berth, which adopts it with this table.
        saveState();
        child = undefined;
        await messages?.finish();
        return;
      }
      child = undefined;
      await messages?.finish();
      if (!running) return;
      // Not a soft stop (SIGUSR1): with idle-close-on-response, that would keep idle keep-alive
      // connections until hard-stop-after. Instead the listeners go at once (connections already open
      // stay), the requests in flight finish within the close timeout, then everything left ends.
      for (const frontend of ['edge', 'edge_tls_none'])
        await ask(files.socket, `shutdown frontend ${frontend}`).catch(() => '');
      const end = Date.now() + closeTimeoutMs;
      while (Date.now() < end && (await requestsInFlight()) > 0) await sleep(DRAIN_POLL_MS);
      const timer = setTimeout(() => running.kill('SIGKILL'), 2000);
      running.kill('SIGTERM');
      for (const process of retiring.keys()) process.kill('SIGTERM');
      await Promise.all([exited, ...retiring.values()]);
      clearTimeout(timer);
      fs.rmSync(files.socket, { force: true });
      fs.rmSync(files.pid, { force: true });
      fs.rmSync(files.state, { force: true });
    },
  };
}

/**
 * Rejects with EADDRINUSE (`listener` saying which port) when `host:port` cannot be bound: something
 * holds it. Node binds without SO_REUSEPORT, so a HAProxy of another Berth that holds it counts too.
 */
function probePort(host: string, port: number, listener: 'plain' | 'tls'): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE')
        Object.assign(error, { listener, message: `edge: ${host}:${port} is already in use` });
      reject(error);
    });
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve()));
  });
}

/**
 * The HAProxy an earlier Berth left serving on these files, when it still runs (same pid and start
 * time, its runtime API answers) and listens where asked (a port of 0 takes whichever it has).
 */
async function runningLeftover(
  files: { state: string; socket: string },
  port: number,
  tlsPort: number | undefined,
): Promise<{ state: EdgeState; process: HaproxyProcess } | undefined> {
  let state: EdgeState;
  try {
    state = JSON.parse(fs.readFileSync(files.state, 'utf8')) as EdgeState;
  } catch {
    return undefined;
  }
  if (processStartTime(state.pid) !== state.startTime) return undefined;
  if (port !== 0 && port !== state.port) return undefined;
  if ((tlsPort === undefined) !== (state.tlsPort === undefined)) return undefined;
  if (tlsPort !== undefined && tlsPort !== 0 && tlsPort !== state.tlsPort) return undefined;
  const info = await ask(files.socket, 'show info').catch(() => '');
  if (!new RegExp(`^Pid: ${state.pid}$`, 'm').test(info)) return undefined;
  const { exited, hasExited } = watchAdoptedExit(state.pid, state.startTime);
  return {
    state,
    process: {
      pid: state.pid,
      kill: (signal) => {
        try {
          process.kill(state.pid, signal);
        } catch {
          // Gone already.
        }
      },
      exited,
      hasExited,
    },
  };
}

/** Stops the HAProxy an earlier Berth left serving from `dir` (berth admin stop-all), if any. */
export async function stopLeftoverEdge(dir: string): Promise<void> {
  const root = checkPath(path.resolve(dir));
  await stopLeftover(path.join(root, 'haproxy.pid'), path.join(root, 'haproxy.cfg'));
  for (const file of ['haproxy.pid', 'admin.sock', 'edge-state.json'])
    fs.rmSync(path.join(root, file), { force: true });
}

/** A master left by a Berth that was killed: stopped, if the pid file names HAProxy on our config. */
async function stopLeftover(pidFile: string, config: string): Promise<void> {
  let pid: number;
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8').trim().split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 1) return;
  let cmdline: string;
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return;
  }
  if (!cmdline.includes('haproxy') || !cmdline.includes(config)) return;
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100; i += 1) {
    if (!fs.existsSync(`/proc/${pid}`)) return;
    await sleep(50);
  }
  process.kill(pid, 'SIGKILL');
}
