// The `gotenberg` service runner: a client written for Gotenberg (chromiumly, from npm) converts HTML and
// a .docx and merges PDFs through an instance, on the same warm engines as the tools endpoints (one
// tools service, its Chromium and LibreOffice shared by every test here). Outputs are checked with
// poppler (pdftotext, pdfinfo) and qpdf; access without the instance's secret path or credentials is
// refused; errors, headers and /health follow Gotenberg.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Chromiumly, HtmlConverter, LibreOffice, MarkdownConverter, PDFEngines } from 'chromiumly';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SOFFICE_PATH } from '../../../src/drivers/libreoffice/engine.js';
import { createGotenbergRunner, GOTENBERG_VERSION } from '../../../src/drivers/services/gotenberg/index.js';
import type { ServiceRuntime, ServiceSpec } from '../../../src/drivers/services/types.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { freePort } from '../../helpers/processes.js';
import { makePdf, pdfInfo, pdfPages, pdfText, qpdfCheck } from '../../tools/helpers.js';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-gotenberg-test-'));
const REPORT = Array.from({ length: 140 }, (_, i) => `Line ${i + 1} of the annual report`).join('\n');
// A 1×1 red PNG.
const PIXEL = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
);

const spec = (port: number): ServiceSpec => ({
  id: '6f1c9a52-0d7e-4b7a-9a57-3c1f0e2b8d11',
  type: 'gotenberg',
  applicationId: 1,
  teamId: 1,
  version: null,
  name: 'pdf',
  memoryMiB: 256,
  port,
  username: 'app',
  password: 'Zq3v9Xc2LmN8pR4tY7wB1dF6gH0jK5sA',
  settings: {},
  secrets: {},
  volumes: [],
});

describe('gotenberg service', () => {
  let t: TestApp;
  let runner: ReturnType<typeof createGotenbergRunner>;
  let rt: ServiceRuntime;
  let base: string;
  let root: string;
  let docx: Buffer;

  const useToken = () => Chromiumly.configure({ endpoint: base });

  beforeAll(async () => {
    fs.writeFileSync(path.join(dir, 'report.txt'), REPORT);
    await run(SOFFICE_PATH, [
      `-env:UserInstallation=file://${path.join(dir, 'profile')}`,
      '--headless',
      '--norestore',
      '--convert-to',
      'docx',
      '--outdir',
      dir,
      path.join(dir, 'report.txt'),
    ]);
    docx = fs.readFileSync(path.join(dir, 'report.docx'));
    t = await createTestApp('sqlite', { services: { tools: { officeListeners: 1, chromiumSlots: 2 } } });
    // The runner is handed the tools service itself: its engines, queues and address guard.
    runner = createGotenbergRunner(t.ctx.services.tools);
    rt = await runner.provision(spec(await freePort()));
    root = `http://${rt.host}:${rt.port}`;
    base = `${root}${rt.extra?.path ?? ''}`;
  }, 180_000);

  afterAll(async () => {
    await runner?.delete({ id: spec(0).id, type: 'gotenberg' });
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('runs in Berth’s process on a loopback port, its secret path in extra', async () => {
    expect(rt).toMatchObject({ host: '127.0.0.1', pid: null, version: GOTENBERG_VERSION, location: null });
    expect(rt.extra?.path).toBe(`/${spec(0).password}`);
    expect(await runner.status({ id: spec(0).id, type: 'gotenberg' })).toEqual({ running: true, pid: null });
  });

  it('converts HTML with its assets through chromiumly', async () => {
    useToken();
    const html = `<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="style.css"></head>
      <body><h1>Invoice 42</h1><img src="pixel.png" width="50" height="50"><p class="tagged">Total due</p></body></html>`;
    const pdf = await new HtmlConverter().convert({
      html: Buffer.from(html),
      assets: [
        { file: Buffer.from('.tagged::after { content: " FROM-STYLESHEET"; }'), name: 'style.css' },
        { file: PIXEL, name: 'pixel.png' },
      ],
      properties: {
        size: { width: 8.27, height: 11.7 },
        margins: { top: 0.5, bottom: 0.5, left: 0.5, right: 0.5 },
      },
    });
    qpdfCheck(pdf);
    const text = pdfText(pdf);
    expect(text).toContain('Invoice 42');
    // The stylesheet sent beside index.html was applied.
    expect(text).toContain('FROM-STYLESHEET');
    // A4 in inches, as Gotenberg's paperWidth/paperHeight take them.
    expect(pdfInfo(pdf).pageSize).toMatch(/^595\.\d* x 842\.\d* pts/);
  });

  it('converts a .docx through chromiumly, and several documents merged or zipped', async () => {
    useToken();
    const pdf = await LibreOffice.convert({ files: [{ data: docx, ext: 'docx' }] });
    qpdfCheck(pdf);
    expect(pdfText(pdf)).toContain('Line 1 of the annual report');
    const single = pdfInfo(pdf).pages;
    expect(single).toBeGreaterThan(1);

    const merged = await LibreOffice.convert({
      files: [
        { data: docx, ext: 'docx' },
        { data: Buffer.from('Second document'), ext: 'txt' },
      ],
      merge: true,
    });
    qpdfCheck(merged);
    expect(pdfInfo(merged).pages).toBe(single + 1);
    expect(pdfPages(merged).at(-1)).toContain('Second document');

    const zipped = await LibreOffice.convert({
      files: [
        { data: docx, ext: 'docx' },
        { data: Buffer.from('Second document'), ext: 'txt' },
      ],
    });
    expect(zipped.subarray(0, 4)).toEqual(Buffer.from([0x50, 0x4b, 0x03, 0x04]));
    fs.writeFileSync(path.join(dir, 'out.zip'), zipped);
    const { stdout } = await run('python3', [
      '-c',
      'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); assert z.testzip() is None; print("\\n".join(z.namelist()))',
      path.join(dir, 'out.zip'),
    ]);
    expect(stdout.trim().split('\n')).toEqual(['file01.docx.pdf', 'file02.txt.pdf']);
  }, 120_000);

  it('honours LibreOffice’s landscape and nativePageRanges', async () => {
    useToken();
    const pdf = await LibreOffice.convert({
      files: [{ data: docx, ext: 'docx' }],
      properties: { landscape: true, nativePageRanges: { from: 1, to: 1 } },
    });
    const info = pdfInfo(pdf);
    expect(info.pages).toBe(1);
    const [w, h] = /^([\d.]+) x ([\d.]+)/.exec(info.pageSize)!.slice(1).map(Number);
    expect(w).toBeGreaterThan(h!);
  }, 60_000);

  it('merges PDFs through chromiumly, in Gotenberg’s alphanumeric order', async () => {
    useToken();
    const [a, b] = await Promise.all([makePdf(2, 'Alpha'), makePdf(1, 'Bravo')]);
    const merged = await PDFEngines.merge({ files: [a, b] });
    qpdfCheck(merged);
    expect(pdfPages(merged).map((p) => p.trim())).toEqual(['Alpha page 1', 'Alpha page 2', 'Bravo page 1']);

    // Gotenberg sorts by name: file2 before file10, whatever the order sent.
    const form = new FormData();
    form.append('files', new Blob([new Uint8Array(a)]), 'file10.pdf');
    form.append('files', new Blob([new Uint8Array(b)]), 'file2.pdf');
    const res = await fetch(`${base}/forms/pdfengines/merge`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const sorted = Buffer.from(await res.arrayBuffer());
    expect(pdfPages(sorted)[0]).toContain('Bravo page 1');
  });

  it('converts Markdown into its index.html', async () => {
    useToken();
    const pdf = await new MarkdownConverter().convert({
      html: Buffer.from('<html><body><div>{{ toHTML "file.md" }}</div></body></html>'),
      markdown: Buffer.from('# Release notes\n\n* **fixed** the thing\n'),
    });
    const text = pdfText(pdf);
    expect(text).toContain('Release notes');
    expect(text).toContain('fixed the thing');
    expect(text).not.toContain('toHTML');
  });

  it('answers with Gotenberg’s headers: output filename, trace, attachment', async () => {
    const form = new FormData();
    form.append(
      'files',
      new Blob(['<p>one</p><p style="break-before: page">two</p><p style="break-before: page">three</p>']),
      'index.html',
    );
    form.append('nativePageRanges', '2-3');
    form.append('emulatedMediaType', 'screen');
    const res = await fetch(`${base}/forms/chromium/convert/html`, {
      method: 'POST',
      body: form,
      headers: { 'Gotenberg-Output-Filename': 'my-report', 'Gotenberg-Trace': 'trace-123' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/pdf');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="my-report.pdf"');
    expect(res.headers.get('gotenberg-trace')).toBe('trace-123');
    const pdf = Buffer.from(await res.arrayBuffer());
    expect(pdfPages(pdf).map((p) => p.trim())).toEqual(['two', 'three']);

    // Without them: a generated name and a generated trace.
    const plainForm = new FormData();
    plainForm.append('files', new Blob(['<p>x</p>']), 'index.html');
    const other = await fetch(`${base}/forms/chromium/convert/html`, { method: 'POST', body: plainForm });
    expect(other.headers.get('content-disposition')).toMatch(/^attachment; filename="[0-9a-f-]{36}\.pdf"$/);
    expect(other.headers.get('gotenberg-trace')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('refuses a bad field with Gotenberg’s 400 and message, and a missing index.html', async () => {
    const form = new FormData();
    form.append('files', new Blob(['<p>x</p>']), 'index.html');
    form.append('landscape', 'maybe');
    form.append('marginTop', '1furlong');
    const res = await fetch(`${base}/forms/chromium/convert/html`, { method: 'POST', body: form });
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(await res.text()).toBe(
      "Invalid form data: form field 'landscape' is invalid (got 'maybe', resulting to strconv.ParseBool: parsing \"maybe\": invalid syntax)\n" +
        "form field 'marginTop' is invalid (got '1furlong', resulting to strconv.ParseFloat: parsing \"1furlong\": invalid syntax)",
    );

    const empty = new FormData();
    empty.append('landscape', 'true');
    const missing = await fetch(`${base}/forms/chromium/convert/html`, { method: 'POST', body: empty });
    expect(missing.status).toBe(400);
    expect(await missing.text()).toBe("Invalid form data: form file 'index.html' is required");

    const ranges = new FormData();
    ranges.append('files', new Blob(['<p>x</p>']), 'index.html');
    ranges.append('nativePageRanges', '5-9');
    const beyond = await fetch(`${base}/forms/chromium/convert/html`, { method: 'POST', body: ranges });
    expect(beyond.status).toBe(400);
    expect(await beyond.text()).toBe("The page ranges '5-9' (nativePageRanges) exceeds the page count");
  });

  it('applies the tools’ address rules to the url route', async () => {
    const form = new FormData();
    form.append('url', `${root}/`);
    const res = await fetch(`${base}/forms/chromium/convert/url`, { method: 'POST', body: form });
    expect(res.status).toBe(403);
    const file = new FormData();
    file.append('url', 'file:///etc/passwd');
    const refused = await fetch(`${base}/forms/chromium/convert/url`, { method: 'POST', body: file });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toMatch(/^file:\/\/ URLs are not accepted/);
  });

  it('is private: a wrong or missing token is a bare 404, the root paths need basic auth', async () => {
    const form = () => {
      const f = new FormData();
      f.append('files', new Blob(['<p>secret</p>']), 'index.html');
      return f;
    };
    const wrong = await fetch(`${root}/${'x'.repeat(32)}/forms/chromium/convert/html`, {
      method: 'POST',
      body: form(),
    });
    expect(wrong.status).toBe(404);
    expect(await wrong.text()).toBe('Not Found');
    expect((await fetch(`${root}/${'x'.repeat(32)}/health`)).status).toBe(404);
    expect((await fetch(`${root}/nothing-here`)).status).toBe(404);

    const bare = await fetch(`${root}/forms/chromium/convert/html`, { method: 'POST', body: form() });
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe('basic realm=Restricted');
    const badAuth = await fetch(`${root}/health`, {
      headers: { authorization: `Basic ${Buffer.from('app:wrong').toString('base64')}` },
    });
    expect(badAuth.status).toBe(401);

    // Gotenberg's own basic-auth scheme, as a client configures it.
    Chromiumly.configure({ endpoint: root, username: 'app', password: spec(0).password });
    const pdf = await new HtmlConverter().convert({ html: Buffer.from('<p>over basic auth</p>') });
    expect(pdfText(pdf)).toContain('over basic auth');
  });

  it('answers /health and /version as Gotenberg does', async () => {
    const res = await fetch(`${base}/health`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const body = (await res.json()) as {
      status: string;
      details: Record<string, { status: string; timestamp: string }>;
    };
    expect(body.status).toBe('up');
    expect(Object.keys(body.details).sort()).toEqual(['chromium', 'libreoffice']);
    expect(body.details.chromium).toMatchObject({ status: 'up' });
    expect(Date.parse(body.details.libreoffice!.timestamp)).not.toBeNaN();
    const version = await fetch(`${base}/version`);
    expect(await version.text()).toBe(GOTENBERG_VERSION);
  });

  it('logs request lines without the token, and stops and starts on its port', async () => {
    const ref = { id: spec(0).id, type: 'gotenberg' };
    const lines = await runner.logs(ref, 500);
    expect(lines.some((l) => / POST \/forms\/chromium\/convert\/html 200 \d+ms$/.test(l))).toBe(true);
    expect(lines.some((l) => / POST - 404 \d+ms$/.test(l))).toBe(true);
    expect(lines.join('\n')).not.toContain(spec(0).password);
    expect(await runner.logs(ref, 2)).toHaveLength(2);

    await runner.stop(ref);
    expect(await runner.status(ref)).toEqual({ running: false, pid: null });
    await expect(fetch(`${base}/version`)).rejects.toThrow();
    const again = await runner.start(spec(rt.port));
    expect(again.port).toBe(rt.port);
    expect((await fetch(`${base}/version`)).status).toBe(200);
  });
});
