// The audit log's setting (BERTH_AUDIT_RETENTION_DAYS and its flag) and the masking of its before/after
// (redactValues): names stay, secret values never (issue 31, item 2).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { redactValues } from '../../src/domain/redact.js';

describe('BERTH_AUDIT_RETENTION_DAYS', () => {
  it('defaults to 365 days, and the flag overrides the variable', () => {
    expect(loadConfig({}).auditRetentionDays).toBe(365);
    expect(loadConfig({ BERTH_AUDIT_RETENTION_DAYS: '30' }).auditRetentionDays).toBe(30);
    expect(
      loadConfig({ BERTH_AUDIT_RETENTION_DAYS: '30' }, { auditRetentionDays: '7' }).auditRetentionDays,
    ).toBe(7);
  });

  it('refuses what is not a whole number of days from 1 to 36500, with the other bad values', () => {
    for (const bad of ['0', '-1', 'a year', '36501', '1.5']) {
      let error: unknown;
      try {
        loadConfig({ BERTH_AUDIT_RETENTION_DAYS: bad, BERTH_PORT: 'eighty' });
      } catch (e) {
        error = e;
      }
      expect(error, bad).toBeInstanceOf(ConfigError);
      const problems = (error as ConfigError).problems;
      expect(problems.join('\n')).toContain('BERTH_AUDIT_RETENTION_DAYS');
      expect(problems).toHaveLength(2);
    }
  });
});

describe('redactValues', () => {
  it('masks secret fields and every value of a secrets map, keeping names and keys', () => {
    expect(
      redactValues({
        name: 'shop',
        password: 'hunter2-long',
        api_token: 'berth_pat_x',
        secrets: [{ key: 'APP_KEY', value: 'base64:abc' }],
        environment: { DB_PASSWORD: 'p', LOG: 'info' },
        nested: { client_secret: 's', kept: 1, none: null },
      }),
    ).toEqual({
      name: 'shop',
      password: '***',
      api_token: '***',
      secrets: [{ key: 'APP_KEY', value: '***' }],
      environment: { DB_PASSWORD: '***', LOG: '***' },
      nested: { client_secret: '***', kept: 1, none: null },
    });
  });

  it('masks credentials inside text and leaves paths alone', () => {
    expect(
      redactValues({ source: 'postgres://app:pa55@db.example.com:5432/shop', health: '/api/health' }),
    ).toEqual({ source: 'postgres://app:***@db.example.com:5432/shop', health: '/api/health' });
  });
});
