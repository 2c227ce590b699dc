// One operation per key at a time, in this process: drivers and services converge on an instance from
// several callers (a job, a deployment, the supervisor) that must not interleave on the same one.
// Pure (promises only, no I/O): every layer may use it.

export interface KeyedLock {
  /**
   * Runs `work` after every earlier `run` of the same key has settled (fulfilled or rejected); keys do
   * not wait for each other. The result is `work`'s, its failure included.
   */
  run<T>(key: string, work: () => Promise<T>): Promise<T>;
  /** Settles once the operations running or waiting now have settled (for an orderly close). */
  idle(): Promise<void>;
  /** How many keys have an operation running or waiting (0 once all have settled: no memory is kept). */
  readonly size: number;
}

export function createKeyedLock(): KeyedLock {
  // The last operation of each key, as a promise that never rejects: the next one waits on it.
  const tails = new Map<string, Promise<unknown>>();
  return {
    run<T>(key: string, work: () => Promise<T>): Promise<T> {
      const previous = tails.get(key) ?? Promise.resolve();
      const next = previous.then(work, work);
      const settled = next.catch(() => undefined);
      tails.set(key, settled);
      void settled.then(() => {
        if (tails.get(key) === settled) tails.delete(key);
      });
      return next;
    },
    async idle(): Promise<void> {
      await Promise.all([...tails.values()]);
    },
    get size() {
      return tails.size;
    },
  };
}
