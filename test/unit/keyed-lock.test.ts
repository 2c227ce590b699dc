// The per-key lock drivers and services share (src/domain/keyed-lock.ts): one operation per key at a
// time, in call order, a failure not blocking the next, other keys not waiting, nothing kept after.
import { describe, expect, it } from 'vitest';
import { createKeyedLock } from '../../src/domain/keyed-lock.js';

/** A promise the test settles by hand. */
function gate() {
  let open!: () => void;
  let fail!: (error: Error) => void;
  const promise = new Promise<void>((resolve, reject) => {
    open = resolve;
    fail = reject;
  });
  return { promise, open, fail };
}

describe('keyed lock', () => {
  it('runs the operations of one key one at a time, in call order', async () => {
    const lock = createKeyedLock();
    const events: string[] = [];
    const first = gate();
    const a = lock.run('k', async () => {
      events.push('a start');
      await first.promise;
      events.push('a end');
      return 'a';
    });
    const b = lock.run('k', () => {
      events.push('b start');
      return Promise.resolve('b');
    });
    const c = lock.run('k', () => {
      events.push('c start');
      return Promise.resolve('c');
    });
    await Promise.resolve();
    await Promise.resolve();
    expect(events).toEqual(['a start']);
    first.open();
    expect(await Promise.all([a, b, c])).toEqual(['a', 'b', 'c']);
    expect(events).toEqual(['a start', 'a end', 'b start', 'c start']);
  });

  it('gives a failure to its caller and still runs the next operation', async () => {
    const lock = createKeyedLock();
    const first = gate();
    const a = lock.run('k', () => first.promise.then(() => 'never'));
    const b = lock.run('k', () => Promise.resolve('b'));
    first.fail(new Error('boom'));
    await expect(a).rejects.toThrow('boom');
    await expect(b).resolves.toBe('b');
    // A work that throws before returning a promise is a failure of its own call too.
    await expect(
      lock.run('k', () => {
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
    await expect(lock.run('k', () => Promise.resolve('after'))).resolves.toBe('after');
  });

  it('lets other keys run meanwhile', async () => {
    const lock = createKeyedLock();
    const held = gate();
    const a = lock.run('a', () => held.promise.then(() => 'a'));
    await expect(lock.run('b', () => Promise.resolve('b'))).resolves.toBe('b');
    expect(lock.size).toBe(1);
    held.open();
    await expect(a).resolves.toBe('a');
  });

  it('waits in idle() for what runs or waits, and keeps no key after', async () => {
    const lock = createKeyedLock();
    const held = gate();
    let done = 0;
    void lock.run('a', () => held.promise.then(() => done++));
    void lock.run('a', () => Promise.resolve(done++)).catch(() => undefined);
    void lock.run('b', () => Promise.reject(new Error('ignored'))).catch(() => undefined);
    expect(lock.size).toBe(2);
    let idle = false;
    const waiting = lock.idle().then(() => {
      idle = true;
    });
    await Promise.resolve();
    expect(idle).toBe(false);
    held.open();
    await waiting;
    expect(done).toBe(2);
    // The tails are dropped once settled (a microtask after): no memory per key is kept.
    await new Promise((resolve) => setImmediate(resolve));
    expect(lock.size).toBe(0);
    await lock.idle();
  });
});
