// Runtime benchmark (issue 14): a nodejs application from a git repository on loopback, deployed and
// served by Berth (SQLite, the local runtime driver, the edge proxy), each measurement against a
// baseline taken in the same process and the same rounds, since these machines are noisy:
//   1. deploy → serving the new version through the edge, against the same clone, build and start
//      done by hand with plain child processes (overhead = the difference, per round);
//   2. a skip_build redeploy → serving (a new replica), against starting the server by hand;
//   3. the edge proxy against the replica directly, 10 keep-alive connections, alternated rounds:
//      throughput ratio and added median latency; a bare proxy on Node's http module (bare-proxy.ts)
//      in the same rounds shows the floor of any proxy written that way;
//   4. failed requests (non-2xx, socket errors, timeouts) at 10 connections through the edge during
//      3 rolling deploys, against the same load without deploys; then during one skip_build redeploy;
//   5. a hung replica (GET /hang) found by its health checks and replaced: the hang to the first 200 of
//      the new replica, against 3 intervals + 1 s.
// Run: npx tsx bench/runtime/index.ts [--rounds 5] [--seconds 3] [--connections 10] [--only 3]
// It measures the default edge (HAProxy, edge-haproxy.ts); BERTH_EDGE_PROXY=node measures the Node one.
// The load generator (autocannon) runs in a child process (load.ts), never on Berth's event loop.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { nodeAppFiles } from '../../test/runtime/node-app.js';
import { processCpuMicros } from '../proc.js';
import { deployByHand, startByHand, type ByHandTimes } from './by-hand.js';
import {
  api,
  applyYaml,
  commit,
  deploymentLog,
  get,
  HEALTH,
  instances,
  load,
  median,
  nodeDocument,
  startBerth,
  startLoad,
  until,
  waitForDeployment,
  type AppAnswer,
  type Berth,
  type DeploymentView,
} from './harness.js';
import type { LoadRequest, LoadResult } from './load.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '10' },
    // Comma-separated item numbers to run (1 and 2 run together); default all. Item 4 needs 3's setup,
    // which always runs.
    only: { type: 'string' },
  },
});
const ONLY = values.only?.split(',').map((item) => Number(item.trim()));
const runs = (item: number) => !ONLY || ONLY.includes(item);
const ROUNDS = Number(values.rounds);
const SECONDS = Number(values.seconds);
const CONNECTIONS = Number(values.connections);
const HOST = 'shop.test';
const ROLLING_DEPLOYS = 3;

const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
const ms = (value: number) => `${Math.round(value)} ms`;
const s = (value: number) => `${(value / 1000).toFixed(2)} s`;

type Variant = 'direct' | 'edge' | 'bare';
const VARIANTS: readonly Variant[] = ['direct', 'edge', 'bare'];

/** The bare proxy (bare-proxy.ts) in a child process, in front of `upstreamPort`. */
async function startBareProxy(
  upstreamPort: number,
): Promise<{ port: number; cpu(): Promise<number>; stop(): Promise<void> }> {
  const child = fork(new URL('./bare-proxy.ts', import.meta.url), [String(upstreamPort)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = <T>(key: string) =>
    new Promise<T>((resolve) => {
      const listener = (message: unknown) => {
        if (typeof message === 'object' && message !== null && key in message) {
          child.off('message', listener);
          resolve((message as Record<string, T>)[key]!);
        }
      };
      child.on('message', listener);
    });
  const port = await next<number>('port');
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    port,
    async cpu() {
      const usage = next<NodeJS.CpuUsage>('cpu');
      child.send('cpu');
      const { user, system } = await usage;
      return user + system;
    },
    async stop() {
      child.send('stop');
      await exited;
    },
  };
}

/** CPU time (user + system) of the HAProxy edge's process, in µs (its pid file, then /proc). */
function haproxyCpu(dataDir: string): number {
  const pid = fs.readFileSync(path.join(dataDir, 'edge-haproxy', 'haproxy.pid'), 'utf8').trim();
  return processCpuMicros(pid);
}

// ---- the deployment's own times, from its log ----

/** Times of a deployment's steps, in ms from the request (client clock, the same machine). */
interface Phases {
  /** The request to the job runner starting it. */
  queued: number;
  /** Starting: the Node.js runtime, the app's account, directories; up to git's start. */
  prepare: number;
  clone: number;
  /** After the clone: .git removed, the source packed for download, the tree given to the app's user. */
  pack: number;
  build: number;
  /** Init commands (none here) and the steps' bookkeeping. */
  release: number;
  /** The replica's sandbox and memory group, up to the process running. */
  spawn: number;
  /** The start command until its health path answered 200 (polled every 100 ms). */
  ready: number;
  /** Ready to routed, and routed to the benchmark's probe seeing the new version. */
  route: number;
  seen: number;
}

async function phasesOf(
  berth: Berth,
  appId: number,
  deployment: DeploymentView,
  requestedAt: number,
  seenAt: number,
): Promise<Phases | undefined> {
  // A deployment is `success` a few ms before its last lines are stored (they are flushed after it
  // ends): the log is read again until its last line is there.
  let lines = await deploymentLog(berth, appId, deployment.id);
  for (let tries = 0; !lines.some((l) => / is live$/.test(l.line)) && tries < 100; tries += 1) {
    await sleep(20);
    lines = await deploymentLog(berth, appId, deployment.id);
  }
  const at = (test: (line: string) => boolean): number => {
    const found = lines.find((l) => test(l.line));
    return found ? new Date(found.at).getTime() : NaN;
  };
  const started = new Date(deployment.started_at ?? '').getTime();
  const fetch = at((l) => l === '==> fetch');
  const fetching = at((l) => l.startsWith('Fetching '));
  const fetched = at((l) => l.startsWith('Fetched commit'));
  const build = at((l) => l === '==> build');
  const release = at((l) => l === '==> release');
  const rollout = at((l) => l === '==> rollout');
  const spawned = at((l) => l.startsWith('Started '));
  const ready = at((l) => l.includes(' is ready on port '));
  const routed = at((l) => l.startsWith('Routed '));
  const skipped = Number.isNaN(fetch);
  return {
    queued: started - requestedAt,
    prepare: skipped ? 0 : fetching - started,
    clone: skipped ? 0 : fetched - fetching,
    pack: skipped ? 0 : build - fetched,
    build: skipped ? 0 : release - build,
    release: rollout - (skipped ? started : release),
    spawn: spawned - rollout,
    ready: ready - spawned,
    route: routed - ready,
    seen: seenAt - routed,
  };
}

/** From the request to the edge's switch. */
const routedAfter = (p: Phases): number =>
  p.queued + p.prepare + p.clone + p.pack + p.build + p.release + p.spawn + p.ready + p.route;

/** Waits until only the live release's replica is left (the old one drained and stopped). */
async function settled(berth: Berth, appId: number): Promise<void> {
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    const all = await instances(berth, appId);
    if (all.length === 1 && all[0]?.state === 'running') return;
    await sleep(50);
  }
  throw new Error('the old replica did not stop');
}

const edgeGet = (berth: Berth, pathname = '/') => get(berth.edgePort, pathname, { host: HOST });

/** POST deploy, then the first answer through the edge that `accept`s; returns ms and the deployment. */
async function deployAndSee(
  berth: Berth,
  appId: number,
  body: Record<string, unknown>,
  accept: (answer: AppAnswer) => boolean,
): Promise<{ ms: number; phases: Phases | undefined; answer: AppAnswer }> {
  const t0 = performance.now();
  const wall0 = Date.now();
  const deployment = await api<{ id: number }>(berth, 'POST', `/api/v1/applications/${appId}/deploy`, body);
  const seen = await until(() => edgeGet(berth), accept);
  const wallSeen = wall0 + (seen.at - t0);
  const done = await waitForDeployment(berth, appId, deployment.id);
  const phases = await phasesOf(berth, appId, done, wall0, wallSeen);
  await settled(berth, appId);
  return { ms: seen.at - t0, phases, answer: seen.answer };
}

// ---- the measurements ----

interface Row {
  name: string;
  measured: string;
  baseline: string;
  ratio: string;
  target: string;
  met: boolean | undefined;
}

async function main(): Promise<void> {
  console.log(`runtime benchmark: ${ROUNDS} rounds, load ${CONNECTIONS} connections × ${SECONDS} s`);
  console.log(`load average at start: ${loadAverage()} (${os.cpus().length} CPUs)`);
  const berth = await startBerth();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-hand-'));
  const rows: Row[] = [];
  try {
    const repository = berth.repository('shop');
    repository.commit(nodeAppFiles('v0'));
    const url = berth.git.url('shop');

    // The first deployment (apply): the application's account and groups are made here.
    const t0 = performance.now();
    const applied = await applyYaml(berth, nodeDocument(berth.team, 'shop', url));
    await until(
      () => edgeGet(berth),
      (a) => a.version === 'v0',
    );
    const applyMs = performance.now() - t0;
    const appId = applied.application_id;
    await waitForDeployment(berth, appId, applied.deployment_id ?? 0);
    console.log(`apply → serving v0 (first deployment): ${ms(applyMs)}`);
    // Warm-up of the by-hand path (the page cache, npm's first start).
    await deployByHand(url, work);

    if (runs(1) || runs(2)) {
      // 1 and 2: deploys, by hand and by Berth, alternating which goes first.
      const hand: ByHandTimes[] = [];
      const deploys: number[] = [];
      const overheads: number[] = [];
      const phases: Phases[] = [];
      const skips: number[] = [];
      const skipPhases: Phases[] = [];
      const starts: number[] = [];
      let skipRestarts = 0;
      for (let round = 1; round <= ROUNDS; round += 1) {
        const version = `r${round}`;
        await commit(repository, nodeAppFiles(version));
        const byHand = async () => hand.push(await deployByHand(url, work));
        const byBerth = async () => {
          const deployed = await deployAndSee(berth, appId, {}, (a) => a.version === version);
          deploys.push(deployed.ms);
          if (deployed.phases) phases.push(deployed.phases);
        };
        if (round % 2 === 1) {
          await byHand();
          await byBerth();
        } else {
          await byBerth();
          await byHand();
        }
        overheads.push(deploys[deploys.length - 1]! - hand[hand.length - 1]!.totalMs);
        // skip_build: the same release again, a new replica (seen by its port).
        const before = (await edgeGet(berth)).body;
        const oldPort = (JSON.parse(before) as AppAnswer).port;
        const skipped = await deployAndSee(berth, appId, { skip_build: true }, (a) => a.port !== oldPort);
        skips.push(skipped.ms);
        if (skipped.phases) skipPhases.push(skipped.phases);
        // Whether the new replica had to be started again after the switch (and why).
        const [live] = await instances(berth, appId);
        const restarted = live && live.restarts > 0 ? `, then restarted: ${live.last_restart_reason}` : '';
        if (restarted) skipRestarts += 1;
        // Its baseline: the start command by hand in a checkout.
        const dir = fs.mkdtempSync(path.join(work, 'start-'));
        const home = fs.mkdtempSync(path.join(work, 'home-'));
        for (const [file, content] of Object.entries(nodeAppFiles(version))) {
          fs.writeFileSync(path.join(dir, file), content);
        }
        const started = await startByHand(dir, home);
        starts.push(started.ms);
        await started.stop();
        fs.rmSync(dir, { recursive: true, force: true });
        fs.rmSync(home, { recursive: true, force: true });
        console.log(
          `  round ${round}: deploy ${ms(deploys[deploys.length - 1]!)} vs by hand ${ms(hand[hand.length - 1]!.totalMs)}` +
            ` (clone ${ms(hand[hand.length - 1]!.cloneMs)}, build ${ms(hand[hand.length - 1]!.buildMs)}, start ${ms(hand[hand.length - 1]!.startMs)});` +
            ` skip_build ${ms(skips[skips.length - 1]!)}${restarted} vs start by hand ${ms(started.ms)}`,
        );
      }
      const deployMedian = median(deploys);
      const handMedian = median(hand.map((h) => h.totalMs));
      const overhead = median(overheads);
      rows.push({
        name: '1. deploy → serving (overhead)',
        measured: `${s(deployMedian)} (+${s(overhead)})`,
        baseline: s(handMedian),
        ratio: (deployMedian / handMedian).toFixed(2),
        target: 'overhead ≤ 1.50 s',
        met: overhead <= 1500,
      });
      const skipMedian = median(skips);
      const startMedian = median(starts);
      // Request to the route switch, from the deployment's log: what the client would see without a
      // restart of the new replica in between.
      const routedMedian = median(skipPhases.map((p) => routedAfter(p)));
      rows.push({
        name: '2. skip_build redeploy → serving',
        measured: `${s(skipMedian)} (routed ${s(routedMedian)}; ${skipRestarts}/${ROUNDS} killed after)`,
        baseline: s(startMedian),
        ratio: (skipMedian / startMedian).toFixed(2),
        target: '≤ 2.00 s',
        met: skipMedian <= 2000,
      });
      const phaseTable = (label: string, list: Phases[]) => {
        const keys = Object.keys(list[0] ?? {}) as Array<keyof Phases>;
        console.log(
          `${label} (medians over ${list.length}): ` +
            keys.map((k) => `${k} ${ms(median(list.map((p) => p[k])))}`).join(', '),
        );
      };
      phaseTable('deploy steps', phases);
      phaseTable('skip_build steps', skipPhases);
      console.log(
        `by hand (medians): clone ${ms(median(hand.map((h) => h.cloneMs)))}, build ${ms(median(hand.map((h) => h.buildMs)))}, start ${ms(median(hand.map((h) => h.startMs)))}`,
      );
    }
    // 3. Edge against direct, and against the floor of any proxy on Node's http module.
    const replica = (await instances(berth, appId)).find((i) => i.state === 'running');
    if (!replica?.port) throw new Error('no running replica');
    const bare = await startBareProxy(replica.port);
    const variants: Record<Variant, LoadRequest> = {
      direct: { url: `http://127.0.0.1:${replica.port}/`, connections: CONNECTIONS, seconds: SECONDS },
      edge: {
        url: `http://127.0.0.1:${berth.edgePort}/`,
        host: HOST,
        connections: CONNECTIONS,
        seconds: SECONDS,
      },
      bare: { url: `http://127.0.0.1:${bare.port}/`, host: HOST, connections: CONNECTIONS, seconds: SECONDS },
    };
    const edge = variants.edge;
    /** CPU time (user + system) of the process that serves the variant, in µs. */
    if (runs(3)) {
      const cpuOf = async (variant: Variant): Promise<number | undefined> => {
        if (variant === 'edge') {
          if (berth.ctx.config.runtime.edgeProxy === 'haproxy') return haproxyCpu(berth.ctx.config.dataDir);
          const usage = process.cpuUsage();
          return usage.user + usage.system;
        }
        return variant === 'bare' ? bare.cpu() : undefined;
      };
      const results: Record<Variant, LoadResult[]> = { direct: [], edge: [], bare: [] };
      const cpuPerRequest: Record<Variant, number[]> = { direct: [], edge: [], bare: [] };
      try {
        for (const variant of VARIANTS) await load({ ...variants[variant], seconds: 1 });
        for (let round = 1; round <= ROUNDS; round += 1) {
          // Each round in another order, so that no variant always follows the same one.
          const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
          for (const variant of order) {
            const before = await cpuOf(variant);
            const result = await load(variants[variant]);
            const after = await cpuOf(variant);
            if (result.non2xx + result.errors > 0)
              throw new Error(`${variant}: ${result.non2xx} non-2xx, ${result.errors} errors`);
            results[variant].push(result);
            if (before !== undefined && after !== undefined)
              cpuPerRequest[variant].push((after - before) / result.requests);
          }
          const line = VARIANTS.map((v) => {
            const r = results[v][results[v].length - 1]!;
            const cpu = cpuPerRequest[v][cpuPerRequest[v].length - 1];
            return `${v} ${r.perSecond.toFixed(0)} req/s p50 ${r.p50.toFixed(3)} ms p99 ${r.p99.toFixed(2)} ms${cpu === undefined ? '' : ` ${cpu.toFixed(0)} µs CPU/req`}`;
          });
          console.log(`  round ${round}: ${line.join('; ')}`);
        }
      } finally {
        await bare.stop();
      }
      const perRound = (f: (r: LoadResult) => number, v: Variant, w: Variant) =>
        results[v].map((r, i) => f(r) / f(results[w][i]!));
      const addedPerRound = (v: Variant) => results[v].map((r, i) => r.p50 - results.direct[i]!.p50);
      const rate = (v: Variant) => median(results[v].map((r) => r.perSecond));
      const p50 = (v: Variant) => median(results[v].map((r) => r.p50));
      const ratio = median(perRound((r) => r.perSecond, 'edge', 'direct'));
      const added = median(addedPerRound('edge'));
      console.log(
        `edge (medians): ${rate('edge').toFixed(0)} req/s, ${median(cpuPerRequest.edge).toFixed(0)} µs CPU/req; ` +
          `bare Node proxy ${rate('bare').toFixed(0)} req/s (${median(perRound((r) => r.perSecond, 'bare', 'direct')).toFixed(2)} of direct, ` +
          `p50 +${median(addedPerRound('bare')).toFixed(3)} ms, ${median(cpuPerRequest.bare).toFixed(0)} µs CPU/req); ` +
          `edge ÷ bare proxy ${median(perRound((r) => r.perSecond, 'edge', 'bare')).toFixed(2)}`,
      );
      rows.push({
        name: `3a. edge throughput (${CONNECTIONS} conns)`,
        measured: `${rate('edge').toFixed(0)} req/s`,
        baseline: `${rate('direct').toFixed(0)} req/s`,
        ratio: ratio.toFixed(2),
        target: 'ratio ≥ 0.50',
        met: ratio >= 0.5,
      });
      rows.push({
        name: '3b. edge p50 latency (added)',
        measured: `${p50('edge').toFixed(3)} ms (+${added.toFixed(3)})`,
        baseline: `${p50('direct').toFixed(3)} ms`,
        ratio: (p50('edge') / p50('direct')).toFixed(2),
        target: 'added ≤ 1 ms',
        met: added <= 1,
      });
      rows.push({
        name: '3c. bare Node proxy (floor, info)',
        measured: `${rate('bare').toFixed(0)} req/s, p50 ${p50('bare').toFixed(3)} ms`,
        baseline: `${rate('direct').toFixed(0)} req/s`,
        ratio: median(perRound((r) => r.perSecond, 'bare', 'direct')).toFixed(2),
        target: '–',
        met: undefined,
      });

      // Without queueing: one connection, where the added latency is the hop itself.
      const single = { direct: [] as LoadResult[], edge: [] as LoadResult[] };
      for (let round = 1; round <= ROUNDS; round += 1) {
        for (const variant of round % 2 === 1
          ? (['direct', 'edge'] as const)
          : (['edge', 'direct'] as const)) {
          single[variant].push(await load({ ...variants[variant], connections: 1, seconds: 2 }));
        }
      }
      const singleAdded = median(single.edge.map((r, i) => r.p50 - single.direct[i]!.p50));
      const singleP50 = (v: 'direct' | 'edge') => median(single[v].map((r) => r.p50));
      console.log(
        `one connection (medians): direct p50 ${singleP50('direct').toFixed(3)} ms, edge p50 ${singleP50('edge').toFixed(3)} ms (+${singleAdded.toFixed(3)}); ` +
          `${median(single.direct.map((r) => r.perSecond)).toFixed(0)} vs ${median(single.edge.map((r) => r.perSecond)).toFixed(0)} req/s`,
      );
      rows.push({
        name: '3d. edge p50 added, 1 conn (info)',
        measured: `${singleP50('edge').toFixed(3)} ms (+${singleAdded.toFixed(3)})`,
        baseline: `${singleP50('direct').toFixed(3)} ms`,
        ratio: (singleP50('edge') / singleP50('direct')).toFixed(2),
        target: '–',
        met: undefined,
      });
    }
    if (runs(4)) {
      // 4. Failed requests during rolling deploys under load, against the same load without.
      // Berth's event loop is the edge's: what blocks it (synchronous SQLite commits, execFileSync,
      // /proc scans) delays every proxied request. Its delay is sampled during each load.
      const loopDelay = () => {
        const histogram = monitorEventLoopDelay({ resolution: 1 });
        histogram.enable();
        return () => {
          histogram.disable();
          return `event loop delay p99 ${(histogram.percentile(99) / 1e6).toFixed(1)} ms, max ${(histogram.max / 1e6).toFixed(1)} ms`;
        };
      };
      const steadyDelay = loopDelay();
      const steady = await load({ ...edge, seconds: 6 });
      const steadyDelayText = steadyDelay();
      const underLoad = async (deploys: () => Promise<string[]>) => {
        const delay = loopDelay();
        const running = startLoad({ ...edge, seconds: 0 });
        const t0 = performance.now();
        await sleep(1000);
        const seen = await deploys();
        // The old replica drains and stops under the same load.
        await sleep(1000);
        running.stop();
        const result = await running.result;
        return { result, seen, seconds: (performance.now() - t0) / 1000, delay: delay() };
      };
      const describe = (r: LoadResult) =>
        `${r.requests} requests: ${r.non2xx} non-2xx ${JSON.stringify(r.statuses)}, ${r.errors} errors ` +
        `(${r.timeouts} timeouts, ${r.resets} resets); p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms, max ${r.max.toFixed(1)} ms`;
      const rolling = await underLoad(async () => {
        const seen: string[] = [];
        for (let i = 1; i <= ROLLING_DEPLOYS; i += 1) {
          const version = `roll${i}`;
          await commit(repository, nodeAppFiles(version));
          seen.push((await deployAndSee(berth, appId, {}, (a) => a.version === version)).answer.version);
        }
        return seen;
      });
      const failures = rolling.result.non2xx + rolling.result.errors;
      const steadyFailures = steady.non2xx + steady.errors;
      console.log(
        `rolling, ${ROLLING_DEPLOYS} deploys (${rolling.seen.join(', ')}) in ${rolling.seconds.toFixed(1)} s: ${describe(rolling.result)}`,
      );
      console.log(`  Berth during them: ${rolling.delay}`);
      console.log(`steady, no deploy, 6 s: ${describe(steady)}; ${steadyDelayText}`);
      rows.push({
        name: `4. failed requests, ${ROLLING_DEPLOYS} rolling deploys`,
        measured: `${failures} of ${rolling.result.requests}`,
        baseline: `${steadyFailures} of ${steady.requests} (no deploy)`,
        ratio: '–',
        target: '0',
        met: failures === 0,
      });
      // The same for one skip_build redeploy (the live release again).
      const skipLoad = await underLoad(async () => {
        const oldPort = (JSON.parse((await edgeGet(berth)).body) as AppAnswer).port;
        const seen = await deployAndSee(berth, appId, { skip_build: true }, (a) => a.port !== oldPort);
        return [`port ${oldPort} → ${seen.answer.port}`];
      });
      const skipFailures = skipLoad.result.non2xx + skipLoad.result.errors;
      console.log(
        `skip_build redeploy under load (${skipLoad.seen.join('')}): ${describe(skipLoad.result)}; Berth: ${skipLoad.delay}`,
      );
      rows.push({
        name: '4b. failed requests, 1 skip_build redeploy',
        measured: `${skipFailures} of ${skipLoad.result.requests}`,
        baseline: `${steadyFailures} of ${steady.requests} (no deploy)`,
        ratio: '–',
        target: '0',
        met: skipFailures === 0,
      });
    }
    if (runs(5)) {
      // 5. A hung replica found by its health checks and replaced.
      const bound = 3 * HEALTH.intervalSeconds * 1000 + 1000;
      const hangs: number[] = [];
      const detections: number[] = [];
      const unrouted: number[] = [];
      for (let round = 1; round <= ROUNDS; round += 1) {
        const before = (await instances(berth, appId)).find((i) => i.state === 'running');
        if (!before?.port) throw new Error('no running replica');
        const oldPort = String(before.port);
        const hang = await edgeGet(berth, '/hang');
        const hungAt = performance.now();
        const hungWall = Date.now();
        if (hang.body !== 'hanging') throw new Error(`/hang answered ${hang.status} ${hang.body}`);
        let firstNot200: number | undefined;
        const seen = await until(
          async () => {
            const answer = await edgeGet(berth);
            if (answer.status !== 200) firstNot200 ??= performance.now();
            return answer;
          },
          (a) => a.port !== oldPort,
          30_000,
        );
        const after = (await instances(berth, appId)).find((i) => i.state === 'running');
        if (!after || after.restarts <= before.restarts)
          throw new Error(`the replica was not restarted: ${JSON.stringify(after)}`);
        const restartedWall = new Date(after.started_at ?? '').getTime();
        hangs.push(seen.at - hungAt);
        detections.push(restartedWall - hungWall);
        unrouted.push((firstNot200 ?? seen.at) - hungAt);
        console.log(
          `  round ${round}: ${ms(seen.at - hungAt)} to a 200 from the new replica (unrouted after ${ms((firstNot200 ?? seen.at) - hungAt)},` +
            ` restart launched after ${ms(restartedWall - hungWall)}; ${after.last_restart_reason})`,
        );
        // The next hang comes at a random point of the new replica's check interval, as a real one
        // would: detection takes from (threshold − 1) intervals + the timeout to one interval more.
        await sleep(1000 + Math.random() * HEALTH.intervalSeconds * 1000);
      }
      const hangMedian = median(hangs);
      rows.push({
        name: '5. hung replica → new replica serving',
        measured: `${s(hangMedian)} (max ${s(Math.max(...hangs))})`,
        baseline: `bound ${s(bound)}`,
        ratio: (hangMedian / bound).toFixed(2),
        target: `≤ 3 intervals + 1 s = ${s(bound)}`,
        met: hangMedian <= bound,
      });
      console.log(
        `hang (medians): unrouted ${ms(median(unrouted))}, restart launched ${ms(median(detections))} (interval ${HEALTH.intervalSeconds} s, timeout ${HEALTH.timeoutSeconds} s, threshold ${HEALTH.failureThreshold})`,
      );
    }
  } finally {
    await berth.close();
    fs.rmSync(work, { recursive: true, force: true });
  }

  console.log('');
  const header = ['measurement', 'measured (median)', 'baseline', 'ratio', 'target', 'met'];
  const table = rows.map((r) => [
    r.name,
    r.measured,
    r.baseline,
    r.ratio,
    r.target,
    r.met === undefined ? '–' : r.met ? 'met' : 'NOT met',
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ');
  console.log(line(header));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const row of table) console.log(line(row));
  console.log(`load average at end: ${loadAverage()}`);
}

await main();
