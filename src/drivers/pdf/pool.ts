// PDF work off the request thread: one worker thread, reused, that pdf-lib runs on. A merge that
// runs past its time is stopped by terminating the worker (pdf-lib cannot be interrupted otherwise);
// the next merge gets a fresh one. Callers queue merges, so one runs at a time.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { DEFAULT_MERGE_LIMITS, InvalidPdfError, PdfLimitError, type MergeLimits } from './merge.js';

export interface PdfWorkerOptions {
  timeoutMs: number;
  limits?: MergeLimits;
}

interface Reply {
  id: number;
  merged?: Uint8Array;
  error?: { kind: 'invalid' | 'limit' | 'failed'; index: number | undefined; message: string };
}

/**
 * From dist the worker is plain JS. From source (tests, `npm run berth`) it is TypeScript: a small
 * bootstrap registers tsx in the worker first (workers take no `--import`).
 */
function spawnWorker(): Worker {
  if (!import.meta.url.endsWith('.ts')) {
    const worker = new Worker(new URL('./merge-worker.js', import.meta.url));
    worker.unref();
    return worker;
  }
  const tsx = createRequire(import.meta.url).resolve('tsx/cjs/api');
  const file = fileURLToPath(new URL('./merge-worker.ts', import.meta.url));
  const worker = new Worker(`require(${JSON.stringify(tsx)}).register(); require(${JSON.stringify(file)});`, {
    eval: true,
  });
  worker.unref();
  return worker;
}

export function createPdfWorker(options: PdfWorkerOptions) {
  const limits = options.limits ?? DEFAULT_MERGE_LIMITS;
  let worker: Worker | undefined;
  let ids = 0;

  return {
    merge(inputs: readonly Uint8Array[]): Promise<Buffer> {
      const current = (worker ??= spawnWorker());
      const id = ++ids;
      return new Promise<Buffer>((resolve, reject) => {
        const done = () => {
          clearTimeout(timer);
          current.off('message', onMessage);
          current.off('error', onError);
        };
        const timer = setTimeout(() => {
          done();
          if (worker === current) worker = undefined;
          void current.terminate();
          reject(
            new PdfLimitError(
              undefined,
              `took longer than ${Math.round(options.timeoutMs / 1000)} s to read, the limit of one merge`,
            ),
          );
        }, options.timeoutMs);
        const onMessage = (reply: Reply) => {
          if (reply.id !== id) return;
          done();
          if (reply.merged)
            resolve(Buffer.from(reply.merged.buffer, reply.merged.byteOffset, reply.merged.byteLength));
          else if (reply.error?.kind === 'invalid')
            reject(new InvalidPdfError(reply.error.index ?? 0, reply.error.message));
          else if (reply.error?.kind === 'limit')
            reject(new PdfLimitError(reply.error.index, reply.error.message));
          else reject(new Error(reply.error?.message ?? 'the PDF worker failed'));
        };
        const onError = (error: Error) => {
          done();
          if (worker === current) worker = undefined;
          reject(error);
        };
        current.on('message', onMessage);
        current.on('error', onError);
        current.postMessage({ id, inputs, limits });
      });
    },
    async close(): Promise<void> {
      await worker?.terminate();
      worker = undefined;
    },
  };
}
