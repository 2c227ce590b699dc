// How a serving Berth process sets V8's heap growth (`berth serve`; bench/s3/server.ts mirrors it).
//
// Bodies that pass through Berth (S3 objects, uploads) arrive in short-lived Buffers. V8 counts the
// memory behind them towards the old generation's limit, and the default limit sits only a little
// above the live heap (about 40 MB). A stream of 1 MiB PUTs therefore set off a full mark-compact
// every ten or so requests, although almost nothing on the heap had changed: 2–3 ms of CPU per PUT, a
// quarter of the endpoint's cost (docs/benchmarks/s3-upstream.md). Letting the heap double before a
// full collection cut the collections fivefold and a PUT's CPU by 20–30 % for the local and s3
// drivers alike, for at most one more live heap's worth of memory.
import v8 from 'node:v8';

/** The old generation may grow to (1 + this / 100) times what the last full collection left. */
export const HEAP_GROWING_PERCENT = 100;

const FLAG = '--heap-growing-percent';

/**
 * Sets the heap's growth unless the operator set it (`node --heap-growing-percent=N`). V8 reads the
 * flag whenever it sizes the heap after a collection, so setting it at run time takes effect.
 */
export function tuneHeapForServing(execArgv: readonly string[] = process.execArgv): void {
  if (execArgv.some((arg) => arg === FLAG || arg.startsWith(`${FLAG}=`))) return;
  v8.setFlagsFromString(`${FLAG}=${HEAP_GROWING_PERCENT}`);
}
