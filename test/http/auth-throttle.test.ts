// Issue 11, item 12: failed authentications are throttled per client address and per /1.3 username
// on all three APIs, with 429 and Retry-After. Issue 24, item 2: only failing attempts are: a valid
// credential is served from a throttled address too (behind a proxy every user shares one), and the
// client address comes from X-Forwarded-For only when the peer is in BERTH_TRUSTED_PROXIES.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { AUTH_FAILURES_PER_ADDRESS, AUTH_FAILURES_PER_NAME } from '../../src/http/plugins/auth.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';

describe.each(DIALECTS)('failed authentication throttle (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect, { env: { BERTH_TRUSTED_PROXIES: '127.0.0.1/32' } });
  });
  afterAll(() => t.close());

  const call = (url: string, authorization: string, remoteAddress: string) =>
    t.request({ method: 'GET', url, headers: { authorization, 'x-forwarded-for': remoteAddress } });

  const APIS: Array<[string, string, () => string, (n: number) => string]> = [
    ['platform', '/api/v1/user', () => t.auth.platform.authorization!, (n) => `Bearer wrong-token-${n}`],
    ['tools', '/api/v1/tools/balance', () => t.auth.tools.authorization!, (n) => `wrong-key-${n}`],
    [
      '/1.3',
      '/1.3/database',
      () => t.auth.dbApi.authorization!,
      (n) => `Basic ${Buffer.from(`nobody${n}:x`).toString('base64')}`,
    ],
  ];

  it.each(APIS.map((a, i) => [...a, i] as const))(
    '%s: a burst of wrong credentials gets 429 with Retry-After; a valid credential is still served',
    async (_name, url, good, wrong, i) => {
      const attacker = `10.0.${i}.1`;
      const statuses: number[] = [];
      for (let n = 0; n < AUTH_FAILURES_PER_ADDRESS + 5; n++) {
        statuses.push((await call(url, wrong(n), attacker)).statusCode);
      }
      expect(statuses.slice(0, AUTH_FAILURES_PER_ADDRESS).every((s) => s === 401)).toBe(true);
      expect(statuses.slice(AUTH_FAILURES_PER_ADDRESS).every((s) => s === 429)).toBe(true);
      const blocked = await call(url, wrong(1000), attacker);
      expect(blocked.statusCode).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      // The same address with a valid credential (another user behind the same proxy) is served.
      expect((await call(url, good(), attacker)).statusCode).toBe(200);
      expect((await call(url, good(), `10.0.${i}.2`)).statusCode).toBe(200);
    },
  );

  it('counts failures over the last minute, so a burst across a minute boundary is not allowed twice', async () => {
    const attacker = '10.2.0.1';
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(new Date('2030-01-01T12:00:59.000Z'));
      for (let n = 0; n < AUTH_FAILURES_PER_ADDRESS; n++) {
        // Half the burst before 12:01:00, half after.
        if (n === AUTH_FAILURES_PER_ADDRESS / 2) vi.setSystemTime(new Date('2030-01-01T12:01:01.000Z'));
        expect((await call('/api/v1/user', `Bearer wrong-${n}`, attacker)).statusCode).toBe(401);
      }
      const blocked = await call('/api/v1/user', 'Bearer wrong-again', attacker);
      expect(blocked.statusCode).toBe(429);
      // Free again once the oldest failure is a minute old.
      expect(Number(blocked.headers['retry-after'])).toBe(58);
      vi.setSystemTime(new Date('2030-01-01T12:02:00.000Z'));
      expect((await call('/api/v1/user', 'Bearer wrong-later', attacker)).statusCode).toBe(401);
    } finally {
      vi.useRealTimers();
    }
  });

  it('throttles one /1.3 username whatever the address', async () => {
    const username = 'victim';
    const basic = (password: string) => `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
    const statuses: number[] = [];
    for (let n = 0; n <= AUTH_FAILURES_PER_NAME; n++) {
      statuses.push((await call('/1.3/database', basic(`guess${n}`), `10.1.0.${n + 1}`)).statusCode);
    }
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.slice(0, AUTH_FAILURES_PER_NAME).every((s) => s === 401)).toBe(true);
  });

  it('serves a valid /1.3 login whose username others failed for', async () => {
    const [username] = Buffer.from(t.auth.dbApi.authorization!.slice('Basic '.length), 'base64')
      .toString()
      .split(':');
    const basic = `Basic ${Buffer.from(`${username}:wrong`).toString('base64')}`;
    for (let n = 0; n <= AUTH_FAILURES_PER_NAME; n++) await call('/1.3/database', basic, `10.3.0.${n + 1}`);
    expect((await call('/1.3/database', basic, '10.3.1.1')).statusCode).toBe(429);
    expect((await call('/1.3/database', t.auth.dbApi.authorization!, '10.3.1.1')).statusCode).toBe(200);
  });
});

describe('client address behind proxies (BERTH_TRUSTED_PROXIES)', () => {
  const burst = async (t: TestApp, forwardedFor: string) => {
    const statuses: number[] = [];
    for (let n = 0; n <= AUTH_FAILURES_PER_ADDRESS; n++) {
      const response = await t.request({
        url: '/api/v1/user',
        headers: { authorization: `Bearer wrong-${n}`, 'x-forwarded-for': forwardedFor },
      });
      statuses.push(response.statusCode);
    }
    return statuses;
  };
  const status = async (t: TestApp, forwardedFor: string) =>
    (
      await t.request({
        url: '/api/v1/user',
        headers: { authorization: 'Bearer wrong', 'x-forwarded-for': forwardedFor },
      })
    ).statusCode;

  it('believes X-Forwarded-For from a trusted proxy: each client is counted on its own', async () => {
    const t = await createTestApp('sqlite', { env: { BERTH_TRUSTED_PROXIES: '127.0.0.0/8,::1' } });
    try {
      expect((await burst(t, '203.0.113.7')).at(-1)).toBe(429);
      expect(await status(t, '203.0.113.8')).toBe(401);
      // The right-most address the proxy did not add is the client: a forged left part changes nothing.
      expect(await status(t, '203.0.113.8, 203.0.113.7')).toBe(429);
    } finally {
      await t.close();
    }
  });

  it('ignores X-Forwarded-For from any other peer: a client cannot pick its address', async () => {
    const t = await createTestApp('sqlite');
    try {
      expect((await burst(t, '203.0.113.7')).at(-1)).toBe(429);
      // The socket's address is the client's, whatever the header says.
      expect(await status(t, '203.0.113.99')).toBe(429);
    } finally {
      await t.close();
    }
  });

  it('refuses a setting that is not an address or a CIDR, naming it', async () => {
    await expect(
      createTestApp('sqlite', { env: { BERTH_TRUSTED_PROXIES: '10.0.0.0/8,proxy.example' } }),
    ).rejects.toThrow(/BERTH_TRUSTED_PROXIES must be comma-separated IP addresses or CIDRs.*proxy\.example/);
  });
});
