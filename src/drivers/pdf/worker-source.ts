// The merge as it runs on a worker thread (./merge.ts runs the pool). pdf-lib is synchronous CPU work
// whose cost grows with what a file declares (pages, objects), not with its size: a 2 MB file naming
// 20,000 pages kept the event loop busy for 42 s. On a worker the API stays responsive, and the pool can
// terminate a worker that runs over its time. Plain CommonJS so that it runs as is (no TypeScript loader
// in workers); pdf-lib's path comes in workerData.
export const PDF_WORKER_SOURCE = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const { PDFDocument } = require(workerData.pdfLib);

class Refusal extends Error {
  constructor(kind, message, index) {
    super(message);
    this.kind = kind;
    this.index = index;
  }
}
const invalid = (index, message) => new Refusal('invalid', message, index);
const tooMany = (message) => new Refusal('limit', message);
const ENCRYPTED = 'is encrypted; remove the password protection first';
const DAMAGED = 'is damaged and cannot be read';

async function merge(inputs, limits) {
  const loaded = [];
  let pages = 0;
  let objects = 0;
  for (const [index, bytes] of inputs.entries()) {
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
    if (!text.slice(0, 1024).includes('%PDF-')) throw invalid(index, 'is not a PDF file');
    // The trailer (or xref stream) of an encrypted file names its /Encrypt dictionary in clear text;
    // pdf-lib may otherwise fail on the encrypted objects first and call the file damaged.
    if (/\/Encrypt\s*\d+\s+\d+\s+R/.test(text)) throw invalid(index, ENCRYPTED);
    // Counted before parsing (a cheap scan), so that a file of millions of tiny objects is refused
    // before pdf-lib builds them all. Objects inside object streams are counted after the load.
    const declared = (text.match(/\d\s+\d+\s+obj\b/g) || []).length;
    objects += declared;
    if (objects > limits.maxObjects) {
      throw tooMany('The files hold more than ' + limits.maxObjects + ' PDF objects together.');
    }
    let doc;
    try {
      // throwOnInvalidObject: a damaged file is refused here instead of producing a damaged merge.
      doc = await PDFDocument.load(bytes, { updateMetadata: false, throwOnInvalidObject: true });
    } catch (error) {
      const name = error && error.constructor ? error.constructor.name : '';
      if (name === 'EncryptedPDFError' || /encrypt/i.test(String(error && error.message))) {
        throw invalid(index, ENCRYPTED);
      }
      throw invalid(index, DAMAGED);
    }
    if (doc.isEncrypted) throw invalid(index, ENCRYPTED);
    objects += Math.max(0, doc.context.enumerateIndirectObjects().length - declared);
    if (objects > limits.maxObjects) {
      throw tooMany('The files hold more than ' + limits.maxObjects + ' PDF objects together.');
    }
    let count;
    try {
      // A file without a catalog or page tree loads, then fails here.
      count = doc.getPageCount();
    } catch {
      throw invalid(index, DAMAGED);
    }
    if (count === 0) throw invalid(index, 'has no pages');
    pages += count;
    if (pages > limits.maxPages) {
      throw tooMany('The files have more than ' + limits.maxPages + ' pages together.');
    }
    loaded.push(doc);
  }
  const merged = await PDFDocument.create();
  merged.setProducer('Berth');
  for (const [index, doc] of loaded.entries()) {
    let copied;
    try {
      copied = await merged.copyPages(doc, doc.getPageIndices());
    } catch {
      throw invalid(index, DAMAGED);
    }
    for (const page of copied) merged.addPage(page);
  }
  return merged.save();
}

parentPort.on('message', async ({ id, inputs, limits }) => {
  try {
    const out = await merge(inputs, limits);
    parentPort.postMessage({ id, ok: out }, [out.buffer]);
  } catch (error) {
    if (error instanceof Refusal) {
      parentPort.postMessage({ id, refused: { kind: error.kind, message: error.message, index: error.index } });
    } else {
      parentPort.postMessage({ id, failed: String(error && error.message).slice(0, 300) });
    }
  }
});
`;
