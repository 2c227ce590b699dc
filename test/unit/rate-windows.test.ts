// Counting failed sign-ins: exact over the last minute, so a burst across a minute boundary gets no
// second allowance (the fixed windows of the request rate limit would give one).
import { describe, expect, it } from 'vitest';
import { createSlidingCounts } from '../../src/domain/rate-windows.js';

describe('sliding counts', () => {
  it('stays full across a minute boundary until the oldest counted event is a minute old', () => {
    const counts = createSlidingCounts();
    const start = 59_500; // half a second before a minute boundary
    for (let i = 0; i < 10; i++) counts.add('account:a', start + i * 10);
    expect(counts.full('account:a', 10, start + 100)).toBe(60);
    expect(counts.full('account:a', 10, 60_200)).toBe(60); // past the boundary: still full
    expect(counts.full('account:a', 10, start + 59_999)).toBe(1);
    expect(counts.full('account:a', 10, start + 60_000)).toBeUndefined(); // the first one left
    expect(counts.full('account:b', 10, 60_200)).toBeUndefined();
  });

  it('keeps at most the limit it is told per key', () => {
    const counts = createSlidingCounts(60_000, 5);
    for (let i = 0; i < 50; i++) counts.add('k', 1000 + i);
    expect(counts.full('k', 5, 2000)).toBe(60);
    expect(counts.full('k', 6, 2000)).toBeUndefined();
  });
});
