// A bounded work queue: at most `concurrency` jobs run, at most `maxQueued` wait; the rest get 429.
// Each engine has one, so a burst cannot pile up unbounded memory or latency behind a slow engine.
import { AppError } from '../../domain/errors.js';

export interface WorkQueue {
  run<T>(work: () => Promise<T>): Promise<T>;
  readonly running: number;
  readonly queued: number;
}

export function createWorkQueue(options: {
  name: string;
  concurrency: number;
  maxQueued: number;
  /** Typical seconds per job, to estimate Retry-After. */
  secondsPerJob: number;
}): WorkQueue {
  let running = 0;
  const waiting: Array<() => void> = [];

  const next = () => {
    running -= 1;
    const start = waiting.shift();
    if (start) {
      running += 1;
      start();
    }
  };

  return {
    get running() {
      return running;
    },
    get queued() {
      return waiting.length;
    },
    async run<T>(work: () => Promise<T>): Promise<T> {
      if (running >= options.concurrency) {
        if (waiting.length >= options.maxQueued) {
          const retryAfter = Math.max(
            1,
            Math.ceil(((waiting.length + running) * options.secondsPerJob) / options.concurrency),
          );
          throw new AppError(
            'rate_limited',
            `The ${options.name} queue is full. Retry after ${retryAfter} s.`,
            {
              retryAfter,
            },
          );
        }
        await new Promise<void>((resolve) => waiting.push(resolve));
      } else {
        running += 1;
      }
      try {
        return await work();
      } finally {
        next();
      }
    },
  };
}
