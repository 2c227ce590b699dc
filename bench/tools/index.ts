// Tools benchmark: Berth's HTTP API on warm engines against the naive way, measured in the same run.
//   HTML→PDF and screenshots: Berth vs spawning `chromium --headless --print-to-pdf/--screenshot` per document.
//   Throughput of HTML→PDF at concurrency 4 through the API.
//   docx→PDF: Berth vs a cold `soffice --convert-to pdf` per file.
// Run: npx tsx bench/tools/index.ts [--runs 20] [--cold-runs 8] [--throughput 120]
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { pino } from 'pino';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { CHROMIUM_PATH } from '../../src/drivers/chromium/engine.js';
import { SOFFICE_PATH } from '../../src/drivers/libreoffice/engine.js';

const run = promisify(execFile);
const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20' },
    'cold-runs': { type: 'string', default: '8' },
    throughput: { type: 'string', default: '120' },
  },
});
const RUNS = Number(values.runs);
const COLD_RUNS = Number(values['cold-runs']);
const THROUGHPUT_JOBS = Number(values.throughput);

// A small invoice: heading, table, text (as in the feasibility measurements).
const INVOICE = `<!doctype html><html><head><meta charset="utf-8"><style>
body { font-family: sans-serif; margin: 40px; } table { border-collapse: collapse; width: 100%; }
td, th { border: 1px solid #ccc; padding: 6px; } h1 { color: #234; }</style></head><body>
<h1>Invoice 2026-0042</h1><p>Acme B.V., Keizersgracht 1, Amsterdam</p>
<table><tr><th>Item</th><th>Qty</th><th>Price</th></tr>
${Array.from({ length: 12 }, (_, i) => `<tr><td>Item ${i + 1}</td><td>${i + 1}</td><td>${(i + 1) * 9.5} EUR</td></tr>`).join('')}
</table><p>Total due within 30 days. Thank you for your business.</p></body></html>`;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

async function time(n: number, fn: (i: number) => Promise<void>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await fn(i);
    out.push(performance.now() - t0);
  }
  return out;
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-bench-tools-'));
const config = loadConfig({
  BERTH_DATA_DIR: path.join(work, 'data'),
  BERTH_LOG_LEVEL: 'silent',
  BERTH_RATE_LIMIT_PER_MINUTE: '0',
  BERTH_TOOLS_MONTHLY_CREDITS: '1000000000',
});
const ctx = await createContext(config, { logger: pino({ level: 'silent' }) });
const app = await buildApp(ctx);
const address = await app.listen({ port: 0, host: '127.0.0.1' });
const user = await ctx.identity.createUser({ email: 'bench@example.com', team: 'bench' });
const headers = { authorization: user.tools_api_key, 'content-type': 'application/json' };

async function api(pathname: string, body: unknown): Promise<Buffer> {
  const res = await fetch(`${address}${pathname}`, { method: 'POST', headers, body: JSON.stringify(body) });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`${pathname}: ${res.status} ${bytes.toString().slice(0, 200)}`);
  return bytes;
}

async function apiUpload(pathname: string, filename: string, content: Buffer): Promise<Buffer> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(content)]), filename);
  const res = await fetch(`${address}${pathname}`, {
    method: 'POST',
    headers: { authorization: user.tools_api_key },
    body: form,
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status !== 200) throw new Error(`${pathname}: ${res.status} ${bytes.toString().slice(0, 200)}`);
  return bytes;
}

const htmlFile = path.join(work, 'invoice.html');
fs.writeFileSync(htmlFile, INVOICE);
const naiveChromium = async (mode: 'pdf' | 'png', i: number) => {
  const out = path.join(work, `naive-${i}.${mode}`);
  const profile = path.join(work, `chromium-profile-${mode}-${i}`);
  await run(CHROMIUM_PATH, [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-dev-shm-usage',
    `--user-data-dir=${profile}`,
    ...(mode === 'pdf'
      ? [`--print-to-pdf=${out}`, '--no-pdf-header-footer']
      : [`--screenshot=${out}`, '--window-size=1920,1080']),
    `file://${htmlFile}`,
  ]);
  if (!fs.existsSync(out)) throw new Error('chromium produced no output');
  fs.rmSync(profile, { recursive: true, force: true });
};

// A .docx made by LibreOffice from a 60-line text, once.
fs.writeFileSync(
  path.join(work, 'report.txt'),
  Array.from({ length: 60 }, (_, i) => `Paragraph ${i + 1} of the report.`).join('\n'),
);
const soffice = (args: string[]) =>
  run(SOFFICE_PATH, [
    `-env:UserInstallation=file://${path.join(work, 'soffice-profile')}`,
    '--headless',
    '--norestore',
    ...args,
  ]);
await soffice(['--convert-to', 'docx', '--outdir', work, path.join(work, 'report.txt')]);
const docx = fs.readFileSync(path.join(work, 'report.docx'));
const naiveSoffice = async (i: number) => {
  const input = path.join(work, `cold-${i}.docx`);
  fs.writeFileSync(input, docx);
  await soffice(['--convert-to', 'pdf', '--outdir', path.join(work, 'cold-out'), input]);
};

try {
  // Warm-up: engines start on first use; that start is not what we measure.
  await api('/api/v1/tools/pdf/convert/html', { html: INVOICE });
  await api('/api/v1/tools/screenshot/html', { html: INVOICE });
  await apiUpload('/api/v1/tools/pdf/convert/office', 'report.docx', docx);
  await apiUpload('/api/v1/tools/pdf/convert/office', 'report.docx', docx);
  await naiveChromium('pdf', -1);
  await naiveSoffice(-1);

  const berthPdf = await time(RUNS, () =>
    api('/api/v1/tools/pdf/convert/html', { html: INVOICE }).then(() => undefined),
  );
  const naivePdf = await time(COLD_RUNS, (i) => naiveChromium('pdf', i));
  // The same invoice with a script: it runs on a scripted slot (a new window per job).
  const scripted = INVOICE.replace('</body>', '<script>document.title = "Invoice";</script></body>');
  await api('/api/v1/tools/pdf/convert/html', { html: scripted });
  const berthScripted = await time(RUNS, () =>
    api('/api/v1/tools/pdf/convert/html', { html: scripted }).then(() => undefined),
  );
  const berthPng = await time(RUNS, () =>
    api('/api/v1/tools/screenshot/html', { html: INVOICE, width: 1920, height: 1080 }).then(() => undefined),
  );
  const naivePng = await time(COLD_RUNS, (i) => naiveChromium('png', i));

  // Throughput: 4 clients, back to back.
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < THROUGHPUT_JOBS) {
        next += 1;
        await api('/api/v1/tools/pdf/convert/html', { html: INVOICE });
      }
    }),
  );
  const perSecond = THROUGHPUT_JOBS / ((performance.now() - t0) / 1000);

  const berthDocx = await time(RUNS, () =>
    apiUpload('/api/v1/tools/pdf/convert/office', 'report.docx', docx).then(() => undefined),
  );
  const naiveDocx = await time(COLD_RUNS, (i) => naiveSoffice(i));

  const rows = [
    ['HTML→PDF', median(berthPdf), median(naivePdf), 0.15],
    ['HTML with a script→PDF', median(berthScripted), median(naivePdf), 0.15],
    ['HTML→PNG 1920×1080', median(berthPng), median(naivePng), undefined],
    ['docx→PDF', median(berthDocx), median(naiveDocx), 0.25],
  ] as const;
  console.log(
    `machine: ${os.cpus().length} cores, load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );
  console.log('| operation | Berth API median | naive median | ratio | target |');
  console.log('|---|---|---|---|---|');
  for (const [name, berth, naive, target] of rows) {
    const ratio = berth / naive;
    console.log(
      `| ${name} | ${berth.toFixed(1)} ms | ${naive.toFixed(1)} ms | ${ratio.toFixed(3)} | ${target === undefined ? '–' : `≤ ${target} ${ratio <= target ? 'met' : 'MISSED'}`} |`,
    );
  }
  console.log(
    `| HTML→PDF throughput, 4 clients | ${perSecond.toFixed(1)} PDFs/s | ${(1000 / median(naivePdf)).toFixed(1)} PDFs/s (one naive spawn at a time) | ${(perSecond / (1000 / median(naivePdf))).toFixed(1)}× | ≥ 30/s ${perSecond >= 30 ? 'met' : 'MISSED'} |`,
  );
} finally {
  await app.close();
  await ctx.close();
  fs.rmSync(work, { recursive: true, force: true });
}
