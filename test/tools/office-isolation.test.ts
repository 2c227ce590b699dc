// A document is untrusted: converting it fetches nothing it links to (loopback, the host's name, a
// decimal IP) and embeds no local file it names.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolsServiceFor } from '../../src/services/tools/index.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { multipart, pdfText } from './helpers.js';

// A 2×2 PNG, pure red: anything that embeds it shows up as an image in the PDF.
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEklEQVR4nGP4z8DAwMDAxMDAAAAo8wIBwbQ3PAAAAABJRU5ErkJggg==',
  'base64',
);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-office-links-'));

/** An .odt (zip) whose only content is text and linked images at `hrefs`. */
function odtLinking(hrefs: string[], stored?: { name: string; content: Buffer }): Buffer {
  const work = fs.mkdtempSync(path.join(dir, 'odt-'));
  const images = hrefs
    .map(
      (href, i) =>
        `<text:p><draw:frame draw:name="i${i}" text:anchor-type="as-char" svg:width="2cm" svg:height="2cm"><draw:image xlink:href="${href}" xlink:type="simple" xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>`,
    )
    .join('');
  fs.writeFileSync(path.join(work, 'mimetype'), 'application/vnd.oasis.opendocument.text');
  fs.mkdirSync(path.join(work, 'META-INF'));
  fs.writeFileSync(
    path.join(work, 'META-INF', 'manifest.xml'),
    `<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>${stored ? `<manifest:file-entry manifest:full-path="${stored.name}" manifest:media-type="image/png"/>` : ''}</manifest:manifest>`,
  );
  if (stored) {
    fs.mkdirSync(path.dirname(path.join(work, stored.name)), { recursive: true });
    fs.writeFileSync(path.join(work, stored.name), stored.content);
  }
  fs.writeFileSync(
    path.join(work, 'content.xml'),
    `<?xml version="1.0" encoding="UTF-8"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.2"><office:body><office:text><text:p>Linked pictures</text:p>${images}</office:text></office:body></office:document-content>`,
  );
  execFileSync('zip', ['-q', '-X', '-0', 'doc.odt', 'mimetype'], { cwd: work });
  execFileSync(
    'zip',
    ['-q', '-X', '-r', 'doc.odt', 'META-INF', 'content.xml', ...(stored ? [stored.name] : [])],
    {
      cwd: work,
    },
  );
  return fs.readFileSync(path.join(work, 'doc.odt'));
}

const imagesIn = (pdf: Buffer): number => {
  const file = path.join(dir, `out-${Date.now()}.pdf`);
  fs.writeFileSync(file, pdf);
  // pdfimages -list: two header lines, then one line per image.
  return execFileSync('pdfimages', ['-list', file], { encoding: 'utf8' }).trim().split('\n').length - 2;
};

describe('office documents cannot reach the network or the file system', () => {
  let t: TestApp;
  let server: http.Server;
  let port = 0;
  const hits: string[] = [];

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'image/png' }).end(PNG);
    });
    await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
    port = (server.address() as { port: number }).port;
    fs.writeFileSync(path.join(dir, 'secret.png'), PNG);
    t = await createTestApp('sqlite', { env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' } });
    toolsServiceFor(t.ctx, { officeListeners: 1 });
  }, 60_000);
  afterAll(async () => {
    await t?.close();
    server?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const convert = (content: Buffer) => {
    const body = multipart([{ name: 'file', filename: 'links.odt', content }]);
    return t.app.inject({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/office',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    });
  };

  it('the document must really link: a control with its picture inside is drawn', async () => {
    expect(imagesIn(await convertEmbedded())).toBeGreaterThan(0);
  });

  it('fetches no linked picture, by loopback address, host name or decimal IP', async () => {
    const res = await convert(
      odtLinking([
        `http://127.0.0.1:${port}/loopback.png`,
        `http://${os.hostname()}:${port}/hostname.png`,
        `http://2130706433:${port}/decimal.png`,
        `http://localhost:${port}/localhost.png`,
      ]),
    );
    expect(res.statusCode).toBe(200);
    expect(pdfText(res.rawPayload)).toContain('Linked pictures');
    // Give a request that would leave late a moment to arrive.
    await new Promise((r) => setTimeout(r, 300));
    expect(hits).toEqual([]);
    expect(imagesIn(res.rawPayload)).toBe(0);
  });

  it('embeds no local file a document links to', async () => {
    const res = await convert(odtLinking([`file://${path.join(dir, 'secret.png')}`, 'file:///etc/hostname']));
    expect(res.statusCode).toBe(200);
    expect(pdfText(res.rawPayload)).toContain('Linked pictures');
    expect(imagesIn(res.rawPayload)).toBe(0);
  });

  /** The same picture stored inside the document: proves the PDF check would see a picture. */
  async function convertEmbedded(): Promise<Buffer> {
    const res = await convert(odtLinking(['Pictures/p.png'], { name: 'Pictures/p.png', content: PNG }));
    expect(res.statusCode).toBe(200);
    return res.rawPayload;
  }
});
