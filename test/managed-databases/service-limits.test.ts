// An application's database service is held to its document's `memory` and `volume_size`
// (docs/services.md): its server's processes are in a memory cgroup of that size, and its files are on
// a loop-mounted volume of that size, so a service that fills its volume gets "No space left on
// device" and the host's disk is untouched.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLocalDatabaseDriver,
  type LocalDatabaseDriver,
} from '../../src/drivers/databases/local/index.js';
import type { InstanceSpec } from '../../src/drivers/databases/types.js';
import { detectCgroups, groupDir } from '../../src/drivers/os/cgroups.js';
import { isMounted } from '../../src/drivers/os/disk-images.js';
import { isRoot } from '../../src/drivers/os/users.js';
import { isAlive } from '../helpers/processes.js';

const MIB = 1024 * 1024;
const cgroups = detectCgroups();

let dataDir: string;
let driver: LocalDatabaseDriver;
const made: InstanceSpec[] = [];

function pgSpec(limits: InstanceSpec['limits']): InstanceSpec {
  const spec: InstanceSpec = {
    id: randomUUID(),
    engine: 'pg',
    plan: 'service',
    ...(limits ? { limits } : {}),
    adminUser: 'app',
    adminPassword: 'service-password-1',
    users: [],
    databases: [{ name: 'app' }],
  };
  made.push(spec);
  return spec;
}

async function client(spec: InstanceSpec, port: number): Promise<pg.Client> {
  const c = new pg.Client({
    host: '127.0.0.1',
    port,
    user: spec.adminUser,
    password: spec.adminPassword,
    database: 'app',
  });
  await c.connect();
  return c;
}

const volumeBytes = (dir: string): number => {
  const stats = fs.statfsSync(dir);
  return stats.blocks * stats.bsize;
};

/** `pid` and its descendants. */
function processTree(pid: number): number[] {
  const children = fs
    .readdirSync(`/proc/${pid}/task`)
    .flatMap((task) => fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').split(/\s+/))
    .filter(Boolean)
    .map(Number);
  return [pid, ...children.flatMap((child) => (fs.existsSync(`/proc/${child}`) ? processTree(child) : []))];
}

describe.runIf(isRoot() && cgroups)('limits of an application database service', () => {
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-service-limits-'));
    driver = createLocalDatabaseDriver({ dataDir });
  });

  afterAll(async () => {
    for (const spec of made) await driver.delete(spec).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('runs the server in a memory group of its memory, and keeps its files on a volume of its size', async () => {
    const spec = pgSpec({ memoryMiB: 128, diskMiB: 128 });
    const runtime = await driver.provision(spec);
    const root = driver.instanceDir(spec.id);
    expect(isMounted(root)).toBe(true);
    // ext4's own tables take a few per cent.
    expect(volumeBytes(root)).toBeGreaterThan(110 * MIB);
    expect(volumeBytes(root)).toBeLessThanOrEqual(128 * MIB);
    expect(fs.statSync(root).mode & 0o777).toBe(0o700);
    expect(fs.existsSync(path.join(root, 'lost+found'))).toBe(false);

    const group = groupDir(cgroups!, ['databases', spec.id]);
    const limitFile = cgroups!.version === 1 ? 'memory.limit_in_bytes' : 'memory.max';
    expect(Number(fs.readFileSync(path.join(group, limitFile), 'utf8'))).toBe(128 * MIB);
    const tree = processTree(runtime.pid!);
    expect(tree.length).toBeGreaterThan(3); // the postmaster and its background processes
    const members = () => fs.readFileSync(path.join(group, 'cgroup.procs'), 'utf8').split('\n').map(Number);
    // Read after the tree: a process the server starts meanwhile is born in the group. One that ended
    // meanwhile (a WAL archive command, a short-lived worker) leaves the group at its exit but stays in
    // its parent's list of children, a zombie, until it is reaped: only the processes still in the tree
    // after the read, and not zombies, must be in it.
    const inGroup = members();
    const stable = processTree(runtime.pid!).filter((pid) => tree.includes(pid) && isAlive(pid));
    expect(stable.length).toBeGreaterThan(3);
    for (const pid of stable) expect(inGroup).toContain(pid);

    // A backend forked for a connection is born in the group.
    const c = await client(spec, runtime.port);
    try {
      const backend = (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      expect(members()).toContain(backend);

      // Unlogged: no WAL, so the data files alone fill the volume and the error is an ordinary one.
      await c.query('CREATE UNLOGGED TABLE filler (data bytea)');
      await c.query('CREATE TABLE kept (n int)');
      await c.query('INSERT INTO kept VALUES (1)');
      // 1 MiB of md5 of random values does not compress: 300 rows of it are 300 MiB on disk.
      const fill = c.query(
        `INSERT INTO filler
           SELECT (SELECT decode(string_agg(md5(random()::text), ''), 'hex') FROM generate_series(1, 65536))
           FROM generate_series(1, 300)`,
      );
      await expect(fill).rejects.toThrow(/No space left on device/);
      const image = path.join(dataDir, 'databases', '.volumes', `${spec.id}.ext4`);
      expect(fs.statSync(image).blocks * 512).toBeLessThanOrEqual(128 * MIB);

      // The server is fine; freeing space lets it write again.
      await c.query('DROP TABLE filler');
      await c.query('INSERT INTO kept VALUES (2)');
      expect((await c.query<{ n: number }>('SELECT count(*)::int AS n FROM kept')).rows[0]?.n).toBe(2);
    } finally {
      await c.end();
    }
  }, 120_000);

  it('grows a volume with its data, refuses to shrink it, and moves an instance made without one onto one', async () => {
    const spec = pgSpec({ memoryMiB: 128 });
    let runtime = await driver.provision(spec);
    const root = driver.instanceDir(spec.id);
    expect(isMounted(root)).toBe(false);
    let c = await client(spec, runtime.port);
    await c.query('CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)');
    await c.end();

    // Given a volume_size: its files move onto a volume (the server restarts on it).
    const sized = { ...spec, limits: { memoryMiB: 128, diskMiB: 128 } };
    runtime = await driver.provision(sized);
    expect(isMounted(root)).toBe(true);
    expect(volumeBytes(root)).toBeLessThanOrEqual(128 * MIB);
    c = await client(spec, runtime.port);
    expect((await c.query('SELECT n FROM kept')).rows).toEqual([{ n: 7 }]);
    await c.end();

    runtime = await driver.provision({ ...spec, limits: { memoryMiB: 128, diskMiB: 192 } });
    expect(volumeBytes(root)).toBeGreaterThan(128 * MIB);
    const pid = runtime.pid;
    await expect(driver.provision(sized)).rejects.toThrow(/volume_size cannot shrink from 192Mi to 128Mi/);
    // Refused before anything was touched: the same server still serves the same data.
    expect((await driver.status(spec)).pid).toBe(pid);

    // Stopped, its volume is unmounted; started, it is back with its data.
    await driver.stop(spec);
    expect(isMounted(root)).toBe(false);
    runtime = await driver.start({ ...spec, limits: { memoryMiB: 128, diskMiB: 192 } });
    expect(isMounted(root)).toBe(true);
    c = await client(spec, runtime.port);
    expect((await c.query('SELECT n FROM kept')).rows).toEqual([{ n: 7 }]);
    await c.end();

    await driver.delete(spec);
    expect(isMounted(root)).toBe(false);
    expect(fs.existsSync(path.join(dataDir, 'databases', '.volumes', `${spec.id}.ext4`))).toBe(false);
    expect(fs.existsSync(root)).toBe(false);
  }, 120_000);
});
