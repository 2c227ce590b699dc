// Network benchmark (issue 25, item 4): applications in network namespaces of their own against the
// host's network, in the same process and the same rounds (the machine is shared and noisy):
//   a. bench 3 of index.ts through the namespace: the edge → the replica at its namespace address,
//      against the replica directly on the host's network (today's), 10 keep-alive connections,
//      alternated rounds; the edge on the host's network and the replica directly at its namespace
//      address in the same rounds: throughput ratio and added median latency;
//   b. what a deployment pays for its network: making one (namespace, veth, addresses, rules) and
//      removing it, per round, and a new commit deployed → serving on each Berth, alternated.
// Run (root): npx tsx bench/runtime/network.ts [--rounds 5] [--seconds 3] [--connections 10]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import {
  ensureAppNetwork,
  ensureNetworkTable,
  networksAvailable,
  removeAppNetwork,
  removeTagNetworks,
  vethName,
} from '../../src/drivers/os/netns.js';
import { runtimeTag } from '../../src/drivers/runtime/local/index.js';
import { nodeAppFiles } from '../../test/runtime/node-app.js';
import {
  api,
  applyYaml,
  commit,
  get,
  instances,
  load,
  median,
  nodeDocument,
  startBerth,
  until,
  waitForDeployment,
  type Berth,
} from './harness.js';
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
const loadAverage = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

type Variant = 'direct' | 'edge' | 'nsDirect' | 'nsEdge';
const VARIANTS: readonly Variant[] = ['direct', 'edge', 'nsDirect', 'nsEdge'];

async function deployShop(berth: Berth): Promise<{ appId: number; applyMs: number }> {
  const repository = berth.repository('shop');
  repository.commit(nodeAppFiles('v0'));
  const t0 = performance.now();
  const applied = await applyYaml(berth, nodeDocument(berth.team, 'shop', berth.git.url('shop')));
  await until(
    () => get(berth.edgePort, '/', { host: HOST }),
    (a) => a.version === 'v0',
  );
  const applyMs = performance.now() - t0;
  await waitForDeployment(berth, applied.application_id, applied.deployment_id ?? 0);
  return { appId: applied.application_id, applyMs };
}

/** A new commit deployed → its first answer through the edge. */
async function deployVersion(berth: Berth, appId: number, version: string): Promise<number> {
  await commit(berth.repository('shop'), nodeAppFiles(version));
  const t0 = performance.now();
  await api(berth, 'POST', `/api/v1/applications/${appId}/deploy`, {}, 202);
  await until(
    () => get(berth.edgePort, '/', { host: HOST }),
    (a) => a.version === version,
  );
  return performance.now() - t0;
}

async function main(): Promise<void> {
  if (!networksAvailable()) throw new Error('run as root, with nftables and iproute2 installed');
  console.log(`network benchmark: ${ROUNDS} rounds, load ${CONNECTIONS} connections × ${SECONDS} s`);
  console.log(`load average at start: ${loadAverage()} (${os.cpus().length} CPUs)`);
  const host = await startBerth({ BERTH_APP_NETWORK: 'host' });
  const spaced = await startBerth({ BERTH_APP_NETWORK: 'namespace' });
  try {
    const hostShop = await deployShop(host);
    const spacedShop = await deployShop(spaced);
    console.log(
      `apply → serving v0: host network ${hostShop.applyMs.toFixed(0)} ms, namespace ${spacedShop.applyMs.toFixed(0)} ms`,
    );
    const [hostReplica] = await instances(host, hostShop.appId);
    const [spacedReplica] = await instances(spaced, spacedShop.appId);
    const address = addressOf(spaced, spacedShop.appId);
    const request = (url: string, hostname?: string): LoadRequest => ({
      url,
      ...(hostname ? { host: hostname } : {}),
      connections: CONNECTIONS,
      seconds: SECONDS,
    });
    const variants: Record<Variant, LoadRequest> = {
      direct: request(`http://127.0.0.1:${hostReplica!.port}/`),
      edge: request(`http://127.0.0.1:${host.edgePort}/`, HOST),
      nsDirect: request(`http://${address}:${spacedReplica!.port}/`),
      nsEdge: request(`http://127.0.0.1:${spaced.edgePort}/`, HOST),
    };
    const results: Record<Variant, LoadResult[]> = { direct: [], edge: [], nsDirect: [], nsEdge: [] };
    for (const variant of VARIANTS) await load({ ...variants[variant], seconds: 1 });
    for (let round = 1; round <= ROUNDS; round += 1) {
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]!);
      for (const variant of order) {
        const result = await load(variants[variant]);
        if (result.non2xx + result.errors > 0)
          throw new Error(`${variant}: ${result.non2xx} non-2xx, ${result.errors} errors`);
        results[variant].push(result);
      }
      console.log(
        `  round ${round}: ` +
          VARIANTS.map((v) => {
            const r = results[v][round - 1]!;
            return `${v} ${r.perSecond.toFixed(0)} req/s p50 ${r.p50.toFixed(3)} ms`;
          }).join('; '),
      );
    }
    const ratio = (v: Variant) =>
      median(results[v].map((r, i) => r.perSecond / results.direct[i]!.perSecond));
    const added = (v: Variant) => median(results[v].map((r, i) => r.p50 - results.direct[i]!.p50));
    const rate = (v: Variant) => median(results[v].map((r) => r.perSecond)).toFixed(0);
    const p50 = (v: Variant) => median(results[v].map((r) => r.p50)).toFixed(3);

    // b. The network's own cost, then deployments on each Berth alternated.
    const tag = runtimeTag(spaced.ctx.config.dataDir);
    const makes: number[] = [];
    const removes: number[] = [];
    await ensureNetworkTable(tag, []);
    for (let round = 1; round <= ROUNDS; round += 1) {
      const id = 900_000 + round;
      const t0 = performance.now();
      await ensureAppNetwork(tag, id);
      makes.push(performance.now() - t0);
      const t1 = performance.now();
      await removeAppNetwork(tag, id);
      removes.push(performance.now() - t1);
    }
    const deploys = { host: [] as number[], namespace: [] as number[] };
    for (let round = 1; round <= ROUNDS; round += 1) {
      const pair = [
        async () => deploys.host.push(await deployVersion(host, hostShop.appId, `r${round}`)),
        async () => deploys.namespace.push(await deployVersion(spaced, spacedShop.appId, `r${round}`)),
      ];
      for (const step of round % 2 === 1 ? pair : pair.reverse()) await step();
    }

    const rows = [
      [
        'a. edge through the namespace ÷ direct (host network)',
        `${rate('nsEdge')} / ${rate('direct')} req/s`,
        ratio('nsEdge').toFixed(2),
        '≥ 0.50',
        ratio('nsEdge') >= 0.5,
      ],
      [
        'a. edge through the namespace, p50 added',
        `${p50('nsEdge')} / ${p50('direct')} ms`,
        `+${added('nsEdge').toFixed(3)} ms`,
        '≤ +1 ms',
        added('nsEdge') <= 1,
      ],
      [
        'a. (today) edge on the host network ÷ direct',
        `${rate('edge')} / ${rate('direct')} req/s`,
        `${ratio('edge').toFixed(2)}, +${added('edge').toFixed(3)} ms`,
        'info',
        undefined,
      ],
      [
        'a. (info) replica at its namespace address ÷ direct',
        `${rate('nsDirect')} / ${rate('direct')} req/s`,
        `${ratio('nsDirect').toFixed(2)}, +${added('nsDirect').toFixed(3)} ms`,
        'info',
        undefined,
      ],
      [
        'b. a network made (namespace, veth, rules)',
        `${median(makes).toFixed(0)} ms (max ${Math.max(...makes).toFixed(0)})`,
        `removed ${median(removes).toFixed(0)} ms`,
        '≤ 100 ms',
        median(makes) <= 100,
      ],
      [
        'b. deploy → serving: namespace / host network',
        `${median(deploys.namespace).toFixed(0)} / ${median(deploys.host).toFixed(0)} ms`,
        `${(median(deploys.namespace) - median(deploys.host)).toFixed(0)} ms`,
        'info (network made once per application)',
        undefined,
      ],
    ] as const;
    console.log(`\nload average at the end: ${loadAverage()}`);
    console.log('| measurement | measured / baseline | result | target | met |');
    console.log('|---|---|---|---|---|');
    for (const [name, measured, result, target, met] of rows)
      console.log(
        `| ${name} | ${measured} | ${result} | ${target} | ${met === undefined ? '–' : met ? 'met' : 'not met'} |`,
      );
  } finally {
    const tag = runtimeTag(spaced.ctx.config.dataDir);
    await host.close();
    await spaced.close();
    await removeTagNetworks(tag);
  }
}

/** The application's address in its namespace: the next one after the host end of its veth. */
function addressOf(berth: Berth, appId: number): string {
  const veth = vethName(runtimeTag(berth.ctx.config.dataDir), appId);
  const [link] = JSON.parse(
    execFileSync('ip', ['-j', '-4', 'addr', 'show', 'dev', veth], { encoding: 'utf8' }),
  ) as Array<{ addr_info: Array<{ local: string }> }>;
  const parts = link!.addr_info[0]!.local.split('.').map(Number);
  return `${parts[0]}.${parts[1]}.${parts[2]}.${parts[3]! + 1}`;
}

await main();
