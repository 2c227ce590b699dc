// Issue 11, item 12: failed authentications are throttled per client address and per /1.3 username
// on all three APIs, with 429 and Retry-After; a correct credential from another address still works.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AUTH_FAILURES_PER_ADDRESS, AUTH_FAILURES_PER_NAME } from '../../src/http/plugins/auth.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';

describe.each(DIALECTS)('failed authentication throttle (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect);
  });
  afterAll(() => t.close());

  const call = (url: string, authorization: string, remoteAddress: string) =>
    t.app.inject({ method: 'GET', url, headers: { authorization }, remoteAddress });

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
    '%s: a burst of wrong credentials gets 429 with Retry-After; another address is served',
    async (_name, url, good, wrong, i) => {
      const attacker = `10.0.${i}.1`;
      const statuses: number[] = [];
      for (let n = 0; n < AUTH_FAILURES_PER_ADDRESS + 5; n++) {
        statuses.push((await call(url, wrong(n), attacker)).statusCode);
      }
      expect(statuses.slice(0, AUTH_FAILURES_PER_ADDRESS).every((s) => s === 401)).toBe(true);
      const blocked = await call(url, good(), attacker);
      expect(blocked.statusCode).toBe(429);
      expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
      expect((await call(url, good(), `10.0.${i}.2`)).statusCode).toBe(200);
    },
  );

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
});
