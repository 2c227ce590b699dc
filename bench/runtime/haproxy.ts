// Would HAProxy as the edge's data plane meet issue 14's edge target (bench item 3: ≥ 0.5× of direct
// throughput, ≤ +1 ms p50 at 10 connections)? Measured before writing it: HAProxy 2.6 configured the
// way the edge would use it (master-worker, Host → backend through a map file, the upstream a dynamic
// server added on the runtime API, X-Forwarded-* set by the proxy, retry on a connection failure),
// (HX_DYNAMIC=1: added with `add server`, which HAProxy 2.6 keeps no idle connection to) in front of the same application the benchmark deploys (test/runtime/node-app.ts, started by hand
// here), alternated round by round with direct and with the bare Node proxy (bare-proxy.ts).
// Run: npx tsx bench/runtime/haproxy.ts [--rounds 5] [--seconds 3] [--connections 10]
import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { freePort } from '../../src/drivers/net/ports.js';
import { nodeAppFiles } from '../../test/runtime/node-app.js';
import { parentPid, processCpuMicros } from '../proc.js';
import { get, load, median } from './harness.js';
import type { LoadRequest, LoadResult } from './load.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
  },
});
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const HOST = 'shop.test';

type Variant = 'direct' | 'haproxy' | 'bare';
const VARIANTS: readonly Variant[] = ['direct', 'haproxy', 'bare'];

/** CPU time (user + system) of a process and its children still alive, in µs, from /proc. */
function cpuOfTree(pid: number): number {
  let total = processCpuMicros(pid);
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (parentPid(entry) === pid) total += processCpuMicros(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

async function waitFor(ready: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (Date.now() > end) throw new Error('not ready in time');
    await sleep(20);
  }
}

function command(socket: string, line: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const connection = net.connect(socket);
    let out = '';
    connection.setEncoding('utf8');
    connection.on('data', (chunk: string) => (out += chunk));
    connection.on('end', () => resolve(out));
    connection.on('error', reject);
    connection.end(`${line}\n`);
  });
}

async function startHaproxy(dir: string, port: number, upstreamPort: number) {
  const socket = path.join(dir, 'admin.sock');
  const map = path.join(dir, 'hosts.map');
  fs.writeFileSync(map, '');
  const config = `global
  master-worker
  nbthread 1
  stats socket ${socket} mode 600 level admin
  pidfile ${path.join(dir, 'haproxy.pid')}
defaults
  mode http
  timeout connect 5s
  timeout client 65s
  timeout server 60s
  timeout http-keep-alive 65s
  timeout tunnel 1h
  retries 1
  retry-on conn-failure
  option redispatch 1
frontend edge
  bind 127.0.0.1:${port}
  http-request return status 400 content-type text/plain string "missing Host\\n" unless { req.hdr(host) -m found }
  http-request del-header x-forwarded-for
  http-request del-header x-forwarded-proto
  http-request del-header x-forwarded-host
  http-request del-header forwarded
  http-request set-header x-forwarded-proto http
  http-request set-header x-forwarded-host %[req.hdr(host)]
  option forwardfor
  use_backend %[req.hdr(host),host_only,lower,map(${map})]
  default_backend unknown
backend unknown
  http-request return status 404 content-type text/plain string "unknown host\\n"
backend s0
  balance roundrobin
${
  process.env.HX_DYNAMIC
    ? ''
    : // Servers declared in the configuration, off, given their address at run time.
      '  server-template u 1-8 127.0.0.1:1 disabled\n'
}`;
  fs.writeFileSync(path.join(dir, 'haproxy.cfg'), config);
  const child: ChildProcess = spawn('haproxy', ['-db', '-f', path.join(dir, 'haproxy.cfg')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitFor(() => Promise.resolve(fs.existsSync(socket)));
  // HX_DYNAMIC=1: the upstream as a server added on the runtime API (`add server`) instead; HAProxy
  // 2.6 then keeps no idle connection to it and opens one per request (measured: 0 reused).
  const server = process.env.HX_DYNAMIC ? `s0/u${upstreamPort}` : 's0/u1';
  const steps = [
    process.env.HX_DYNAMIC
      ? `add server ${server} 127.0.0.1:${upstreamPort}`
      : `set server ${server} addr 127.0.0.1 port ${upstreamPort}`,
    `set server ${server} state ready`,
    `add map ${map} ${HOST} s0`,
  ];
  for (const step of steps) {
    const answer = await command(socket, step);
    if (
      answer.trim() !== '' &&
      !/New server registered|Done|IP changed|port changed|no need to change/i.test(answer)
    )
      throw new Error(`${step}: ${answer.trim()}`);
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    pid: child.pid!,
    /** New connections to the upstream and requests that reused one, from the runtime API. */
    async upstreamConnections(): Promise<string> {
      const csv = (await command(socket, 'show stat')).split('\n');
      const names = csv[0]!.replace(/^# /, '').split(',');
      const row = csv.find((line) => line.startsWith(`s0,${server.slice(3)},`))?.split(',') ?? [];
      const field = (name: string) => row[names.indexOf(name)];
      return `${field('connect')} connections opened to the upstream, ${field('reuse')} reused, ${field('stot')} sessions`;
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

async function startBareProxy(upstreamPort: number) {
  const child = fork(new URL('./bare-proxy.ts', import.meta.url), [String(upstreamPort)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve) =>
    child.once('message', (message) => resolve((message as { port: number }).port)),
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    port,
    pid: child.pid!,
    async stop() {
      child.send('stop');
      await exited;
    },
  };
}

async function main(): Promise<void> {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-haproxy-'));
  fs.chmodSync(work, 0o700);
  const appDir = path.join(work, 'app');
  fs.mkdirSync(appDir);
  for (const [name, content] of Object.entries(nodeAppFiles('v1')))
    fs.writeFileSync(path.join(appDir, name), content);
  const upstreamPort = await freePort();
  const app = spawn(process.execPath, ['server.js'], {
    cwd: appDir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NODE_ENV: 'production', PORT: String(upstreamPort) },
    stdio: 'ignore',
  });
  const stops: Array<() => Promise<void>> = [
    async () => {
      app.kill('SIGTERM');
      await sleep(100);
    },
  ];
  try {
    await waitFor(async () => (await get(upstreamPort, '/').catch(() => undefined))?.status === 200);
    const haproxyPort = await freePort();
    const haproxy = await startHaproxy(work, haproxyPort, upstreamPort);
    stops.push(() => haproxy.stop());
    const bare = await startBareProxy(upstreamPort);
    stops.push(() => bare.stop());
    const probe = await get(haproxyPort, '/', { host: HOST });
    if (probe.status !== 200) throw new Error(`haproxy answered ${probe.status}: ${probe.body}`);
    console.log(`through haproxy: ${probe.body}`);

    const variants: Record<Variant, LoadRequest> = {
      direct: { url: `http://127.0.0.1:${upstreamPort}/`, connections: CONNECTIONS, seconds: SECONDS },
      haproxy: {
        url: `http://127.0.0.1:${haproxyPort}/`,
        host: HOST,
        connections: CONNECTIONS,
        seconds: SECONDS,
      },
      bare: { url: `http://127.0.0.1:${bare.port}/`, host: HOST, connections: CONNECTIONS, seconds: SECONDS },
    };
    const cpuOf = (variant: Variant) =>
      variant === 'haproxy'
        ? cpuOfTree(haproxy.pid)
        : variant === 'bare'
          ? cpuOfTree(bare.pid)
          : cpuOfTree(app.pid!);
    const results: Record<Variant, LoadResult[]> = { direct: [], haproxy: [], bare: [] };
    const cpu: Record<Variant, number[]> = { direct: [], haproxy: [], bare: [] };
    console.log(`load average before: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
    for (const variant of VARIANTS) await load({ ...variants[variant], seconds: 1 });
    for (let round = 1; round <= ROUNDS; round += 1) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
      for (const variant of order) {
        const before = cpuOf(variant);
        const result = await load(variants[variant]);
        const after = cpuOf(variant);
        if (result.non2xx + result.errors > 0)
          throw new Error(`${variant}: ${result.non2xx} non-2xx, ${result.errors} errors`);
        results[variant].push(result);
        cpu[variant].push((after - before) / result.requests);
      }
      const line = VARIANTS.map((v) => {
        const r = results[v][round - 1]!;
        return `${v} ${r.perSecond.toFixed(0)} req/s p50 ${r.p50.toFixed(3)} ms ${cpu[v][round - 1]!.toFixed(0)} µs CPU/req`;
      });
      console.log(`  round ${round}: ${line.join('; ')}`);
    }
    const ratios = (v: Variant) => results[v].map((r, i) => r.perSecond / results.direct[i]!.perSecond);
    const added = (v: Variant) => results[v].map((r, i) => r.p50 - results.direct[i]!.p50);
    const range = (list: number[], digits: number) =>
      `${Math.min(...list).toFixed(digits)}–${Math.max(...list).toFixed(digits)} (median ${median(list).toFixed(digits)})`;
    console.log(`load average after: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
    console.log(
      `direct: ${range(
        results.direct.map((r) => r.perSecond),
        0,
      )} req/s, p50 ${range(
        results.direct.map((r) => r.p50),
        3,
      )} ms`,
    );
    for (const v of ['haproxy', 'bare'] as const) {
      console.log(
        `${v}: ${range(
          results[v].map((r) => r.perSecond),
          0,
        )} req/s; ÷ direct ${range(ratios(v), 2)}; ` +
          `p50 ${range(
            results[v].map((r) => r.p50),
            3,
          )} ms, added ${range(added(v), 3)} ms; CPU/req ${range(cpu[v], 0)} µs`,
      );
    }
    console.log(`haproxy: ${await haproxy.upstreamConnections()}`);
    const ratio = median(ratios('haproxy'));
    const plus = median(added('haproxy'));
    console.log(
      `target (≥ 0.50×, ≤ +1 ms): haproxy ${ratio.toFixed(2)}×, +${plus.toFixed(3)} ms → ${ratio >= 0.5 && plus <= 1 ? 'met' : 'NOT met'}`,
    );
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    fs.rmSync(work, { recursive: true, force: true });
  }
}

await main();
