// Hostile PDFs cannot freeze the server (issue 11, item 4): a small file that names 20,000 pages is
// merged on a worker thread while a cheap route keeps answering, and is refused with a 422 naming the
// limit, with the credit given back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PDF_LIMITS } from '../../src/drivers/pdf/merge.js';
import type { ToolsOptions } from '../../src/composition.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { makePdf, multipart } from './helpers.js';

/** A PDF whose page tree lists one page object `pages` times: a few hundred KB, `pages` pages to pdf-lib. */
function manyPages(pages: number): Buffer {
  const kids = Array.from({ length: pages }, () => '3 0 R').join(' ');
  const objects = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    `<< /Type /Pages /Kids [${kids}] /Count ${pages} >>`,
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R /Resources << >> >>',
    '<< /Length 0 >>\nstream\n\nendstream',
  ];
  let body = '%PDF-1.7\n';
  const offsets: number[] = [];
  objects.forEach((object, i) => {
    offsets.push(Buffer.byteLength(body, 'latin1'));
    body += `${i + 1} 0 obj\n${object}\nendobj\n`;
  });
  const xref = Buffer.byteLength(body, 'latin1');
  body += `xref\n0 ${objects.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) body += `${String(offset).padStart(10, '0')} 00000 n \n`;
  body += `trailer\n<< /Size ${objects.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(body, 'latin1');
}

function openApp(overrides: Partial<ToolsOptions>): Promise<TestApp> {
  return createTestApp('sqlite', {
    env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' },
    services: { tools: overrides },
  });
}

function merge(t: TestApp, files: Buffer[]) {
  const body = multipart(
    files.map((content, i) => ({ name: 'files[]', filename: `f${i}.pdf`, content, type: 'application/pdf' })),
  );
  return t.request({
    method: 'POST',
    url: '/api/v1/tools/pdf/merge',
    headers: { ...t.auth.tools, ...body.headers },
    payload: body.payload,
  });
}

async function used(t: TestApp): Promise<number> {
  const res = await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers: t.auth.tools });
  return res.json<{ data: { used: number } }>().data.used;
}

/** Runs `work` while polling /healthz every 20 ms; the longest time between two answers. */
async function whilePolling<T>(
  t: TestApp,
  work: () => Promise<T>,
): Promise<{ result: T; maxGapMs: number; polls: number }> {
  const answers: number[] = [performance.now()];
  let failures = 0;
  const timer = setInterval(() => {
    void t.request({ method: 'GET', url: '/healthz' }).then((res) => {
      if (res.statusCode === 200) answers.push(performance.now());
      else failures += 1;
    });
  }, 20);
  try {
    const result = await work();
    answers.push(performance.now());
    expect(failures).toBe(0);
    const gaps = answers.slice(1).map((at, i) => at - answers[i]!);
    return { result, maxGapMs: Math.max(...gaps), polls: answers.length - 2 };
  } finally {
    clearInterval(timer);
  }
}

describe('pdf merge limits', () => {
  let one: Buffer;
  const hostile = manyPages(20_000);

  beforeAll(async () => {
    one = await makePdf(1, 'One');
  });

  describe('with the default limits', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await openApp({});
    });
    afterAll(async () => {
      await t?.close();
    });

    it('refuses a file of 20,000 pages with 422 naming the page limit, charges nothing, stays responsive', async () => {
      expect(hostile.length).toBeLessThan(1024 * 1024);
      const before = await used(t);
      const { result: res, maxGapMs } = await whilePolling(t, () => merge(t, [one, hostile]));
      expect(res.statusCode).toBe(422);
      expect(res.json<{ errors: { files: string[] } }>().errors.files[0]).toBe(
        `The files have more than ${DEFAULT_PDF_LIMITS.maxPages} pages together.`,
      );
      expect(await used(t)).toBe(before);
      expect(maxGapMs).toBeLessThan(2_000);
      // The pool is reused after a refusal: an ordinary merge still works.
      expect((await merge(t, [one, one])).statusCode).toBe(200);
    });
  });

  describe('with limits high enough that the work runs long', () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await openApp({ mergeLimits: { ...DEFAULT_PDF_LIMITS, maxPages: 1_000_000, timeoutMs: 3_000 } });
    });
    afterAll(async () => {
      await t?.close();
    });

    it('the API answers while pdf-lib works, and the time limit ends the merge with 422', async () => {
      const before = await used(t);
      const { result: res, maxGapMs, polls } = await whilePolling(t, () => merge(t, [one, hostile, hostile]));
      expect(res.statusCode).toBe(422);
      expect(res.json<{ errors: { files: string[] } }>().errors.files[0]).toBe(
        'The files could not be merged within 3 s.',
      );
      expect(await used(t)).toBe(before);
      // About 150 polls in 3 s; a blocked event loop answers none until the end.
      expect(polls).toBeGreaterThan(20);
      expect(maxGapMs).toBeLessThan(2_000);
      // The timed-out worker was replaced.
      expect((await merge(t, [one, one])).statusCode).toBe(200);
    });

    it('refuses inputs over the size limit with 413 and over the object limit with 422, naming them', async () => {
      const small = await openApp({
        mergeLimits: { ...DEFAULT_PDF_LIMITS, maxBytes: 1024 * 1024, maxObjects: 10 },
      });
      try {
        const before = await used(small);
        const res = await merge(small, [one, Buffer.concat([one, Buffer.alloc(1024 * 1024)])]);
        expect(res.statusCode).toBe(413);
        expect(res.json<{ message: string }>().message).toBe('The files are larger than 1 MiB together.');
        // A one-page pdf-lib file holds about 8 objects: two exceed 10.
        const objects = await merge(small, [one, one]);
        expect(objects.statusCode).toBe(422);
        expect(objects.json<{ errors: { files: string[] } }>().errors.files[0]).toBe(
          'The files hold more than 10 PDF objects together.',
        );
        expect(await used(small)).toBe(before);
      } finally {
        await small.close();
      }
    });
  });
});
