// The tools API: credits, PDF conversion and merging, screenshots; files written where -o says. With the
// tools key, or the API token under /api/v1/user/tools when the profile has no key.
import fs from 'node:fs';
import path from 'node:path';
import type { Balance } from '../answers.js';
import { requireArg, stringOption, type Command, type Values } from '../command.js';
import { UsageError, type Api, type Credential } from '../http.js';
import { print, printJson, spinner } from '../output.js';

/** The tools with the tools key, else the same tools for the API token under `/api/v1/user/tools`. */
function toolsRoute(api: Api, pathname: string): { path: string; credential: Credential } {
  const credential = api.access('tools');
  return {
    path: `${credential === 'platform' ? '/api/v1/user/tools' : '/api/v1/tools'}${pathname}`,
    credential,
  };
}

function readInput(file: string): Buffer {
  try {
    return file === '-' ? fs.readFileSync(0) : fs.readFileSync(file);
  } catch (error) {
    throw new UsageError(
      `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
}

async function save(
  api: Api,
  pathname: string,
  init: { json?: unknown; body?: FormData },
  out: string,
  format: string,
  accept: string,
) {
  const progress = format === 'json' ? undefined : spinner(`Converting…`);
  let response: Response;
  try {
    const route = toolsRoute(api, pathname);
    response = await api.send('POST', route.path, { credential: route.credential, ...init, accept });
  } finally {
    progress?.stop();
  }
  const bytes = Buffer.from(await response.arrayBuffer());
  if (out === '-') process.stdout.write(bytes);
  else fs.writeFileSync(out, bytes);
  const remaining = response.headers.get('x-credits-remaining');
  const summary = {
    file: out,
    bytes: bytes.length,
    credits_remaining: remaining === null ? null : Number(remaining),
  };
  if (out !== '-') {
    if (format === 'json') printJson(summary);
    else
      print(
        `Wrote ${out} (${bytes.length} bytes${remaining !== null ? `; ${remaining} credits left` : ''}).`,
      );
  }
}

function outputFile(values: Values, fallback?: string): string {
  const out = stringOption(values, 'out') ?? fallback;
  return requireArg(out, '-o FILE');
}

const balance: Command = {
  name: 'tools balance',
  summary: "this month's credits: allowance, used, remaining, reset",
  usage: '',
  examples: ['berth tools balance'],
  async run({ api, format }) {
    const route = toolsRoute(api(), '/balance');
    const b = await api().data<Balance>('GET', route.path, { credential: route.credential });
    if (format === 'json') return printJson(b);
    print(`${b.remaining} of ${b.allowance} credits left (${b.used} used); resets ${b.resets_at}.`);
  },
};

const LAYOUT = {
  landscape: { type: 'boolean' },
  'paper-width': { type: 'string' },
  'paper-height': { type: 'string' },
  margin: { type: 'string' },
} as const;

function layout(values: Values): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (values.landscape === true) body.landscape = true;
  const width = stringOption(values, 'paper-width');
  const height = stringOption(values, 'paper-height');
  const margin = stringOption(values, 'margin');
  if (width) body.paperWidth = width;
  if (height) body.paperHeight = height;
  if (margin)
    for (const side of ['marginTop', 'marginBottom', 'marginLeft', 'marginRight']) body[side] = margin;
  return body;
}

const pdf: Command = {
  name: 'tools pdf',
  summary: 'convert a URL, an HTML or Markdown file, or an office document to PDF',
  usage: '(--url U | --html FILE | --markdown FILE | --office FILE) -o OUT.pdf [--landscape] [--margin 1cm]',
  options: {
    url: { type: 'string' },
    html: { type: 'string' },
    markdown: { type: 'string' },
    office: { type: 'string' },
    out: { type: 'string', short: 'o' },
    ...LAYOUT,
  },
  details: 'Each conversion costs 1 credit. FILE may be - for stdin; -o - writes the PDF to stdout.',
  examples: [
    'berth tools pdf --url https://example.com -o example.pdf',
    'berth tools pdf --markdown README.md -o readme.pdf',
    'berth tools pdf --office report.docx -o report.pdf',
  ],
  async run({ api: apiOf, values, format }) {
    const sources = (['url', 'html', 'markdown', 'office'] as const).filter(
      (k) => stringOption(values, k) !== undefined,
    );
    if (sources.length !== 1) throw new UsageError('give exactly one of --url, --html, --markdown, --office');
    const kind = sources[0]!;
    const value = stringOption(values, kind)!;
    const out = outputFile(values);
    const api = apiOf();
    if (kind === 'office') {
      const form = new FormData();
      form.append(
        'file',
        new Blob([new Uint8Array(readInput(value))]),
        path.basename(value === '-' ? 'document' : value),
      );
      return save(api, '/pdf/convert/office', { body: form }, out, format, 'application/pdf');
    }
    const body = kind === 'url' ? { url: value } : { [kind]: readInput(value).toString('utf8') };
    return save(
      api,
      `/pdf/convert/${kind}`,
      { json: { ...body, ...layout(values) } },
      out,
      format,
      'application/pdf',
    );
  },
};

const merge: Command = {
  name: 'tools merge',
  summary: 'merge PDF files, in the order given, into one',
  usage: 'A.pdf B.pdf… -o OUT.pdf',
  options: { out: { type: 'string', short: 'o' } },
  examples: ['berth tools merge cover.pdf report.pdf -o merged.pdf'],
  async run({ api, values, positionals, format }) {
    if (positionals.length < 2) throw new UsageError('give at least two PDF files to merge');
    const out = outputFile(values);
    const form = new FormData();
    for (const file of positionals)
      form.append(
        'files',
        new Blob([new Uint8Array(readInput(file))], { type: 'application/pdf' }),
        path.basename(file),
      );
    return save(api(), '/pdf/merge', { body: form }, out, format, 'application/pdf');
  },
};

const screenshot: Command = {
  name: 'tools screenshot',
  summary: 'a screenshot of a URL or an HTML file, as PNG or JPEG',
  usage:
    '(--url U | --html FILE) -o OUT.png [--width W] [--height H] [--full-page] [--format png|jpeg] [--quality Q]',
  options: {
    url: { type: 'string' },
    html: { type: 'string' },
    out: { type: 'string', short: 'o' },
    width: { type: 'string' },
    height: { type: 'string' },
    'full-page': { type: 'boolean' },
    format: { type: 'string' },
    quality: { type: 'string' },
  },
  examples: ['berth tools screenshot --url https://example.com -o example.png --full-page'],
  async run({ api, values, format }) {
    const url = stringOption(values, 'url');
    const html = stringOption(values, 'html');
    if ((url === undefined) === (html === undefined))
      throw new UsageError('give exactly one of --url and --html');
    const out = outputFile(values);
    const imageFormat =
      stringOption(values, 'format') ?? (out.endsWith('.jpg') || out.endsWith('.jpeg') ? 'jpeg' : 'png');
    const body: Record<string, unknown> =
      url !== undefined ? { url } : { html: readInput(html!).toString('utf8') };
    body.format = imageFormat;
    for (const key of ['width', 'height', 'quality'] as const) {
      const v = stringOption(values, key);
      if (v !== undefined) {
        if (!/^\d+$/.test(v)) throw new UsageError(`--${key} must be a whole number; got '${v}'`);
        body[key] = Number(v);
      }
    }
    if (values['full-page'] === true) body.fullPage = true;
    return save(
      api(),
      `/screenshot/${url !== undefined ? 'url' : 'html'}`,
      { json: body },
      out,
      format,
      `image/${imageFormat}`,
    );
  },
};

export const toolsCommands = [balance, pdf, merge, screenshot];
