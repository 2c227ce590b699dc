// Hostile PDFs: a merge never holds up the server (pdf-lib runs on a worker thread), and a file past
// the limits on pages, objects or time is answered 422 naming the limit, with the credit refunded.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toolsServiceFor } from '../../src/services/tools/index.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { makePdf, multipart } from './helpers.js';

/** A small file with `kids` references to one page object, saying it has `count` pages. */
function pageBomb(kids: number, count: number): Buffer {
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${Array<string>(kids).fill('3 0 R').join(' ')}] /Count ${count} >>`,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 10 10] >>',
  ];
  let out = '%PDF-1.4\n';
  const offsets: number[] = [];
  objects.forEach((body, i) => {
    offsets.push(out.length);
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = out.length;
  out += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  out += offsets.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('');
  out += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

describe('pdf merge of hostile files', () => {
  let t: TestApp;
  let small: Buffer;
  beforeAll(async () => {
    t = await createTestApp('sqlite', { env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' } });
    small = await makePdf(1, 'Small');
  });
  afterAll(async () => t?.close());

  const merge = (files: Buffer[]) => {
    const body = multipart(files.map((content) => ({ name: 'files[]', filename: 'f.pdf', content })));
    return t.app.inject({
      method: 'POST',
      url: '/api/v1/tools/pdf/merge',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    });
  };
  const used = async () =>
    (await t.app.inject({ url: '/api/v1/tools/balance', headers: t.auth.tools })).json<{
      data: { used: number };
    }>().data.used;

  it('refuses a file with more pages than a merge may have, whatever its /Count says, and refunds', async () => {
    const before = await used();
    const honest = await merge([pageBomb(20_000, 20_000), small]);
    expect(honest.statusCode).toBe(422);
    expect(honest.json()).toEqual({
      message: 'The given data was invalid.',
      errors: { 'files.0': ['The file files.0 has more than 5000 pages, the limit of one merge.'] },
    });
    const lying = await merge([small, pageBomb(20_000, 1)]);
    expect(lying.statusCode).toBe(422);
    expect(lying.json()).toMatchObject({
      errors: { 'files.1': [expect.stringContaining('more than 5000 pages')] },
    });
    expect(await used()).toBe(before);
  });

  it('keeps answering other requests while a long merge runs, and stops it at its time limit', async () => {
    await t.close();
    t = await createTestApp('sqlite', { env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' } });
    // Limits high enough to let pdf-lib work on 40,000 pages, and a 1 s time limit.
    toolsServiceFor(t.ctx, {
      mergeLimits: { maxPages: 100_000, maxObjects: 100_000 },
      mergeTimeoutMs: 1000,
    });
    const before = await used();
    const started = Date.now();
    const pending = merge([pageBomb(20_000, 1), pageBomb(20_000, 1)]);
    let polls = 0;
    let longestGap = 0;
    let last = Date.now();
    let finished = false;
    void pending.finally(() => (finished = true));
    while (!finished) {
      const health = await t.app.inject({ url: '/healthz' });
      expect(health.statusCode).toBe(200);
      polls += 1;
      const now = Date.now();
      longestGap = Math.max(longestGap, now - last);
      last = now;
      await new Promise((r) => setTimeout(r, 20));
    }
    const response = await pending;
    expect(response.statusCode).toBe(422);
    expect(response.json()).toMatchObject({
      errors: { files: ['The files took longer than 1 s to read, the limit of one merge.'] },
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    // On the request thread the same merge froze everything for seconds; off it, polls keep coming.
    expect(polls).toBeGreaterThan(5);
    expect(longestGap).toBeLessThan(500);
    expect(await used()).toBe(before);
  });
});
