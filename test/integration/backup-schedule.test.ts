// BERTH_BACKUP_SCHEDULE in a serving Berth (issue 31 item 3): when the time comes, a backup of the
// store is written to BERTH_BACKUP_TO with its manifest, and the next one is planned. Only the timer
// and the date are the test's: the backup itself runs for real against a real store and directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startBackupSchedule, type Manifest } from '../../src/backup.js';
import { createTestApp, type TestApp } from '../helpers/app.js';

describe('scheduled backups', () => {
  let t: TestApp | undefined;
  const target = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-scheduled-backup-'));
  afterEach(async () => {
    vi.useRealTimers();
    await t?.close();
    fs.rmSync(target, { recursive: true, force: true });
  });

  it('takes a backup to BERTH_BACKUP_TO once the interval has passed', async () => {
    t = await createTestApp('sqlite', {
      env: {
        BERTH_BACKUP_SCHEDULE: '30m',
        BERTH_BACKUP_TO: target,
        BERTH_BACKUP_PASSPHRASE: 'scheduled passphrase',
      },
    });
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    const schedule = startBackupSchedule(t.ctx)!;
    expect(schedule).toBeDefined();
    await vi.advanceTimersByTimeAsync(29 * 60_000);
    expect(fs.existsSync(path.join(target, 'manifest.json'))).toBe(false);
    await vi.advanceTimersByTimeAsync(60_000);
    // stop() waits for the run that the timer started.
    await schedule.stop();
    const manifest = JSON.parse(fs.readFileSync(path.join(target, 'manifest.json'), 'utf8')) as Manifest;
    expect(manifest.files.map((f) => f.path)).toEqual(
      expect.arrayContaining(['key.sealed', 'store/users.json', 'store/teams.json']),
    );
    expect(manifest.stats.copied_files).toBeGreaterThan(0);
  });

  it('is off without BERTH_BACKUP_SCHEDULE', async () => {
    t = await createTestApp('sqlite');
    expect(startBackupSchedule(t.ctx)).toBeUndefined();
  });
});
