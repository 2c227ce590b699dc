// The private-address guard: what counts as private, the operator allow-list, and that the fetch
// connects to exactly the address that was checked.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedFetch } from '../../src/drivers/net/fetch.js';
import { BlockedAddressError, createAddressGuard, nonPublicReason } from '../../src/drivers/net/guard.js';
import { freePort } from '../helpers/processes.js';

describe('address guard', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['169.254.169.254', 'linkLocal'],
    ['100.100.100.200', 'carrierGradeNat'],
    ['0.0.0.0', 'unspecified'],
    ['224.0.0.251', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['::1', 'loopback'],
    ['fe80::1', 'linkLocal'],
    ['fd00:ec2::254', 'uniqueLocal'],
    ['ff02::1', 'multicast'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:127.0.0.1', 'loopback'],
  ])('%s is not public (%s)', (address, range) => {
    expect(nonPublicReason(address)).toContain(range);
  });

  // IPv6 forms that carry an IPv4 address are judged by that address (issue 11, item 10).
  it.each([
    ['::127.0.0.1', '127.0.0.1 is a loopback'],
    ['::7f00:1', '127.0.0.1 is a loopback'],
    ['::10.0.0.1', '10.0.0.1 is a private'],
    ['::169.254.169.254', '169.254.169.254 is a linkLocal'],
    ['::ffff:7f00:1', '127.0.0.1 is a loopback'],
    ['::ffff:192.168.0.1', '192.168.0.1 is a private'],
    ['64:ff9b::127.0.0.1', '127.0.0.1 is a loopback'],
    ['64:ff9b::a9fe:a9fe', '169.254.169.254 is a linkLocal'],
    ['2002:7f00:1::1', '127.0.0.1 is a loopback'],
    ['2002:a00:1:5::9', '10.0.0.1 is a private'],
    // Teredo: server 65.54.227.120, client 127.0.0.1 (stored inverted).
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', '127.0.0.1 is a loopback'],
    // Teredo: server 10.0.0.1, client 8.8.8.8.
    ['2001:0:a00:1::f7f7:f7f7', '10.0.0.1 is a private'],
  ])('%s is judged by its embedded IPv4 address', (address, reason) => {
    expect(nonPublicReason(address)).toContain(reason);
  });

  it.each([
    '::ffff:8.8.8.8',
    '::8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    '2001:0:808:808::f7f7:f7f7',
  ])('%s embeds a public IPv4 address and is public', (address) => {
    expect(nonPublicReason(address)).toBeUndefined();
  });

  it.each([
    'http://[::127.0.0.1]/',
    'http://[::7f00:1]:8080/',
    'http://[::ffff:127.0.0.1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
  ])('the guard refuses %s', async (url) => {
    const guard = createAddressGuard({ allow: [] });
    await expect(guard.resolve(new URL(url))).rejects.toThrow(/127\.0\.0\.1 is a loopback/);
  });

  it('an allowed IPv4 address is allowed in its embedded forms, and only there', async () => {
    const guard = createAddressGuard({ allow: ['127.0.0.1'] });
    await expect(guard.resolve(new URL('http://[::7f00:1]/'))).resolves.toMatchObject({
      address: '::7f00:1',
    });
    await expect(guard.resolve(new URL('http://[::7f00:2]/'))).rejects.toThrow(/loopback/);
  });

  it.each(['93.184.215.14', '1.1.1.1', '2606:4700:4700::1111'])('%s is public', (address) => {
    expect(nonPublicReason(address)).toBeUndefined();
  });

  const fakeDns = (table: Record<string, string[]>) => (host: string) =>
    Promise.resolve(
      (table[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 })),
    );

  it('refuses a name when any of its addresses is private', async () => {
    const guard = createAddressGuard({
      allow: [],
      lookup: fakeDns({ 'mixed.test': ['93.184.215.14', '10.0.0.5'], 'public.test': ['93.184.215.14'] }),
    });
    await expect(guard.resolve(new URL('http://mixed.test/'))).rejects.toBeInstanceOf(BlockedAddressError);
    await expect(guard.resolve(new URL('http://nothing.test/'))).rejects.toThrow(/does not resolve/);
    await expect(guard.resolve(new URL('ftp://public.test/'))).rejects.toThrow(/scheme/);
    await expect(guard.resolve(new URL('http://public.test/'))).resolves.toEqual({
      address: '93.184.215.14',
      family: 4,
    });
  });

  it('allows what the operator lists: an address, a CIDR, or one port of an address', async () => {
    const guard = createAddressGuard({ allow: ['10.0.0.0/8', '127.0.0.1:8081', '[::1]:9000'] });
    await expect(guard.resolve(new URL('http://10.20.30.40/'))).resolves.toMatchObject({
      address: '10.20.30.40',
    });
    await expect(guard.resolve(new URL('http://127.0.0.1:8081/'))).resolves.toMatchObject({
      address: '127.0.0.1',
    });
    await expect(guard.resolve(new URL('http://127.0.0.1:8082/'))).rejects.toThrow(/loopback/);
    await expect(guard.resolve(new URL('http://[::1]:9000/'))).resolves.toMatchObject({ address: '::1' });
    await expect(guard.resolve(new URL('http://192.168.0.1/'))).rejects.toThrow(/private/);
  });

  describe('guardedFetch', () => {
    let server: http.Server;
    let port: number;
    const hosts: string[] = [];
    beforeAll(async () => {
      port = await freePort();
      server = http.createServer((req, res) => {
        hosts.push(req.headers.host ?? '');
        res.writeHead(302, { location: '/elsewhere', 'set-cookie': ['a=1', 'b=2'] });
        res.end('moved');
      });
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    });
    afterAll(() => {
      server.close();
    });

    it('connects to the checked address, keeps the host name, and returns redirects unfollowed', async () => {
      // `pinned.test` exists only in the guard's resolver: the connection must use the guard's answer.
      const guard = createAddressGuard({
        allow: [`127.0.0.1:${port}`],
        lookup: fakeDns({ 'pinned.test': ['127.0.0.1'] }),
      });
      const response = await guardedFetch(
        guard,
        { url: `http://pinned.test:${port}/start`, method: 'GET', headers: { cookie: 'x=y' }, body: null },
        { timeoutMs: 5_000, maxBytes: 1_000_000 },
      );
      expect(response.status).toBe(302);
      expect(response.headers.location).toBe('/elsewhere');
      expect(response.headers['set-cookie']).toBe('a=1\nb=2');
      expect(response.body.toString()).toBe('moved');
      expect(hosts).toEqual([`pinned.test:${port}`]);
    });

    it('refuses before connecting when the name resolves to a private address', async () => {
      const guard = createAddressGuard({ allow: [], lookup: fakeDns({ 'rebind.test': ['127.0.0.1'] }) });
      hosts.length = 0;
      await expect(
        guardedFetch(
          guard,
          { url: `http://rebind.test:${port}/`, method: 'GET', headers: {}, body: null },
          { timeoutMs: 5_000, maxBytes: 1_000 },
        ),
      ).rejects.toBeInstanceOf(BlockedAddressError);
      expect(hosts).toEqual([]);
    });
  });
});
