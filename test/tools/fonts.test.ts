// Text in every script users write renders with a real font (not empty boxes), and a PDF's title is
// the page's own <title> or none, never the internal address Chromium loaded the page from.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';

function pdfTool(tool: 'pdffonts' | 'pdfinfo', bytes: Buffer): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-fonts-'));
  try {
    fs.writeFileSync(path.join(dir, 'f.pdf'), bytes);
    return execFileSync(tool, [path.join(dir, 'f.pdf')], { encoding: 'utf8' });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('fonts and titles of PDFs made from HTML', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('sqlite', { services: { tools: { chromiumSlots: 1 } } });
  });
  afterAll(async () => t?.close());

  const convert = (html: string) =>
    t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/html',
      headers: t.auth.tools,
      payload: { html },
    });

  const shot = async (text: string) => {
    const res = await t.request({
      method: 'POST',
      url: '/api/v1/tools/screenshot/html',
      headers: t.auth.tools,
      payload: {
        html: `<!doctype html><html><head><meta charset="utf-8"></head><body style="font-size:64px">${text}</body></html>`,
        width: 400,
        height: 120,
      },
    });
    expect(res.statusCode).toBe(200);
    return res.rawPayload;
  };

  it('draws Chinese, Japanese and emoji with real glyphs, not the boxes of a missing font', async () => {
    // Unassigned code points have no glyph in any font: they draw as the missing-glyph box. Text in
    // a script without an installed font draws exactly the same boxes.
    const boxes = (count: number) => shot('\u0378'.repeat(count));
    for (const text of ['中文字', '日本語', '한국어'])
      expect((await shot(text)).equals(await boxes(3))).toBe(false);
    expect((await shot('🚀🎉')).equals(await boxes(2))).toBe(false);
  });

  it('embeds the fonts in PDFs and takes the title from <title>', async () => {
    const res = await convert(
      '<!doctype html><html><head><meta charset="utf-8"><title>Fonts</title></head>' +
        '<body><p>中文测试 日本語のテキスト 🚀</p></body></html>',
    );
    expect(res.statusCode).toBe(200);
    expect(pdfTool('pdffonts', res.rawPayload)).toContain('Type 3'); // glyphs drawn, as Skia embeds CJK
    expect(pdfTool('pdfinfo', res.rawPayload)).toMatch(/^Title:\s+Fonts$/m);
  });

  it('gives a page without <title> no title, rather than the address it was loaded from', async () => {
    const res = await convert('<!doctype html><html><body><p>untitled</p></body></html>');
    expect(res.statusCode).toBe(200);
    const info = pdfTool('pdfinfo', res.rawPayload);
    expect(info).not.toMatch(/^Title:[ \t]*\S/m); // empty, or no Title at all
    expect(info).toMatch(/^Pages:\s+1$/m); // the file is still whole
  });
});
