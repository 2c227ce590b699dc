// HTML/Markdown/URL → PDF and screenshots through the real Chromium, with the address guard, isolation
// between jobs, timeouts, the bounded queue and crash recovery. The engine tests run on SQLite; the
// credit ledger itself is tested on both dialects in credits.test.ts.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_PATH, ChromiumEngine, needsScripts } from '../../src/drivers/chromium/engine.js';
import { createAddressGuard } from '../../src/drivers/net/guard.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { freePort, waitFor } from '../helpers/processes.js';
import { imageSize, localEngines, pdfInfo, pdfText } from './helpers.js';

// A 1×1 red PNG.
const PIXEL = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==',
  'base64',
);

interface Hit {
  path: string;
  cookie: string | undefined;
}

function startServer(
  port: number,
  routes: (hit: Hit, res: http.ServerResponse) => void,
): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    routes({ path: req.url ?? '/', cookie: req.headers.cookie }, res);
  });
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

/** An engine of its own, with one slot of each kind, for tests that count jobs per slot. */
const oneSlotEngine = (limits: { maxJobsPerSlot: number; maxJobsPerBrowser: number }) =>
  new ChromiumEngine({
    executablePath: CHROMIUM_PATH,
    slots: 1,
    jobTimeoutMs: 10_000,
    guard: createAddressGuard({ allow: [] }),
    maxResourceBytes: 1_000_000,
    ...limits,
  });

describe('tools on Chromium', () => {
  let t: TestApp;
  let site: http.Server;
  let decoy: http.Server;
  let base: string;
  let decoyBase: string;
  const siteHits: Hit[] = [];
  const decoyHits: Hit[] = [];
  const secretDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-secret-'));
  const secretFile = path.join(secretDir, 'secret.txt');
  fs.writeFileSync(secretFile, 'TOPSECRET-7f3a91');

  const html = (body: string) =>
    `<!doctype html><html><head><meta charset="utf-8"></head><body>${body}</body></html>`;

  beforeAll(async () => {
    const sitePort = await freePort();
    const decoyPort = await freePort();
    base = `http://127.0.0.1:${sitePort}`;
    decoyBase = `http://127.0.0.1:${decoyPort}`;
    site = await startServer(sitePort, (hit, res) => {
      siteHits.push(hit);
      const send = (body: string, type = 'text/html; charset=utf-8') => {
        res.writeHead(200, { 'content-type': type });
        res.end(body);
      };
      if (hit.path === '/page') {
        return send(
          html(
            `<h1>Quarterly report from the test server</h1><img id="ok" src="/pixel.png">` +
              `<img src="http://10.0.0.1/internal.png"><img src="${decoyBase}/stolen.png">` +
              `<img src="http://169.254.169.254/latest/meta-data/">`,
          ),
        );
      }
      if (hit.path === '/pixel.png') return send(PIXEL.toString('latin1'), 'image/png');
      if (hit.path === '/redirect') {
        res.writeHead(302, { location: `${decoyBase}/landing` });
        return res.end();
      }
      if (hit.path === '/redirect-ok') {
        res.writeHead(302, { location: `${base}/page` });
        return res.end();
      }
      if (hit.path === '/set') {
        res.setHeader('set-cookie', 'header_session=leaked; Path=/; Max-Age=3600; SameSite=None');
        return send(
          html(
            `<p>setter</p><script>document.cookie = "session=leaked; path=/; max-age=3600";` +
              `localStorage.setItem("token", "leaked"); sessionStorage.setItem("s", "leaked");</script>`,
          ),
        );
      }
      if (hit.path === '/read') {
        return send(
          html(
            `<p id="out">pending</p><script>const out = document.getElementById("out"); try { out.textContent = "cookie=[" +` +
              ` document.cookie + "] local=[" + localStorage.getItem("token") + "] session=[" + sessionStorage.getItem("s") + "]";` +
              ` } catch (e) { out.textContent = "storage=none"; }</script>`,
          ),
        );
      }
      if (hit.path === '/slow') {
        setTimeout(() => send(html('<p>finally</p>')), 1500);
        return;
      }
      if (hit.path === '/hang') return; // never answers
      res.writeHead(404);
      res.end();
    });
    decoy = await startServer(decoyPort, (hit, res) => {
      decoyHits.push(hit);
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<p>DECOY CONTENT</p>');
    });
    // Only the site's own address and port are allowed; the decoy on another loopback port is private.
    t = await createTestApp('sqlite', {
      env: { BERTH_TOOLS_ALLOW_PRIVATE: `127.0.0.1:${sitePort}`, BERTH_TOOLS_MONTHLY_CREDITS: '1000' },
      services: { tools: { chromiumSlots: 1, chromiumTimeoutMs: 4_000, chromiumMaxQueued: 2 } },
    });
  });

  afterAll(async () => {
    await t?.close();
    site?.close();
    decoy?.close();
    fs.rmSync(secretDir, { recursive: true, force: true });
  });

  const post = (url: string, payload: Record<string, unknown>) =>
    t.request({ method: 'POST', url, headers: t.auth.tools, payload });
  const balance = async () =>
    (await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers: t.auth.tools })).json<{
      data: { used: number };
    }>().data.used;

  it('converts HTML to a PDF with the requested paper, and answers with the file', async () => {
    const res = await post('/api/v1/tools/pdf/convert/html', {
      html: html('<h1>Invoice 2026-0042</h1><table><tr><td>Widget</td><td>12.50 EUR</td></tr></table>'),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers['content-disposition']).toContain('filename="document.pdf"');
    expect(res.headers['x-credits-remaining']).toBe('999');
    const info = pdfInfo(res.rawPayload);
    expect(info.pages).toBe(1);
    expect(info.pageSize).toMatch(/^612 x 792 pts/); // US Letter by default, as Gotenberg
    const text = pdfText(res.rawPayload);
    expect(text).toContain('Invoice 2026-0042');
    expect(text).toContain('12.50 EUR');

    const a4 = await post('/api/v1/tools/pdf/convert/html', {
      html: html(
        '<p>first</p><p style="break-before: page">second</p><p style="break-before: page">third</p>',
      ),
      paperWidth: '210mm',
      paperHeight: '297mm',
      landscape: true,
      marginTop: '1cm',
      scale: 0.8,
    });
    expect(a4.statusCode).toBe(200);
    const a4info = pdfInfo(a4.rawPayload);
    expect(a4info.pages).toBe(3);
    expect(a4info.pageSize).toMatch(/^841\.\d+ x 595\.\d+ pts/);
  });

  it('converts Markdown with the default stylesheet and without raw HTML', async () => {
    const res = await post('/api/v1/tools/pdf/convert/markdown', {
      markdown:
        '# Release notes\n\n| Item | Price |\n|---|---|\n| Berth | 0 EUR |\n\n<b>raw tag</b>\n\n```\ncode block\n```\n',
    });
    expect(res.statusCode).toBe(200);
    const text = pdfText(res.rawPayload);
    expect(text).toContain('Release notes');
    expect(text).toMatch(/Berth\s+0 EUR/);
    // html:false → the tag is shown as text, not interpreted.
    expect(text).toContain('<b>raw tag</b>');
    expect(text).toContain('code block');
    const templated = await post('/api/v1/tools/pdf/convert/markdown', {
      markdown: '**inside**',
      html: html('<p>Header of the template</p>{{ toHTML "index.md" }}<p>Footer</p>'),
    });
    expect(templated.statusCode).toBe(200);
    expect(pdfText(templated.rawPayload)).toMatch(/Header of the template\s+inside\s+Footer/);
  });

  it('converts a URL, loads its allowed sub-resources and refuses private ones', async () => {
    decoyHits.length = 0;
    const res = await post('/api/v1/tools/pdf/convert/url', { url: `${base}/page`, printBackground: true });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-disposition']).toContain('filename="page.pdf"');
    expect(pdfText(res.rawPayload)).toContain('Quarterly report from the test server');
    expect(siteHits.some((h) => h.path === '/pixel.png')).toBe(true);
    // 10.0.0.1, the decoy's port and the metadata address were all refused, and the decoy saw nothing.
    expect(res.headers['x-blocked-requests']).toBe('3');
    expect(decoyHits).toEqual([]);
  });

  it('refuses a redirect to a private address, and charges nothing', async () => {
    decoyHits.length = 0;
    const before = await balance();
    const res = await post('/api/v1/tools/pdf/convert/url', { url: `${base}/redirect` });
    expect(res.statusCode).toBe(422);
    expect(res.json<{ errors: { url: string[] } }>().errors.url[0]).toMatch(/public address/);
    expect(decoyHits).toEqual([]);
    expect(await balance()).toBe(before);
    // A redirect that stays on an allowed address is followed.
    const ok = await post('/api/v1/tools/screenshot/url', {
      url: `${base}/redirect-ok`,
      width: 640,
      height: 480,
    });
    expect(ok.statusCode).toBe(200);
    expect(imageSize(ok.rawPayload)).toEqual({ format: 'png', width: 640, height: 480 });
  });

  it.each([
    ['http://10.0.0.1/', /private/],
    ['http://169.254.169.254/latest/meta-data/', /linkLocal/],
    ['http://[::1]:80/', /loopback/],
    ['http://localhost/', /loopback/],
    ['http://0x7f.1/', /loopback/],
    ['http://224.0.0.1/', /multicast/],
  ])('refuses %s before charging', async (url, why) => {
    const before = await balance();
    for (const endpoint of ['/api/v1/tools/pdf/convert/url', '/api/v1/tools/screenshot/url']) {
      const res = await post(endpoint, { url });
      expect(res.statusCode).toBe(422);
      expect(res.json<{ errors: { url: string[] } }>().errors.url[0]).toMatch(why);
    }
    expect(await balance()).toBe(before);
  });

  it('gives HTML jobs no file:// access', async () => {
    const res = await post('/api/v1/tools/pdf/convert/html', {
      html: html(
        `<p>visible</p><iframe src="file://${secretFile}"></iframe><object data="file://${secretFile}"></object>` +
          `<script>fetch("file://${secretFile}").then(r => r.text()).then(t => document.body.append(t)).catch(() => {});</script>`,
      ),
    });
    expect(res.statusCode).toBe(200);
    const text = pdfText(res.rawPayload);
    expect(text).toContain('visible');
    expect(text).not.toContain('TOPSECRET');
    const fileUrl = await post('/api/v1/tools/pdf/convert/url', { url: `file://${secretFile}` });
    expect(fileUrl.statusCode).toBe(422);
  });

  it('takes PNG and JPEG screenshots of the requested size', async () => {
    const png = await post('/api/v1/tools/screenshot/html', {
      html: html('<h1 style="color:red">Shot</h1>'),
    });
    expect(png.statusCode).toBe(200);
    expect(png.headers['content-type']).toBe('image/png');
    expect(png.headers['content-disposition']).toContain('screenshot.png');
    expect(imageSize(png.rawPayload)).toEqual({ format: 'png', width: 1920, height: 1080 });
    const jpeg = await post('/api/v1/tools/screenshot/html', {
      html: html('<h1>Shot</h1>'),
      width: 800,
      height: 600,
      format: 'jpeg',
    });
    expect(jpeg.headers['content-type']).toBe('image/jpeg');
    expect(imageSize(jpeg.rawPayload)).toEqual({ format: 'jpeg', width: 800, height: 600 });
    const full = await post('/api/v1/tools/screenshot/html', {
      html: html('<div style="height:3000px">tall</div>'),
      width: 400,
      height: 300,
      fullPage: true,
    });
    const size = imageSize(full.rawPayload);
    expect(size.width).toBe(400);
    expect(size.height).toBeGreaterThanOrEqual(3000);
    const url = await post('/api/v1/tools/screenshot/url', { url: `${base}/page`, width: 1024, height: 768 });
    expect(imageSize(url.rawPayload)).toEqual({ format: 'png', width: 1024, height: 768 });
  });

  it('answers 422 for invalid or missing fields', async () => {
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['/api/v1/tools/pdf/convert/html', {}, 'html'],
      ['/api/v1/tools/pdf/convert/html', { html: '<p>x</p>', scale: 5 }, 'scale'],
      ['/api/v1/tools/pdf/convert/html', { html: '<p>x</p>', paperWidth: 'wide' }, 'paperWidth'],
      ['/api/v1/tools/pdf/convert/markdown', { markdown: 'x'.repeat(1024 * 1024 + 1) }, 'markdown'],
      ['/api/v1/tools/pdf/convert/url', { url: 'not a url' }, 'url'],
      ['/api/v1/tools/pdf/convert/url', { url: `https://example.com/${'a'.repeat(2048)}` }, 'url'],
      ['/api/v1/tools/screenshot/html', { html: '<p>x</p>', width: 99 }, 'width'],
      ['/api/v1/tools/screenshot/html', { html: '<p>x</p>', height: 4097 }, 'height'],
      ['/api/v1/tools/screenshot/html', { html: '<p>x</p>', format: 'gif' }, 'format'],
    ];
    const before = await balance();
    for (const [url, payload, field] of cases) {
      const res = await post(url, payload);
      expect(res.statusCode, `${url} ${field}`).toBe(422);
      const body = res.json<{ message: string; errors: Record<string, string[]> }>();
      expect(body.message).toBe('The given data was invalid.');
      expect(Object.keys(body.errors)).toContain(field);
    }
    expect(await balance()).toBe(before);
    const unauthenticated = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/html',
      payload: { html: 'x' },
    });
    expect(unauthenticated.statusCode).toBe(401);
  });

  it('leaves no cookies, storage or script state from one job to the next', async () => {
    // One slot: both jobs run on the same warm page.
    const first = await post('/api/v1/tools/pdf/convert/html', {
      html: html(
        `<p>one</p><script>window.leak = "global"; window.name = "named";` +
          `try { document.cookie = "c=1"; localStorage.setItem("k", "v"); sessionStorage.setItem("s", "v"); } catch (e) {}` +
          `setInterval(() => { try { localStorage.setItem("late", "1"); } catch (e) {} }, 1);</script>` +
          `<iframe src="${base}/set"></iframe>`,
      ),
    });
    expect(first.statusCode).toBe(200);
    siteHits.length = 0;
    const second = await post('/api/v1/tools/pdf/convert/html', {
      html: html(
        `<p id="r">pending</p><script>let s = "global=[" + (window.leak ?? "") + "] name=[" + window.name + "]";` +
          `try { s += " cookie=[" + document.cookie + "] local=[" + localStorage.getItem("k") + "]"; } catch (e) { s += " storage=none"; }` +
          `document.getElementById("r").textContent = s;</script><iframe src="${base}/read"></iframe>`,
      ),
    });
    const text = pdfText(second.rawPayload);
    expect(text).toMatch(/global=\[\] name=\[\] (storage=none|cookie=\[\] local=\[null\])/);
    expect(text).not.toContain('leaked');
    // The iframe inherits the job's sandbox: no storage there either, and the cookie that /set sent in
    // a header was cleared with the first job.
    expect(text).toMatch(/pending|storage=none/);
    expect(siteHits.find((h) => h.path === '/read')).toBeDefined();
    expect(siteHits.find((h) => h.path === '/read')?.cookie).toBeUndefined();

    // URL jobs: each in a fresh browser context.
    expect((await post('/api/v1/tools/pdf/convert/url', { url: `${base}/set` })).statusCode).toBe(200);
    siteHits.length = 0;
    const read = await post('/api/v1/tools/pdf/convert/url', { url: `${base}/read` });
    expect(pdfText(read.rawPayload)).toContain('cookie=[] local=[null] session=[null]');
    expect(siteHits.find((h) => h.path === '/read')?.cookie).toBeUndefined();
  });

  it('sends documents without scripts to JavaScript-free slots, and leaves nothing there either', async () => {
    expect(needsScripts('<h1>Invoice</h1><table><tr><td>1</td></tr></table>')).toBe(false);
    for (const dynamic of [
      '<SCRIPT>x()</SCRIPT>',
      '<img src=x onerror=alert(1)>',
      '<svg onload="x()">',
      '<a href="javascript:x()">',
      '<meta http-equiv="refresh" content="0;url=/x">',
    ]) {
      expect(needsScripts(dynamic), dynamic).toBe(true);
    }
    siteHits.length = 0;
    // A static job whose frame receives a cookie in a Set-Cookie header…
    const first = await post('/api/v1/tools/pdf/convert/html', {
      html: html(`<p>static one</p><iframe src="${base}/set"></iframe>`),
    });
    expect(first.statusCode).toBe(200);
    expect(pdfText(first.rawPayload)).toContain('static one');
    // …and the next static job on the same slot: the server sees no cookie, and no script ran.
    const second = await post('/api/v1/tools/pdf/convert/html', {
      html: html(`<p>static two</p><iframe src="${base}/read"></iframe>`),
    });
    const text = pdfText(second.rawPayload);
    expect(text).toContain('static two');
    expect(text).toContain('pending'); // the frame's script did not run: JavaScript is off there
    expect(siteHits.find((h) => h.path === '/read')?.cookie).toBeUndefined();
    // A document with a script still gets it run.
    const scripted = await post('/api/v1/tools/pdf/convert/html', {
      html: html(
        '<p id="s">before</p><script>document.getElementById("s").textContent = "script ran"</script>',
      ),
    });
    expect(pdfText(scripted.rawPayload)).toContain('script ran');
  });

  it('does not carry the viewport of one job into the next', async () => {
    const probe = html(
      '<p id="w">?</p><script>document.getElementById("w").textContent = "width=" + innerWidth;</script>',
    );
    const shot = await post('/api/v1/tools/screenshot/html', { html: probe, width: 400, height: 300 });
    expect(imageSize(shot.rawPayload)).toEqual({ format: 'png', width: 400, height: 300 });
    const pdf = await post('/api/v1/tools/pdf/convert/html', { html: probe });
    expect(pdfText(pdf.rawPayload)).toContain('width=1280');
  });

  it('refunds a job that times out (502) and keeps working afterwards', async () => {
    const before = await balance();
    const res = await post('/api/v1/tools/pdf/convert/url', { url: `${base}/hang` });
    expect(res.statusCode).toBe(502);
    expect(res.json<{ message: string }>().message).toMatch(/did not render within/);
    expect(await balance()).toBe(before);
    const after = await post('/api/v1/tools/pdf/convert/html', { html: html('<p>still alive</p>') });
    expect(after.statusCode).toBe(200);
    expect(pdfText(after.rawPayload)).toContain('still alive');
  });

  it('answers 429 with Retry-After when the queue is full, and refunds those calls', async () => {
    const before = await balance();
    // One slot, two places in the queue: of six slow jobs, three are refused at once.
    const responses = await Promise.all(
      Array.from({ length: 6 }, () => post('/api/v1/tools/pdf/convert/url', { url: `${base}/slow` })),
    );
    const codes = responses.map((r) => r.statusCode).sort();
    expect(codes).toEqual([200, 200, 200, 429, 429, 429]);
    const refused = responses.find((r) => r.statusCode === 429)!;
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(await balance()).toBe(before + 3);
  });

  it('restarts Chromium after a crash', async () => {
    const tools = t.ctx.services.tools;
    const restarts = tools.health().engines.chromium.restarts;
    await localEngines(t).chromium.crashForTest();
    await waitFor(
      () => Promise.resolve(tools.health().engines.chromium.restarts > restarts ? true : undefined),
      10_000,
    );
    const res = await post('/api/v1/tools/pdf/convert/html', { html: html('<p>after the crash</p>') });
    expect(res.statusCode).toBe(200);
    expect(pdfText(res.rawPayload)).toContain('after the crash');
    const health = await t.request({ method: 'GET', url: '/api/v1/tools/health', headers: t.auth.tools });
    expect(
      health.json<{ data: { engines: { chromium: { status: string } } } }>().data.engines.chromium.status,
    ).toBe('ready');
  });

  it('does not keep a finished job running in an idle slot', async () => {
    const engine = oneSlotEngine({ maxJobsPerSlot: 10, maxJobsPerBrowser: 10 });
    const shot = { width: 200, height: 200, format: 'png' as const, fullPage: false };
    try {
      const animated = '<style>p{animation:a 1s infinite}@keyframes a{to{opacity:0}}</style><p>spin</p>';
      await engine.screenshot({ kind: 'html', html: html(animated) }, shot);
      // Static slot: emptied at once.
      const first = await waitFor(async () => (await engine.freeSlotDocuments())[0]);
      expect(first).toMatchObject({ kind: 'static' });
      expect(first?.html).not.toContain('spin');
      const script =
        '<p id=n>0</p><script>(function f(){n.textContent++;requestAnimationFrame(f)})()</script>';
      await engine.screenshot({ kind: 'html', html: html(script) }, shot);
      // Scripted slot: the job's document stays a moment (the next job would replace it), then it is left.
      const scriptedUrl = async () =>
        (await engine.freeSlotDocuments()).find((d) => d.kind === 'scripted')?.url;
      const kept = await waitFor(scriptedUrl);
      expect(kept).toMatch(/\.invalid\//);
      await waitFor(async () => ((await scriptedUrl()) === 'about:blank' ? true : undefined), 5_000);
      // The slot still works afterwards.
      const again = await engine.screenshot({ kind: 'html', html: html(script) }, shot);
      expect(again.body.subarray(1, 4).toString()).toBe('PNG');
    } finally {
      await engine.close();
    }
  });

  it('replaces slots and the browser after their number of jobs', async () => {
    const engine = oneSlotEngine({ maxJobsPerSlot: 2, maxJobsPerBrowser: 3 });
    const settings = {
      landscape: false,
      printBackground: false,
      scale: 1,
      width: '8.5in',
      height: '11in',
      margin: { top: '0', bottom: '0', left: '0', right: '0' },
    };
    try {
      for (let i = 1; i <= 5; i++) {
        const result = await engine.pdf({ kind: 'html', html: html(`<p>job number ${i}</p>`) }, settings);
        expect(pdfText(result.body)).toContain(`job number ${i}`);
      }
      const status = engine.status();
      expect(status.jobs).toBe(5);
      expect(status.restarts).toBe(1); // after job 3
      expect(status.failures).toBe(0);
    } finally {
      await engine.close();
    }
  });
});
