// The load generator of the runtime benchmark, in its own process so that it never shares an event loop
// with the edge proxy it measures: autocannon with keep-alive connections, every response's time kept
// (autocannon's own histogram has whole milliseconds, too coarse for a sub-millisecond difference).
// Started with fork(); gets one LoadRequest, answers one LoadResult. With `seconds: 0` it runs until the
// parent sends 'stop'.
import autocannon from 'autocannon';

export interface LoadRequest {
  url: string;
  /** The Host header (through the edge), or none (direct to a replica). */
  host?: string;
  connections: number;
  /** 0: until 'stop'. */
  seconds: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  perSecond: number;
  /** Exact percentiles of the 2xx responses' times, in ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  resets: number;
  /** Status codes other than 2xx and how often each came. */
  statuses: Record<string, number>;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function run(request: LoadRequest): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    let times = new Float64Array(1 << 16);
    let count = 0;
    const statuses: Record<string, number> = {};
    const instance = autocannon(
      {
        url: request.url,
        connections: request.connections,
        // A long run is ended by 'stop'.
        duration: request.seconds > 0 ? request.seconds : 3600,
        headers: request.host ? { host: request.host } : {},
        timeout: 10,
      },
      (error, result) => {
        if (error) return reject(error instanceof Error ? error : new Error(String(error)));
        const sorted = times.subarray(0, count).sort();
        resolve({
          requests: result.requests.total,
          seconds: result.duration,
          perSecond: result.requests.total / result.duration,
          p50: percentile(sorted, 50),
          p90: percentile(sorted, 90),
          p99: percentile(sorted, 99),
          max: percentile(sorted, 100),
          non2xx: result.non2xx,
          errors: result.errors,
          timeouts: result.timeouts,
          resets: result.resets,
          statuses,
        });
      },
    );
    instance.on('response', (_client, statusCode: number, _bytes: number, responseTime: number) => {
      if (statusCode < 200 || statusCode >= 300) {
        statuses[statusCode] = (statuses[statusCode] ?? 0) + 1;
        return;
      }
      if (count === times.length) {
        const grown = new Float64Array(times.length * 2);
        grown.set(times);
        times = grown;
      }
      times[count++] = responseTime;
    });
    process.on('message', (message) => {
      if (message === 'stop') instance.stop();
    });
  });
}

process.once('message', (message: LoadRequest) => {
  run(message).then(
    (result) => process.send?.(result, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
