// A network namespace per application (issue 25): from an attacking application of another team —
// its one-off command and its running replica — no TCP connection reaches the owner's replica, the
// owner's PostgreSQL and Redis (so the connection floods of the issue cannot even begin, and the
// owner's own connections keep working), or Berth's and the host's ports; its own services work with
// the injected names; a server outside (a test namespace with its own veth) is reached through the
// NAT; /proc/net/tcp shows only its own namespace. Deleting an application removes its network, and
// networks a killed Berth left behind go at the next start. Real engines, real namespaces and nftables.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import {
  appNetworkName,
  ensureAppNetwork,
  ensureNetworkTable,
  listAppNetworks,
  networksAvailable,
  vethName,
} from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { SERVICE_SERVER_JS, serviceAppFiles } from '../app-services/service-app.js';
import { startOutsideNetwork } from '../helpers/outside-network.js';
import { edgeRequest, eventually, startRuntime, waitForDeployment, type RuntimeHarness } from './helpers.js';

/**
 * `node probe.js [xN] host:port…`: one TCP connection to each (N times each with `xN`: a command line is
 * capped at 4096 characters), held until all settled; prints the outcomes.
 */
const PROBE_JS = `
const net = require('node:net');
const args = process.argv.slice(2);
const times = /^x\\d+$/.test(args[0] || '') ? Number(args.shift().slice(1)) : 1;
const targets = Array.from({ length: times }, () => args).flat();
const sockets = [];
Promise.all(targets.map((target) => new Promise((resolve) => {
  const at = target.lastIndexOf(':');
  const socket = net.connect({ host: target.slice(0, at), port: Number(target.slice(at + 1)) });
  sockets.push(socket);
  socket.setTimeout(5000, () => { socket.destroy(); resolve('timeout'); });
  socket.on('connect', () => { socket.setTimeout(0); resolve('connected'); });
  socket.on('error', (error) => resolve(error.code || error.message));
}))).then((outcomes) => {
  for (const socket of sockets) socket.destroy();
  console.log(JSON.stringify(outcomes));
});
`;

/** The replica's own probe: GET /connect?to=host:port,… answers the outcomes as probe.js does. */
const ATTACKER_SERVER_JS = SERVICE_SERVER_JS.replace(
  "if (url.pathname === '/probe') {",
  `if (url.pathname === '/connect') {
      const { execFile } = require('node:child_process');
      const targets = url.searchParams.get('to').split(',');
      return execFile(process.execPath, ['probe.js', ...targets], (error, out) => res.end(error ? error.message : out));
    }
    if (url.pathname === '/probe') {`,
);

function document(name: string, team: string, repositoryUrl: string, services: unknown[]): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: {
        name,
        type: 'nodejs',
        repository: { url: repositoryUrl, branch: 'main' },
        commands: { build: ['node build.js'], start: 'npm start' },
        settings: { health_check_path: '/health', replicas: 1, memory: '256Mi' },
      },
      domains: [{ domain: `${name}.test` }],
      services,
    },
  });
}

const SERVICES = [
  { name: 'db', type: 'postgresql', memory: '128Mi', settings: { extensions: ['citext'] } },
  { name: 'cache', type: 'redis', memory: '64Mi' },
];

interface ServiceView {
  name: string;
  port: number | null;
  host: string | null;
}

/** A server in a namespace of the test's own, outside Berth's pool: "the internet" of this host. */
interface Outside {
  address: string;
  port: number;
  close(): void;
}

async function startOutside(): Promise<Outside> {
  const network = startOutsideNetwork();
  const server: ChildProcess = spawn(
    'nsenter',
    [
      `--net=${network.namespacePath}`,
      '--',
      process.execPath,
      '-e',
      "const s = require('node:net').createServer((c) => c.on('error', () => {}).end('outside\\n')).listen(0, '0.0.0.0', () => console.log(s.address().port));",
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const port = await new Promise<number>((resolve) =>
    server.stdout!.once('data', (d: Buffer) => resolve(Number(d))),
  );
  return {
    address: network.address,
    port,
    close() {
      server.kill('SIGKILL');
      network.close();
    },
  };
}

/** The application's address in its namespace and the host end's, read from its veth. */
function networkOf(h: RuntimeHarness, appId: number): { hostAddress: string; address: string } {
  const veth = vethName(runtimeTag(h.t.ctx.config.dataDir), appId);
  const [link] = JSON.parse(
    execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', veth], { encoding: 'utf8' }),
  ) as Array<{
    addr_info: Array<{ local: string }>;
  }>;
  const hostAddress = link!.addr_info[0]!.local;
  const parts = hostAddress.split('.').map(Number);
  return { hostAddress, address: `${parts[0]}.${parts[1]}.${parts[2]}.${parts[3]! + 1}` };
}

/** A non-loopback IPv4 address of the host (its eth0's). */
function hostAddress(): string {
  const found = Object.values(os.networkInterfaces())
    .flat()
    .find((a) => a && a.family === 'IPv4' && !a.internal && !a.address.startsWith('10.20'));
  if (!found) throw new Error('no non-loopback address on this host');
  return found.address;
}

describe.skipIf(!networksAvailable())('a network namespace per application', () => {
  let h: RuntimeHarness;
  let ownerId: number;
  let attackerId: number;
  let outside: Outside;
  /** A listener of the host on every address (as a careless daemon would have), and one on loopback. */
  let wide: net.Server;
  let loopback: net.Server;
  const portOf = (server: net.Server) => (server.address() as net.AddressInfo).port;

  const data = <T>(response: { json<U>(): U }): T => response.json<{ data: T }>().data;
  /** The attacker's team member's token; the owner's application is the platform user's. */
  let mallory: Record<string, string>;
  const headersFor = (url: string) =>
    new RegExp(`/applications/${attackerId}(/|$)`).test(url) ? mallory : h.t.auth.platform;
  const api = (method: string, url: string, payload?: Record<string, unknown>) =>
    h.t.request({ method, url, headers: headersFor(url), ...(payload ? { payload } : {}) });
  const services = async (appId: number) =>
    data<ServiceView[]>(await api('GET', `/api/v1/applications/${appId}/services`));
  const exec = async (appId: number, command: string) => {
    const response = await api('POST', `/api/v1/applications/${appId}/exec`, { command });
    expect(response.statusCode, response.body).toBe(200);
    return data<{ output: string; exit_code: number }>(response);
  };
  /** Outcomes of TCP connections from a one-off command of the attacker. */
  const probeFromExec = async (targets: string[]) =>
    JSON.parse((await exec(attackerId, `node probe.js ${targets.join(' ')}`)).output) as string[];
  const probeFromReplica = async (targets: string[]) =>
    JSON.parse(
      (await edgeRequest(h.edgePort, 'attacker.test', `/connect?to=${targets.join(',')}`)).body,
    ) as string[];

  beforeAll(async () => {
    // Long enough for initdb of the services' servers on a busy machine (no engine warm-up here:
    // MariaDB's, which this file does not use, collides with other files' bootstraps in /tmp).
    h = await startRuntime('sqlite', { BERTH_DEPLOYMENT_TIMEOUT: '120' });
    h.repository('owner').commit(serviceAppFiles());
    h.repository('attacker').commit({
      ...serviceAppFiles(),
      'server.js': ATTACKER_SERVER_JS,
      'probe.js': PROBE_JS,
    });
    // Another team's member made the team the attacker's application belongs to.
    const member = await h.t.ctx.identity.createUser({ email: 'mallory@example.com', team: 'evil' });
    mallory = { authorization: `Bearer ${member.api_token}` };
    for (const [name, team] of [
      ['owner', 'acme'],
      ['attacker', 'evil'],
    ] as const) {
      const response = await h.t.request({
        method: 'POST',
        url: '/api/v1/infrastructure/apply',
        headers: { ...(team === 'evil' ? mallory : h.t.auth.platform), 'content-type': 'application/yaml' },
        payload: document(name, team, h.git.url(name), SERVICES),
      });
      expect(response.statusCode, response.body).toBe(200);
      const applied = response.json<{ application_id: number; deployment_id: number }>();
      if (team === 'evil') attackerId = applied.application_id;
      // Polled as the application's team sees it.
      const as = { ...h.t, auth: { ...h.t.auth, platform: team === 'evil' ? mallory : h.t.auth.platform } };
      const deployment = await waitForDeployment(as, applied.application_id, applied.deployment_id, 120_000);
      expect(deployment.error).toBeNull();
      if (name === 'owner') ownerId = applied.application_id;
      else attackerId = applied.application_id;
    }
    outside = await startOutside();
    wide = await new Promise<net.Server>((resolve) => {
      const server = net
        .createServer((c) => c.on('error', () => undefined).end())
        .listen(0, '0.0.0.0', () => resolve(server));
    });
    loopback = await new Promise<net.Server>((resolve) => {
      const server = net
        .createServer((c) => c.on('error', () => undefined).end())
        .listen(0, '127.0.0.1', () => resolve(server));
    });
  }, 300_000);
  afterAll(async () => {
    outside?.close();
    wide?.close();
    loopback?.close();
    await h?.close();
  });

  it('keeps the attacker out of the owner’s replica and services, Berth’s ports and the host’s; its own services and the outside work', async () => {
    const owner = networkOf(h, ownerId);
    const attacker = networkOf(h, attackerId);
    const ownerPort = data<Array<{ port: number }>>(
      await api('GET', `/api/v1/applications/${ownerId}/instances`),
    )[0]!.port;
    const ownerServices = await services(ownerId);
    const ownerDb = ownerServices.find((s) => s.name === 'db')!;
    const ownerCache = ownerServices.find((s) => s.name === 'cache')!;
    // Services are reached at the host end of the application's own veth.
    expect(ownerDb.host).toBe(owner.hostAddress);
    expect((await services(attackerId)).every((s) => s.host === attacker.hostAddress)).toBe(true);

    const apiPort = h.t.port;
    const forbidden = [
      // The owner's replica, directly (the edge is the only way in).
      `${owner.address}:${ownerPort}`,
      `127.0.0.1:${ownerPort}`,
      // The owner's services, wherever they might answer.
      ...[ownerDb.port, ownerCache.port].flatMap((port) => [
        `127.0.0.1:${port}`,
        `${owner.hostAddress}:${port}`,
        `${attacker.hostAddress}:${port}`,
        `${hostAddress()}:${port}`,
      ]),
      // Berth's API and the git server on loopback, the edge's loopback port.
      `127.0.0.1:${apiPort}`,
      `${attacker.hostAddress}:${apiPort}`,
      `127.0.0.1:${new URL(h.git.url('owner')).port}`,
      `127.0.0.1:${h.edgePort}`,
      // The host's own listeners: on every address, and on loopback.
      `${attacker.hostAddress}:${portOf(wide)}`,
      `${hostAddress()}:${portOf(wide)}`,
      `${owner.hostAddress}:${portOf(wide)}`,
      `${attacker.hostAddress}:${portOf(loopback)}`,
    ];
    // Seen from the host, each of these is open (the test would prove nothing otherwise).
    for (const target of [
      `${owner.address}:${ownerPort}`,
      `127.0.0.1:${ownerDb.port}`,
      `${hostAddress()}:${portOf(wide)}`,
    ]) {
      const at = target.lastIndexOf(':');
      await new Promise<void>((resolve, reject) =>
        net
          .connect(Number(target.slice(at + 1)), target.slice(0, at))
          .on('connect', function (this: net.Socket) {
            this.destroy();
            resolve();
          })
          .on('error', reject),
      );
    }
    for (const outcomes of [await probeFromExec(forbidden), await probeFromReplica(forbidden)]) {
      expect(outcomes).toHaveLength(forbidden.length);
      // Refused at once (a TCP reset, or no route), never left to time out.
      outcomes.forEach((outcome, index) =>
        expect(['ECONNREFUSED', 'EHOSTUNREACH'], forbidden[index]).toContain(outcome),
      );
    }

    // Its own services, with the names injected, from its replica and from a one-off command.
    const roundtrip = JSON.parse(
      (await edgeRequest(h.edgePort, 'attacker.test', '/roundtrip?value=mine')).body,
    ) as {
      pg: { body: string };
      redis: { got: string };
    };
    expect(roundtrip.pg.body).toBe('mine');
    expect(roundtrip.redis.got).toBe('mine');
    const psql = await exec(
      attackerId,
      `node -e "const { Client } = require('pg'); const c = new Client({ connectionString: process.env.DATABASE_URL }); c.connect().then(() => c.query('select 1 as one')).then((r) => { console.log(r.rows[0].one, process.env.DATABASE_URL.includes('@${attacker.hostAddress}:')); return c.end(); })"`,
    );
    expect(psql.output.trim()).toBe('1 true');

    // The outside (a server in a namespace of the test's own) through the NAT, from both.
    const out = `${outside.address}:${outside.port}`;
    expect(await probeFromExec([out])).toEqual(['connected']);
    expect(await probeFromReplica([out])).toEqual(['connected']);
  }, 120_000);

  it('shows a sandbox only its own namespace’s sockets in /proc/net/tcp', async () => {
    const hex = (port: number) => `:${port.toString(16).toUpperCase().padStart(4, '0')} `;
    const ownerDb = (await services(ownerId)).find((s) => s.name === 'db')!;
    const host = fs.readFileSync('/proc/net/tcp', 'utf8');
    expect(host).toContain(`0100007F${hex(ownerDb.port!)}`);
    expect(host).toContain(hex(portOf(loopback)));
    const inside = (await exec(attackerId, 'cat /proc/net/tcp')).output;
    expect(inside).not.toContain(hex(ownerDb.port!));
    expect(inside).not.toContain(hex(portOf(loopback)));
    expect(inside).not.toContain(hex(portOf(wide)));
    // Only loopback and the application's own address in there.
    const { address } = networkOf(h, attackerId);
    const own = address
      .split('.')
      .map((part) => Number(part).toString(16).toUpperCase().padStart(2, '0'))
      .reverse()
      .join('');
    const locals = inside
      .split('\n')
      .slice(1)
      .filter(Boolean)
      .map((line) => line.trim().split(/\s+/)[1]!.split(':')[0]);
    expect(locals.length).toBeGreaterThan(0);
    expect(locals.every((local) => ['0100007F', '00000000', own].includes(local!))).toBe(true);
  }, 60_000);

  it('leaves the owner’s PostgreSQL and Redis working while the attacker tries to fill them', async () => {
    const owner = networkOf(h, ownerId);
    const attacker = networkOf(h, attackerId);
    const ownerServices = await services(ownerId);
    const targets = ownerServices.flatMap((s) =>
      [owner.hostAddress, attacker.hostAddress, '127.0.0.1'].map((address) => `${address}:${s.port}`),
    );
    // The flood: 110 connections to PostgreSQL (its 100 slots) and as many to Redis, from
    // every address the attacker might try; none of them even connects.
    const outcomes = await probeFromExec(['x40', ...targets]);
    expect(outcomes).toHaveLength(40 * targets.length);
    expect(outcomes.filter((outcome) => outcome === 'connected')).toEqual([]);
    // The owner's own connections work.
    const answer = await edgeRequest(h.edgePort, 'owner.test', '/roundtrip?value=still-mine');
    expect(answer.status).toBe(200);
    const roundtrip = JSON.parse(answer.body) as { pg: { body: string }; redis: { got: string } };
    expect(roundtrip.pg.body).toBe('still-mine');
    expect(roundtrip.redis.got).toBe('still-mine');
  }, 120_000);

  it('removes networks of applications Berth no longer has at its start (a kill -9), and keeps the others', async () => {
    const tag = runtimeTag(h.t.ctx.config.dataDir);
    // As a Berth killed during a delete would leave it: a network for an application it does not have.
    await ensureNetworkTable(tag, []);
    const orphan = await ensureAppNetwork(tag, 987_654);
    expect(fs.existsSync(orphan.namespacePath)).toBe(true);
    const before = networkOf(h, ownerId);
    await h.t.ctx.services.runtime.start();
    expect(await listAppNetworks(tag)).toEqual([ownerId, attackerId].sort((a, b) => a - b));
    expect(fs.existsSync(orphan.namespacePath)).toBe(false);
    expect(fs.existsSync(`/sys/class/net/${orphan.veth}`)).toBe(false);
    // The live ones are found again as they are, and keep serving.
    expect(networkOf(h, ownerId)).toEqual(before);
    expect((await edgeRequest(h.edgePort, 'owner.test', '/health')).status).toBe(200);
  }, 60_000);

  it('removes an application’s namespace, veth, address and rules with the application', async () => {
    const tag = runtimeTag(h.t.ctx.config.dataDir);
    const { hostAddress: address } = networkOf(h, attackerId);
    const deleted = await api('DELETE', `/api/v1/applications/${attackerId}`);
    expect(deleted.statusCode).toBe(202);
    await eventually(
      async () => (await api('GET', `/api/v1/applications/${attackerId}`)).statusCode === 404,
      60_000,
      'the application to be deleted',
    );
    expect(fs.existsSync(`/run/netns/${appNetworkName(tag, attackerId)}`)).toBe(false);
    expect(fs.existsSync(`/sys/class/net/${vethName(tag, attackerId)}`)).toBe(false);
    // The address left with the veth. It is free again, so another Berth on this machine (another test
    // file's, running beside this one) may have been given it since: only this application's veth counts.
    const holders = execFileSync('ip', ['-o', '-4', 'addr'], { encoding: 'utf8' })
      .split('\n')
      .filter((line) => line.includes(` ${address}/`));
    expect(holders.filter((line) => line.includes(vethName(tag, attackerId)))).toEqual([]);
    const rules = execFileSync('nft', ['list', 'table', 'inet', `berth_${tag}`], { encoding: 'utf8' });
    expect(rules).not.toContain(`app_${attackerId} `);
    expect(rules).not.toContain(vethName(tag, attackerId));
    expect(await listAppNetworks(tag)).toEqual([ownerId]);
  }, 90_000);
});
