// Fetches one HTTP(S) resource for the browser, connected to the address the guard approved.
// Redirects are NOT followed here: they go back to the browser, whose next request is checked again.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import zlib from 'node:zlib';
import type { AddressGuard } from './guard.js';

export interface FetchedResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-encoding',
  'content-length',
  'upgrade',
  'proxy-connection',
]);

export async function guardedFetch(
  guard: AddressGuard,
  request: { url: string; method: string; headers: Record<string, string>; body: Buffer | null },
  options: {
    timeoutMs: number;
    maxBytes: number;
    signal?: AbortSignal;
    /** Past maxBytes: fail (the default), or answer with the first maxBytes and stop reading. */
    overflow?: 'error' | 'truncate';
  },
): Promise<FetchedResponse> {
  const url = new URL(request.url);
  const target = await guard.resolve(url);
  const pinned: LookupFunction = (_host, opts, callback) => {
    if ((opts as { all?: boolean }).all) {
      (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
        { address: target.address, family: target.family },
      ]);
    } else {
      callback(null, target.address, target.family);
    }
  };
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers)) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || lower === 'host' || lower.startsWith(':')) continue;
    headers[lower] = value;
  }
  headers['accept-encoding'] = 'gzip, deflate, br';
  const module = url.protocol === 'https:' ? https : http;
  return new Promise<FetchedResponse>((resolve, reject) => {
    const req = module.request(
      url,
      {
        method: request.method,
        headers,
        lookup: pinned,
        timeout: options.timeoutMs,
        agent: false,
        ...(options.signal ? { signal: options.signal } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        const encoding = (res.headers['content-encoding'] ?? '').toLowerCase();
        const stream =
          encoding === 'gzip' || encoding === 'x-gzip'
            ? res.pipe(zlib.createGunzip())
            : encoding === 'deflate'
              ? res.pipe(zlib.createInflate())
              : encoding === 'br'
                ? res.pipe(zlib.createBrotliDecompress())
                : res;
        const answer = () => {
          const out: Record<string, string> = {};
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined || HOP_BY_HOP.has(name)) continue;
            out[name] = Array.isArray(value) ? value.join(name === 'set-cookie' ? '\n' : ', ') : value;
          }
          resolve({ status: res.statusCode ?? 502, headers: out, body: Buffer.concat(chunks) });
        };
        stream.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > options.maxBytes) {
            if (options.overflow === 'truncate') {
              chunks.push(chunk.subarray(0, chunk.length - (size - options.maxBytes)));
              answer();
              req.destroy();
              return;
            }
            req.destroy(new Error(`response larger than ${options.maxBytes} bytes`));
            return;
          }
          chunks.push(chunk);
        });
        stream.on('error', reject);
        res.on('error', reject);
        stream.on('end', answer);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no response within ${options.timeoutMs} ms`)));
    req.on('error', reject);
    req.end(request.body ?? undefined);
  });
}
