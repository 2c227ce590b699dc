// Requests to a Berth listening on a real socket (port 0 on loopback), the way users reach it.
// Fastify's inject() hands a route a fake request object, not a socket: it hid a guard that walked a
// streamed body's socket graph until the heap ran out (issue 24). Tests use `request()` below; the
// few that still call inject() say why next to the call.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';

export interface SocketRequest {
  method?: string;
  url: string;
  headers?: Record<string, string | string[] | undefined>;
  /** A string or Buffer is sent as is; a stream is piped; anything else is sent as JSON. */
  payload?: unknown;
  /** The same as `payload` (inject() accepts both names). */
  body?: unknown;
  query?: Record<string, string | number | boolean | undefined>;
  signal?: AbortSignal;
}

export interface SocketResponse {
  statusCode: number;
  statusMessage: string;
  headers: http.IncomingHttpHeaders;
  /** The body as UTF-8 text. */
  body: string;
  payload: string;
  rawPayload: Buffer;
  json<T = any>(): T; // eslint-disable-line @typescript-eslint/no-explicit-any -- as inject()'s answer types it
}

export type RequestOverSocket = (options: SocketRequest | string) => Promise<SocketResponse>;

/** Sends one request to a server listening at `port` on 127.0.0.1 and reads the whole answer. */
export function requestPort(port: number, input: SocketRequest | string): Promise<SocketResponse> {
  const options: SocketRequest = typeof input === 'string' ? { url: input } : input;
  const url = new URL(options.url, `http://127.0.0.1:${port}`);
  for (const [key, value] of Object.entries(options.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  const headers: Record<string, string | string[]> = {};
  for (const [key, value] of Object.entries(options.headers ?? {})) {
    if (value !== undefined) headers[key.toLowerCase()] = value;
  }
  const raw = options.payload ?? options.body;
  let body: Buffer | Readable | undefined;
  if (raw instanceof Readable) body = raw;
  else if (Buffer.isBuffer(raw) || raw instanceof Uint8Array) body = Buffer.from(raw);
  else if (typeof raw === 'string') body = Buffer.from(raw);
  else if (raw !== undefined) {
    body = Buffer.from(JSON.stringify(raw));
    headers['content-type'] ??= 'application/json';
  }
  if (Buffer.isBuffer(body) && headers['transfer-encoding'] === undefined) {
    headers['content-length'] = String(body.length);
  }
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      // A fresh connection per request (no keep-alive pool shared between tests).
      { method: options.method ?? 'GET', headers, agent: false, signal: options.signal },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const rawPayload = Buffer.concat(chunks);
          const text = rawPayload.toString('utf8');
          resolve({
            statusCode: res.statusCode ?? 0,
            statusMessage: res.statusMessage ?? '',
            headers: res.headers,
            body: text,
            payload: text,
            rawPayload,
            json: <T>() => JSON.parse(text) as T,
          });
        });
      },
    );
    req.on('error', reject);
    if (body instanceof Readable) body.pipe(req);
    else req.end(body);
  });
}

/** Makes `app` listen on a free loopback port and returns a request function bound to it. */
export async function listenOnSocket(
  app: FastifyInstance,
): Promise<{ port: number; request: RequestOverSocket }> {
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as AddressInfo).port;
  return { port, request: (options) => requestPort(port, options) };
}
