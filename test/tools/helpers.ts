// Helpers of the tools tests: multipart bodies, small PDFs, and real checks of outputs
// (pdfinfo/pdftotext from poppler, image sizes read from the PNG/JPEG headers).
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PDFDocument, StandardFonts } from 'pdf-lib';
import type { LocalToolsEngines } from '../../src/drivers/tools/local/index.js';
import type { TestApp } from '../helpers/app.js';

/** The test Berth's tools engines, the local ones (BERTH_TOOLS_DRIVER's default), to crash them. */
export function localEngines(t: TestApp): LocalToolsEngines['processes'] {
  const engines = t.ctx.services.tools.engines;
  if (!('processes' in engines)) throw new Error(`the tools engines are ${engines.name}'s, not local`);
  return (engines as LocalToolsEngines).processes;
}

export interface Part {
  name: string;
  filename?: string;
  content: Buffer | string;
  type?: string;
}

export function multipart(parts: Part[]): { payload: Buffer; headers: Record<string, string> } {
  const boundary = `----berth${randomBytes(8).toString('hex')}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const disposition = part.filename
      ? `form-data; name="${part.name}"; filename="${part.filename}"`
      : `form-data; name="${part.name}"`;
    chunks.push(
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: ${disposition}\r\nContent-Type: ${part.type ?? 'application/octet-stream'}\r\n\r\n`,
      ),
      Buffer.isBuffer(part.content) ? part.content : Buffer.from(part.content),
      Buffer.from('\r\n'),
    );
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return {
    payload: Buffer.concat(chunks),
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
  };
}

/** A PDF with `pages` pages, page i saying `${label} page i`. */
export async function makePdf(pages: number, label: string): Promise<Buffer> {
  const doc = await PDFDocument.create();
  const font = await doc.embedFont(StandardFonts.Helvetica);
  for (let i = 1; i <= pages; i++) {
    const page = doc.addPage([300, 200]);
    page.drawText(`${label} page ${i}`, { x: 20, y: 100, size: 14, font });
  }
  return Buffer.from(await doc.save());
}

function withTempFile<T>(bytes: Buffer, extension: string, use: (file: string) => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-tools-check-'));
  const file = path.join(dir, `file.${extension}`);
  fs.writeFileSync(file, bytes);
  try {
    return use(file);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export function pdfInfo(bytes: Buffer): { pages: number; pageSize: string; encrypted: boolean } {
  const out = withTempFile(bytes, 'pdf', (file) => execFileSync('pdfinfo', [file], { encoding: 'utf8' }));
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(out)?.[1]?.trim() ?? '';
  return {
    pages: Number(field('Pages')),
    pageSize: field('Page size'),
    encrypted: field('Encrypted').startsWith('yes'),
  };
}

export function pdfText(bytes: Buffer): string {
  return withTempFile(bytes, 'pdf', (file) =>
    execFileSync('pdftotext', ['-layout', file, '-'], { encoding: 'utf8' }),
  );
}

/** Text of each page, in order. */
export function pdfPages(bytes: Buffer): string[] {
  return pdfText(bytes).split('\f').slice(0, -1);
}

export function imageSize(bytes: Buffer): { format: 'png' | 'jpeg'; width: number; height: number } {
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) {
    return { format: 'png', width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes[0] === 0xff && bytes[1] === 0xd8) {
    let offset = 2;
    while (offset < bytes.length) {
      if (bytes[offset] !== 0xff) throw new Error('bad JPEG marker');
      const marker = bytes[offset + 1] ?? 0;
      const length = bytes.readUInt16BE(offset + 2);
      // SOF0..SOF15 except DHT (C4), JPG (C8), DAC (CC) carry the frame size.
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return {
          format: 'jpeg',
          height: bytes.readUInt16BE(offset + 5),
          width: bytes.readUInt16BE(offset + 7),
        };
      }
      offset += 2 + length;
    }
  }
  throw new Error('not a PNG or JPEG');
}

/** qpdf's structural check; throws when the file is damaged. */
export function qpdfCheck(bytes: Buffer): void {
  withTempFile(bytes, 'pdf', (file) => execFileSync('qpdf', ['--check', file], { stdio: 'pipe' }));
}
