// Office → PDF through warm LibreOffice listeners, the cold fallback, type checks and crash recovery.
// Inputs are made at test time: text formats are written directly, .docx/.xlsx/.odt/.doc by soffice.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OfficeEngine, SOFFICE_PATH } from '../../src/drivers/libreoffice/engine.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { localEngines, multipart, pdfInfo, pdfText } from './helpers.js';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-office-test-'));
const REPORT = Array.from({ length: 140 }, (_, i) => `Line ${i + 1} of the annual report`).join('\n');
const SHEET = 'product,amount,price\nalpha,3,9.50\nbeta,7,12.25\ngamma,1,99.00\n';

/** Converts `file` with a cold soffice of its own profile (so the conversions can run side by side). */
async function sofficeConvert(file: string, format: string, profile: string): Promise<string> {
  const out = path.join(dir, `out-${format}`);
  await run(SOFFICE_PATH, [
    `-env:UserInstallation=file://${path.join(dir, profile)}`,
    '--headless',
    '--norestore',
    '--convert-to',
    format,
    '--outdir',
    out,
    file,
  ]);
  return path.join(out, `${path.parse(file).name}.${format.split(':')[0]}`);
}

describe('office conversion', () => {
  let t: TestApp;
  const inputs: Record<string, Buffer> = {};

  beforeAll(async () => {
    fs.writeFileSync(path.join(dir, 'report.txt'), REPORT);
    fs.writeFileSync(path.join(dir, 'sheet.csv'), SHEET);
    inputs.txt = Buffer.from(REPORT);
    inputs.csv = Buffer.from(SHEET);
    inputs.rtf = Buffer.from(
      '{\\rtf1\\ansi{\\fonttbl{\\f0 Helvetica;}}\\f0 Rich text \\b bold words\\b0 here.\\par}',
    );
    const [docx, xlsx, odt, doc] = await Promise.all([
      sofficeConvert(path.join(dir, 'report.txt'), 'docx', 'p1'),
      sofficeConvert(path.join(dir, 'sheet.csv'), 'xlsx', 'p2'),
      sofficeConvert(path.join(dir, 'report.txt'), 'odt', 'p3'),
      sofficeConvert(path.join(dir, 'report.txt'), 'doc', 'p4'),
    ]);
    inputs.docx = fs.readFileSync(docx);
    inputs.xlsx = fs.readFileSync(xlsx);
    inputs.odt = fs.readFileSync(odt);
    inputs.doc = fs.readFileSync(doc);
    t = await createTestApp('sqlite', {
      env: { BERTH_TOOLS_MONTHLY_CREDITS: '100' },
      services: { tools: { officeListeners: 2 } },
    });
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const upload = (filename: string, content: Buffer, field = 'file') => {
    const body = multipart([{ name: field, filename, content }]);
    return t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/office',
      headers: { ...t.auth.tools, ...body.headers },
      payload: body.payload,
    });
  };
  const used = async () =>
    (await t.request({ method: 'GET', url: '/api/v1/tools/balance', headers: t.auth.tools })).json<{
      data: { used: number };
    }>().data.used;

  it('converts every kind of input to a PDF with its content', async () => {
    // Side by side: the two listeners share the work.
    const kinds = ['docx', 'odt', 'doc', 'txt', 'xlsx', 'csv', 'rtf'];
    const responses = await Promise.all(kinds.map((kind) => upload(`input.${kind}`, inputs[kind]!)));
    for (const [i, kind] of kinds.entries()) {
      const res = responses[i]!;
      expect(res.statusCode, kind).toBe(200);
      expect(res.headers['content-type']).toBe('application/pdf');
      expect(res.headers['content-disposition']).toContain('filename="input.pdf"');
      const text = pdfText(res.rawPayload);
      if (['docx', 'odt', 'doc', 'txt'].includes(kind)) {
        expect(text, kind).toContain('Line 1 of the annual report');
        expect(text, kind).toContain('Line 140 of the annual report');
        // 140 lines do not fit on one page.
        expect(pdfInfo(res.rawPayload).pages, kind).toBeGreaterThan(1);
      } else if (kind === 'rtf') {
        expect(text).toMatch(/Rich text\s+bold words\s*here/);
      } else {
        // Comma-separated: the cells land in separate columns.
        expect(text, kind).toMatch(/alpha\s+3\s+9\.5/);
        expect(text, kind).toMatch(/gamma\s+1\s+99/);
      }
    }
    const health = await t.request({ method: 'GET', url: '/api/v1/tools/health', headers: t.auth.tools });
    const office = health.json<{
      data: { engines: { libreoffice: { status: string; listeners: number; coldConversions: number } } };
    }>().data.engines.libreoffice;
    expect(office.status).toBe('ready');
    expect(office.listeners).toBe(2);
    expect(office.coldConversions).toBe(0);
  });

  it('refuses files of the wrong type with 422 and charges nothing', async () => {
    const before = await used();
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    const cases: Array<[string, Buffer]> = [
      ['picture.docx', png],
      ['program.exe', Buffer.from('MZ')],
      ['noextension', inputs.docx!],
      ['binary.txt', Buffer.from([0x41, 0x00, 0x42])],
      ['fake.rtf', Buffer.from('plain text')],
    ];
    for (const [name, content] of cases) {
      const res = await upload(name, content);
      expect(res.statusCode, name).toBe(422);
      expect(res.json<{ errors: { file: string[] } }>().errors.file).toHaveLength(1);
    }
    // A part under another name is skipped, the `file` part after it is used.
    const other = multipart([
      { name: 'attachment', filename: 'x.docx', content: inputs.docx! },
      { name: 'file', filename: 'second.txt', content: 'the second part' },
    ]);
    const mixed = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/office',
      headers: { ...t.auth.tools, ...other.headers },
      payload: other.payload,
    });
    expect(mixed.statusCode).toBe(200);
    expect(pdfText(mixed.rawPayload)).toContain('the second part');
    const missing = await upload('report.docx', inputs.docx!, 'document');
    expect(missing.statusCode).toBe(422);
    expect(missing.json<{ errors: { file: string[] } }>().errors.file[0]).toMatch(/required/);
    const json = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/convert/office',
      headers: t.auth.tools,
      payload: { file: 'x' },
    });
    expect(json.statusCode).toBe(422);
    const large = await upload('big.txt', Buffer.alloc(25 * 1024 * 1024 + 1, 0x61));
    expect(large.statusCode).toBe(422);
    expect(large.json<{ errors: { file: string[] } }>().errors.file[0]).toMatch(/25600 kilobytes/);
    // A zip that is no document: LibreOffice cannot read it → 422, and the credit comes back.
    const notADocument = await upload(
      'broken.docx',
      Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(64, 7)]),
    );
    expect(notADocument.statusCode).toBe(422);
    expect(await used()).toBe(before + 1); // only the one conversion that succeeded
  });

  it('recovers after the listeners crash', async () => {
    const tools = t.ctx.services.tools;
    localEngines(t).office.crashForTest();
    const res = await upload('again.docx', inputs.docx!);
    expect(res.statusCode).toBe(200);
    expect(pdfText(res.rawPayload)).toContain('Line 140 of the annual report');
    expect(tools.health().engines.libreoffice.restarts).toBeGreaterThanOrEqual(1);
  });

  it('falls back to a cold soffice with the same result', async () => {
    const cold = new OfficeEngine({
      listeners: 0,
      jobTimeoutMs: 60_000,
      maxJobsPerListener: 10,
      startTimeoutMs: 30_000,
    });
    try {
      const pdf = await cold.convert(inputs.docx!, 'docx');
      expect(pdfText(pdf)).toContain('Line 140 of the annual report');
      expect(cold.status().coldConversions).toBe(1);
      const warm = await upload('same.docx', inputs.docx!);
      expect(pdfInfo(pdf).pages).toBe(pdfInfo(warm.rawPayload).pages);
    } finally {
      await cold.close();
    }
  });

  // Three LibreOffice starts (~5 s each on a quiet machine): the test's budget is the engine's own bound
  // for them, not the suite's default.
  it(
    'recycles a worn listener, starts its replacement before the next job and removes its profile',
    {
      timeout: 3 * 60_000,
    },
    async () => {
      const workDir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'berth-office-recycle-'));
      await fs.promises.chmod(workDir, 0o711); // the office account passes through it, as through the data directory
      const engine = new OfficeEngine({
        listeners: 1,
        jobTimeoutMs: 60_000,
        maxJobsPerListener: 1,
        startTimeoutMs: 60_000,
        workDir,
      });
      const profiles = async () => {
        const [root] = await fs.promises.readdir(workDir);
        return (await fs.promises.readdir(path.join(workDir, root!))).filter((name) =>
          name.startsWith('profile-'),
        );
      };
      try {
        const first = await engine.convert(Buffer.from('recycled listener job 1'), 'txt');
        expect(pdfText(first)).toContain('recycled listener job 1');
        expect(engine.status().restarts).toBe(1);
        // The replacement comes up with no job asking for it, and the worn listener's profile is gone.
        await vi.waitFor(() => expect(engine.status().listeners).toBe(1), { timeout: 60_000, interval: 100 });
        await vi.waitFor(async () => expect(await profiles()).toEqual(['profile-2']), { timeout: 10_000 });
        const second = await engine.convert(Buffer.from('recycled listener job 2'), 'txt');
        expect(pdfText(second)).toContain('recycled listener job 2');
        expect(engine.status()).toMatchObject({ jobs: 2, restarts: 2, coldConversions: 0, failures: 0 });
      } finally {
        await engine.close();
        await fs.promises.rm(workDir, { recursive: true, force: true });
      }
    },
  );
});
