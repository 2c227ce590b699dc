// The local driver reports its instances' health from what Berth recorded of them (the pid and
// data_dir columns, its own state): the supervisor restarts what it calls crashed and counts the
// restart, starts what it calls stopped without an incident, and leaves another Berth's alone.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createLocalDatabaseDriver,
  type LocalDatabaseDriver,
} from '../../src/drivers/databases/local/index.js';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import type { InstanceSpec } from '../../src/drivers/databases/types.js';
import { waitFor } from '../helpers/processes.js';

describe('the local managed-database driver’s health', () => {
  let dataDir: string;
  let driver: LocalDatabaseDriver;
  const spec: InstanceSpec = {
    id: randomUUID(),
    engine: 'valkey',
    plan: '1x1xCPU-2GB',
    adminUser: 'upadmin',
    adminPassword: 'health-password-1',
    users: [],
    databases: [],
  };
  const ref = { id: spec.id, engine: spec.engine };

  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-db-health-'));
    driver = createLocalDatabaseDriver({ dataDir, cgroups: null });
  });
  afterAll(async () => {
    await driver?.delete(ref).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('reports a running instance, a killed one as crashed, a stopped one as stopped, and another Berth’s', async () => {
    const runtime = await driver.provision(spec);
    const record = { pid: runtime.pid, location: runtime.location };
    expect(await driver.health(ref, record)).toEqual({
      state: 'running',
      pid: runtime.pid,
      storageBytes: expect.any(Number) as unknown,
    });
    // Health walks the instance's files at most every 30 s (it runs at each supervisor pass); status
    // walks them every time.
    const { storageBytes } = (await driver.health(ref, record)) as { storageBytes: number };
    const extra = path.join(runtime.location!, 'berth-health-test.bin');
    fs.writeFileSync(extra, Buffer.alloc(1024 * 1024));
    try {
      expect(await driver.health(ref, record)).toMatchObject({ state: 'running', storageBytes });
      expect((await driver.status(ref)).storageBytes).toBeGreaterThanOrEqual(storageBytes + 1024 * 1024);
    } finally {
      fs.rmSync(extra);
    }
    // Files under another data dir: not this Berth's to supervise or stop.
    const elsewhere = path.join(os.tmpdir(), 'another-berth', 'databases', spec.id);
    expect(await driver.health(ref, { ...record, location: elsewhere })).toEqual({ state: 'elsewhere' });

    const pid = runtime.pid as number;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => Promise.resolve(isAlive(pid) ? undefined : true));
    expect(await driver.health(ref, record)).toEqual({ state: 'crashed', reason: `process ${pid} exited` });
    // Berth clears the pid when it stops an instance on purpose: not a crash.
    expect(await driver.health(ref, { pid: null, location: runtime.location })).toEqual({ state: 'stopped' });

    const again = await driver.start(spec);
    expect(await driver.health(ref, { pid: again.pid, location: again.location })).toMatchObject({
      state: 'running',
      pid: again.pid,
    });
    await driver.stop(ref);
    expect(await driver.health(ref, { pid: null, location: again.location })).toEqual({ state: 'stopped' });
  }, 120_000);

  it('gives plan limits and the endpoint from the driver', () => {
    expect(driver.planLimits('pg', '2x2xCPU-4GB-50GB')).toEqual({
      nodes: 2,
      memoryMiB: 256,
      storageMiB: 50 * 1024,
      maxConnections: 100,
      baseBackupRetention: 15,
    });
    expect(() => driver.planLimits('pg', 'huge')).toThrow(/not a plan name/);
    expect(driver.endpoint(ref)).toEqual({ host: '127.0.0.1', ipFilter: ['127.0.0.1/32'] });
  });
});
