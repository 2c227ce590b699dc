// The s3 driver's object GETs on keep-alive sockets that read into buffers of their own.
//
// node:http hands a response over in fresh 64 KiB buffers. At 1 MiB a GET, that churn of external
// memory set off a full collection of Berth's whole heap every ten or so GETs: 3 of the 7.7 ms of
// CPU a proxied GET cost (bench/s3/upstream.ts, profiled). Here a socket reads into its own two
// buffers in turn, a slice goes out to the tenant, and a buffer is read into again only once that
// write is flushed: no allocation per GET on the way through. The answer must carry Content-Length (every S3 service
// sends it on GetObject); a chunked one is refused as an upstream failure.
import net from 'node:net';
import { Readable, type Writable } from 'node:stream';
import tls from 'node:tls';

/** What one socket reads at a time. */
const BUFFER_BYTES = 256 * 1024;
/** The most a response's status line and headers may take. */
const MAX_HEAD_BYTES = 64 * 1024;
/** How long the upstream may take to start answering. */
const HEAD_TIMEOUT_MS = 60_000;
/** An idle socket is closed before a usual server keep-alive (5 s) closes it under a request. */
const IDLE_MS = 4_000;
/** Idle sockets kept for reuse (each holds two buffers: 512 KiB). */
const MAX_IDLE = 32;
/** How much of a refusal's body is kept for the log. */
export const REFUSAL_BYTES = 2048;

/** A status the upstream answered that is not a success; `body` is the start of its answer. */
export class UpstreamRefusal extends Error {
  constructor(
    readonly status: number,
    body: string,
  ) {
    super(`the upstream answered ${status}: ${body}`);
    this.name = 'UpstreamRefusal';
  }
}

/** Called with each slice the socket read; returns whether the socket may read on at once. */
type Reader = (slice: Buffer) => boolean;

class Connection {
  readonly socket: net.Socket;
  /**
   * The socket reads into these in turn: while a slice of one is being written to the tenant, the
   * next read goes into the other, so reading and writing overlap.
   */
  private readonly ring = [Buffer.allocUnsafe(BUFFER_BYTES), Buffer.allocUnsafe(BUFFER_BYTES)];
  private readonly held = [false, false];
  /** The ring's buffer the latest read went into. */
  private filling = -1;
  /** Paused until the buffer next in the ring is let go. */
  private waiting = false;
  private reader: Reader | undefined;
  private failer: ((error: Error) => void) | undefined;
  closed = false;

  /** `ca`: certificates to trust instead of the system's (tests); `onClose`: told once it closes. */
  constructor(url: URL, ca: string | undefined, onClose: (connection: Connection) => void) {
    const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    const onread = {
      // Called once at first and after each read: the buffer the next read goes into.
      buffer: () => {
        this.filling = (this.filling + 1) % this.ring.length;
        return this.ring[this.filling]!;
      },
      callback: (bytes: number, buffer: Buffer) => this.read(buffer.subarray(0, bytes)),
    };
    this.socket =
      url.protocol === 'https:'
        ? // tls takes `onread` as net does (Node's docs); its types do not list it.
          tls.connect({
            host: url.hostname,
            port,
            // SNI names a host, never an address (RFC 6066); the certificate is checked either way.
            servername: net.isIP(url.hostname) ? undefined : url.hostname,
            ca,
            onread,
          } as tls.ConnectionOptions)
        : net.connect({ host: url.hostname, port, onread });
    this.socket.setNoDelay(true);
    this.socket.on('timeout', () => this.socket.destroy(new Error('the upstream did not answer in time')));
    this.socket.on('error', (error) => this.fail(error));
    this.socket.on('close', () => {
      this.fail(new Error('the upstream closed the connection'));
      onClose(this);
    });
  }

  /**
   * Keeps the buffer of the latest read from being read into again; the returned function lets it
   * go (and resumes a socket that waits for it).
   */
  hold(): () => void {
    const index = this.filling;
    this.held[index] = true;
    return () => {
      this.held[index] = false;
      if (this.waiting && (this.filling + 1) % this.ring.length === index) {
        this.waiting = false;
        this.resume();
      }
    };
  }

  /** Whether the next read has a free buffer; if not, the socket waits for it to be let go. */
  mayReadOn(): boolean {
    const free = !this.held[(this.filling + 1) % this.ring.length];
    if (!free) this.waiting = true;
    return free;
  }

  private read(slice: Buffer): boolean {
    if (this.reader) return this.reader(slice);
    // Bytes nobody asked for: the connection is out of step with the upstream.
    this.socket.destroy();
    return false;
  }

  private fail(error: Error): void {
    this.closed = true;
    const failer = this.failer;
    this.reader = this.failer = undefined;
    failer?.(error);
  }

  /** Sends a request head; `reader` gets the answer's bytes, `failer` a broken connection. */
  send(head: string, reader: Reader, failer: (error: Error) => void): void {
    this.reader = reader;
    this.failer = failer;
    this.socket.ref();
    this.socket.setTimeout(HEAD_TIMEOUT_MS);
    this.socket.write(head, 'latin1');
  }

  /** The answer is complete: nothing more is expected on this socket until the next send. */
  idle(): void {
    this.reader = this.failer = undefined;
    this.socket.setTimeout(IDLE_MS);
    // As node:http's agent does: an idle socket does not keep the process alive.
    this.socket.unref();
    // Reading on while idle sees the upstream close the socket. On the next tick: a reader that
    // finished an answer returns false, which pauses the socket after it returns.
    process.nextTick(() => this.resume());
  }

  /** The answer started: a slow tenant may hold the socket paused for as long as it reads. */
  answering(): void {
    this.socket.setTimeout(0);
  }

  resume(): void {
    if (!this.closed) this.socket.resume();
  }

  destroy(): void {
    this.closed = true;
    this.reader = this.failer = undefined;
    this.socket.destroy();
  }
}

/** A response head: status and lower-cased headers. */
function parseHead(text: string): { status: number; headers: Map<string, string> } {
  const lines = text.split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0] ?? '');
  if (!status) throw new Error(`the upstream answered with no HTTP status line: ${lines[0]?.slice(0, 80)}`);
  const headers = new Map<string, string>();
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return { status: Number(status[1]), headers };
}

/**
 * An object's bytes as the upstream sends them. Read as a stream, each chunk is a copy; `sendTo`
 * writes slices of the socket's own buffer instead, reading on only once each write is flushed.
 */
export class UpstreamBody extends Readable {
  /** A slice of the socket's buffer not yet handed on, and what lets that buffer go. */
  private pending: { slice: Buffer; letGo: () => void } | undefined;
  private mode: 'copy' | 'send' | undefined;
  private target: { to: Writable; resolve: () => void; reject: (error: Error) => void } | undefined;
  /** Body bytes the socket has still to read. */
  private remaining: number;

  constructor(
    private readonly connection: Connection,
    readonly length: number,
    private readonly finished: () => void,
  ) {
    super({ highWaterMark: BUFFER_BYTES });
    this.remaining = length;
  }

  /** The connection's next slice of body; returns whether the socket may read on at once. */
  accept(slice: Buffer): boolean {
    if (slice.length > this.remaining) {
      this.broken(new Error('the upstream sent more bytes than its Content-Length'));
      return false;
    }
    this.remaining -= slice.length;
    this.pending = { slice, letGo: this.connection.hold() };
    return this.handOn();
  }

  /** Hands on the pending slice if someone takes bytes; true when the socket may read on. */
  private handOn(): boolean {
    const pending = this.pending;
    if (!pending || !this.mode) return false;
    this.pending = undefined;
    const { slice, letGo } = pending;
    if (this.mode === 'copy') {
      const more = this.push(Buffer.from(slice));
      letGo();
      if (this.remaining === 0) {
        this.finished();
        this.push(null);
        return false;
      }
      return more;
    }
    const { to, resolve, reject } = this.target!;
    const last = this.remaining === 0;
    const written = (error?: Error | null) => {
      letGo();
      if (error) {
        this.connection.destroy();
        reject(error);
      } else if (last) {
        this.finished();
        resolve();
      }
    };
    // The last slice ends `to` (as a pipe would): its callback comes once everything is flushed.
    // Corked, the answer's head leaves with the first slice in one system call.
    to.cork();
    if (last) to.end(slice, written);
    else to.write(slice, written);
    to.uncork();
    return !last && this.connection.mayReadOn();
  }

  /** The connection broke or sent nonsense: the body ends in that error. */
  broken(error: Error): void {
    this.connection.destroy();
    if (this.target) this.target.reject(error);
    else this.destroy(error);
  }

  /** Writes the whole body to `to` and ends it; settles once the last byte is flushed there. */
  sendTo(to: Writable): Promise<void> {
    if (this.mode) throw new Error('the body is already being read');
    this.mode = 'send';
    return new Promise<void>((resolve, reject) => {
      this.target = { to, resolve, reject };
      if (this.remaining === 0 && !this.pending) {
        this.finished();
        to.end(() => resolve());
        return;
      }
      // A tenant gone away before the write's callback: the socket is not reused.
      to.once('close', () => {
        if (this.remaining > 0 || this.pending) {
          this.connection.destroy();
          // Coded as a pipe's would be: a client that went away is no failure to log (server.ts).
          const gone = new Error('the response closed before the object was sent');
          reject(Object.assign(gone, { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
        }
      });
      if (!this.pending || this.handOn()) this.connection.resume();
    });
  }

  override _read(): void {
    if (this.mode === 'send') return;
    if (!this.mode) {
      this.mode = 'copy';
      if (this.remaining === 0 && !this.pending) {
        this.finished();
        this.push(null);
        return;
      }
    }
    if (this.pending) {
      if (this.handOn()) this.connection.resume();
    } else this.connection.resume();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    if (this.remaining > 0 || this.pending) this.connection.destroy();
    callback(error);
  }
}

export interface UpstreamGetter {
  /** GETs a presigned `url`: the body once the head says 200 or 206, else an UpstreamRefusal. */
  get(url: string, range?: { start: number; end: number }): Promise<UpstreamBody>;
  close(): void;
}

/** `options.ca`: certificates to trust for an https upstream instead of the system's (tests). */
export function upstreamGetter(endpoint: string, options: { ca?: string } = {}): UpstreamGetter {
  const base = new URL(endpoint);
  const idle: Connection[] = [];
  // A socket the upstream closed while idle leaves the pool at once, with its buffers.
  const connect = () =>
    new Connection(base, options.ca, (closed) => {
      const at = idle.indexOf(closed);
      if (at >= 0) idle.splice(at, 1);
    });

  function take(): { connection: Connection; reused: boolean } {
    for (let c = idle.pop(); c; c = idle.pop()) if (!c.closed) return { connection: c, reused: true };
    return { connection: connect(), reused: false };
  }
  function release(connection: Connection, keepAlive: boolean): void {
    if (keepAlive && !connection.closed && idle.length < MAX_IDLE) {
      connection.idle();
      idle.push(connection);
    } else connection.destroy();
  }

  function attempt(url: URL, connection: Connection, range?: { start: number; end: number }) {
    return new Promise<UpstreamBody>((resolve, reject) => {
      let head = '';
      let started = false;
      let body: UpstreamBody | undefined;
      let refused: { status: number; text: string; remaining: number; keepAlive: boolean } | undefined;

      const reader: Reader = (slice) => {
        started = true;
        if (body) return body.accept(slice);
        if (refused) return readRefusal(slice);
        // Only the head becomes a string, not the body bytes that came in the same read. The blank
        // line may straddle two reads: its start is then in the head's last three bytes.
        const tail = head.slice(-3);
        const straddling = (tail + slice.toString('latin1', 0, 3)).indexOf('\r\n\r\n');
        const found = slice.indexOf('\r\n\r\n');
        const headBytes = straddling >= 0 ? straddling + 4 - tail.length : found >= 0 ? found + 4 : -1;
        if (headBytes < 0) {
          head += slice.toString('latin1');
          if (head.length > MAX_HEAD_BYTES) fail(new Error('the upstream answered with an oversized head'));
          return true;
        }
        head += slice.toString('latin1', 0, headBytes);
        const rest = slice.subarray(headBytes);
        const end = head.length - 4;
        let parsed;
        try {
          parsed = parseHead(head.slice(0, end));
        } catch (error) {
          fail(error as Error);
          return false;
        }
        const { status, headers } = parsed;
        connection.answering();
        const keepAlive = headers.get('connection')?.toLowerCase() !== 'close';
        const declared = headers.get('content-length');
        const length = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
        if (status !== 200 && status !== 206) {
          // An error's body may come chunked (S3's often does): read to its length, else what came
          // with the head, and then the socket is not reused.
          refused = {
            status,
            text: '',
            remaining: length ?? rest.length,
            keepAlive: keepAlive && length !== undefined,
          };
          return readRefusal(rest);
        }
        if (length === undefined || headers.has('transfer-encoding')) {
          fail(new Error(`the upstream answered ${status} without a Content-Length`));
          return false;
        }
        body = new UpstreamBody(connection, length, () => release(connection, keepAlive));
        resolve(body);
        return rest.length > 0 ? body.accept(rest) : false;
      };

      const readRefusal = (slice: Buffer): boolean => {
        const r = refused!;
        if (r.text.length < REFUSAL_BYTES) r.text += slice.toString('utf8', 0, REFUSAL_BYTES);
        r.remaining -= slice.length;
        if (r.remaining > 0) return true;
        release(connection, r.keepAlive && r.remaining === 0);
        reject(new UpstreamRefusal(r.status, r.text.slice(0, REFUSAL_BYTES)));
        return false;
      };

      const fail = (error: Error): void => {
        connection.destroy();
        if (body) body.broken(error);
        else reject(Object.assign(error, { beforeAnswer: !started }));
      };

      const rangeLine = range ? `Range: bytes=${range.start}-${range.end}\r\n` : '';
      connection.send(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\n${rangeLine}\r\n`,
        reader,
        fail,
      );
    });
  }

  return {
    async get(target, range) {
      const url = new URL(target);
      const { connection, reused } = take();
      try {
        return await attempt(url, connection, range);
      } catch (error) {
        // A reused socket the upstream closed just as this request went out: once more on a new one
        // (a GET is safe to repeat).
        if (reused && (error as { beforeAnswer?: boolean }).beforeAnswer)
          return attempt(url, connect(), range);
        throw error;
      }
    },
    close() {
      for (const c of idle.splice(0)) c.destroy();
    },
  };
}
