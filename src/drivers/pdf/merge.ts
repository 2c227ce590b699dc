// PDF merging with pdf-lib on a bounded pool of worker threads: pages of every input, in the order
// given, under limits on total size, pages, objects, memory and time (issue 11, item 4).
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { PDF_WORKER_SOURCE } from './worker-source.js';

/** An input that is not a usable PDF; `index` is its position in the request. */
export class InvalidPdfError extends Error {
  constructor(
    readonly index: number,
    message: string,
  ) {
    super(message);
    this.name = 'InvalidPdfError';
  }
}

/** The inputs exceed a limit; `tooLarge` is a size limit (413), otherwise a work limit (422). */
export class PdfLimitError extends Error {
  constructor(
    message: string,
    readonly tooLarge = false,
  ) {
    super(message);
    this.name = 'PdfLimitError';
  }
}

export interface PdfLimits {
  /** Bytes of all inputs together. */
  maxBytes: number;
  /** Pages of all inputs together. */
  maxPages: number;
  /** Indirect objects of all inputs together. */
  maxObjects: number;
  /** Wall time of one merge; the worker is terminated after it. */
  timeoutMs: number;
  /** V8 heap of one worker; a merge that needs more ends its worker. */
  heapMb: number;
}

export const DEFAULT_PDF_LIMITS: PdfLimits = {
  maxBytes: 100 * 1024 * 1024,
  maxPages: 2_000,
  maxObjects: 500_000,
  timeoutMs: 20_000,
  heapMb: 512,
};

export interface PdfPool {
  merge(inputs: readonly Uint8Array[]): Promise<Buffer>;
  close(): Promise<void>;
}

type Answer =
  | { id: number; ok: Uint8Array }
  | { id: number; refused: { kind: 'invalid' | 'limit'; message: string; index?: number } }
  | { id: number; failed: string };

const PDF_LIB = createRequire(import.meta.url).resolve('pdf-lib');

/**
 * `size` workers, started on first use and reused; a worker that runs over its time or heap is
 * terminated and replaced on the next job. Callers bound how many jobs wait (the tools' work queue).
 */
export function createPdfPool(options: { size: number; limits: PdfLimits }): PdfPool {
  const { limits } = options;
  const idle: Worker[] = [];
  const busy = new Set<Worker>();
  let started = 0;
  let ids = 0;
  let closed = false;

  const take = (): Worker => {
    const ready = idle.pop();
    if (ready) return ready;
    if (started >= options.size) throw new Error('the PDF pool is full (the caller must queue)');
    started += 1;
    const worker = new Worker(PDF_WORKER_SOURCE, {
      eval: true,
      workerData: { pdfLib: PDF_LIB },
      resourceLimits: { maxOldGenerationSizeMb: limits.heapMb },
    });
    worker.unref();
    // A worker that dies while idle is forgotten, not handed the next job.
    worker.once('exit', () => {
      const at = idle.indexOf(worker);
      if (at < 0) return;
      idle.splice(at, 1);
      started -= 1;
    });
    return worker;
  };

  const drop = (worker: Worker) => {
    busy.delete(worker);
    started -= 1;
    void worker.terminate();
  };

  return {
    async merge(inputs) {
      if (closed) throw new Error('the PDF pool is closed');
      const total = inputs.reduce((sum, input) => sum + input.byteLength, 0);
      if (total > limits.maxBytes) {
        throw new PdfLimitError(
          `The files are larger than ${Math.floor(limits.maxBytes / 1024 / 1024)} MiB together.`,
          true,
        );
      }
      const worker = take();
      busy.add(worker);
      const id = ++ids;
      let timer: NodeJS.Timeout | undefined;
      const answer = await new Promise<Answer | Error>((resolve) => {
        const onMessage = (message: Answer) => {
          if (message.id === id) finish(message);
        };
        const onError = (error: Error) => finish(error);
        const onExit = () => finish(new Error('the PDF worker exited'));
        const finish = (result: Answer | Error) => {
          clearTimeout(timer);
          worker.off('message', onMessage).off('error', onError).off('exit', onExit);
          resolve(result);
        };
        timer = setTimeout(
          () =>
            finish(new PdfLimitError(`The files could not be merged within ${limits.timeoutMs / 1000} s.`)),
          limits.timeoutMs,
        );
        worker.on('message', onMessage).on('error', onError).on('exit', onExit);
        worker.postMessage({
          id,
          inputs,
          limits: { maxPages: limits.maxPages, maxObjects: limits.maxObjects },
        });
      });
      if (answer instanceof Error) {
        // Timed out, out of heap or crashed: this worker is not reused.
        drop(worker);
        if (answer instanceof PdfLimitError) throw answer;
        if ((answer as NodeJS.ErrnoException).code === 'ERR_WORKER_OUT_OF_MEMORY') {
          throw new PdfLimitError(`The files need more than ${limits.heapMb} MB of memory to merge.`);
        }
        throw answer;
      }
      busy.delete(worker);
      if (closed) void worker.terminate();
      else idle.push(worker);
      if ('ok' in answer) return Buffer.from(answer.ok.buffer, answer.ok.byteOffset, answer.ok.byteLength);
      if ('failed' in answer) throw new Error(`the merge failed: ${answer.failed}`);
      const { kind, message, index } = answer.refused;
      if (kind === 'invalid') throw new InvalidPdfError(index ?? 0, message);
      throw new PdfLimitError(message);
    },

    async close() {
      closed = true;
      await Promise.all([...idle.splice(0), ...busy].map((worker) => worker.terminate()));
    },
  };
}
