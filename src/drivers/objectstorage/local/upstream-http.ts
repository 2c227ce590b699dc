// The s3 driver's hot path to the upstream: object GETs and PUTs as presigned requests over plain
// keep-alive HTTP, GETs on sockets of their own (upstream-get.ts). The AWS SDK (upstream-client.ts)
// does everything else; on 1 MiB bodies its middleware stack cost as much CPU as Berth's own
// handling of the request (bench/s3/upstream.ts).
import http from 'node:http';
import https from 'node:https';
import type { UpstreamSettings } from '../upstream-client.js';
import { presignUrl } from './sigv4.js';
import { REFUSAL_BYTES, UpstreamRefusal, upstreamGetter, type UpstreamBody } from './upstream-get.js';

/** How long a presigned request stays valid: it is sent at once, this only absorbs clock skew. */
const EXPIRES_SECONDS = 300;

export interface UpstreamPut {
  /** The request body: write the bytes, then end it. */
  request: http.ClientRequest;
  /** Settles once the upstream answered (a success) or failed. */
  done: Promise<void>;
}

export interface UpstreamHttp {
  /** The bytes of `key` (or of its inclusive byte range) as they arrive; `length` says how many. */
  get(key: string, range?: { start: number; end: number }): Promise<UpstreamBody>;
  /** A PUT of exactly `length` bytes to `key`. */
  put(key: string, length: number): UpstreamPut;
}

/** Reads (the start of) a refused answer's body, then fails with it. */
function refusal(response: http.IncomingMessage, reject: (error: Error) => void): void {
  let text = '';
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    if (text.length < REFUSAL_BYTES) text += chunk;
  });
  response.on('error', () => undefined);
  response.on('end', () =>
    reject(new UpstreamRefusal(response.statusCode ?? 0, text.slice(0, REFUSAL_BYTES))),
  );
}

export function upstreamHttp(settings: UpstreamSettings): UpstreamHttp {
  const secure = new URL(settings.url).protocol === 'https:';
  const transport = secure ? https : http;
  const agent = secure
    ? new https.Agent({ keepAlive: true, maxSockets: 256 })
    : new http.Agent({ keepAlive: true, maxSockets: 256 });
  const getter = upstreamGetter(settings.url);
  const urlOf = (method: 'GET' | 'PUT', key: string) =>
    presignUrl({
      method,
      endpoint: settings.url,
      path: `/${settings.bucket}/${key}`,
      region: settings.region,
      accessKeyId: settings.accessKeyId,
      secretAccessKey: settings.secretAccessKey,
      now: new Date(),
      expiresSeconds: EXPIRES_SECONDS,
    });

  return {
    get: (key, range) => getter.get(urlOf('GET', key), range),

    put(key, length) {
      const request = transport.request(urlOf('PUT', key), {
        method: 'PUT',
        agent,
        headers: { 'content-length': length },
      });
      const done = new Promise<void>((resolve, reject) => {
        request.on('response', (response) => {
          if (response.statusCode === 200) {
            response.resume();
            response.on('end', resolve);
            response.on('error', reject);
          } else refusal(response, reject);
        });
        request.on('error', reject);
      });
      return { request, done };
    },
  };
}
