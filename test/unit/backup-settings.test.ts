// BERTH_BACKUP_SCHEDULE, _TO and _PASSPHRASE (issue 31 item 3): what a schedule means, and every bad
// value reported together with the accepted forms.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { nextBackupAt } from '../../src/backup.js';
import { parseS3Url } from '../../src/drivers/backup/s3.js';

const base = { BERTH_DATA_DIR: '/tmp/berth-backup-settings' };

describe('backup settings', () => {
  it('reads a daily time or an interval, with a target and a passphrase', () => {
    const daily = loadConfig({
      ...base,
      BERTH_BACKUP_SCHEDULE: '02:30',
      BERTH_BACKUP_TO: '/mnt/backups',
      BERTH_BACKUP_PASSPHRASE: 'pass phrase',
    });
    expect(daily.backup).toEqual({
      schedule: { dailyAt: { hour: 2, minute: 30 } },
      to: '/mnt/backups',
      passphrase: 'pass phrase',
    });
    const every = loadConfig({
      ...base,
      BERTH_BACKUP_SCHEDULE: '6h',
      BERTH_BACKUP_TO: '/mnt/backups',
      BERTH_BACKUP_PASSPHRASE: 'x',
    });
    expect(every.backup?.schedule).toEqual({ everyMinutes: 360 });
    expect(loadConfig(base).backup).toBeUndefined();
  });

  it('refuses bad values, all of them at once, naming the accepted forms', () => {
    let error: unknown;
    try {
      loadConfig({ ...base, BERTH_BACKUP_SCHEDULE: '25:00', BERTH_BACKUP_TO: 'relative/dir' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toContain(
      "BERTH_BACKUP_SCHEDULE must be a daily time HH:MM (UTC) or an interval such as 6h or 30m (5m to 168h), got '25:00'",
    );
    expect(message).toContain(
      "BERTH_BACKUP_TO must be an absolute directory or s3://bucket/prefix, got 'relative/dir'",
    );
    expect(message).toContain(
      'BERTH_BACKUP_PASSPHRASE is required (and not empty) with BERTH_BACKUP_SCHEDULE',
    );
    expect(() =>
      loadConfig({
        ...base,
        BERTH_BACKUP_SCHEDULE: '1m',
        BERTH_BACKUP_TO: '/b',
        BERTH_BACKUP_PASSPHRASE: 'x',
      }),
    ).toThrow(/BERTH_BACKUP_SCHEDULE must be/);
    expect(() =>
      loadConfig({
        ...base,
        BERTH_BACKUP_SCHEDULE: '1h',
        BERTH_BACKUP_TO: 's3://bucket/x',
        BERTH_BACKUP_PASSPHRASE: 'x',
      }),
    ).toThrow(/needs BERTH_S3_UPSTREAM_URL/);
  });

  it('plans the next run: later today or tomorrow at the daily time, or one interval on', () => {
    const now = new Date('2026-11-27T10:00:00Z');
    expect(nextBackupAt({ dailyAt: { hour: 2, minute: 30 } }, now).toISOString()).toBe(
      '2026-11-28T02:30:00.000Z',
    );
    expect(nextBackupAt({ dailyAt: { hour: 12, minute: 0 } }, now).toISOString()).toBe(
      '2026-11-27T12:00:00.000Z',
    );
    expect(nextBackupAt({ everyMinutes: 30 }, now).toISOString()).toBe('2026-11-27T10:30:00.000Z');
  });

  it('takes s3://bucket/prefix URLs and refuses others', () => {
    expect(parseS3Url('s3://my-bucket/berth/daily')).toEqual({ bucket: 'my-bucket', prefix: 'berth/daily/' });
    expect(parseS3Url('s3://my-bucket')).toEqual({ bucket: 'my-bucket', prefix: '' });
    expect(parseS3Url('s3://my-bucket/../x')).toMatch(/is not s3:\/\/<bucket>\/<prefix>/);
    expect(parseS3Url('s3://UPPER/x')).toMatch(/is not s3:\/\/<bucket>\/<prefix>/);
  });
});
