// Office conversion fetches nothing and reads no local file a document links to (issue 11, item 3):
// documents with linked images (http to a loopback server under several spellings, and file://) are
// converted by the real LibreOffice; the server must see no request and the PDF must hold no image.
import { execFile, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OfficeEngine, PYTHON_PATH } from '../../src/drivers/libreoffice/engine.js';
import { BWRAP_PATH, sandboxArgs } from '../../src/drivers/libreoffice/sandbox.js';
import { pdfText } from './helpers.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-office-links-'));

/** A 16×16 PNG of one colour (a real image LibreOffice would embed). */
function png(rgb: [number, number, number]): Buffer {
  const crc = (bytes: Buffer) => {
    let c = ~0;
    for (const byte of bytes) {
      c ^= byte;
      for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
    }
    return (~c >>> 0) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(body.length + 8);
    out.writeUInt32BE(data.length, 0);
    body.copy(out, 4);
    out.writeUInt32BE(crc(body), body.length + 4);
    return out;
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(16, 0);
  header.writeUInt32BE(16, 4);
  header.set([8, 2, 0, 0, 0], 8);
  const row = Buffer.concat([Buffer.from([0]), Buffer.from(Array.from({ length: 16 }, () => rgb).flat())]);
  return Buffer.concat([
    Buffer.from('89504e470d0a1a0a', 'hex'),
    chunk('IHDR', header),
    chunk('IDAT', zlib.deflateSync(Buffer.concat(Array.from({ length: 16 }, () => row)))),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

function zipDir(source: string, target: string, first: string): Buffer {
  // The first entry stored uncompressed (ODF's `mimetype` rule), the rest deflated.
  execFileSync('zip', ['-X', '-0', '-q', target, first], { cwd: source });
  execFileSync('zip', ['-X', '-r', '-q', target, '.', '-x', first], { cwd: source });
  return fs.readFileSync(target);
}

/** An .odt whose body has one linked (not embedded) image per URL. */
function odtLinking(urls: string[]): Buffer {
  const root = fs.mkdtempSync(path.join(dir, 'odt-'));
  fs.writeFileSync(path.join(root, 'mimetype'), 'application/vnd.oasis.opendocument.text');
  fs.mkdirSync(path.join(root, 'META-INF'));
  fs.writeFileSync(
    path.join(root, 'META-INF', 'manifest.xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">
 <manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
</manifest:manifest>`,
  );
  const frames = urls
    .map(
      (url, i) =>
        `<text:p>Image ${i}: <draw:frame draw:name="i${i}" text:anchor-type="as-char" svg:width="2cm" svg:height="2cm"><draw:image xlink:href="${url}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>`,
    )
    .join('\n');
  fs.writeFileSync(
    path.join(root, 'content.xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.2">
<office:body><office:text>
<text:p>Linked images follow.</text:p>
${frames}
</office:text></office:body></office:document-content>`,
  );
  return zipDir(root, path.join(dir, `${path.basename(root)}.odt`), 'mimetype');
}

/** A .docx whose body has one externally linked image per URL (`TargetMode="External"`). */
function docxLinking(urls: string[]): Buffer {
  const root = fs.mkdtempSync(path.join(dir, 'docx-'));
  fs.mkdirSync(path.join(root, '_rels'));
  fs.mkdirSync(path.join(root, 'word', '_rels'), { recursive: true });
  fs.writeFileSync(
    path.join(root, '[Content_Types].xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
 <Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
 <Default Extension="xml" ContentType="application/xml"/>
 <Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
</Types>`,
  );
  fs.writeFileSync(
    path.join(root, '_rels', '.rels'),
    `<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
 <Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
</Relationships>`,
  );
  fs.writeFileSync(
    path.join(root, 'word', '_rels', 'document.xml.rels'),
    `<?xml version="1.0" encoding="UTF-8"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
${urls
  .map(
    (url, i) =>
      ` <Relationship Id="rImg${i}" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="${url}" TargetMode="External"/>`,
  )
  .join('\n')}
</Relationships>`,
  );
  const pictures = urls
    .map(
      (_url, i) => `<w:p><w:r><w:t>Image ${i}:</w:t></w:r><w:r><w:drawing><wp:inline>
<wp:extent cx="720000" cy="720000"/><wp:docPr id="${i + 1}" name="p${i}"/>
<a:graphic><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:pic>
<pic:nvPicPr><pic:cNvPr id="${i + 1}" name="p${i}"/><pic:cNvPicPr/></pic:nvPicPr>
<pic:blipFill><a:blip r:link="rImg${i}"/><a:stretch><a:fillRect/></a:stretch></pic:blipFill>
<pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="720000" cy="720000"/></a:xfrm><a:prstGeom prst="rect"/></pic:spPr>
</pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>`,
    )
    .join('\n');
  fs.writeFileSync(
    path.join(root, 'word', 'document.xml'),
    `<?xml version="1.0" encoding="UTF-8"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"
 xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"
 xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"
 xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"
 xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture">
<w:body><w:p><w:r><w:t>Linked images follow.</w:t></w:r></w:p>
${pictures}
</w:body></w:document>`,
  );
  return zipDir(root, path.join(dir, `${path.basename(root)}.docx`), '[Content_Types].xml');
}

/** The images a PDF holds, as `pdfimages -list` rows. */
function pdfImages(pdf: Buffer): string[] {
  const file = path.join(dir, `check-${Date.now()}-${Math.random()}.pdf`);
  fs.writeFileSync(file, pdf);
  const rows = execFileSync('pdfimages', ['-list', file], { encoding: 'utf8' }).split('\n').slice(2);
  return rows.filter((row) => row.trim() !== '');
}

describe('office conversion and linked content', () => {
  let server: http.Server;
  let port: number;
  const requests: string[] = [];
  const secret = path.join(dir, 'secret.png');
  let engine: OfficeEngine;
  let urls: string[];

  beforeAll(async () => {
    fs.writeFileSync(secret, png([12, 34, 56]));
    server = http.createServer((req, res) => {
      requests.push(`${req.headers.host ?? ''} ${req.url ?? ''}`);
      res.writeHead(200, { 'content-type': 'image/png' });
      res.end(png([200, 10, 10]));
    });
    // Every interface: the host-name form reaches the server through the host's own address.
    await new Promise<void>((resolve) => server.listen(0, resolve));
    port = (server.address() as AddressInfo).port;
    urls = [
      `http://127.0.0.1:${port}/loopback.png`,
      `http://${os.hostname()}:${port}/hostname.png`,
      `http://2130706433:${port}/decimal.png`,
      `http://localhost:${port}/localhost.png`,
      `file://${secret}`,
    ];
    // The jailed account must traverse to the engine's directory (as it does under the 1777 /tmp).
    fs.chmodSync(dir, 0o711);
    engine = new OfficeEngine({
      workDir: dir,
      listeners: 1,
      jobTimeoutMs: 60_000,
      maxJobsPerListener: 10,
      startTimeoutMs: 60_000,
    });
  }, 60_000);

  afterAll(async () => {
    await engine?.close();
    server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each([
    ['odt', () => odtLinking(urls)],
    ['docx', () => docxLinking(urls)],
  ])(
    'a .%s with linked images: no request leaves, no local file is embedded',
    async (extension, make) => {
      requests.length = 0;
      const pdf = await engine.convert(make(), extension);
      expect(pdfText(pdf)).toContain('Linked images follow.');
      // Both at once, so that a failure shows the requests made and the images embedded.
      expect({ requests, images: pdfImages(pdf) }).toEqual({ requests: [], images: [] });
      // The jailed warm listener did the work (not the cold fallback).
      // …as the unprivileged office account when the tests run as root.
      const owners = execFileSync('ps', ['-eo', 'user:32,args'], { encoding: 'utf8' })
        .split('\n')
        .filter((line) => line.includes('soffice.bin') && line.includes(dir))
        .map((line) => line.trim().split(/\s+/)[0]);
      expect(owners.length).toBeGreaterThan(0);
      expect(new Set(owners)).toEqual(
        new Set([process.getuid?.() === 0 ? 'berth-office' : os.userInfo().username]),
      );
      expect(engine.status()).toMatchObject({
        status: 'ready',
        listeners: 1,
        coldConversions: 0,
        failures: 0,
      });
    },
    120_000,
  );

  it('the cold conversion is jailed the same way', async () => {
    const cold = new OfficeEngine({
      listeners: 0,
      jobTimeoutMs: 60_000,
      maxJobsPerListener: 10,
      startTimeoutMs: 60_000,
    });
    try {
      requests.length = 0;
      const pdf = await cold.convert(docxLinking(urls), 'docx');
      expect(pdfText(pdf)).toContain('Linked images follow.');
      expect({ requests, images: pdfImages(pdf) }).toEqual({ requests: [], images: [] });
      expect(cold.status().coldConversions).toBe(1);
    } finally {
      await cold.close();
    }
  }, 120_000);

  it('the jail itself reaches no network and sees no host file outside the directories it is given', async () => {
    const given = fs.mkdtempSync(path.join(dir, 'given-'));
    fs.writeFileSync(path.join(given, 'input.txt'), 'mine');
    // Each probe prints what it got; the jail must refuse all but the given directory.
    const probe = `
import socket, sys
def attempt(name, fn):
    try:
        fn()
        print(name, "reached")
    except Exception as error:
        print(name, "refused")
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", ${port}), timeout=5))
attempt("passwd", lambda: open("/etc/passwd").read())
attempt("secret", lambda: open(${JSON.stringify(secret)}).read())
attempt("given", lambda: open(${JSON.stringify(path.join(given, 'input.txt'))}).read())
`;
    requests.length = 0;
    const { stdout } = await promisify(execFile)(
      BWRAP_PATH,
      sandboxArgs([given], [PYTHON_PATH, '-c', probe]),
    );
    expect(stdout.trim().split('\n')).toEqual([
      'tcp refused',
      'passwd refused',
      'secret refused',
      'given reached',
    ]);
    expect(requests).toEqual([]);
  });
});
