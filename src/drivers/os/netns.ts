// A network namespace per application (issue 25; docs/runtime.md "Networks", docs/decisions/0008):
// every sandbox of the application joins it, the edge and the health checks reach its replicas in it,
// its services are reached on the host end of its veth, and nothing else of the host or of other
// applications is. Root only: without root every sandbox stays on the host's network.
//
//   host                                         namespace berth-<tag>-<id> (/run/netns/…)
//   ─────────────────────────────────────        ─────────────────────────────────────────
//   bv<hash> 10.200.x.1/30 ◄──── veth ────►      eth0 10.200.x.2/30, default via 10.200.x.1
//     alias berth-<tag>-<id>                       lo; what arrives on eth0 is DNATed to 127.0.0.1
//   table inet berth_<tag> (nftables):               (replicas may listen on loopback or 0.0.0.0)
//     to 10.200.x.1:<its services' ports> → DNAT (and SNAT) 127.0.0.1 (route_localnet on its veth)
//     to the public ports (edge, API) of a host address → accepted
//     anything else to the host → rejected; to another application's veth → rejected
//     replies accepted; to the outside → masqueraded (not to 169.254/16: cloud metadata)
//
// Everything here outlives Berth (a named namespace persists without a process): ensureAppNetwork
// finds a healthy network again and keeps it untouched; only a broken one is made anew.
// Addresses: a /30 per application from 10.200.0.0/14, chosen under an flock on a file in /run so
// that concurrent Berth processes (a server beside the test suite) never pick the same one; the
// address is read back from the veth when the network is found again.
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import { isRoot } from './users.js';

export const NETNS_DIR = '/run/netns';
const LOCK_FILE = '/run/berth-network.lock';
const IP = '/usr/sbin/ip';
const NFT = '/usr/sbin/nft';
export const NSENTER = '/usr/bin/nsenter';
/** The pool of application networks: 10.200.0.0/14 in /30s (65,536 applications per host). */
const POOL_BASE = (10 * 256 + 200) * 65_536;
const POOL_SIZE = 1 << 18;
const POOL = '10.200.0.0/14';
const SUBNET = 4;
const TAG = /^[a-z0-9]{1,12}$/;
const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

export interface AppNetwork {
  /** `berth-<tag>-<id>`: the namespace's name and the veth's alias. */
  name: string;
  /** /run/netns/<name>, what a sandbox joins (nsenter --net=). */
  namespacePath: string;
  /** The host end of the veth (`bv` + 12 hex digits). */
  veth: string;
  /** The host end's address: the application reaches its services there. */
  hostAddress: string;
  /** The application's address inside: the edge and the health checks reach its replicas there. */
  address: string;
}

/** Whether this Berth gives applications networks of their own: root, with ip, nft and nsenter. */
export function networksAvailable(): boolean {
  return isRoot() && [IP, NFT, NSENTER].every((file) => fs.existsSync(file));
}

export function appNetworkName(tag: string, appId: number): string {
  if (!Number.isSafeInteger(appId) || appId < 1) throw new Error(`invalid application id ${appId}`);
  if (!TAG.test(tag)) throw new Error(`invalid network tag '${tag}'`);
  return `berth-${tag}-${appId}`;
}

/** Interface names have at most 15 characters: a hash of the name, the full name in the alias. */
export function vethName(tag: string, appId: number): string {
  return `bv${createHash('sha256').update(appNetworkName(tag, appId)).digest('hex').slice(0, 12)}`;
}

const tableName = (tag: string): string => `berth_${tag}`;

/** The tags whose networks this process made (the test suite removes them after each file). */
const tagsHere = new Set<string>();
export const networkTagsUsedHere = (): string[] => [...tagsHere];

/** The table of each tag, made (or found) once per process; its base rules are rewritten then. */
const tables = new Map<string, Promise<void>>();

/**
 * The table of `tag` with its base chains (idempotent: chains are flushed and filled in one
 * transaction, so a rewrite never opens a gap); `publicPorts` are the host ports every application
 * may reach on a host address (the edge's, Berth's API).
 */
export function ensureNetworkTable(tag: string, publicPorts: readonly number[]): Promise<void> {
  const ports = publicPorts.filter((port) => Number.isInteger(port) && port > 0 && port < 65_536);
  const t = `inet ${tableName(tag)}`;
  const script = [
    `add table ${t}`,
    `add set ${t} veths { type ifname; }`,
    `add set ${t} public { type inet_service; }`,
    `add map ${t} app_dnat { type ifname : verdict; }`,
    `add chain ${t} prerouting { type nat hook prerouting priority dstnat; policy accept; }`,
    `add chain ${t} postrouting { type nat hook postrouting priority srcnat; policy accept; }`,
    `add chain ${t} input { type filter hook input priority filter; policy accept; }`,
    `add chain ${t} nat_input { type nat hook input priority 100; policy accept; }`,
    `add chain ${t} nat_output { type nat hook output priority -100; policy accept; }`,
    `add chain ${t} forward { type filter hook forward priority filter; policy accept; }`,
    `add chain ${t} from_app`,
    ...['prerouting', 'postrouting', 'input', 'nat_input', 'nat_output', 'forward', 'from_app'].map(
      (c) => `flush chain ${t} ${c}`,
    ),
    // Each application's own chain: DNAT of its services' ports (admitServices).
    `add rule ${t} prerouting iifname vmap @app_dnat`,
    `add rule ${t} postrouting iifname @veths oifname != @veths masquerade`,
    `add rule ${t} input iifname @veths jump from_app`,
    `add rule ${t} from_app ct state established,related accept`,
    // Only the application's own chain DNATs to loopback, and only to its services' ports.
    `add rule ${t} from_app ct status dnat ip daddr 127.0.0.1 accept`,
    `add rule ${t} from_app fib daddr type local tcp dport @public accept`,
    // A TCP reset (ICMP errors are rate-limited: a refused connection must not hang instead).
    `add rule ${t} from_app meta l4proto tcp reject with tcp reset`,
    `add rule ${t} from_app reject with icmpx type admin-prohibited`,
    // A service sees its application's connections come from 127.0.0.1, as before the namespaces:
    // its own access rules (pg_hba.conf, MariaDB's accounts) stay as they are.
    `add rule ${t} nat_input ct status dnat ip daddr 127.0.0.1 ip saddr ${POOL} snat ip to 127.0.0.1`,
    // The host reaches them at the same address (the injected URL works from the host too), seen
    // as 127.0.0.1 as well (a local connection's NAT is settled at postrouting, not at input).
    `add rule ${t} postrouting oifname "lo" ct status dnat ip daddr 127.0.0.1 ip saddr ${POOL} snat ip to 127.0.0.1`,
    `add rule ${t} nat_output ip daddr ${POOL} fib daddr type local meta l4proto tcp dnat ip to 127.0.0.1`,
    // Into an application: only replies (the host's own connections, the edge's, leave by output).
    `add rule ${t} forward oifname @veths ct state established,related accept`,
    `add rule ${t} forward oifname @veths meta l4proto tcp reject with tcp reset`,
    `add rule ${t} forward oifname @veths reject with icmpx type admin-prohibited`,
    `add rule ${t} forward iifname @veths meta nfproto ipv6 reject with icmpx type admin-prohibited`,
    `add rule ${t} forward iifname @veths ip daddr 169.254.0.0/16 reject with icmpx type admin-prohibited`,
    `flush set ${t} public`,
    ...(ports.length > 0 ? [`add element ${t} public { ${ports.join(', ')} }`] : []),
  ];
  const key = `${tag}:${ports.join(',')}`;
  let made = tables.get(key);
  if (!made) {
    made = (async () => {
      tagsHere.add(tag);
      // Forwarding is host-wide and off by default on Debian: the namespaces' egress needs it.
      if (fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim() !== '1')
        fs.writeFileSync('/proc/sys/net/ipv4/ip_forward', '1');
      await nft(script.join('\n'));
    })();
    made.catch(() => tables.delete(key));
    tables.set(key, made);
  }
  return made;
}

/**
 * The network of application `appId`, made when missing or broken; a healthy one is kept untouched
 * (its address read back from its veth). Call ensureNetworkTable first.
 */
export async function ensureAppNetwork(tag: string, appId: number): Promise<AppNetwork> {
  const name = appNetworkName(tag, appId);
  const veth = vethName(tag, appId);
  tagsHere.add(tag);
  let network = await findAppNetwork(tag, appId);
  if (!network) {
    await removeLinks(name, veth);
    network = await withLock(async () => {
      const subnet = freeSubnet();
      return createNetwork(name, veth, subnet);
    });
  }
  const t = `inet ${tableName(tag)}`;
  // Idempotent (`add` of what exists changes nothing): the chain keeps the services admitted before.
  await nft(
    [
      `add chain ${t} app_${appId}`,
      `add element ${t} veths { "${veth}" }`,
      `add element ${t} app_dnat { "${veth}" : jump app_${appId} }`,
    ].join('\n'),
  );
  return network;
}

/**
 * Lets the application's sandboxes reach these host ports (its services, listening on 127.0.0.1) at
 * `network.hostAddress`, and no others: its chain is rewritten in one transaction.
 */
export async function admitServices(
  tag: string,
  appId: number,
  network: AppNetwork,
  ports: readonly number[],
): Promise<void> {
  const t = `inet ${tableName(tag)}`;
  const valid = [...new Set(ports)].filter((port) => Number.isInteger(port) && port > 0 && port < 65_536);
  if (!IPV4.test(network.hostAddress)) throw new Error(`invalid address '${network.hostAddress}'`);
  await nft(
    [
      `add chain ${t} app_${appId}`,
      `flush chain ${t} app_${appId}`,
      ...(valid.length > 0
        ? [
            `add rule ${t} app_${appId} ip daddr ${network.hostAddress} tcp dport { ${valid.join(', ')} } dnat ip to 127.0.0.1`,
          ]
        : []),
    ].join('\n'),
  );
}

/** Removes the application's namespace, veth (and so its addresses and routes) and rules; idempotent. */
export async function removeAppNetwork(tag: string, appId: number): Promise<void> {
  const name = appNetworkName(tag, appId);
  const veth = vethName(tag, appId);
  await removeLinks(name, veth);
  // No table, nothing of it to remove: the script below would make the table (and leave it behind).
  if (!(await tableExists(tag))) return;
  const t = `inet ${tableName(tag)}`;
  // `add` before `delete`: deleting what does not exist fails the transaction, adding it first never.
  await nft(
    [
      `add table ${t}`,
      `add set ${t} veths { type ifname; }`,
      `add map ${t} app_dnat { type ifname : verdict; }`,
      `add chain ${t} app_${appId}`,
      `add element ${t} veths { "${veth}" }`,
      `add element ${t} app_dnat { "${veth}" : jump app_${appId} }`,
      `delete element ${t} app_dnat { "${veth}" }`,
      `delete element ${t} veths { "${veth}" }`,
      `flush chain ${t} app_${appId}`,
      `delete chain ${t} app_${appId}`,
    ].join('\n'),
  );
}

/** The applications of `tag` that have something of a network: a namespace, a veth or a chain. */
export async function listAppNetworks(tag: string): Promise<number[]> {
  if (!TAG.test(tag)) throw new Error(`invalid network tag '${tag}'`);
  const ids = new Set<number>();
  const prefix = `berth-${tag}-`;
  const idOf = (name: string | undefined) =>
    name?.startsWith(prefix) && /^[1-9]\d{0,15}$/.test(name.slice(prefix.length))
      ? Number(name.slice(prefix.length))
      : undefined;
  for (const entry of fs.existsSync(NETNS_DIR) ? fs.readdirSync(NETNS_DIR) : []) {
    const id = idOf(entry);
    if (id !== undefined) ids.add(id);
  }
  const links = JSON.parse((await run(IP, ['-j', 'link', 'show', 'type', 'veth'])) || '[]') as Array<{
    ifalias?: string;
  }>;
  for (const link of links) {
    const id = idOf(link.ifalias);
    if (id !== undefined) ids.add(id);
  }
  const chains = await run(NFT, ['list', 'chains', 'inet', tableName(tag)]).catch(() => '');
  for (const match of chains.matchAll(/chain app_(\d+) /g)) ids.add(Number(match[1]));
  return [...ids].sort((a, b) => a - b);
}

/** Removes the networks of `tag` whose application is not in `keep` (a crash, a kill -9); their ids. */
export async function pruneAppNetworks(tag: string, keep: ReadonlySet<number>): Promise<number[]> {
  const gone = (await listAppNetworks(tag)).filter((id) => !keep.has(id));
  for (const id of gone) await removeAppNetwork(tag, id);
  return gone;
}

/** Every network of `tag` and its table (tests: a harness's Berth is gone for good). */
export async function removeTagNetworks(tag: string): Promise<void> {
  for (const id of await listAppNetworks(tag)) await removeAppNetwork(tag, id);
  await nft(`add table inet ${tableName(tag)}\ndelete table inet ${tableName(tag)}`);
  for (const key of [...tables.keys()]) if (key.startsWith(`${tag}:`)) tables.delete(key);
  tagsHere.delete(tag);
}

/** The network as found: its namespace, its veth up with a /30 of the pool, eth0 inside with the peer address. */
async function findAppNetwork(tag: string, appId: number): Promise<AppNetwork | undefined> {
  const name = appNetworkName(tag, appId);
  const veth = vethName(tag, appId);
  const namespacePath = `${NETNS_DIR}/${name}`;
  if (!fs.existsSync(namespacePath)) return undefined;
  const [outside, inside] = await Promise.all([
    addressesOf([IP, '-j', '-4', 'addr', 'show', 'dev', veth]),
    addressesOf([IP, '-n', name, '-j', '-4', 'addr', 'show', 'dev', 'eth0']),
  ]);
  const host = outside?.addresses.find((a) => a.prefixlen === 30 && inPool(a.local));
  if (!outside?.up || !host || !inside?.up) return undefined;
  const address = ipString(ipNumber(host.local) + 1);
  if (!inside.addresses.some((a) => a.local === address)) return undefined;
  return { name, namespacePath, veth, hostAddress: host.local, address };
}

async function addressesOf(
  command: string[],
): Promise<{ up: boolean; addresses: Array<{ local: string; prefixlen: number }> } | undefined> {
  const text = await run(command[0]!, command.slice(1)).catch(() => undefined);
  if (!text) return undefined;
  const [link] = JSON.parse(text) as Array<{
    flags?: string[];
    addr_info?: Array<{ local: string; prefixlen: number }>;
  }>;
  if (!link) return undefined;
  return { up: (link.flags ?? []).includes('UP'), addresses: link.addr_info ?? [] };
}

/** The first /30 of the pool no address on the host is in (called under the lock). */
function freeSubnet(): number {
  const used = new Set<number>();
  for (const addresses of Object.values(os.networkInterfaces())) {
    for (const info of addresses ?? []) {
      if (info.family === 'IPv4' && inPool(info.address))
        used.add(Math.floor((ipNumber(info.address) - POOL_BASE) / SUBNET));
    }
  }
  for (let index = 0; index < POOL_SIZE / SUBNET; index++) if (!used.has(index)) return index;
  throw new Error(`no free application network left in ${POOL}`);
}

async function createNetwork(name: string, veth: string, index: number): Promise<AppNetwork> {
  const base = POOL_BASE + index * SUBNET;
  const hostAddress = ipString(base + 1);
  const address = ipString(base + 2);
  const namespacePath = `${NETNS_DIR}/${name}`;
  // As few processes as possible: each costs milliseconds, and a deployment waits for its network.
  await run(
    IP,
    ['-batch', '-'],
    [
      `netns add ${name}`,
      `link add ${veth} type veth peer name eth0 netns ${name}`,
      `link set ${veth} alias ${name}`,
      `addr add ${hostAddress}/30 dev ${veth}`,
      `link set ${veth} up`,
    ].join('\n'),
  );
  // No IPv6 on the pair (no link-local path to the host's listeners on ::); loopback is reached
  // only through the DNAT of the application's own chain.
  fs.writeFileSync(`/proc/sys/net/ipv6/conf/${veth}/disable_ipv6`, '1');
  fs.writeFileSync(`/proc/sys/net/ipv4/conf/${veth}/route_localnet`, '1');
  // Inside: replicas that listen on 127.0.0.1 (as they did on the host) are reached on eth0 too.
  const inside = [
    'add table ip berth',
    'add chain ip berth prerouting { type nat hook prerouting priority dstnat; policy accept; }',
    `add rule ip berth prerouting iifname "eth0" ip daddr ${address} meta l4proto tcp dnat to 127.0.0.1`,
  ].join('; ');
  await run(
    NSENTER,
    [
      `--net=${namespacePath}`,
      '--',
      '/bin/sh',
      '-c',
      [
        'set -e',
        'echo 1 > /proc/sys/net/ipv4/conf/eth0/route_localnet',
        'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6',
        `${IP} -batch -`,
        `exec ${NFT} "$1"`,
      ].join('\n'),
      'berth-network',
      inside,
    ],
    [
      'link set lo up',
      `addr add ${address}/30 dev eth0`,
      'link set eth0 up',
      `route add default via ${hostAddress}`,
    ].join('\n'),
  );
  return { name, namespacePath, veth, hostAddress, address };
}

/** Deletes the namespace and the veth when they exist (deleting the namespace ends the pair too). */
async function removeLinks(name: string, veth: string): Promise<void> {
  if (fs.existsSync(`${NETNS_DIR}/${name}`)) await run(IP, ['netns', 'delete', name]).catch(() => undefined);
  // A namespace a process still holds keeps the pair until it exits: the host end goes now.
  if (fs.existsSync(`/sys/class/net/${veth}`)) await run(IP, ['link', 'delete', veth]).catch(() => undefined);
}

async function tableExists(tag: string): Promise<boolean> {
  return run(NFT, ['-t', 'list', 'table', 'inet', tableName(tag)]).then(
    () => true,
    () => false,
  );
}

/** Runs `work` holding the host-wide lock (a child `flock` holds it until its stdin closes). */
async function withLock<T>(work: () => Promise<T>): Promise<T> {
  const child = spawn('flock', ['-x', LOCK_FILE, '-c', 'echo locked; read -r _'], {
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (code) => reject(new Error(`flock ${LOCK_FILE} exited with ${code}`)));
      child.stdout.once('data', () => resolve());
    });
    return await work();
  } finally {
    child.stdin.end();
    child.stdout.resume();
  }
}

function nft(script: string): Promise<string> {
  return run(NFT, ['-f', '-'], script);
}

function run(file: string, args: string[], input?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(file, args, { encoding: 'utf8', timeout: 30_000 }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${file.split('/').pop()} ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
    // A command that reads no input may exit before the write: its exit says how it went.
    child.stdin?.on('error', () => undefined);
    if (input === undefined) child.stdin?.end();
    else child.stdin?.end(input);
  });
}

function ipNumber(address: string): number {
  const match = IPV4.exec(address);
  if (!match) return -1;
  return match.slice(1).reduce((sum, part) => sum * 256 + Number(part), 0);
}

function ipString(value: number): string {
  return [24, 16, 8, 0].map((shift) => Math.floor(value / 2 ** shift) % 256).join('.');
}

function inPool(address: string): boolean {
  const value = ipNumber(address);
  return value >= POOL_BASE && value < POOL_BASE + POOL_SIZE;
}
