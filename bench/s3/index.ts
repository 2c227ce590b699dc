// S3 endpoint throughput against the local file system, measured in the same run.
//
//   npx tsx bench/s3/index.ts [--quick] [--profile <dir>]
//
// For 1 MiB and 64 MiB objects: PUT and GET through Berth's S3 endpoint (running in its own process,
// as in production, on the SQLite store of a fresh data directory), (a) with the AWS SDK as
// users run it (it hashes the payload for SigV4 and adds a CRC32 checksum) and (b) with presigned
// URLs over plain node:http (UNSIGNED-PAYLOAD: what the server itself costs). The baseline writes
// the same bytes to a file and streams them back, round-robin with the endpoint requests so that both
// see the same machine load. Ratio = endpoint MB/s ÷ file MB/s (target ≥ 0.5).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Writable, type Readable } from 'node:stream';
import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { iso } from '../../src/domain/clock.js';
import { enqueueJob } from '../../src/jobs/queue.js';
import { startListeningScript } from '../../test/helpers/processes.js';

const quick = process.argv.includes('--quick');
const SIZES: Array<{ label: string; bytes: number; rounds: number }> = [
  { label: '1 MiB', bytes: 1024 * 1024, rounds: quick ? 20 : 100 },
  { label: '64 MiB', bytes: 64 * 1024 * 1024, rounds: quick ? 2 : 5 },
];

const counter = () => {
  let n = 0;
  return {
    sink: new Writable({
      write(chunk: Buffer, _e, cb) {
        n += chunk.length;
        cb();
      },
    }),
    get bytes() {
      return n;
    },
  };
};

/**
 * MB/s of each contender, measured round-robin: round i runs every contender once, so a change in
 * the machine's load (it is shared) hits the baseline and the endpoint alike.
 */
async function timedTogether<K extends string>(
  rounds: number,
  bytes: number,
  runs: Record<K, (i: number) => Promise<void>>,
): Promise<Record<K, number>> {
  const names = Object.keys(runs) as K[];
  const nanos = Object.fromEntries(names.map((n) => [n, 0n])) as Record<K, bigint>;
  for (const n of names) await runs[n](-1); // warm-up
  for (let i = 0; i < rounds; i += 1) {
    for (const n of names) {
      const start = process.hrtime.bigint();
      await runs[n](i);
      nanos[n] += process.hrtime.bigint() - start;
    }
  }
  const mbps = (n: K) => (rounds * bytes) / 1024 / 1024 / (Number(nanos[n]) / 1e9);
  return Object.fromEntries(names.map((n) => [n, mbps(n)])) as Record<K, number>;
}

function rawRequest(
  url: string,
  method: 'PUT' | 'GET',
  body?: Buffer,
  headers: Record<string, string> = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method, headers: { ...headers, ...(body ? { 'content-length': body.length } : {}) } },
      (res) => {
        const c = counter();
        pipeline(res, c.sink).then(() => {
          if ((res.statusCode ?? 500) >= 300) reject(new Error(`${method} ${res.statusCode}`));
          else resolve(c.bytes);
        }, reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** Starts a script of this folder in its own Node process; it prints `PORT <n>` once it listens. */
function startChild(script: string, env: Record<string, string>, nodeArgs: string[] = []) {
  return startListeningScript(path.join(import.meta.dirname, script), env, nodeArgs);
}

function startEndpoint(dataDir: string) {
  // --profile <dir>: the endpoint writes a V8 CPU profile there when it stops.
  const at = process.argv.indexOf('--profile');
  const profile =
    at > 0 && process.argv[at + 1] ? ['--cpu-prof', `--cpu-prof-dir=${process.argv[at + 1]}`] : [];
  return startChild('server.ts', { BERTH_DATA_DIR: dataDir, BERTH_LOG_LEVEL: 'silent' }, profile);
}

/** Writes `data` to `file` and waits until it is on the disk, as the endpoint does before it answers. */
async function writeDurably(file: string, data: Buffer): Promise<void> {
  const handle = await fs.promises.open(file, 'w');
  try {
    await handle.writeFile(data);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-s3-'));
  const config = loadConfig({ BERTH_DATA_DIR: dataDir, BERTH_S3_PORT: '0', BERTH_LOG_LEVEL: 'silent' });
  const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
  let server: Awaited<ReturnType<typeof startEndpoint>> | undefined;
  let floor: Awaited<ReturnType<typeof startChild>> | undefined;
  try {
    const user = await ctx.identity.createUser({ email: 'bench@example.com', team: 'bench' });
    const uuid = ctx.ids.uuid();
    const now = ctx.clock.now();
    await ctx.db.transaction().execute(async (trx) => {
      await trx
        .insertInto('object_storages')
        .values({
          uuid,
          team_id: user.team_id,
          name: 'bench',
          zone: 'local',
          plan: null,
          buckets: JSON.stringify(['bench']),
          users: JSON.stringify([{ username: 'bench', policies: ['readwrite'] }]),
          state: 'pending',
          state_reason: null,
          pending_zone: null,
          created_at: iso(now),
          updated_at: iso(now),
        })
        .execute();
      await enqueueJob(
        trx,
        {
          type: 'object_storage.provision',
          key: `object_storage.provision:${uuid}`,
          payload: { uuid },
          runAt: now,
        },
        now,
      );
    });
    await ctx.services.jobs.runner().runDue();
    const [storage] = await ctx.services.objectStorage.view({ id: user.team_id, role: 'owner' });
    const key = storage!.users[0]!;
    await ctx.close();
    server = await startEndpoint(dataDir);
    floor = await startChild('floor-server.ts', {});
    const client = new S3Client({
      endpoint: server.url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: key.access_key_id, secretAccessKey: key.secret_key! },
    });

    console.log(
      `S3 endpoint vs local file (${quick ? 'quick' : 'full'} run, Node ${process.version}, ${os.cpus().length} CPUs)`,
    );
    console.log('| object | operation | file MB/s | SDK MB/s | ratio | presigned MB/s | ratio |');
    console.log('|---|---|---|---|---|---|---|');
    const floors: string[] = [];
    for (const { label, bytes, rounds } of SIZES) {
      const data = randomBytes(bytes);
      const file = path.join(dataDir, `baseline-${bytes}`);
      const putUrls = await Promise.all(
        Array.from({ length: rounds + 1 }, (_, i) =>
          getSignedUrl(client, new PutObjectCommand({ Bucket: 'bench', Key: `raw-${bytes}-${i - 1}` }), {
            expiresIn: 3600,
          }),
        ),
      );
      const put = await timedTogether(rounds, bytes, {
        file: () => fs.promises.writeFile(file, data),
        // The endpoint answers only once the object is on the disk; this is that same write.
        durable: () => writeDurably(file, data),
        // The MD5 the ETag needs, alone on one core: no single-part PUT can be faster.
        md5: () => {
          createHash('md5').update(data).digest();
          return Promise.resolve();
        },
        // A bare node:http server (floor-server.ts): receiving only, and receiving + MD5.
        receive: () => rawRequest(`${floor!.url}/`, 'PUT', data).then(() => undefined),
        receiveMd5: () =>
          rawRequest(`${floor!.url}/`, 'PUT', data, { 'x-floor': 'md5' }).then(() => undefined),
        sdk: async (i) => {
          await client.send(new PutObjectCommand({ Bucket: 'bench', Key: `sdk-${bytes}-${i}`, Body: data }));
        },
        raw: async (i) => {
          await rawRequest(putUrls[i + 1]!, 'PUT', data);
        },
      });
      const getUrl = await getSignedUrl(
        client,
        new GetObjectCommand({ Bucket: 'bench', Key: `raw-${bytes}-0` }),
        {
          expiresIn: 3600,
        },
      );
      const get = await timedTogether(rounds, bytes, {
        file: async () => {
          const c = counter();
          await pipeline(fs.createReadStream(file), c.sink);
        },
        sdk: async (i) => {
          const got = await client.send(
            new GetObjectCommand({ Bucket: 'bench', Key: `sdk-${bytes}-${Math.max(i, 0)}` }),
          );
          const c = counter();
          await pipeline(got.Body as Readable, c.sink);
          if (c.bytes !== bytes) throw new Error('short read');
        },
        raw: async () => {
          if ((await rawRequest(getUrl, 'GET')) !== bytes) throw new Error('short read');
        },
      });

      const f = (n: number) => n.toFixed(0);
      const r = (n: number, d: number) => (n / d).toFixed(2);
      floors.push(
        `| ${label} | ${f(put.file)} | ${f(put.durable)} | ${r(put.raw, put.file)} | ${r(put.raw, put.durable)} | ` +
          `${r(put.receive, put.file)} | ${r(put.receiveMd5, put.file)} | ${r(put.md5, put.file)} |`,
      );
      console.log(
        `| ${label} | PUT | ${f(put.file)} | ${f(put.sdk)} | ${r(put.sdk, put.file)} | ${f(put.raw)} | ${r(put.raw, put.file)} |`,
      );
      console.log(
        `| ${label} | GET | ${f(get.file)} | ${f(get.sdk)} | ${r(get.sdk, get.file)} | ${f(get.raw)} | ${r(get.raw, get.file)} |`,
      );
    }
    console.log('\nPresigned PUT beside its references and floors (ratios of MB/s, same rounds):');
    console.log(
      '| object | file MB/s | durable file MB/s | PUT ÷ file | PUT ÷ durable file | bare receive ÷ file | bare receive + MD5 ÷ file | MD5 alone ÷ file |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const line of floors) console.log(line);
    client.destroy();
  } finally {
    await server?.stop();
    await floor?.stop();
    await ctx.close();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

await main();
