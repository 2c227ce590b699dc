// PDF merging with pdf-lib: pages of every input, in the order given.
import { PDFDocument } from 'pdf-lib';

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

export async function mergePdfs(inputs: readonly Uint8Array[]): Promise<Buffer> {
  const loaded: PDFDocument[] = [];
  for (const [index, bytes] of inputs.entries()) {
    if (!looksLikePdf(bytes)) throw new InvalidPdfError(index, 'is not a PDF file');
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
