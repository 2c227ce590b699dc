// Short-lived memory of store look-ups the endpoint repeats on every request (access key, bucket).
// The store may be changed by another process (the API revoking a key, deprovisioning a bucket), which
// cannot tell this one, so an entry lives at most `ttlMs` from the moment its query started: a change
// takes effect within that bound. Misses are never remembered, so a new key or bucket works at once.

export interface LookupCache<V> {
  get(key: string, load: () => Promise<V | undefined>): Promise<V | undefined>;
  /** Forgets a key this process changed itself, so its own change takes effect at once. */
  forget(key: string): void;
}

export function lookupCache<V>(
  ttlMs: number,
  maxEntries = 1000,
  now: () => number = () => performance.now(),
): LookupCache<V> {
  const entries = new Map<string, { value: V; until: number }>();
  return {
    async get(key, load) {
      const started = now();
      const hit = entries.get(key);
      if (hit && hit.until > started) return hit.value;
      const value = await load();
      if (value === undefined) entries.delete(key);
      else {
        if (entries.size >= maxEntries) entries.clear();
        entries.set(key, { value, until: started + ttlMs });
      }
      return value;
    },
    forget(key) {
      entries.delete(key);
    },
  };
}
