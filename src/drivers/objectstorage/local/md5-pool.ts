// MD5 of large bodies on worker threads. The ETag needs an MD5 of every byte; on the request thread
// that hash costs about as much as writing the file, so large uploads feed their chunks to a worker
// instead and the hash runs on another core while the request thread receives and writes. Back-pressure
// bounds what is in flight per upload, so a slow worker never lets a body pile up in memory.
import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createHash } = require('node:crypto');
const hashes = new Map();
parentPort.on('message', (m) => {
  if (m.chunk !== undefined) {
    let h = hashes.get(m.id);
    if (!h) { h = createHash('md5'); hashes.set(m.id, h); }
    h.update(m.chunk);
    parentPort.postMessage({ id: m.id, done: m.chunk.byteLength });
  } else if (m.end) {
    const h = hashes.get(m.id) || createHash('md5');
    hashes.delete(m.id);
    const digest = h.digest();
    parentPort.postMessage({ id: m.id, digest }, [digest.buffer]);
  } else if (m.drop) {
    hashes.delete(m.id);
  }
});
`;

const MAX_IN_FLIGHT = 8 * 1024 * 1024;
/**
 * Chunks are copied into batches of this size and each batch is transferred in one message: a
 * message per 64 KiB socket chunk cost more on the request thread than the hash it moved away.
 */
const BATCH_BYTES = 256 * 1024;

interface Job {
  inFlight: number;
  resume: (() => void) | undefined;
  digest: ((value: Buffer) => void) | undefined;
}

interface PoolWorker {
  worker: Worker;
  jobs: Map<number, Job>;
}

export interface Md5Job {
  /** Hashes the chunk; `proceed` runs once in-flight bytes are under the bound. */
  update(chunk: Buffer, proceed: () => void): void;
  digest(): Promise<Buffer>;
  drop(): void;
}

let pool: PoolWorker[] | undefined;
let next = 0;
let ids = 0;

function workers(): PoolWorker[] {
  if (!pool) {
    const size = Math.max(1, Math.min(4, availableParallelism() - 1));
    pool = Array.from({ length: size }, () => {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      const entry: PoolWorker = { worker, jobs: new Map() };
      worker.on('message', (m: { id: number; done?: number; digest?: Uint8Array }) => {
        const job = entry.jobs.get(m.id);
        if (!job) return;
        if (m.done !== undefined) {
          job.inFlight -= m.done;
          if (job.resume && job.inFlight <= MAX_IN_FLIGHT) {
            const resume = job.resume;
            job.resume = undefined;
            resume();
          }
        } else if (m.digest) {
          entry.jobs.delete(m.id);
          job.digest?.(Buffer.from(m.digest));
        }
      });
      // Never keeps a process alive. After the listener: on Node 24 adding a 'message' listener refs
      // the worker's port again, and a process that had hashed a large body never exited.
      worker.unref();
      return entry;
    });
  }
  return pool;
}

export function startMd5(): Md5Job {
  const list = workers();
  const entry = list[next++ % list.length]!;
  const id = ++ids;
  const job: Job = { inFlight: 0, resume: undefined, digest: undefined };
  entry.jobs.set(id, job);
  let batch: Buffer | undefined;
  let filled = 0;
  const flush = () => {
    if (!batch || filled === 0) return;
    // Its own (unpooled) memory, so the batch can be transferred rather than cloned.
    const out = filled === batch.length ? batch : batch.subarray(0, filled);
    job.inFlight += out.length;
    entry.worker.postMessage({ id, chunk: out }, [out.buffer as ArrayBuffer]);
    batch = undefined;
    filled = 0;
  };
  return {
    update(chunk, proceed) {
      for (let offset = 0; offset < chunk.length;) {
        batch ??= Buffer.allocUnsafeSlow(BATCH_BYTES);
        const copied = chunk.copy(batch, filled, offset);
        filled += copied;
        offset += copied;
        if (filled === batch.length) flush();
      }
      if (job.inFlight <= MAX_IN_FLIGHT) proceed();
      else job.resume = proceed;
    },
    digest() {
      flush();
      return new Promise<Buffer>((resolve) => {
        job.digest = resolve;
        entry.worker.postMessage({ id, end: true });
      });
    },
    drop() {
      entry.jobs.delete(id);
      entry.worker.postMessage({ id, drop: true });
    },
  };
}
