// Gotenberg's answers that are not a file, and the engines' errors mapped to the answer Gotenberg gives
// in the same situation (its status and message: clients match on them).
import { AppError } from '../../../domain/errors.js';
import { PageBlockedError, PageRangesError } from '../../chromium/engine.js';
import { UnreadableDocumentError } from '../../libreoffice/engine.js';
import { BlockedAddressError } from '../../net/guard.js';
import { InvalidPdfError, PdfLimitError } from '../../pdf/merge.js';

/** A Gotenberg answer that is not a file: status and plain-text message. */
export class GotenbergError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'GotenbergError';
  }
}

export const badForm = (problems: string[]) =>
  new GotenbergError(400, `Invalid form data: ${problems.join('\n')}`);

/** The answer Gotenberg gives for `error` (a GotenbergError as it is; anything unknown: a bare 500). */
export function gotenbergFailure(
  error: unknown,
  context: { pageRanges?: string; filename?: string },
): GotenbergError {
  if (error instanceof GotenbergError) return error;
  if (error instanceof PageBlockedError || error instanceof BlockedAddressError)
    return new GotenbergError(403, 'Forbidden');
  if (error instanceof PageRangesError) {
    return new GotenbergError(
      400,
      error.reason === 'exceeds'
        ? `The page ranges '${context.pageRanges ?? ''}' (nativePageRanges) exceeds the page count`
        : `Chromium does not handle the page ranges '${context.pageRanges ?? ''}' (nativePageRanges) syntax`,
    );
  }
  if (error instanceof UnreadableDocumentError) {
    return new GotenbergError(
      400,
      `LibreOffice could not read the document '${context.filename ?? ''}'. Ensure the file is not corrupted and that its extension matches its actual format.`,
    );
  }
  if (error instanceof InvalidPdfError) return new GotenbergError(400, `The PDF file ${error.message}.`);
  if (error instanceof PdfLimitError) return new GotenbergError(error.tooLarge ? 413 : 400, error.message);
  if (error instanceof AppError && error.code === 'rate_limited') {
    const retryAfter = error.retryAfter;
    return new GotenbergError(
      429,
      'The request queue is full. Retry shortly.',
      retryAfter ? { 'retry-after': String(retryAfter) } : {},
    );
  }
  const message = error instanceof Error ? error.message : '';
  if (/did not (render|finish) within/.test(message))
    return new GotenbergError(503, 'The request exceeded the time limit. Reduce the workload.');
  return new GotenbergError(500, 'Internal Server Error');
}
