// The worker side of pool.ts: merges on its own thread and answers with the file or the reason.
import { parentPort } from 'node:worker_threads';
import { InvalidPdfError, mergePdfs, PdfLimitError, type MergeLimits } from './merge.js';

interface Request {
  id: number;
  inputs: Uint8Array[];
  limits: MergeLimits;
}

parentPort?.on('message', (request: Request) => {
  mergePdfs(request.inputs, request.limits).then(
    (merged) => {
      const bytes = new Uint8Array(merged.buffer, merged.byteOffset, merged.byteLength);
      parentPort?.postMessage({ id: request.id, merged: bytes });
    },
    (error: unknown) => {
      const kind =
        error instanceof InvalidPdfError ? 'invalid' : error instanceof PdfLimitError ? 'limit' : 'failed';
      const index =
        error instanceof InvalidPdfError || error instanceof PdfLimitError ? error.index : undefined;
      parentPort?.postMessage({
        id: request.id,
        error: { kind, index, message: error instanceof Error ? error.message : String(error) },
      });
    },
  );
});
