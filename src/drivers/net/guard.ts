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

const v4 = (high: number, low: number): ipaddr.IPv4 =>
  new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff]);

/**
 * The IPv4 address an IPv6 address carries, judged as that address: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-compatible (::a.b.c.d, so `[::127.0.0.1]` is loopback), NAT64 (64:ff9b::/96), 6to4
 * (2002:AABB:CCDD::) and Teredo (2001:0::/32, the client's address inverted in the last 32 bits).
 */
function normalise(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv4') return ip;
  const v6 = ip as ipaddr.IPv6;
  const p = v6.parts;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const zeros = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  // :: and ::1 are the IPv6 unspecified and loopback addresses themselves.
  if (zeros(0, 6) && (p[6] !== 0 || (p[7] ?? 0) > 1)) return v4(p[6] ?? 0, p[7] ?? 0);
  if (p[0] === 0x64 && p[1] === 0xff9b && zeros(2, 6)) return v4(p[6] ?? 0, p[7] ?? 0);
  if (p[0] === 0x2002) return v4(p[1] ?? 0, p[2] ?? 0);
  if (p[0] === 0x2001 && p[1] === 0) return v4(~(p[6] ?? 0) & 0xffff, ~(p[7] ?? 0) & 0xffff);
  return ip;
}

/** Why an address is not public, or undefined when it is an ordinary unicast address. */
export function nonPublicReason(address: string): string | undefined {
  const ip = normalise(address);
  const range = ip.range();
  return range === 'unicast' ? undefined : `${ip.toString()} is a ${range} address`;
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
    const ip = normalise(address);
    return rules.some(
      (rule) =>
        rule.range[0].kind() === ip.kind() &&
        ip.match(rule.range) &&
        (rule.port === undefined || rule.port === port),
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
