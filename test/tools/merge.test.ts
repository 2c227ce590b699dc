// PDF merge: order, page counts, and the 422s for counts, non-PDFs, encrypted and damaged files.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { makePdf, multipart, pdfInfo, pdfPages, qpdfCheck, type Part } from './helpers.js';

describe('pdf merge', () => {
  let t: TestApp;
  let one: Buffer;
  let two: Buffer;
  let three: Buffer;
  let encrypted: Buffer;

  beforeAll(async () => {
    t = await createTestApp('sqlite', { env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' } });
    [one, two, three] = await Promise.all([makePdf(1, 'First'), makePdf(2, 'Second'), makePdf(3, 'Third')]);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-merge-'));
    fs.writeFileSync(path.join(dir, 'plain.pdf'), two);
    execFileSync('qpdf', [
      '--encrypt',
      'user',
      'owner',
      '256',
      '--',
      path.join(dir, 'plain.pdf'),
      path.join(dir, 'locked.pdf'),
    ]);
    encrypted = fs.readFileSync(path.join(dir, 'locked.pdf'));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  afterAll(async () => {
    await t?.close();
  });

  const merge = (files: Buffer[], field = 'files[]') => {
    const parts: Part[] = files.map((content, i) => ({
      name: field,
      filename: `f${i}.pdf`,
      content,
      type: 'application/pdf',
    }));
    const body = multipart(parts);
    return t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/merge',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    });
  };
  const used = async () =>
    (await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers: t.auth.tools })).json<{
      data: { used: number };
    }>().data.used;

  it('merges in the order given', async () => {
    const res = await merge([three, one, two]);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers['content-disposition']).toContain('filename="merged.pdf"');
    expect(pdfInfo(res.rawPayload).pages).toBe(6);
    expect(pdfPages(res.rawPayload).map((p) => p.trim())).toEqual([
      'Third page 1',
      'Third page 2',
      'Third page 3',
      'First page 1',
      'Second page 1',
      'Second page 2',
    ]);
    qpdfCheck(res.rawPayload);
    // `files` without brackets is accepted too.
    expect((await merge([one, two], 'files')).statusCode).toBe(200);
  });

  it('accepts 20 files and refuses 1 or 21', async () => {
    const twenty = await merge(Array.from({ length: 20 }, () => one));
    expect(twenty.statusCode).toBe(200);
    expect(pdfInfo(twenty.rawPayload).pages).toBe(20);
    const before = await used();
    const single = await merge([one]);
    expect(single.statusCode).toBe(422);
    expect(single.json<{ errors: { files: string[] } }>().errors.files[0]).toMatch(/at least 2/);
    const many = await merge(Array.from({ length: 21 }, () => one));
    expect(many.statusCode).toBe(422);
    expect(many.json<{ errors: { files: string[] } }>().errors.files[0]).toMatch(/more than 20/);
    expect(await used()).toBe(before);
  });

  it.each([
    ['not a PDF', () => Buffer.from('hello, I am text'), /not a PDF/],
    ['encrypted', () => encrypted, /encrypted/],
    [
      'damaged',
      () => Buffer.concat([Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog'), Buffer.alloc(100, 0x20)]),
      /damaged/,
    ],
  ])('refuses a %s file with 422 and refunds', async (_name, file, message) => {
    const before = await used();
    const res = await merge([one, file()]);
    expect(res.statusCode).toBe(422);
    const body = res.json<{ message: string; errors: Record<string, string[]> }>();
    expect(body.errors['files.1']?.[0]).toMatch(message);
    expect(await used()).toBe(before);
  });
});
