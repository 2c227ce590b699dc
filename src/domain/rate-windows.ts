// Counting events (failed sign-ins, requests) per key in fixed one-minute windows, in memory: each
// Berth process counts its own.
/** Fixed one-minute windows per key; memory is bounded by pruning old windows. */
export function createWindows() {
  const windows = new Map<string | number, { start: number; count: number }>();
  const current = (key: string | number, now: number) => {
    const start = now - (now % 60_000);
    let window = windows.get(key);
    if (!window || window.start !== start) {
      if (windows.size > 100_000) windows.clear();
      window = { start, count: 0 };
      windows.set(key, window);
    }
    return window;
  };
  return {
    /** Seconds until the key's window ends when it already holds `limit` events, else undefined. */
    full(key: string | number, limit: number, now: number): number | undefined {
      const window = current(key, now);
      return window.count >= limit ? Math.ceil((window.start + 60_000 - now) / 1000) : undefined;
    },
    add(key: string | number, now: number): void {
      current(key, now).count += 1;
    },
  };
}

/**
 * Events per key within the last minute, counted exactly (a log of times, not fixed windows), so a
 * burst across a minute boundary is not allowed twice the limit: for failed sign-ins.
 */
export function createSlidingCounts(windowMs = 60_000, maxPerKey = 1000) {
  const events = new Map<string, number[]>();
  const recent = (key: string, now: number): number[] => {
    const list = (events.get(key) ?? []).filter((at) => at > now - windowMs);
    if (list.length === 0) events.delete(key);
    else events.set(key, list);
    return list;
  };
  return {
    /** Seconds until the key drops below `limit` events, when it holds `limit` or more; else undefined. */
    full(key: string, limit: number, now: number): number | undefined {
      const list = recent(key, now);
      if (list.length < limit) return undefined;
      return Math.max(1, Math.ceil((list[list.length - limit]! + windowMs - now) / 1000));
    },
    add(key: string, now: number): void {
      if (events.size > 100_000) events.clear();
      const list = recent(key, now);
      list.push(now);
      events.set(key, list.slice(-maxPerKey));
    },
  };
}
