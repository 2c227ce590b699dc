// The database types' service runner (src/drivers/services/databases.ts) on a real engine: it counts
// the clients connected to a service instance's port (the managed-database driver's count of the
// kernel's socket table), which the metrics show as berth_service_connections, and the instance's
// files are where it says they are (berth_service_volume_bytes measures that directory).
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalDatabaseDriver } from '../../../src/drivers/databases/local/index.js';
import { treeBytes } from '../../../src/drivers/os/disk-usage.js';
import { createDatabaseServiceRunner } from '../../../src/drivers/services/databases.js';
import type { ServiceSpec } from '../../../src/drivers/services/types.js';
import { eventually } from '../../runtime/helpers.js';

let dataDir: string;
const sockets: net.Socket[] = [];

describe('the database service runner', () => {
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-db-services-'));
  });
  afterAll(() => {
    for (const socket of sockets) socket.destroy();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it("counts a redis service's open connections, and its files are under its location", async () => {
    const driver = createLocalDatabaseDriver({ dataDir });
    const runner = createDatabaseServiceRunner(() => driver);
    const spec: ServiceSpec = {
      id: '5c0d1e2f-0000-4000-8000-00000000c0de',
      type: 'redis',
      applicationId: 1,
      teamId: 1,
      name: 'cache',
      version: null,
      memoryMiB: 64,
      username: 'app',
      password: 'a-long-enough-password',
      settings: {},
      secrets: {},
      volumes: [],
    };
    const running = await runner.provision(spec);
    try {
      expect(await runner.connections!([running.port])).toEqual(new Map([[running.port, 0]]));
      for (let i = 0; i < 2; i += 1) {
        const socket = net.connect(running.port, '127.0.0.1');
        sockets.push(socket);
        await new Promise((resolve) => socket.once('connect', resolve));
      }
      // The server accepts them as the client's connect resolves: counted once both ends are established.
      await eventually(async () => (await runner.connections!([running.port])).get(running.port) === 2);
      expect(running.location).not.toBeNull();
      expect(running.location!.startsWith(dataDir)).toBe(true);
      expect(await treeBytes(running.location!)).toBeGreaterThan(0);
    } finally {
      await runner.delete({ id: spec.id, type: spec.type });
    }
  }, 120_000);
});
