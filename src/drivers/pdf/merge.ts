// PDF merging with pdf-lib: pages of every input, in the order given, within limits on pages and
// objects. pdf-lib is synchronous at heart: this runs on a worker thread (pool.ts), never on the
// thread that serves requests.
import { PDFDocument } from 'pdf-lib';

export interface MergeLimits {
  /** Pages of all inputs together. */
  maxPages: number;
  /** Indirect objects of one input. */
  maxObjects: number;
}

export const DEFAULT_MERGE_LIMITS: MergeLimits = { maxPages: 5000, maxObjects: 500_000 };

/** An input (or the whole merge, index undefined) beyond a limit; answered 422, the credit refunded. */
export class PdfLimitError extends Error {
  constructor(
    readonly index: number | undefined,
    message: string,
  ) {
    super(message);
    this.name = 'PdfLimitError';
  }
}

/** The largest /Count and the number of `obj` headers, read from the raw bytes before any parsing. */
function rawCounts(bytes: Uint8Array): { pages: number; objects: number } {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  let pages = 0;
  for (const m of text.matchAll(/\/Count\s+(\d{1,12})/g)) pages = Math.max(pages, Number(m[1]));
  let objects = 0;
  for (const _ of text.matchAll(/\d+\s+\d+\s+obj\b/g)) objects += 1;
  return { pages, objects };
}

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

/** True when the bytes start like a PDF (the header may follow up to 1 KiB of junk, as readers allow). */
export function looksLikePdf(bytes: Uint8Array): boolean {
  const head = Buffer.from(bytes.subarray(0, 1024)).toString('latin1');
  return head.includes('%PDF-');
}

export async function mergePdfs(
  inputs: readonly Uint8Array[],
  limits: MergeLimits = DEFAULT_MERGE_LIMITS,
): Promise<Buffer> {
  const loaded: PDFDocument[] = [];
  let total = 0;
  const tooManyPages = (index: number | undefined) =>
    new PdfLimitError(index, `has more than ${limits.maxPages} pages, the limit of one merge`);
  for (const [index, bytes] of inputs.entries()) {
    if (!looksLikePdf(bytes)) throw new InvalidPdfError(index, 'is not a PDF file');
    // Refused before pdf-lib reads it, where the file says so itself.
    const raw = rawCounts(bytes);
    if (raw.pages > limits.maxPages) throw tooManyPages(index);
    if (raw.objects > limits.maxObjects) {
      throw new PdfLimitError(index, `has more than ${limits.maxObjects} objects, the limit of one file`);
    }
    // The trailer (or xref stream) of an encrypted file names its /Encrypt dictionary in clear text;
    // pdf-lib may otherwise fail on the encrypted objects first and call the file damaged.
    if (/\/Encrypt\s*\d+\s+\d+\s+R/.test(Buffer.from(bytes).toString('latin1'))) {
      throw new InvalidPdfError(index, 'is encrypted; remove the password protection first');
    }
    let doc: PDFDocument;
    try {
      // throwOnInvalidObject: a damaged file is refused here instead of producing a damaged merge.
      doc = await PDFDocument.load(bytes, { updateMetadata: false, throwOnInvalidObject: true });
    } catch (error) {
      const name = error instanceof Error ? error.constructor.name : '';
      if (name === 'EncryptedPDFError' || (error instanceof Error && /encrypt/i.test(error.message))) {
        throw new InvalidPdfError(index, 'is encrypted; remove the password protection first');
      }
      throw new InvalidPdfError(index, 'is damaged and cannot be read');
    }
    if (doc.isEncrypted)
      throw new InvalidPdfError(index, 'is encrypted; remove the password protection first');
    let pages: number;
    try {
      // A file without a catalog or page tree loads, then fails here.
      pages = doc.getPageCount();
    } catch {
      throw new InvalidPdfError(index, 'is damaged and cannot be read');
    }
    if (pages === 0) throw new InvalidPdfError(index, 'has no pages');
    // The page tree may hold more pages than its /Count says, and streams may hide objects.
    if (pages > limits.maxPages) throw tooManyPages(index);
    if (doc.context.enumerateIndirectObjects().length > limits.maxObjects) {
      throw new PdfLimitError(index, `has more than ${limits.maxObjects} objects, the limit of one file`);
    }
    total += pages;
    if (total > limits.maxPages) {
      throw new PdfLimitError(
        undefined,
        `together have more than ${limits.maxPages} pages, the limit of one merge`,
      );
    }
    loaded.push(doc);
  }
  const merged = await PDFDocument.create();
  merged.setProducer('Berth');
  for (const [index, doc] of loaded.entries()) {
    let pages;
    try {
      pages = await merged.copyPages(doc, doc.getPageIndices());
    } catch {
      throw new InvalidPdfError(index, 'is damaged and cannot be read');
    }
    for (const page of pages) merged.addPage(page);
  }
  return Buffer.from(await merged.save());
}
