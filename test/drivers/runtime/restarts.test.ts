// The restarts replicas and workers share (src/drivers/runtime/local/restarts.ts): a crash is logged
// and reported (OOM apart), the restart comes after a backoff of 1 s doubling to 30 s, back to 1 s after
// a minute of running, and a cancelled one never comes. Timers are vitest's fake ones: no waiting.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { RuntimeEvent } from '../../../src/drivers/runtime/driver.js';
import { AppLogs } from '../../../src/drivers/runtime/local/logs.js';
import { Restarts } from '../../../src/drivers/runtime/local/restarts.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-restarts-'));
  vi.useFakeTimers({ now: new Date('2026-11-27T12:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
  fs.rmSync(dir, { recursive: true, force: true });
});

function setUp() {
  const logs = new AppLogs(dir);
  const events: RuntimeEvent[] = [];
  const restarts = new Restarts({ appId: 7, name: 'web-1', logs, onEvent: (event) => events.push(event) });
  const restarted: string[] = [];
  /** The process crashed after running `ranMs`; its restart is counted when it comes. */
  const crash = (reason: string, ranMs: number, oom = false) =>
    restarts.crashed(reason, oom, new Date(Date.now() - ranMs), (why) => {
      restarts.begin(why);
      restarted.push(why);
    });
  return { logs, events, restarts, restarted, crash };
}

describe('restarts of a replica or a worker', () => {
  it('reports the crash and restarts after a backoff that doubles, capped at 30 s', () => {
    const { logs, events, restarts, restarted, crash } = setUp();
    const delays: number[] = [];
    for (let attempt = 0; attempt < 7; attempt++) {
      crash('exited with 1', 10);
      const before = restarted.length;
      let waited = 0;
      while (restarted.length === before) {
        vi.advanceTimersByTime(500);
        waited += 500;
      }
      delays.push(waited);
    }
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
    expect(restarts.count).toBe(7);
    expect(restarts.lastReason).toBe('exited with 1');
    expect(events[0]).toEqual({ appId: 7, kind: 'crashed', instance: 'web-1', message: 'exited with 1' });
    expect(logs.tail(2).map((l) => [l.source, l.stream, l.line])).toEqual([
      ['web-1', 'system', 'exited with 1; restarting in 30 s'],
      ['web-1', 'system', 'exited with 1; restarting in 30 s'],
    ]);
  });

  it('starts over at 1 s after a minute of running, and tells an OOM kill apart', () => {
    const { events, restarted, crash } = setUp();
    crash('exited with 1', 10);
    vi.advanceTimersByTime(1000);
    crash('exited with 1', 10);
    vi.advanceTimersByTime(2000);
    expect(restarted).toHaveLength(2);
    crash('killed: out of memory (limit 64 MiB)', 60_000, true);
    vi.advanceTimersByTime(999);
    expect(restarted).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(restarted).toHaveLength(3);
    expect(events.at(-1)).toMatchObject({
      kind: 'oom_killed',
      message: 'killed: out of memory (limit 64 MiB)',
    });
  });

  it('never restarts once cancelled, and reports a restart that serves', () => {
    const { events, restarts, restarted, crash } = setUp();
    crash('exited with 2', 10);
    restarts.cancel();
    vi.advanceTimersByTime(60_000);
    expect(restarted).toEqual([]);
    restarts.done('exited with 2');
    expect(events.at(-1)).toEqual({
      appId: 7,
      kind: 'restarted',
      instance: 'web-1',
      message: 'exited with 2',
    });
  });
});
