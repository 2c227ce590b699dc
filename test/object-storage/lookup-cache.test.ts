// The endpoint's look-up cache: reuse within the bound only, misses never remembered.
import { describe, expect, it } from 'vitest';
import { lookupCache } from '../../src/drivers/objectstorage/local/lookup-cache.js';

describe('lookupCache', () => {
  it('reuses a value until its bound, counted from when the query started', async () => {
    let time = 0;
    let loads = 0;
    const cache = lookupCache<string>(1000, 10, () => time);
    const load = () => {
      loads += 1;
      time += 300; // a slow query: the bound still starts before it
      return Promise.resolve(`v${loads}`);
    };
    expect(await cache.get('k', load)).toBe('v1');
    time = 999;
    expect(await cache.get('k', load)).toBe('v1');
    time = 1000;
    expect(await cache.get('k', load)).toBe('v2');
    expect(loads).toBe(2);
  });

  it('never remembers a miss, and forgets a key at once', async () => {
    const time = 0;
    const cache = lookupCache<string>(1000, 10, () => time);
    let stored: string | undefined;
    const load = () => Promise.resolve(stored);
    expect(await cache.get('k', load)).toBeUndefined();
    stored = 'new';
    expect(await cache.get('k', load)).toBe('new');
    stored = undefined;
    cache.forget('k');
    expect(await cache.get('k', load)).toBeUndefined();
  });

  it('stays bounded in size', async () => {
    let loads = 0;
    const cache = lookupCache<number>(1000, 2, () => 0);
    const load = () => Promise.resolve((loads += 1));
    for (const key of ['a', 'b', 'c']) await cache.get(key, load);
    expect(await cache.get('a', load)).toBe(4); // dropped when the cache filled up
  });
});
