// The s3 object-storage driver against the local one, measured in the same run (issue 29):
//
//   npx tsx bench/s3/upstream.ts [--quick] [--parallel=N]
//
// Two endpoints, each in its own Node process as in production (server.ts): L with the local driver,
// and U with BERTH_OBJECT_STORAGE_DRIVER=s3 whose upstream bucket is on L (a real S3 peer on this
// machine: every U request is also an L request, and both share the same two cores). 1 MiB PUTs and
// GETs with the AWS SDK and with presigned URLs over plain node:http, round-robin so that both see the
// same load: one request at a time (each U request waits on its L request in series, so this is
// latency), and eight at a time (throughput: what each endpoint moves when it is kept busy). Ratio =
// upstream MB/s ÷ local MB/s (target ≥ 0.7).
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Writable, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { startListeningScript } from '../../test/helpers/processes.js';
import { provisionStorage } from '../../test/object-storage/helpers.js';

const quick = process.argv.includes('--quick');
const BYTES = 1024 * 1024;
const ROUNDS = quick ? 20 : 100;
/** Requests in flight at once in the throughput half (`--parallel=N`, default 8). */
const PARALLEL = Number(
  /^--parallel=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--parallel=')) ?? '')?.[1] ?? 8,
);
/** Rounds of the throughput half: four times the requests of the one-at-a-time half. */
const PARALLEL_ROUNDS = Math.max(1, Math.round((4 * ROUNDS) / PARALLEL));

/** A storage with `bucket` and one admin user in the Berth of `env`; that user's key. */
async function provision(env: Record<string, string>, bucket: string) {
  const ctx = await createContext(loadConfig({ ...env, BERTH_S3_PORT: '0', BERTH_LOG_LEVEL: 'silent' }), {
    logger: pino({ level: 'silent' }),
  });
  try {
    const user = await ctx.identity.createUser({ email: `${bucket}@example.com`, team: bucket });
    const keys = await provisionStorage(ctx, user.team_id, bucket, [
      { username: 'admin', policies: ['admin'] },
    ]);
    return keys.admin!;
  } finally {
    await ctx.close();
  }
}

/** server.ts in its own process; it prints `PORT <n>` once it listens. */
function startEndpoint(env: Record<string, string>) {
  return startListeningScript(path.join(import.meta.dirname, 'server.ts'), {
    ...env,
    BERTH_LOG_LEVEL: 'silent',
  });
}

function rawRequest(url: string, method: 'PUT' | 'GET', body?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, headers: body ? { 'content-length': body.length } : {} },
      (res) => {
        let n = 0;
        const sink = new Writable({
          write(chunk: Buffer, _e, cb) {
            n += chunk.length;
            cb();
          },
        });
        pipeline(res, sink).then(() => {
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${res.statusCode}`));
          else resolve(n);
        }, reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * MB/s of each contender, round-robin: round i runs every contender once, `parallel` requests at a
 * time (request numbers i * parallel … i * parallel + parallel - 1).
 */
async function timedTogether<K extends string>(
  runs: Record<K, (n: number) => Promise<void>>,
  parallel: number,
  rounds: number,
) {
  const names = Object.keys(runs) as K[];
  const nanos = Object.fromEntries(names.map((n) => [n, 0n])) as Record<K, bigint>;
  const round = (name: K, i: number) =>
    Promise.all(Array.from({ length: parallel }, (_, j) => runs[name](i * parallel + j)));
  for (const n of names) await round(n, -1); // warm-up
  for (let i = 0; i < rounds; i += 1) {
    for (const n of names) {
      const start = process.hrtime.bigint();
      await round(n, i);
      nanos[n] += process.hrtime.bigint() - start;
    }
  }
  return Object.fromEntries(
    names.map((n) => [n, (rounds * parallel * BYTES) / 1024 / 1024 / (Number(nanos[n]) / 1e9)]),
  ) as Record<K, number>;
}

async function main(): Promise<void> {
  const localDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-local-'));
  const upstreamDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-upstream-'));
  const stops: Array<() => Promise<void>> = [];
  try {
    const localKey = await provision({ BERTH_DATA_DIR: localDir }, 'bench');
    const blobsKey = await provision({ BERTH_DATA_DIR: localDir }, 'blobs');
    const local = await startEndpoint({ BERTH_DATA_DIR: localDir });
    stops.push(local.stop);
    const upstreamEnv = {
      BERTH_DATA_DIR: upstreamDir,
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: local.url,
      BERTH_S3_UPSTREAM_BUCKET: 'blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: blobsKey.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: blobsKey.secret,
    };
    const tenantKey = await provision(upstreamEnv, 'bench');
    const upstream = await startEndpoint(upstreamEnv);
    stops.push(upstream.stop);
    const client = (url: string, key: { id: string; secret: string }) =>
      new S3Client({
        endpoint: url,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: key.id, secretAccessKey: key.secret },
      });
    const clients = { local: client(local.url, localKey), upstream: client(upstream.url, tenantKey) };
    const data = randomBytes(BYTES);
    /** Both operations, `parallel` requests at a time for `rounds` rounds. */
    async function measure(parallel: number, rounds: number) {
      const tag = `p${parallel}`;
      // Request numbers run from -parallel (the warm-up) to rounds * parallel - 1.
      const numbers = Array.from({ length: (rounds + 1) * parallel }, (_, i) => i - parallel);
      const putUrls = (c: S3Client) =>
        Promise.all(
          numbers.map((n) =>
            getSignedUrl(c, new PutObjectCommand({ Bucket: 'bench', Key: `raw-${tag}-${n}` }), {
              expiresIn: 3600,
            }),
          ),
        );
      const urls = { local: await putUrls(clients.local), upstream: await putUrls(clients.upstream) };
      const sdkPut = (c: S3Client) => async (n: number) => {
        await c.send(new PutObjectCommand({ Bucket: 'bench', Key: `sdk-${tag}-${n}`, Body: data }));
      };
      const rawPut = (list: string[]) => async (n: number) => {
        await rawRequest(list[n + parallel]!, 'PUT', data);
      };
      const put = await timedTogether(
        {
          localSdk: sdkPut(clients.local),
          upstreamSdk: sdkPut(clients.upstream),
          localRaw: rawPut(urls.local),
          upstreamRaw: rawPut(urls.upstream),
        },
        parallel,
        rounds,
      );
      const getUrl = (c: S3Client) =>
        getSignedUrl(c, new GetObjectCommand({ Bucket: 'bench', Key: `raw-${tag}-0` }), { expiresIn: 3600 });
      const getUrls = { local: await getUrl(clients.local), upstream: await getUrl(clients.upstream) };
      const sdkGet = (c: S3Client) => async (n: number) => {
        const got = await c.send(new GetObjectCommand({ Bucket: 'bench', Key: `sdk-${tag}-${n}` }));
        let bytes = 0;
        for await (const chunk of got.Body as Readable) bytes += (chunk as Buffer).length;
        if (bytes !== BYTES) throw new Error('short read');
      };
      const rawGet = (url: string) => async () => {
        if ((await rawRequest(url, 'GET')) !== BYTES) throw new Error('short read');
      };
      const get = await timedTogether(
        {
          localSdk: sdkGet(clients.local),
          upstreamSdk: sdkGet(clients.upstream),
          localRaw: rawGet(getUrls.local),
          upstreamRaw: rawGet(getUrls.upstream),
        },
        parallel,
        rounds,
      );
      return { put, get };
    }
    const results = [
      { label: 'one at a time', rounds: ROUNDS, ...(await measure(1, ROUNDS)) },
      {
        label: `${PARALLEL} at a time`,
        rounds: PARALLEL_ROUNDS,
        ...(await measure(PARALLEL, PARALLEL_ROUNDS)),
      },
    ];
    const f = (n: number) => n.toFixed(0);
    const r = (n: number, d: number) => (n / d).toFixed(2);
    console.log(
      `s3 driver (upstream: a local-driver Berth on this machine) vs local driver, 1 MiB, Node ${process.version}, ${os.cpus().length} CPUs`,
    );
    console.log(
      '| requests | operation | local SDK MB/s | s3 SDK MB/s | ratio | local presigned MB/s | s3 presigned MB/s | ratio |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const { label, rounds, put, get } of results) {
      for (const [name, m] of [
        ['PUT', put],
        ['GET', get],
      ] as const) {
        console.log(
          `| ${label} (${rounds} rounds) | ${name} | ${f(m.localSdk)} | ${f(m.upstreamSdk)} | ${r(m.upstreamSdk, m.localSdk)} | ${f(m.localRaw)} | ${f(m.upstreamRaw)} | ${r(m.upstreamRaw, m.localRaw)} |`,
        );
      }
    }
    clients.local.destroy();
    clients.upstream.destroy();
  } finally {
    for (const stop of stops.reverse()) await stop();
    fs.rmSync(localDir, { recursive: true, force: true });
    fs.rmSync(upstreamDir, { recursive: true, force: true });
  }
}

await main();
