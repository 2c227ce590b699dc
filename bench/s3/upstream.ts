// The s3 object-storage driver against the local one, measured in the same run (issue 29):
//
//   npx tsx bench/s3/upstream.ts [--quick] [--parallel=N] [--upstream-on-own-cpu] [--heap-growing-percent=N]
//
// Two endpoints, each in its own Node process as in production (server.ts): L with the local driver,
// and U with BERTH_OBJECT_STORAGE_DRIVER=s3 whose upstream bucket is on L (a real S3 peer on this
// machine: every U request is also an L request, and both share the same two cores).
// With --upstream-on-own-cpu the upstream is a third Berth, S, alone on CPU 1, and the client, L and
// U share CPU 0: the endpoint measured gets the same single CPU either way, and the upstream does not
// take from it, as a real S3 service on its own machines would not. --heap-growing-percent=N starts the
// endpoints with that V8 flag instead of the one `berth serve` sets (0: V8's own sizing). 1 MiB PUTs and
// GETs with the AWS SDK and with presigned URLs over plain node:http, in blocks taken in turn so that
// both see the same load: one request at a time (each U request waits on its L request in series, so
// this is latency), and eight at a time (throughput: what each endpoint moves when it is kept busy).
// Ratio = upstream MB/s ÷ local MB/s (target ≥ 0.7), over the whole run and as the median of the
// blocks' paired ratios; then the CPU each process spent per request.
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
import { pinToCpu, processCpuMicros } from '../proc.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { startListeningScript } from '../../test/helpers/processes.js';
import { provisionStorage } from '../../test/object-storage/helpers.js';

const quick = process.argv.includes('--quick');
const upstreamOnOwnCpu = process.argv.includes('--upstream-on-own-cpu');
/** Node flags of the endpoints' processes: `--heap-growing-percent=N` passed through. */
const endpointNodeArgs = process.argv.filter((a) => /^--heap-growing-percent=\d+$/.test(a));
const BYTES = 1024 * 1024;
/** Requests in flight at once in the throughput half (`--parallel=N`, default 8). */
const PARALLEL = Number(
  /^--parallel=(\d+)$/.exec(process.argv.find((a) => a.startsWith('--parallel=')) ?? '')?.[1] ?? 8,
);
/**
 * Each contender runs in blocks, in turn: a block's time averages over its requests (one collection
 * pause is a small part of it), and the ratio is taken block by block, paired.
 */
const HALVES = [
  { label: 'one at a time', parallel: 1, perBlock: 10, blocks: quick ? 4 : 10 },
  { label: `${PARALLEL} at a time`, parallel: PARALLEL, perBlock: 10 * PARALLEL, blocks: quick ? 2 : 6 },
];

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
  return startListeningScript(
    path.join(import.meta.dirname, 'server.ts'),
    { ...env, BERTH_LOG_LEVEL: 'silent' },
    endpointNodeArgs,
  );
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

/** CPU milliseconds a process has used so far. */
const cpuMs = (pid: number): number => processCpuMicros(pid) / 1000;

/**
 * MB/s of each contender, and each block's time: block i runs every contender once (every other block
 * in reverse order), `perBlock` requests, `parallel` at a time (request numbers i * perBlock …).
 */
async function timedTogether<K extends string>(
  runs: Record<K, (n: number) => Promise<void>>,
  { parallel, perBlock, blocks }: { parallel: number; perBlock: number; blocks: number },
  /**
   * The endpoints' processes, whose CPU each contender's blocks are charged. S is the upstream's: L
   * itself unless --upstream-on-own-cpu.
   */
  pids: { L: number; U: number; S: number },
) {
  const names = Object.keys(runs) as K[];
  const times = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
  const cpu = Object.fromEntries(names.map((n) => [n, { L: 0, U: 0, S: 0, client: 0 }])) as Record<
    K,
    { L: number; U: number; S: number; client: number }
  >;
  const block = async (name: K, i: number) => {
    for (let b = 0; b < perBlock; b += parallel) {
      await Promise.all(Array.from({ length: parallel }, (_, j) => runs[name](i * perBlock + b + j)));
    }
  };
  for (const n of names) await block(n, -1); // warm-up
  for (let i = 0; i < blocks; i += 1) {
    // Every other block in reverse order: what one contender leaves behind (a collection it set
    // off, a socket buffer to drain) falls as often on the one after it as on the one before.
    for (const n of i % 2 === 0 ? names : [...names].reverse()) {
      const [l, u, st, client] = [cpuMs(pids.L), cpuMs(pids.U), cpuMs(pids.S), process.cpuUsage()];
      const start = process.hrtime.bigint();
      await block(n, i);
      times[n].push(Number(process.hrtime.bigint() - start) / 1e9);
      const used = process.cpuUsage(client);
      cpu[n].L += cpuMs(pids.L) - l;
      cpu[n].U += cpuMs(pids.U) - u;
      cpu[n].S += cpuMs(pids.S) - st;
      cpu[n].client += (used.user + used.system) / 1000;
    }
  }
  const total = (n: K) => times[n].reduce((sum, t) => sum + t, 0);
  const mbps = Object.fromEntries(
    names.map((n) => [n, (blocks * perBlock * BYTES) / 1024 / 1024 / total(n)]),
  ) as Record<K, number>;
  const requests = blocks * perBlock;
  const perRequest = Object.fromEntries(
    names.map((n) => [
      n,
      {
        L: cpu[n].L / requests,
        U: cpu[n].U / requests,
        S: cpu[n].S / requests,
        client: cpu[n].client / requests,
      },
    ]),
  ) as Record<K, { L: number; U: number; S: number; client: number }>;
  return { mbps, times, perRequest };
}

/** The median over blocks of `base`'s time ÷ `other`'s: other's share of base's throughput. */
function medianRatio(other: number[], base: number[]): number {
  const ratios = other.map((t, i) => base[i]! / t).sort((x, y) => x - y);
  const mid = Math.floor(ratios.length / 2);
  return ratios.length % 2 ? ratios[mid]! : (ratios[mid - 1]! + ratios[mid]!) / 2;
}

async function main(): Promise<void> {
  const localDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-local-'));
  const upstreamDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-upstream-'));
  const storeDir = upstreamOnOwnCpu
    ? fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-store-'))
    : localDir;
  const stops: Array<() => Promise<void>> = [];
  try {
    if (upstreamOnOwnCpu) {
      if (os.cpus().length < 2) throw new Error('--upstream-on-own-cpu needs two CPUs');
      pinToCpu(process.pid, 0); // L and U, started from here, inherit CPU 0
    }
    const localKey = await provision({ BERTH_DATA_DIR: localDir }, 'bench');
    const blobsKey = await provision({ BERTH_DATA_DIR: storeDir }, 'blobs');
    const local = await startEndpoint({ BERTH_DATA_DIR: localDir });
    stops.push(local.stop);
    let store = local;
    if (upstreamOnOwnCpu) {
      store = await startEndpoint({ BERTH_DATA_DIR: storeDir });
      stops.push(store.stop);
      pinToCpu(store.child.pid!, 1);
    }
    const upstreamEnv = {
      BERTH_DATA_DIR: upstreamDir,
      BERTH_OBJECT_STORAGE_DRIVER: 's3',
      BERTH_S3_UPSTREAM_URL: store.url,
      BERTH_S3_UPSTREAM_BUCKET: 'blobs',
      BERTH_S3_UPSTREAM_ACCESS_KEY_ID: blobsKey.id,
      BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: blobsKey.secret,
    };
    const tenantKey = await provision(upstreamEnv, 'bench');
    const upstream = await startEndpoint(upstreamEnv);
    stops.push(upstream.stop);
    const pids = { L: local.child.pid!, U: upstream.child.pid!, S: store.child.pid! };
    const client = (url: string, key: { id: string; secret: string }) =>
      new S3Client({
        endpoint: url,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: key.id, secretAccessKey: key.secret },
      });
    const clients = { local: client(local.url, localKey), upstream: client(upstream.url, tenantKey) };
    const data = randomBytes(BYTES);
    /** Both operations, in blocks of `perBlock` requests, `parallel` at a time. */
    async function measure(half: (typeof HALVES)[number]) {
      const tag = `p${half.parallel}`;
      // Request numbers run from -perBlock (the warm-up) to blocks * perBlock - 1.
      const numbers = Array.from({ length: (half.blocks + 1) * half.perBlock }, (_, i) => i - half.perBlock);
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
        await rawRequest(list[n + half.perBlock]!, 'PUT', data);
      };
      const put = await timedTogether(
        {
          localSdk: sdkPut(clients.local),
          upstreamSdk: sdkPut(clients.upstream),
          localRaw: rawPut(urls.local),
          upstreamRaw: rawPut(urls.upstream),
        },
        half,
        pids,
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
        half,
        pids,
      );
      return { put, get };
    }
    const results = [];
    for (const half of HALVES) results.push({ ...half, ...(await measure(half)) });
    const f = (n: number) => n.toFixed(0);
    const r = (n: number, d: number) => (n / d).toFixed(2);
    console.log(
      `s3 driver vs local driver, 1 MiB, Node ${process.version}, ${os.cpus().length} CPUs; upstream: ${upstreamOnOwnCpu ? 'a local-driver Berth alone on CPU 1, the client and both endpoints on CPU 0' : 'the local-driver Berth L, every process on every CPU'}${endpointNodeArgs.length ? `; endpoints started with ${endpointNodeArgs.join(' ')}` : ''}`,
    );
    console.log(
      '| requests | operation | local SDK MB/s | s3 SDK MB/s | ratio | median of blocks | local presigned MB/s | s3 presigned MB/s | ratio | median of blocks |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|');
    for (const { label, blocks, perBlock, put, get } of results) {
      for (const [name, m] of [
        ['PUT', put],
        ['GET', get],
      ] as const) {
        const { mbps: v, times: t } = m;
        console.log(
          `| ${label} (${blocks} blocks of ${perBlock}) | ${name} | ${f(v.localSdk)} | ${f(v.upstreamSdk)} | ${r(v.upstreamSdk, v.localSdk)} | ${medianRatio(t.upstreamSdk, t.localSdk).toFixed(2)} | ${f(v.localRaw)} | ${f(v.upstreamRaw)} | ${r(v.upstreamRaw, v.localRaw)} | ${medianRatio(t.upstreamRaw, t.localRaw).toFixed(2)} |`,
        );
      }
    }
    console.log();
    console.log(
      'CPU ms per request of each process (L: the local-driver Berth, U: the s3-driver Berth, S: its upstream):',
    );
    console.log(
      `| requests | operation | client | local: L | s3: U + ${upstreamOnOwnCpu ? 'S' : 'L'} (U alone) |`,
    );
    console.log('|---|---|---|---|---|');
    for (const { label, put, get } of results) {
      for (const [name, m] of [
        ['PUT', put],
        ['GET', get],
      ] as const) {
        for (const kind of ['Sdk', 'Raw'] as const) {
          const local = m.perRequest[`local${kind}`];
          const s3 = m.perRequest[`upstream${kind}`];
          const client = kind === 'Sdk' ? 'SDK' : 'presigned';
          console.log(
            `| ${label} | ${name} | ${client} ${local.client.toFixed(1)} / ${s3.client.toFixed(1)} | ${local.L.toFixed(1)} | ${(s3.U + s3.S).toFixed(1)} (${s3.U.toFixed(1)}) |`,
          );
        }
      }
    }
    clients.local.destroy();
    clients.upstream.destroy();
  } finally {
    for (const stop of stops.reverse()) await stop();
    fs.rmSync(localDir, { recursive: true, force: true });
    fs.rmSync(upstreamDir, { recursive: true, force: true });
    fs.rmSync(storeDir, { recursive: true, force: true });
  }
}

await main();
