// The s3 driver's object GETs on sockets that read into buffers of their own (upstream-get.ts),
// against a real HTTP peer whose answers each test chooses. End to end through Berth (ranges, empty
// objects, 20 MiB bodies) they are covered in upstream.test.ts.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import net, { type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import {
  UpstreamRefusal,
  upstreamGetter,
  type UpstreamBody,
  type UpstreamGetter,
} from '../../src/drivers/objectstorage/local/upstream-get.js';

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

interface Peer {
  url: string;
  /** Sockets the peer accepted. */
  connections: () => number;
  requests: http.IncomingMessage[];
  dropSockets: () => void;
  close: () => Promise<void>;
}

async function peer(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<Peer> {
  let connections = 0;
  const requests: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req);
    answer(req, res);
  });
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
    requests,
    dropSockets: () => server.closeAllConnections(),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** Serves `body` (honouring a byte range), as an S3 service answers GetObject. */
const serving = (body: Buffer) => (req: http.IncomingMessage, res: http.ServerResponse) => {
  const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
  if (range) {
    const [start, end] = [Number(range[1]), Number(range[2])];
    res.writeHead(206, { 'content-length': end - start + 1 });
    res.end(body.subarray(start, end + 1));
  } else {
    res.writeHead(200, { 'content-length': body.length });
    res.end(body);
  }
};

/**
 * A tenant's endpoint in front of `getter`, as objects.ts answers a GET: the body goes out with
 * sendTo. Its `received` are the bytes a client read slowly (pausing after each chunk).
 */
async function tenantGet(getter: UpstreamGetter, target: string): Promise<Buffer> {
  const front = http.createServer((_req, res) => {
    getter.get(target).then(
      (body) => {
        res.writeHead(200, { 'content-length': body.length });
        return body.sendTo(res);
      },
      () => res.destroy(),
    );
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      http
        .get(`http://127.0.0.1:${(front.address() as AddressInfo).port}/`, { agent: false }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => {
            chunks.push(chunk);
            // A slow reader: the upstream socket has to wait for its buffers to be let go.
            res.pause();
            setTimeout(() => res.resume(), 1);
          });
          res.on('end', () => resolve(Buffer.concat(chunks)));
          res.on('error', reject);
        })
        .on('error', reject);
    });
  } finally {
    front.closeAllConnections();
    await new Promise((resolve) => front.close(resolve));
  }
}

async function readAll(body: UpstreamBody, pause = 0): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) {
    chunks.push(chunk as Buffer);
    if (pause) await sleep(pause);
  }
  return Buffer.concat(chunks);
}

describe('object GETs to the upstream on sockets of their own', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  async function setUp(answer: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
    const upstream = await peer(answer);
    const getter = upstreamGetter(upstream.url);
    cleanups.push(upstream.close, () => getter.close());
    return { upstream, getter };
  }

  it('hands a slow tenant every byte exactly, over one reused socket', async () => {
    const object = randomBytes(16 * 1024 * 1024 + 17);
    const { upstream, getter } = await setUp(serving(object));
    for (let i = 0; i < 3; i += 1) {
      const received = await tenantGet(getter, `${upstream.url}/bucket/key?X-Amz-Signature=x`);
      expect(received.length).toBe(object.length);
      expect(sha(received)).toBe(sha(object));
    }
    expect(upstream.connections()).toBe(1);
    expect(upstream.requests.map((r) => r.url)).toEqual(Array(3).fill('/bucket/key?X-Amz-Signature=x'));
  });

  it('reads as a stream with copies, and asks for a byte range', async () => {
    const object = randomBytes(2 * 1024 * 1024);
    const { upstream, getter } = await setUp(serving(object));
    const whole = await getter.get(`${upstream.url}/b/k`);
    expect(whole.length).toBe(object.length);
    expect(sha(await readAll(whole, 2))).toBe(sha(object));
    const part = await getter.get(`${upstream.url}/b/k`, { start: 1000, end: 600_000 });
    expect(part.length).toBe(599_001);
    expect(sha(await readAll(part))).toBe(sha(object.subarray(1000, 600_001)));
    expect(upstream.requests[1]!.headers.range).toBe('bytes=1000-600000');
    expect(upstream.connections()).toBe(1);
  });

  it('turns a refusal into an UpstreamRefusal with its status and body', async () => {
    const object = randomBytes(1000);
    const error = '<Error><Code>NoSuchKey</Code></Error>';
    const { upstream, getter } = await setUp((req, res) => {
      if (req.url === '/b/sized') {
        res.writeHead(404, { 'content-length': error.length });
        res.end(error);
      } else if (req.url === '/b/chunked') {
        res.writeHead(404); // node:http answers chunked, as S3 often does for errors
        res.end(error);
      } else serving(object)(req, res);
    });
    for (const key of ['sized', 'chunked']) {
      const refused = await getter.get(`${upstream.url}/b/${key}`).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(UpstreamRefusal);
      expect((refused as UpstreamRefusal).status).toBe(404);
      expect((refused as Error).message).toContain('NoSuchKey');
      expect(sha(await readAll(await getter.get(`${upstream.url}/b/k`)))).toBe(sha(object));
    }
    // A refusal of known length leaves the socket usable; a chunked one is not read to its end.
    expect(upstream.connections()).toBe(2);
  });

  it('reads a head that arrives in pieces, split inside its blank line', async () => {
    // A raw peer that sends its answer in three writes, apart in time, so each is a read of its own.
    const pieces = ['HTTP/1.1 200 OK\r\nContent-Length: 11\r\n', 'X-Pad: 1\r\n\r', '\nhello world'];
    const server = net.createServer((socket) => {
      socket.setNoDelay(true);
      socket.once('data', () => {
        void (async () => {
          for (const piece of pieces) {
            socket.write(piece);
            await sleep(30);
          }
        })();
      });
    });
    const connections = new Set<net.Socket>();
    server.on('connection', (c) => connections.add(c));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          server.close(() => resolve());
          for (const c of connections) c.destroy();
        }),
    );
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const getter = upstreamGetter(url);
    cleanups.push(() => getter.close());
    const body = await getter.get(`${url}/b/k`);
    expect(body.length).toBe(11);
    expect((await readAll(body)).toString()).toBe('hello world');
  });

  it('refuses an answer without a Content-Length (chunked)', async () => {
    const { upstream, getter } = await setUp((_req, res) => {
      res.writeHead(200); // node:http answers chunked
      res.write('some');
      res.end('bytes');
    });
    await expect(getter.get(`${upstream.url}/b/k`)).rejects.toThrow(/without a Content-Length/);
  });

  it('does not reuse a socket the upstream closed while it was idle', async () => {
    const object = randomBytes(5000);
    const { upstream, getter } = await setUp(serving(object));
    await readAll(await getter.get(`${upstream.url}/b/k`));
    upstream.dropSockets(); // as a server's keep-alive timeout does
    await sleep(50);
    expect(sha(await readAll(await getter.get(`${upstream.url}/b/k`)))).toBe(sha(object));
    expect(upstream.connections()).toBe(2);
  });

  it('sends once more on a new socket when a reused one is closed under its request', async () => {
    const object = randomBytes(5000);
    const served = new WeakMap<object, number>();
    const { upstream, getter } = await setUp((req, res) => {
      const count = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, count);
      // The second request on a socket finds it closed, as when a server's keep-alive timeout
      // closes it just as the request goes out.
      if (count === 2) req.socket.destroy();
      else serving(object)(req, res);
    });
    await readAll(await getter.get(`${upstream.url}/b/k`));
    expect(sha(await readAll(await getter.get(`${upstream.url}/b/k`)))).toBe(sha(object));
    expect(upstream.requests).toHaveLength(3);
    expect(upstream.connections()).toBe(2);
  });

  it('fails the body, not the process, when the upstream dies half-way', async () => {
    const { upstream, getter } = await setUp((_req, res) => {
      res.writeHead(200, { 'content-length': 4 * 1024 * 1024 });
      res.write(randomBytes(256 * 1024), () => setTimeout(() => res.socket!.destroy(), 10));
    });
    const body = await getter.get(`${upstream.url}/b/k`);
    await expect(readAll(body)).rejects.toThrow(/closed the connection/);
  });

  it('drops the socket when the tenant goes away half-way, and serves the next GET on a new one', async () => {
    const object = randomBytes(8 * 1024 * 1024);
    const { upstream, getter } = await setUp(serving(object));
    const front = http.createServer((_req, res) => {
      void getter.get(`${upstream.url}/b/k`).then((body) => {
        res.writeHead(200, { 'content-length': body.length });
        body.sendTo(res).catch(() => undefined);
      });
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => front.close(() => resolve())));
    await new Promise<void>((resolve, reject) => {
      http
        .get(`http://127.0.0.1:${(front.address() as AddressInfo).port}/`, { agent: false }, (res) => {
          res.once('data', () => {
            res.destroy();
            resolve();
          });
        })
        .on('error', reject);
    });
    await sleep(50);
    expect(sha(await readAll(await getter.get(`${upstream.url}/b/k`)))).toBe(sha(object));
    expect(upstream.connections()).toBe(2);
  });

  it('reads from an https upstream, and refuses one whose certificate it does not trust', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upstream-tls-'));
    cleanups.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const [key, cert] = [path.join(dir, 'key.pem'), path.join(dir, 'cert.pem')];
    // A self-signed certificate for 127.0.0.1 (openssl is in scripts/install-system.sh).
    execFileSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'],
        ...['-keyout', key, '-out', cert, '-days', '1', '-subj', '/CN=127.0.0.1'],
        ...['-addext', 'subjectAltName=IP:127.0.0.1'],
      ],
      { stdio: 'ignore' },
    );
    const object = randomBytes(3 * 1024 * 1024);
    const server = https.createServer(
      { key: fs.readFileSync(key), cert: fs.readFileSync(cert) },
      serving(object),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(
      () =>
        new Promise((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const trusting = upstreamGetter(url, { ca: fs.readFileSync(cert, 'utf8') });
    const distrusting = upstreamGetter(url);
    cleanups.push(
      () => trusting.close(),
      () => distrusting.close(),
    );
    for (let i = 0; i < 2; i += 1) {
      expect(sha(await tenantGet(trusting, `${url}/b/k`))).toBe(sha(object));
    }
    expect(sha(await readAll(await trusting.get(`${url}/b/k`, { start: 5, end: 99_999 })))).toBe(
      sha(object.subarray(5, 100_000)),
    );
    await expect(distrusting.get(`${url}/b/k`)).rejects.toThrow(/self[- ]signed/i);
  });
});
