// Benchmark: dump migration of a generated PostgreSQL database against a hand-run `pg_dump -Fc | pg_restore`
// of the same data in the same run, and time to a point-in-time clone of that database.
//   npx tsx bench/dbapi/index.ts                      (~50 MB)
//   BENCH_DBAPI_MB=200 npx tsx bench/dbapi/index.ts   (the 200 MB; BENCH_DBAPI_FULL=1 is the same)
//   BENCH_DBAPI_ROUNDS=3 …                            (alternating rounds, the best of each side is compared)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import {
  clonePostgres,
  clonePostgresNow,
  dumpMigrate,
  flushWalToArchive,
  stopCluster,
  takeBaseBackup,
} from '../../src/drivers/databases/operations/index.js';
import { PG15_BIN, startPostgres, type PostgresServer } from '../../test/helpers/postgres-server.js';
import { execFileAsync, freePort, isRoot } from '../../test/helpers/processes.js';

const TARGET_MB = Number(process.env.BENCH_DBAPI_MB ?? (process.env.BENCH_DBAPI_FULL ? 200 : 50));
const ROUNDS = Math.max(1, Number(process.env.BENCH_DBAPI_ROUNDS ?? 1));
const DB = 'bench';

async function query<R extends pg.QueryResultRow>(url: string, sql: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end();
  }
}

const dbUrl = (server: PostgresServer, db: string): string => {
  const u = new URL(server.url);
  u.pathname = `/${db}`;
  return u.toString();
};

async function generate(source: PostgresServer): Promise<number> {
  await query(source.url, `CREATE DATABASE ${DB}`);
  const url = dbUrl(source, DB);
  // ~172 bytes per row on disk including the primary key and one secondary index (measured).
  const rows = Math.round((TARGET_MB * 1024 * 1024) / 172);
  await query(
    url,
    `CREATE TABLE orders (id bigint PRIMARY KEY, customer int NOT NULL, amount numeric(12,2), placed timestamptz, note text);
     INSERT INTO orders SELECT g, g % 10007, (g % 100000) / 100.0, now() - (g || ' seconds')::interval,
                               md5(g::text) || md5((g * 7)::text)
       FROM generate_series(1, ${rows}) g;
     CREATE INDEX orders_customer ON orders (customer);
     CREATE TABLE customers AS SELECT g AS id, 'customer ' || g AS name FROM generate_series(1, 10007) g;
     ALTER TABLE customers ADD PRIMARY KEY (id);`,
  );
  await query(url, 'VACUUM ANALYZE');
  const [size] = await query<{ bytes: string }>(
    url,
    `SELECT pg_database_size(current_database())::text AS bytes`,
  );
  return Number(size?.bytes ?? 0);
}

/** The baseline exactly as an operator would type it. */
async function handRun(source: PostgresServer, target: PostgresServer): Promise<number> {
  await query(target.url, `CREATE DATABASE ${DB}`);
  const s = new URL(source.url);
  const t = new URL(target.url);
  const started = performance.now();
  await new Promise<void>((resolve, reject) => {
    const child = spawn(
      'sh',
      [
        '-c',
        `PGPASSWORD="$SRC_PW" ${PG15_BIN}/pg_dump -h 127.0.0.1 -p ${s.port} -U postgres -Fc ${DB} | ` +
          `PGPASSWORD="$DST_PW" ${PG15_BIN}/pg_restore -h 127.0.0.1 -p ${t.port} -U postgres --no-owner -d ${DB}`,
      ],
      {
        stdio: 'inherit',
        env: {
          ...process.env,
          SRC_PW: decodeURIComponent(s.password),
          DST_PW: decodeURIComponent(t.password),
        },
      },
    );
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`baseline exited ${code}`))));
  });
  return performance.now() - started;
}

async function ours(source: PostgresServer, target: PostgresServer): Promise<number> {
  const started = performance.now();
  const status = await dumpMigrate({ sourceUri: source.url, targetUri: target.url, databases: [DB] });
  if (status.status !== 'done') throw new Error(`dumpMigrate failed: ${JSON.stringify(status)}`);
  return performance.now() - started;
}

async function rowCount(server: PostgresServer): Promise<number> {
  const [r] = await query<{ n: number }>(dbUrl(server, DB), 'SELECT count(*)::int AS n FROM orders');
  return r?.n ?? -1;
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-dbapi-'));
  fs.chmodSync(work, 0o755);
  const archive = path.join(work, 'wal-archive');
  fs.mkdirSync(archive);
  if (isRoot()) await execFileAsync('chown', ['postgres:postgres', archive]);
  const servers: PostgresServer[] = [];
  const clusters: string[] = [];
  try {
    const archiving = ['wal_level=replica', 'archive_mode=on', `"archive_command=cp %p ${archive}/%f"`];
    const [source, baseTarget, ourTarget] = await Promise.all([
      startPostgres({ conf: archiving }),
      startPostgres(),
      startPostgres(),
    ]);
    servers.push(source, baseTarget, ourTarget);
    const genStarted = performance.now();
    const bytes = await generate(source);
    const expectedRows = await rowCount(source);
    console.log(
      `generated ${(bytes / 1048576).toFixed(1)} MB (${expectedRows} rows) in ${((performance.now() - genStarted) / 1000).toFixed(1)} s`,
    );

    let baseBest = Infinity;
    let oursBest = Infinity;
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate the order so neither side always runs with warmer caches.
      const sides = round % 2 === 0 ? (['baseline', 'ours'] as const) : (['ours', 'baseline'] as const);
      for (const side of sides) {
        const target = side === 'baseline' ? baseTarget : ourTarget;
        await query(target.url, `DROP DATABASE IF EXISTS ${DB}`);
        const ms = side === 'baseline' ? await handRun(source, target) : await ours(source, target);
        if ((await rowCount(target)) !== expectedRows) throw new Error(`${side}: row count differs`);
        console.log(`round ${round + 1} ${side.padEnd(8)} ${(ms / 1000).toFixed(2)} s`);
        if (side === 'baseline') baseBest = Math.min(baseBest, ms);
        else oursBest = Math.min(oursBest, ms);
      }
    }

    // Point-in-time clone of the same database.
    const backup = await takeBaseBackup({ sourceUri: source.url, backupDir: path.join(work, 'backup') });
    await query(
      dbUrl(source, DB),
      `INSERT INTO orders SELECT g, 1, 1, now(), 'keep' FROM generate_series(-1000, -1) g`,
    );
    await new Promise((r) => setTimeout(r, 50));
    const [{ t: target } = { t: new Date() }] = await query<{ t: Date }>(
      source.url,
      'SELECT clock_timestamp() AS t',
    );
    await new Promise((r) => setTimeout(r, 50));
    await query(
      dbUrl(source, DB),
      `INSERT INTO orders SELECT g, 1, 1, now(), 'discard' FROM generate_series(-2000, -1001) g`,
    );
    await flushWalToArchive(source.url);
    const pitrDir = path.join(work, 'pitr');
    clusters.push(pitrDir);
    const pitr = await clonePostgres({
      baseBackup: backup,
      walArchiveDir: archive,
      recoveryTime: target,
      targetDataDir: pitrDir,
      port: await freePort(),
      keepRunning: true,
    });
    const pitrUrl = new URL(dbUrl(source, DB));
    pitrUrl.port = String(pitr.port);
    const [check] = await query<{ keep: number; discard: number }>(
      pitrUrl.toString(),
      `SELECT count(*) FILTER (WHERE note = 'keep')::int AS keep, count(*) FILTER (WHERE note = 'discard')::int AS discard FROM orders`,
    );
    if (check?.keep !== 1000 || check.discard !== 0)
      throw new Error(`PITR clone content wrong: ${JSON.stringify(check)}`);
    await stopCluster({ binDir: PG15_BIN, dataDir: pitrDir });

    const nowDir = path.join(work, 'now');
    clusters.push(nowDir);
    const nowStarted = performance.now();
    const now = await clonePostgresNow({
      sourceUri: source.url,
      backupDir: path.join(work, 'now-backup'),
      targetDataDir: nowDir,
      port: await freePort(),
    });
    const nowMs = performance.now() - nowStarted;

    const ratio = baseBest / oursBest;
    const lines = [
      ['database size (MB)', (bytes / 1048576).toFixed(1)],
      ['hand-run pg_dump -Fc | pg_restore (s)', (baseBest / 1000).toFixed(2)],
      ['dumpMigrate (s)', (oursBest / 1000).toFixed(2)],
      ['speed ratio ours/baseline (target ≥ 0.9)', ratio.toFixed(2)],
      ['base backup size (MB)', (backup.sizeBytes / 1048576).toFixed(1)],
      ['point-in-time clone: restore + replay + promote (s)', (pitr.durationMs / 1000).toFixed(2)],
      ['current-state clone: base backup + restore (s)', (nowMs / 1000).toFixed(2)],
    ];
    console.log('\nresult');
    for (const [k, v] of lines) console.log(`  ${String(k).padEnd(54)} ${v}`);
    console.log(
      JSON.stringify({
        sizeMB: +(bytes / 1048576).toFixed(1),
        rounds: ROUNDS,
        baselineSeconds: +(baseBest / 1000).toFixed(2),
        dumpMigrateSeconds: +(oursBest / 1000).toFixed(2),
        speedRatio: +ratio.toFixed(2),
        pitrCloneSeconds: +(pitr.durationMs / 1000).toFixed(2),
        currentStateCloneSeconds: +(nowMs / 1000).toFixed(2),
        currentStateCloneRestoreSeconds: +(now.durationMs / 1000).toFixed(2),
      }),
    );
    if (ratio < 0.9) process.exitCode = 1;
  } finally {
    for (const dataDir of clusters)
      await stopCluster({ binDir: PG15_BIN, dataDir }, 'immediate').catch(() => undefined);
    for (const s of servers) await s.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

await main();
