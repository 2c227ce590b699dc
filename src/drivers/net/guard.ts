// The private-address guard: Berth never fetches loopback, private, link-local (cloud metadata),
// multicast or otherwise reserved addresses on behalf of a tools request, unless the operator allows them.
// Callers resolve through `resolve()` and connect to the address it returns, so the address that was
// checked is the one connected to (no DNS rebinding between check and connect).
import dns from 'node:dns/promises';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export class BlockedAddressError extends Error {
  constructor(
    readonly target: string,
    readonly reason: string,
  ) {
    super(`${target} is not allowed: ${reason}`);
    this.name = 'BlockedAddressError';
  }
}

export interface ResolvedTarget {
  address: string;
  family: 4 | 6;
}

export interface AddressGuard {
  /** Resolves the URL's host and checks every address; throws BlockedAddressError. */
  resolve(url: URL): Promise<ResolvedTarget>;
}

interface AllowRule {
  range: [ipaddr.IPv4 | ipaddr.IPv6, number];
  port: number | undefined;
}

/** Allow-list entries: `10.1.2.3`, `10.0.0.0/8`, `127.0.0.1:8080`, `[::1]:8080`, `::1`, `fd00::/8`. */
export function parseAllowList(entries: readonly string[]): AllowRule[] {
  return entries.map((entry) => {
    let host = entry.trim();
    let port: number | undefined;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(host);
    const v4port = /^(\d+\.\d+\.\d+\.\d+(?:\/\d+)?):(\d+)$/.exec(host);
    if (bracketed?.[1]) {
      host = bracketed[1];
      port = bracketed[2] ? Number(bracketed[2]) : undefined;
    } else if (v4port?.[1] && v4port[2]) {
      host = v4port[1];
      port = Number(v4port[2]);
    }
    const range = host.includes('/')
      ? ipaddr.parseCIDR(host)
      : ((): [ipaddr.IPv4 | ipaddr.IPv6, number] => {
          const ip = ipaddr.parse(host);
          return [ip, ip.kind() === 'ipv4' ? 32 : 128];
        })();
    return { range, port };
  });
}

/**
 * The IPv4 addresses an IPv6 address carries to the wire: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
 * (`::a.b.c.d`, which some stacks still route as IPv4), NAT64 (`64:ff9b::/96`), 6to4 (`2002:AABB:CCDD::/48`)
 * and Teredo (`2001:0::/32`: the relay's server address and the client's, inverted). Empty for other
 * addresses. Each form is judged by what it embeds, or `[::127.0.0.1]` would reach loopback.
 */
export function embeddedIPv4(ip: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4[] {
  if (ip.kind() !== 'ipv6') return [];
  const w = (ip as ipaddr.IPv6).parts;
  const v4 = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);
  const zeros = (from: number, to: number) => w.slice(from, to).every((part) => part === 0);
  if (zeros(0, 5) && w[5] === 0xffff) return [v4(w[6]!, w[7]!)];
  // `::` and `::1` keep their own meaning (unspecified, loopback); every other `::/96` address is compatible.
  if (zeros(0, 6) && !(w[6] === 0 && (w[7] === 0 || w[7] === 1))) return [v4(w[6]!, w[7]!)];
  if (w[0] === 0x64 && w[1] === 0xff9b && zeros(2, 6)) return [v4(w[6]!, w[7]!)];
  if (w[0] === 0x2002) return [v4(w[1]!, w[2]!)];
  if (w[0] === 0x2001 && w[1] === 0) return [v4(w[2]!, w[3]!), v4(w[6]! ^ 0xffff, w[7]! ^ 0xffff)];
  return [];
}

function normalise(address: string): Array<ipaddr.IPv4 | ipaddr.IPv6> {
  const ip = ipaddr.parse(address);
  const embedded = embeddedIPv4(ip);
  return embedded.length > 0 ? embedded : [ip];
}

/** Why an address is not public, or undefined when it is an ordinary unicast address. */
export function nonPublicReason(address: string): string | undefined {
  for (const ip of normalise(address)) {
    const range = ip.range();
    if (range !== 'unicast') return `${ip.toString()} is a ${range} address`;
  }
  return undefined;
}

function defaultPort(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

export function createAddressGuard(options: {
  allow: readonly string[];
  lookup?: (host: string) => Promise<Array<{ address: string; family: number }>>;
}): AddressGuard {
  const rules = parseAllowList(options.allow);
  const lookup = options.lookup ?? ((host: string) => dns.lookup(host, { all: true, verbatim: true }));

  const allowed = (address: string, port: number): boolean => {
    // Every address the packet may reach must be listed.
    return normalise(address).every((ip) =>
      rules.some(
        (rule) =>
          rule.range[0].kind() === ip.kind() &&
          ip.match(rule.range) &&
          (rule.port === undefined || rule.port === port),
      ),
    );
  };

  return {
    async resolve(url) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:') {
        throw new BlockedAddressError(url.href.slice(0, 200), `the ${url.protocol} scheme is not allowed`);
      }
      const host = url.hostname.replace(/^\[|\]$/g, '');
      const port = defaultPort(url);
      let addresses: Array<{ address: string; family: number }>;
      if (net.isIP(host)) {
        addresses = [{ address: host, family: net.isIP(host) }];
      } else {
        try {
          addresses = await lookup(host);
        } catch {
          throw new BlockedAddressError(host, 'the host name does not resolve');
        }
      }
      if (addresses.length === 0) throw new BlockedAddressError(host, 'the host name does not resolve');
      // Every address must pass: a name that resolves to one public and one private address is refused,
      // since the connection could be made to either.
      for (const { address } of addresses) {
        const reason = nonPublicReason(address);
        if (reason !== undefined && !allowed(address, port)) throw new BlockedAddressError(host, reason);
      }
      const first = addresses[0] as { address: string; family: number };
      return { address: first.address, family: first.family === 6 ? 6 : 4 };
    },
  };
}
