// The rabbitmq service runner against Debian's rabbitmq-server: real nodes on free loopback ports, a
// real AMQP client (amqplib) as the application. Starting a node takes seconds, so one instance is
// provisioned once and the tests walk through its life in order.
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import amqp from 'amqplib';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRabbitmqRunner } from '../../../src/drivers/services/rabbitmq/index.js';
import type { ServiceRunner, ServiceRuntime, ServiceSpec } from '../../../src/drivers/services/types.js';
import { isMounted } from '../../../src/drivers/os/disk-images.js';
import { findAccount, isRoot } from '../../../src/drivers/os/users.js';

const LONG = 240_000;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

function specOf(overrides: Partial<ServiceSpec> = {}): ServiceSpec {
  return {
    id: randomUUID(),
    type: 'rabbitmq',
    applicationId: 1,
    teamId: 1,
    version: null,
    name: 'queue',
    memoryMiB: 256,
    username: 'app',
    password: randomBytes(24).toString('base64url'),
    settings: {},
    secrets: {},
    volumes: [],
    ...overrides,
  };
}

const url = (user: string, password: string, port: number, vhost: string): string =>
  `amqp://${encodeURIComponent(user)}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(vhost)}`;

async function connect(u: string): Promise<amqp.ChannelModel> {
  const connection = await amqp.connect(u, { timeout: 10_000 });
  connection.on('error', () => undefined);
  return connection;
}

/** The pids whose command line satisfies `test` (NUL-separated arguments). */
function pidsWhere(test: (args: string[]) => boolean): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && test(args)) found.push(Number(entry));
    } catch {
      // gone
    }
  }
  return found;
}

const beamsOf = (location: string): number[] =>
  pidsWhere(
    (args) =>
      path.basename(args[0] ?? '') === 'beam.smp' &&
      args.some((a, i) => a === '-home' && args[i + 1] === location),
  );

function epmdPortOf(location: string): number {
  return (JSON.parse(fs.readFileSync(path.join(location, 'state.json'), 'utf8')) as { epmdPort: number })
    .epmdPort;
}

/** Every epmd serving `port`, whoever started it (found by its socket, not by its arguments). */
function epmdsOn(port: number): number[] {
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols[1]?.endsWith(`:${hex}`) && cols[3] === '0A') inodes.add(cols[9] ?? '');
    }
  }
  return pidsWhere((args) => path.basename(args[0] ?? '') === 'epmd').filter((pid) => {
    try {
      return fs
        .readdirSync(`/proc/${pid}/fd`)
        .some((fd) =>
          inodes.has(/^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1] ?? ''),
        );
    } catch {
      return false;
    }
  });
}

async function publish(u: string, queue: string, body: string): Promise<void> {
  const connection = await connect(u);
  const channel = await connection.createConfirmChannel();
  await channel.assertQueue(queue, { durable: true });
  channel.sendToQueue(queue, Buffer.from(body), { persistent: true });
  await channel.waitForConfirms();
  await connection.close();
}

async function take(u: string, queue: string): Promise<string | undefined> {
  const connection = await connect(u);
  const channel = await connection.createChannel();
  await channel.assertQueue(queue, { durable: true });
  const message = await channel.get(queue, { noAck: true });
  await connection.close();
  return message ? message.content.toString() : undefined;
}

describe('rabbitmq service runner', () => {
  let dataDir: string;
  let runner: ServiceRunner;
  const logLines: string[] = [];
  const spec = specOf({ settings: { vhost: 'orders' }, volumeGiB: 1 });
  let runtime: ServiceRuntime;
  let provisionMs = 0;

  beforeAll(async () => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-rabbitmq-'));
    const logger = pino({ level: 'debug' }, { write: (line: string) => void logLines.push(line) });
    runner = createRabbitmqRunner({ dataDir, logger });
    const started = Date.now();
    runtime = await runner.provision(spec);
    provisionMs = Date.now() - started;
    console.log(`rabbitmq: first provision (start + account) took ${provisionMs} ms`);
  }, LONG);

  afterAll(async () => {
    await runner?.delete({ id: spec.id, type: 'rabbitmq' }).catch(() => undefined);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }, LONG);

  it('provisions a node on loopback: the app user publishes and consumes on its vhost', async () => {
    expect(runtime.host).toBe('127.0.0.1');
    expect(runtime.version).toMatch(/^3\.\d+\.\d+$/);
    expect(runtime.extra).toEqual({ vhost: 'orders' });
    expect(runtime.location).toBe(path.join(dataDir, 'services', spec.id));
    expect(runtime.pid).toBe(beamsOf(runtime.location as string)[0]);
    expect(await runner.status({ id: spec.id, type: 'rabbitmq' })).toEqual({
      running: true,
      pid: runtime.pid,
    });

    const u = url(spec.username, spec.password, runtime.port, 'orders');
    await publish(u, 'jobs', 'hello');
    expect(await take(u, 'jobs')).toBe('hello');
  });

  it('runs unprivileged, listens on loopback only, with its own files', () => {
    const location = runtime.location as string;
    const uid = fs.statSync(`/proc/${runtime.pid}`).uid;
    if (isRoot()) {
      const account = findAccount(`berth-mq-${spec.id.replace(/-/g, '').slice(0, 20)}`);
      expect(account).toBeDefined();
      expect(uid).toBe(account?.uid);
      expect(uid).not.toBe(0);
      expect(fs.statSync(location).uid).toBe(account?.uid);
      // Its messages are on a volume of its volume_size, its own.
      const mnesia = path.join(location, 'mnesia');
      expect(isMounted(mnesia)).toBe(true);
      const volume = fs.statfsSync(mnesia);
      expect(volume.blocks * volume.bsize).toBeGreaterThan(0.9 * 1024 ** 3);
      expect(volume.blocks * volume.bsize).toBeLessThanOrEqual(1024 ** 3);
      expect(fs.statSync(mnesia).uid).toBe(account?.uid);
      expect(fs.statSync(mnesia).mode & 0o777).toBe(0o700);
    } else {
      expect(uid).toBe(process.getuid?.());
    }
    const cookie = fs.statSync(path.join(location, '.erlang.cookie'));
    expect(cookie.mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(path.join(location, 'enabled_plugins'), 'utf8').trim()).toBe('[].');
    expect(fs.readFileSync(path.join(location, 'rabbitmq.conf'), 'utf8')).toContain(
      `vm_memory_high_watermark.absolute = ${256 * 1024 * 1024}`,
    );
    // Every socket the node listens on is bound to 127.0.0.1 (AMQP and distribution), its epmd too.
    const inodes = new Set(
      fs
        .readdirSync(`/proc/${runtime.pid}/fd`)
        .map((fd) => {
          try {
            return /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${runtime.pid}/fd/${fd}`))?.[1];
          } catch {
            return undefined;
          }
        })
        .filter((x): x is string => x !== undefined),
    );
    const listening: string[] = [];
    for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
      for (const line of fs.readFileSync(table, 'utf8').split('\n').slice(1)) {
        const cols = line.trim().split(/\s+/);
        if (cols[3] === '0A' && inodes.has(cols[9] ?? '')) listening.push(cols[1] ?? '');
      }
    }
    expect(listening.length).toBeGreaterThanOrEqual(2);
    for (const address of listening) expect(address.split(':')[0]).toBe('0100007F');
    expect(listening).toContain(`0100007F:${runtime.port.toString(16).toUpperCase().padStart(4, '0')}`);
    expect(epmdsOn(epmdPortOf(location))).toHaveLength(1);
    expect(epmdPortOf(location)).not.toBe(4369);
  });

  it('refuses guest and a wrong password; no default vhost exists', async () => {
    for (const vhost of ['/', 'orders']) {
      await expect(connect(url('guest', 'guest', runtime.port, vhost))).rejects.toThrow(/ACCESS_REFUSED|403/);
    }
    await expect(connect(url(spec.username, `${spec.password}x`, runtime.port, 'orders'))).rejects.toThrow(
      /ACCESS_REFUSED|403/,
    );
    await expect(connect(url(spec.username, spec.password, runtime.port, '/'))).rejects.toThrow(
      /NOT_ALLOWED|530|ConnectionClose/,
    );
  });

  it(
    'the user reaches its vhost only: after a vhost change the former one is refused',
    async () => {
      const u = url(spec.username, spec.password, runtime.port, 'orders');
      await publish(u, 'left', 'in orders');
      const moved = await runner.provision({ ...spec, settings: { vhost: 'billing' } });
      expect(moved.extra).toEqual({ vhost: 'billing' });
      expect(moved.pid).toBe(runtime.pid);
      const billing = url(spec.username, spec.password, runtime.port, 'billing');
      await publish(billing, 'jobs', 'in billing');
      expect(await take(billing, 'jobs')).toBe('in billing');
      // `orders` still exists (its messages stay), but the user has no rights there any more.
      await expect(connect(u)).rejects.toThrow(/NOT_ALLOWED|530|ConnectionClose/);

      await runner.provision(spec);
      await expect(connect(billing)).rejects.toThrow(/NOT_ALLOWED|530|ConnectionClose/);
      expect(await take(u, 'left')).toBe('in orders');
    },
    LONG,
  );

  it(
    'a second provision converges: same node and port, a changed password takes effect',
    async () => {
      const before = Date.now();
      const again = await runner.provision(spec);
      console.log(`rabbitmq: a provision that changes nothing took ${Date.now() - before} ms`);
      expect(again.port).toBe(runtime.port);
      expect(again.pid).toBe(runtime.pid);
      expect(again.extra).toEqual({ vhost: 'orders' });
      const u = url(spec.username, spec.password, runtime.port, 'orders');
      await publish(u, 'jobs', 'again');
      expect(await take(u, 'jobs')).toBe('again');

      const newPassword = randomBytes(24).toString('base64url');
      await runner.provision({ ...spec, password: newPassword });
      await expect(connect(u)).rejects.toThrow(/ACCESS_REFUSED|403/);
      const connection = await connect(url(spec.username, newPassword, runtime.port, 'orders'));
      await connection.close();
      await runner.provision(spec); // back to the first password for the tests below
      await (await connect(u)).close();
    },
    LONG,
  );

  it(
    'stop leaves no beam and no epmd of the instance; start again keeps a durable message',
    async () => {
      const location = runtime.location as string;
      const epmdPort = epmdPortOf(location);
      const u = url(spec.username, spec.password, runtime.port, 'orders');
      await publish(u, 'durable', 'kept across restarts');
      expect(beamsOf(location)).toHaveLength(1);
      expect(epmdsOn(epmdPort)).toHaveLength(1);

      await runner.stop({ id: spec.id, type: 'rabbitmq' });
      expect(beamsOf(location)).toEqual([]);
      expect(epmdsOn(epmdPort)).toEqual([]);
      expect(
        pidsWhere((args) => path.basename(args[0] ?? '') === 'epmd' && args.includes(String(epmdPort))),
      ).toEqual([]);
      expect(await runner.status({ id: spec.id, type: 'rabbitmq' })).toEqual({ running: false, pid: null });
      await runner.stop({ id: spec.id, type: 'rabbitmq' }); // no-op when stopped

      const started = Date.now();
      const back = await runner.start(spec);
      console.log(`rabbitmq: start of an existing node took ${Date.now() - started} ms`);
      expect(back.port).toBe(runtime.port);
      expect(back.pid).not.toBe(runtime.pid);
      expect((await runner.status({ id: spec.id, type: 'rabbitmq' })).running).toBe(true);
      expect(await take(u, 'durable')).toBe('kept across restarts');
      runtime = back;
    },
    LONG,
  );

  it(
    'runs a second instance side by side on other ports, with credentials of its own',
    async () => {
      const preferred = await freePort();
      const other = specOf({ port: preferred });
      try {
        const second = await runner.provision(other);
        expect(second.port).toBe(preferred);
        expect(second.port).not.toBe(runtime.port);
        expect(second.pid).not.toBe(runtime.pid);
        expect(second.extra).toEqual({ vhost: 'app' });
        expect(epmdPortOf(second.location as string)).not.toBe(epmdPortOf(runtime.location as string));
        const u2 = url(other.username, other.password, second.port, 'app');
        await publish(u2, 'jobs', 'second');
        expect(await take(u2, 'jobs')).toBe('second');
        // One instance's password is refused by the other.
        await expect(connect(url(spec.username, spec.password, second.port, 'orders'))).rejects.toThrow();
        await expect(connect(url(other.username, other.password, runtime.port, 'orders'))).rejects.toThrow();
        // The first still serves.
        const u1 = url(spec.username, spec.password, runtime.port, 'orders');
        await publish(u1, 'jobs', 'first');
        expect(await take(u1, 'jobs')).toBe('first');
      } finally {
        await runner.delete({ id: other.id, type: 'rabbitmq' });
      }
    },
    LONG,
  );

  it('falls back to vhost app for a vhost name it does not take', async () => {
    const { vhostOf } = await import('../../../src/drivers/services/rabbitmq/index.js');
    expect(vhostOf({ settings: { vhost: 'orders-1.eu_west' } })).toBe('orders-1.eu_west');
    for (const bad of ['', '-x', '../etc', 'a b', 'x'.repeat(64), '/', 7, null]) {
      expect(vhostOf({ settings: { vhost: bad } })).toBe('app');
    }
  });

  it('refuses ids and usernames that are not its own patterns', async () => {
    await expect(runner.provision({ ...specOf(), id: '../../etc' })).rejects.toThrow(/invalid/);
    await expect(runner.stop({ id: 'x; rm -rf /', type: 'rabbitmq' })).rejects.toThrow(/invalid/);
  });

  it('logs the node log without credentials, and Berth logs none', async () => {
    const lines = await runner.logs({ id: spec.id, type: 'rabbitmq' }, 200);
    expect(lines.length).toBeGreaterThan(10);
    expect(lines.length).toBeLessThanOrEqual(200);
    expect(lines.join('\n')).toMatch(/Server startup complete|started TCP listener/);
    expect(lines.join('\n')).not.toContain(spec.password);
    const cookie = fs.readFileSync(path.join(runtime.location as string, '.erlang.cookie'), 'utf8');
    expect(lines.join('\n')).not.toContain(cookie);
    expect(logLines.join('\n')).not.toContain(spec.password);
    expect(logLines.join('\n')).toContain('rabbitmq service provisioned');
  });

  it(
    'delete removes the processes, the directory and the account',
    async () => {
      const location = runtime.location as string;
      const epmdPort = epmdPortOf(location);
      await runner.delete({ id: spec.id, type: 'rabbitmq' });
      expect(isMounted(path.join(location, 'mnesia'))).toBe(false);
      expect(fs.existsSync(path.join(dataDir, 'services', '.volumes', `${spec.id}.ext4`))).toBe(false);
      expect(fs.existsSync(location)).toBe(false);
      expect(beamsOf(location)).toEqual([]);
      expect(epmdsOn(epmdPort)).toEqual([]);
      expect(findAccount(`berth-mq-${spec.id.replace(/-/g, '').slice(0, 20)}`)).toBeUndefined();
      expect(await runner.status({ id: spec.id, type: 'rabbitmq' })).toEqual({ running: false, pid: null });
      await runner.delete({ id: spec.id, type: 'rabbitmq' }); // idempotent
    },
    LONG,
  );
});
