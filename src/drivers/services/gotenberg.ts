// The `gotenberg` service: a Gotenberg 8-compatible HTTP API (Chromium URL/HTML/Markdown → PDF,
// LibreOffice → PDF, PDF merge, /health, /version) served by Berth's own process on a loopback port,
// on the warm engines of the tools endpoints (the tools service's functions, handed in by composition),
// without credits. One listener per instance. Private to its application: every route sits under a secret
// path prefix derived from the instance's password (`http://127.0.0.1:<port>/<token>/…`), or at the root
// with HTTP basic auth (Gotenberg's `--api-enable-basic-auth`); anything else is a bare 404.
// Form fields, errors and answers follow Gotenberg's own code (pkg/modules/api/formdata.go, routes.go);
// the fields it honours are listed in docs (GOTENBERG_FIELDS below).
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { Busboy, type BusboyHeaders } from '@fastify/busboy';
import { AppError } from '../../domain/errors.js';
import { OFFICE_EXTENSIONS, TOOLS_LIMITS, officeTypeProblem } from '../../domain/tools.js';
import {
  PageBlockedError,
  PageRangesError,
  type PageAsset,
  type PageSource,
  type PdfSettings,
} from '../chromium/engine.js';
import { UnreadableDocumentError, type OfficeConvertOptions } from '../libreoffice/engine.js';
import { BlockedAddressError, type AddressGuard } from '../net/guard.js';
import { InvalidPdfError, PdfLimitError } from '../pdf/merge.js';
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from './types.js';

/** The Gotenberg release whose API this follows (`GET /version`; semver-equal to it). */
export const GOTENBERG_VERSION = '8.36.0+berth';

/** What the runner uses: the tools service's warm engines and queues (src/services/tools). */
export interface GotenbergDeps {
  renderPdf(source: PageSource, settings: PdfSettings): Promise<{ body: Buffer; blocked: string[] }>;
  office(bytes: Buffer, extension: string, options?: OfficeConvertOptions): Promise<Buffer>;
  merge(files: readonly Uint8Array[]): Promise<Buffer>;
  /** Markdown → HTML; with a template, the rendered Markdown replaces its `{{ content }}` marker. */
  markdownToHtml(markdown: string, template?: string): string;
  /** The tools' address guard: a URL must lead to a public address (BERTH_TOOLS_ALLOW_PRIVATE aside). */
  guard: AddressGuard;
  health(): {
    engines: {
      chromium: { status: string; lastError: string | null };
      libreoffice: { status: string; lastError: string | null };
    };
  };
}

export interface GotenbergLimits {
  /** Largest file of a form. */
  fileBytes: number;
  /** Largest request body. */
  bodyBytes: number;
  files: number;
  fields: number;
  fieldBytes: number;
  /** Request lines kept per instance for `logs`. */
  logLines: number;
}

export const DEFAULT_GOTENBERG_LIMITS: GotenbergLimits = {
  fileBytes: TOOLS_LIMITS.fileBytes,
  bodyBytes: 64 * 1024 * 1024,
  files: 100,
  fields: 100,
  fieldBytes: 1024 * 1024,
  logLines: 1_000,
};

/** The form fields each route honours (docs/services.md lists them). */
export const GOTENBERG_FIELDS = {
  chromium: [
    'paperWidth',
    'paperHeight',
    'marginTop',
    'marginBottom',
    'marginLeft',
    'marginRight',
    'preferCssPageSize',
    'printBackground',
    'landscape',
    'scale',
    'nativePageRanges',
    'waitDelay',
    'emulatedMediaType',
  ],
  libreoffice: ['landscape', 'nativePageRanges', 'merge'],
  merge: [] as string[],
} as const;

/** A Gotenberg answer that is not a file: status and plain-text message. */
class GotenbergError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'GotenbergError';
  }
}

const badForm = (problems: string[]) => new GotenbergError(400, `Invalid form data: ${problems.join('\n')}`);

interface Upload {
  field: string;
  filename: string;
  bytes: Buffer;
}

interface Form {
  /** The first value of each field, as Gotenberg reads it. */
  values: Map<string, string>;
  /** By (sanitized) file name; a second file of the same name replaces the first, as in Gotenberg. */
  files: Map<string, Upload>;
}

/** Gotenberg's sanitizeFilename: the base name, without control characters, NFC. */
function sanitizeFilename(name: string): string {
  const base = name.slice(Math.max(name.lastIndexOf('/'), name.lastIndexOf('\\')) + 1);
  return base.replace(/[\x00-\x1f\x7f]/g, '').normalize('NFC');
}

function readForm(req: http.IncomingMessage, limits: GotenbergLimits): Promise<Form> {
  return new Promise<Form>((resolve, reject) => {
    const form: Form = { values: new Map(), files: new Map() };
    const type = req.headers['content-type'] ?? '';
    if (!/^multipart\/form-data/i.test(type)) {
      req.resume();
      reject(badForm(["request Content-Type isn't multipart/form-data"]));
      return;
    }
    let failed: GotenbergError | undefined;
    const fail = (error: GotenbergError) => {
      failed ??= error;
    };
    let busboy;
    try {
      busboy = Busboy({
        headers: req.headers as BusboyHeaders,
        limits: {
          fileSize: limits.fileBytes,
          files: limits.files,
          fields: limits.fields,
          fieldSize: limits.fieldBytes,
          parts: limits.files + limits.fields,
        },
      });
    } catch {
      req.resume();
      reject(badForm(['malformed multipart/form-data']));
      return;
    }
    const pending: Array<Promise<void>> = [];
    let total = 0;
    const tooLarge = () =>
      fail(
        new GotenbergError(
          413,
          'The request body exceeds the configured size limit. Send a smaller request.',
        ),
      );
    req.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > limits.bodyBytes) {
        tooLarge();
        req.unpipe(busboy);
        req.resume();
        resolveOrReject();
      }
    });
    busboy.on('field', (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
      if (valueTruncated) tooLarge();
      if (!form.values.has(name)) form.values.set(name, value);
    });
    busboy.on('file', (field: string, file: Readable, filename: string) => {
      const chunks: Buffer[] = [];
      pending.push(
        new Promise<void>((done) => {
          file.on('data', (chunk: Buffer) => chunks.push(chunk));
          file.on('limit', tooLarge);
          file.on('end', () => {
            const name = sanitizeFilename(filename ?? '');
            if (name !== '') form.files.set(name, { field, filename: name, bytes: Buffer.concat(chunks) });
            done();
          });
          file.on('error', () => done());
        }),
      );
    });
    busboy.on('filesLimit', tooLarge);
    busboy.on('fieldsLimit', tooLarge);
    busboy.on('partsLimit', tooLarge);
    let settled = false;
    const resolveOrReject = () => {
      if (settled) return;
      settled = true;
      void Promise.all(pending).then(() => (failed ? reject(failed) : resolve(form)));
    };
    busboy.on('finish', resolveOrReject);
    busboy.on('error', () => {
      fail(badForm(['malformed multipart/form-data']));
      req.resume();
      resolveOrReject();
    });
    req.pipe(busboy);
  });
}

// ---- Go's parsers, with Go's messages (Gotenberg answers with them) ----

const goQuote = (value: string) => JSON.stringify(value);

function goBool(value: string): boolean | string {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false;
  return `strconv.ParseBool: parsing ${goQuote(value)}: invalid syntax`;
}

function goFloat(value: string): number | string {
  const n = Number(value);
  if (!/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value) || !Number.isFinite(n))
    return `strconv.ParseFloat: parsing ${goQuote(value)}: invalid syntax`;
  return n;
}

const DURATION_UNITS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's time.ParseDuration, in milliseconds. */
function goDuration(value: string): number | string {
  const invalid = `time: invalid duration ${goQuote(value)}`;
  if (value === '0') return 0;
  const body = value.replace(/^[+-]/, '');
  if (body === '') return invalid;
  let ms = 0;
  const re = /(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let at = 0;
  while (at < body.length) {
    re.lastIndex = at;
    const match = re.exec(body);
    if (!match)
      return match === null && /^[\d.]+$/.test(body.slice(at))
        ? `time: missing unit in duration ${goQuote(value)}`
        : invalid;
    ms += Number(match[1]) * DURATION_UNITS[match[2]!]!;
    at = re.lastIndex;
  }
  return value.startsWith('-') ? -ms : ms;
}

/** Gotenberg's Inches: a unit suffix (pt, px, in, mm, cm, pc) or a bare number of inches. */
function goInches(value: string): number | string {
  const factor: Record<string, number> = {
    pt: 1 / 72,
    px: 1 / 96,
    in: 1,
    mm: 1 / 25.4,
    cm: 1 / 2.54,
    pc: 1 / 6,
  };
  for (const unit of Object.keys(factor)) {
    if (!value.endsWith(unit)) continue;
    const n = goFloat(value.slice(0, -unit.length));
    return typeof n === 'string' ? n : n * factor[unit]!;
  }
  return goFloat(value);
}

/** Binds fields as Gotenberg's FormData does: an empty or absent field takes the default. */
class FieldReader {
  readonly problems: string[] = [];
  constructor(private readonly values: Map<string, string>) {}

  private read<T>(key: string, fallback: T, parse: (value: string) => T | string): T {
    const value = this.values.get(key);
    if (value === undefined || value === '') return fallback;
    const parsed = parse(value);
    if (typeof parsed === 'string' && typeof fallback !== 'string') {
      this.problems.push(`form field '${key}' is invalid (got '${value}', resulting to ${parsed})`);
      return fallback;
    }
    return parsed as T;
  }

  bool(key: string, fallback: boolean): boolean {
    return this.read(key, fallback, goBool);
  }
  float(key: string, fallback: number): number {
    return this.read(key, fallback, goFloat);
  }
  inches(key: string, fallback: number): number {
    return this.read(key, fallback, goInches);
  }
  duration(key: string, fallback: number): number {
    return this.read(key, fallback, goDuration);
  }
  string(key: string, fallback: string): string {
    return this.values.get(key) || fallback;
  }
  custom(key: string, check: (value: string) => string | undefined): string {
    const value = this.values.get(key) ?? '';
    const problem = value === '' ? undefined : check(value);
    if (problem)
      this.problems.push(`form field '${key}' is invalid (got '${value}', resulting to ${problem})`);
    return problem ? '' : value;
  }
  validate(): void {
    if (this.problems.length > 0) throw badForm(this.problems);
  }
}

/** Gotenberg's Chromium PDF options (FormDataChromiumPdfOptions), as far as Berth's engine honours them. */
function chromiumSettings(fields: FieldReader, jobTimeoutMs: number): PdfSettings {
  const inches = (key: string, fallback: number) => `${fields.inches(key, fallback)}in`;
  const settings: PdfSettings = {
    landscape: fields.bool('landscape', false),
    printBackground: fields.bool('printBackground', false),
    scale: fields.float('scale', 1),
    width: inches('paperWidth', 8.5),
    height: inches('paperHeight', 11),
    margin: {
      top: inches('marginTop', 0.39),
      bottom: inches('marginBottom', 0.39),
      left: inches('marginLeft', 0.39),
      right: inches('marginRight', 0.39),
    },
    preferCSSPageSize: fields.bool('preferCssPageSize', false),
  };
  const pageRanges = fields.string('nativePageRanges', '');
  if (pageRanges) settings.pageRanges = pageRanges;
  const waitDelay = fields.duration('waitDelay', 0);
  // A delay past the job's time limit ends as Gotenberg's does: the request runs out of time (503).
  if (waitDelay > 0) settings.waitDelayMs = Math.min(waitDelay, jobTimeoutMs + 1_000);
  const media = fields.custom('emulatedMediaType', (value) =>
    value === 'screen' || value === 'print'
      ? undefined
      : "wrong value, expected either 'screen', 'print' or empty",
  );
  if (media === 'screen') settings.media = 'screen';
  // Read (so a bad value is a 400, as in Gotenberg) but not applied: see the docs' differences.
  fields.bool('omitBackground', false);
  fields.bool('singlePage', false);
  fields.bool('generateDocumentOutline', false);
  fields.bool('skipNetworkIdleEvent', true);
  if (!(settings.scale > 0))
    fields.problems.push(
      `form field 'scale' is invalid (got '${settings.scale}', resulting to value must be positive)`,
    );
  return settings;
}

/** Gotenberg's AlphanumericSort of file names (merge order, LibreOffice's order). */
function alphanumericLess(a: string, b: string): number {
  const extract = (s: string): [number, string, number] => {
    let m = /^(\d+)(.*)$/.exec(s);
    if (m) return [Number(m[1]), m[2]!, 1];
    m = /^(.*?)(\d+)(\.[^.]+)$/.exec(s);
    if (m) return [Number(m[2]), m[1]! + m[3]!, 2];
    m = /^(.*?)(\d+)$/.exec(s);
    if (m) return [Number(m[2]), m[1]!, 3];
    return [-1, s, 0];
  };
  const cmp = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  const [ni, ri, li] = extract(a);
  const [nj, rj, lj] = extract(b);
  if (ni !== -1 && nj !== -1) {
    if (li === 1 && lj === 1) return ni !== nj ? ni - nj : cmp(ri, rj);
    if (li !== 1 && lj !== 1) {
      if (ri !== rj) return cmp(ri, rj);
      return ni !== nj ? ni - nj : cmp(a, b);
    }
    if (ri !== rj) return cmp(ri, rj);
    return li === 1 ? -1 : 1;
  }
  if (ni !== -1) return -1;
  if (nj !== -1) return 1;
  return cmp(a, b);
}

function filesWith(form: Form, extensions: readonly string[]): Upload[] {
  return [...form.files.values()]
    .filter((f) => extensions.some((ext) => f.filename.toLowerCase().endsWith(ext)))
    .sort((a, b) => alphanumericLess(a.filename, b.filename));
}

const missingExtensions = (extensions: readonly string[]) =>
  `no form file found for extensions: [${extensions.join(' ')}]`;

const MIME: Record<string, string> = {
  html: 'text/html',
  htm: 'text/html',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  json: 'application/json',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  svg: 'image/svg+xml',
  webp: 'image/webp',
  avif: 'image/avif',
  ico: 'image/x-icon',
  bmp: 'image/bmp',
  woff: 'font/woff',
  woff2: 'font/woff2',
  ttf: 'font/ttf',
  otf: 'font/otf',
  txt: 'text/plain',
  md: 'text/markdown',
};

function assetsOf(form: Form, except: string): Map<string, PageAsset> {
  const assets = new Map<string, PageAsset>();
  for (const file of form.files.values()) {
    if (file.filename === except) continue;
    const ext = /\.([^.]+)$/.exec(file.filename)?.[1]?.toLowerCase() ?? '';
    assets.set(file.filename, { body: file.bytes, type: MIME[ext] ?? 'application/octet-stream' });
  }
  return assets;
}

function indexHtml(form: Form): Upload {
  for (const [name, file] of form.files) {
    const lowerExt = name.replace(/\.[^.]*$/, (ext) => ext.toLowerCase());
    if (name === 'index.html' || lowerExt === 'index.html') return file;
  }
  throw badForm(["form file 'index.html' is required"]);
}

// ---- A zip of several PDFs (LibreOffice with several files, as Gotenberg answers) ----

function zip(entries: Array<{ name: string; body: Buffer }>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const name = Buffer.from(entry.name, 'utf8');
    const data = zlib.deflateRawSync(entry.body);
    const crc = zlib.crc32(entry.body);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt32LE(0, 10); // time, date
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(entry.body.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt32LE(0, 12);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(entry.body.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += local.length + name.length + data.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}

// ---- Errors of the engines, as Gotenberg reports the same situations ----

function gotenbergFailure(
  error: unknown,
  context: { pageRanges?: string; filename?: string },
): GotenbergError {
  if (error instanceof GotenbergError) return error;
  if (error instanceof PageBlockedError || error instanceof BlockedAddressError)
    return new GotenbergError(403, 'Forbidden');
  if (error instanceof PageRangesError) {
    return new GotenbergError(
      400,
      error.reason === 'exceeds'
        ? `The page ranges '${context.pageRanges ?? ''}' (nativePageRanges) exceeds the page count`
        : `Chromium does not handle the page ranges '${context.pageRanges ?? ''}' (nativePageRanges) syntax`,
    );
  }
  if (error instanceof UnreadableDocumentError) {
    return new GotenbergError(
      400,
      `LibreOffice could not read the document '${context.filename ?? ''}'. Ensure the file is not corrupted and that its extension matches its actual format.`,
    );
  }
  if (error instanceof InvalidPdfError) return new GotenbergError(400, `The PDF file ${error.message}.`);
  if (error instanceof PdfLimitError) return new GotenbergError(error.tooLarge ? 413 : 400, error.message);
  if (error instanceof AppError && error.code === 'rate_limited') {
    const retryAfter = error.retryAfter;
    return new GotenbergError(
      429,
      'The request queue is full. Retry shortly.',
      retryAfter ? { 'retry-after': String(retryAfter) } : {},
    );
  }
  const message = error instanceof Error ? error.message : '';
  if (/did not (render|finish) within/.test(message))
    return new GotenbergError(503, 'The request exceeded the time limit. Reduce the workload.');
  return new GotenbergError(500, 'Internal Server Error');
}

// ---- The listener of one instance ----

interface Instance {
  id: string;
  server: http.Server | undefined;
  port: number;
  token: string;
  username: string;
  password: string;
  logs: string[];
}

/** The secret path segment: the password when it is URL-safe (Berth's are base64url), else a digest of it. */
export function gotenbergToken(password: string): string {
  return /^[A-Za-z0-9_-]{16,}$/.test(password)
    ? password
    : createHash('sha256').update(password).digest('base64url');
}

function sameSecret(a: string, b: string): boolean {
  const da = createHash('sha256').update(a).digest();
  const db = createHash('sha256').update(b).digest();
  return timingSafeEqual(da, db);
}

const ROUTES = new Set([
  'POST /forms/chromium/convert/url',
  'POST /forms/chromium/convert/html',
  'POST /forms/chromium/convert/markdown',
  'POST /forms/libreoffice/convert',
  'POST /forms/pdfengines/merge',
  'GET /health',
  'HEAD /health',
  'GET /version',
  'GET /',
]);
const KNOWN_PATHS = new Set([...ROUTES].map((r) => r.slice(r.indexOf(' ') + 1)));

export interface GotenbergRunnerOptions {
  limits?: Partial<GotenbergLimits>;
  /** The Chromium job's time limit (the tools' chromiumTimeoutMs): bounds waitDelay. */
  jobTimeoutMs?: number;
  host?: string;
}

export function createGotenbergRunner(
  deps: GotenbergDeps,
  options: GotenbergRunnerOptions = {},
): ServiceRunner & { instance(id: string): { port: number; path: string } | undefined } {
  const limits = { ...DEFAULT_GOTENBERG_LIMITS, ...options.limits };
  const host = options.host ?? '127.0.0.1';
  const jobTimeoutMs = options.jobTimeoutMs ?? 30_000;
  const instances = new Map<string, Instance>();

  const log = (instance: Instance, line: string) => {
    instance.logs.push(line);
    if (instance.logs.length > limits.logLines)
      instance.logs.splice(0, instance.logs.length - limits.logLines);
  };

  /** Where a request goes once it is authorized, or undefined (a bare 404 or 401). */
  function authorize(instance: Instance, req: http.IncomingMessage, pathname: string): string | 401 | 404 {
    const slash = pathname.indexOf('/', 1);
    const first = slash < 0 ? pathname.slice(1) : pathname.slice(1, slash);
    if (first !== '' && sameSecret(first, instance.token)) return slash < 0 ? '/' : pathname.slice(slash);
    if (!KNOWN_PATHS.has(pathname)) return 404;
    const header = req.headers.authorization ?? '';
    const basic = /^basic\s+(\S+)$/i.exec(header);
    if (basic?.[1]) {
      const decoded = Buffer.from(basic[1], 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      const user = colon < 0 ? decoded : decoded.slice(0, colon);
      const pass = colon < 0 ? '' : decoded.slice(colon + 1);
      // Both compared, always: no early return tells which one was wrong.
      const ok = [sameSecret(user, instance.username), sameSecret(pass, instance.password)];
      if (ok[0] && ok[1]) return pathname;
    }
    return 401;
  }

  function send(
    res: http.ServerResponse,
    status: number,
    body: Buffer | string,
    headers: Record<string, string>,
  ): void {
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    res.writeHead(status, { ...headers, 'content-length': String(bytes.length) });
    res.end(res.req.method === 'HEAD' ? undefined : bytes);
  }

  const plain = { 'content-type': 'text/plain; charset=UTF-8' };

  function health(): { status: number; body: string } {
    const { chromium, libreoffice } = deps.health().engines;
    const timestamp = new Date().toISOString();
    const check = (engine: { status: string }, name: string) =>
      engine.status === 'failed'
        ? { status: 'down', timestamp, error: `${name} is unhealthy` }
        : { status: 'up', timestamp };
    const details = { chromium: check(chromium, 'Chromium'), libreoffice: check(libreoffice, 'LibreOffice') };
    const up = details.chromium.status === 'up' && details.libreoffice.status === 'up';
    return { status: up ? 200 : 503, body: JSON.stringify({ status: up ? 'up' : 'down', details }) };
  }

  /** Sends a file as Gotenberg does: `attachment; filename="…"`, the name from Gotenberg-Output-Filename. */
  function sendFile(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    body: Buffer,
    extension: 'pdf' | 'zip',
    trace: string,
  ): void {
    const wanted = sanitizeFilename(String(req.headers['gotenberg-output-filename'] ?? ''));
    const filename = `${wanted || randomUUID()}.${extension}`;
    send(res, 200, body, {
      'content-type': extension === 'pdf' ? 'application/pdf' : 'application/zip',
      'content-disposition': `attachment; filename="${filename.replace(/["\\]/g, '\\$&')}"`,
      'gotenberg-trace': trace,
      'cache-control': 'no-store',
    });
  }

  async function renderChromium(form: Form, route: string): Promise<Buffer> {
    const fields = new FieldReader(form.values);
    const settings = chromiumSettings(fields, jobTimeoutMs);
    let source: PageSource;
    if (route === '/forms/chromium/convert/url') {
      const url = form.values.get('url') ?? '';
      if (url === '') fields.problems.push("form field 'url' is required");
      fields.validate();
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch (error) {
        throw new GotenbergError(400, `Invalid URL: ${(error as Error).message}`);
      }
      if (parsed.protocol === 'file:')
        throw new GotenbergError(
          400,
          'file:// URLs are not accepted on this route. Use the /convert/html or /convert/markdown routes to render local HTML',
        );
      if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')
        throw new GotenbergError(403, 'Forbidden');
      // The tools' rule: the page must lead to a public address (checked again at every connection).
      await deps.guard.resolve(parsed);
      source = { kind: 'url', url: parsed.href };
    } else {
      const index = (() => {
        try {
          return indexHtml(form);
        } catch (error) {
          fields.problems.push("form file 'index.html' is required");
          return error as GotenbergError;
        }
      })();
      let markdown: Upload[] = [];
      if (route === '/forms/chromium/convert/markdown') {
        markdown = filesWith(form, ['.md']);
        if (markdown.length === 0) fields.problems.push(missingExtensions(['.md']));
      }
      fields.validate();
      const upload = index as Upload;
      let html = upload.bytes.toString('utf8');
      if (markdown.length > 0) html = withMarkdown(html, markdown);
      source = { kind: 'html', html, assets: assetsOf(form, upload.filename) };
    }
    const { body } = await deps.renderPdf(source, settings);
    return body;
  }

  /** Gotenberg's `{{ toHTML "file.md" }}`: each marker becomes its file's Markdown, rendered. */
  function withMarkdown(template: string, markdown: Upload[]): string {
    const missing: string[] = [];
    const out = template.replace(/\{\{\s*toHTML\s+"([^"]*)"\s*\}\}/g, (_all, name: string) => {
      const file = markdown.find((f) => f.filename === name);
      if (!file) {
        missing.push(`'${name}'`);
        return '';
      }
      return deps.markdownToHtml(file.bytes.toString('utf8'), '{{ content }}');
    });
    if (missing.length > 0)
      throw new GotenbergError(400, `Markdown file(s) not found: ${missing.join('\n')}`);
    return out;
  }

  async function libreoffice(form: Form): Promise<{ body: Buffer; extension: 'pdf' | 'zip' }> {
    const fields = new FieldReader(form.values);
    const extensions = OFFICE_EXTENSIONS.map((e) => `.${e}`);
    const inputs = filesWith(form, extensions);
    if (inputs.length === 0) fields.problems.push(missingExtensions(extensions));
    const landscape = fields.bool('landscape', false);
    const pageRanges = fields.string('nativePageRanges', '');
    const merge = fields.bool('merge', false);
    fields.validate();
    const convertOptions: OfficeConvertOptions = {
      ...(landscape ? { landscape } : {}),
      ...(pageRanges ? { pageRanges } : {}),
    };
    const pdfs = await Promise.all(
      inputs.map(async (file) => {
        const extension = /\.([^.]+)$/.exec(file.filename)![1]!.toLowerCase();
        try {
          if (officeTypeProblem(file.bytes, extension)) throw new UnreadableDocumentError('type mismatch');
          return await deps.office(file.bytes, extension, convertOptions);
        } catch (error) {
          throw gotenbergFailure(error, { filename: file.filename });
        }
      }),
    );
    if (pdfs.length === 1) return { body: pdfs[0]!, extension: 'pdf' };
    if (merge) return { body: await deps.merge(pdfs), extension: 'pdf' };
    return {
      body: zip(inputs.map((file, i) => ({ name: `${file.filename}.pdf`, body: pdfs[i]! }))),
      extension: 'zip',
    };
  }

  async function handle(instance: Instance, req: http.IncomingMessage, res: http.ServerResponse) {
    const started = performance.now();
    const method = req.method ?? 'GET';
    const pathname = (req.url ?? '/').replace(/[?#].*$/s, '');
    let route = '-';
    const finish = (status: number) =>
      log(
        instance,
        `${new Date().toISOString()} ${method} ${route} ${status} ${Math.round(performance.now() - started)}ms`,
      );
    const where = authorize(instance, req, pathname);
    if (where === 404 || where === 401) {
      req.resume();
      send(res, where, where === 404 ? 'Not Found' : 'Unauthorized', {
        ...plain,
        ...(where === 401 ? { 'www-authenticate': 'basic realm=Restricted' } : {}),
      });
      finish(where);
      return;
    }
    route = where;
    const key = `${method} ${route}`;
    const trace = String(req.headers['gotenberg-trace'] ?? '') || randomUUID();
    if (!ROUTES.has(key)) {
      req.resume();
      const status = KNOWN_PATHS.has(route) ? 405 : 404;
      send(res, status, status === 405 ? 'Method Not Allowed' : 'Not Found', plain);
      finish(status);
      return;
    }
    try {
      if (route === '/health') {
        const answer = health();
        send(res, answer.status, answer.body, { 'content-type': 'application/json' });
      } else if (route === '/version') {
        send(res, 200, GOTENBERG_VERSION, plain);
      } else if (route === '/') {
        send(
          res,
          200,
          "Hey, Gotenberg has no UI, it's an API. Head to the documentation to learn how to interact with it.",
          {
            'content-type': 'text/html; charset=UTF-8',
          },
        );
      } else {
        const form = await readForm(req, limits);
        let pageRanges: string | undefined;
        try {
          if (route.startsWith('/forms/chromium/')) {
            pageRanges = form.values.get('nativePageRanges');
            sendFile(req, res, await renderChromium(form, route), 'pdf', trace);
          } else if (route === '/forms/libreoffice/convert') {
            const out = await libreoffice(form);
            sendFile(req, res, out.body, out.extension, trace);
          } else {
            const pdfs = filesWith(form, ['.pdf']);
            if (pdfs.length === 0) throw badForm([missingExtensions(['.pdf'])]);
            const body = pdfs.length === 1 ? pdfs[0]!.bytes : await deps.merge(pdfs.map((f) => f.bytes));
            sendFile(req, res, body, 'pdf', trace);
          }
        } catch (error) {
          throw gotenbergFailure(error, pageRanges ? { pageRanges } : {});
        }
      }
      finish(res.statusCode);
    } catch (error) {
      const failure = gotenbergFailure(error, {});
      if (!res.headersSent)
        send(res, failure.status, failure.message, {
          ...plain,
          ...failure.headers,
          'gotenberg-trace': trace,
        });
      else res.destroy();
      finish(failure.status);
    }
  }

  function listen(instance: Instance, port: number): Promise<number> {
    const server = http.createServer((req, res) => void handle(instance, req, res));
    server.requestTimeout = 5 * 60_000;
    return new Promise<number>((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        server.off('listening', onListening);
        reject(error);
      };
      const onListening = () => {
        server.off('error', onError);
        instance.server = server;
        resolve((server.address() as AddressInfo).port);
      };
      server.once('error', onError);
      server.once('listening', onListening);
      server.listen(port, host);
    });
  }

  function runtime(instance: Instance): ServiceRuntime {
    return {
      host,
      port: instance.port,
      pid: null,
      version: GOTENBERG_VERSION,
      location: null,
      extra: { path: `/${instance.token}` },
    };
  }

  async function start(spec: ServiceSpec): Promise<ServiceRuntime> {
    let instance = instances.get(spec.id);
    if (!instance) {
      instance = { id: spec.id, server: undefined, port: 0, token: '', username: '', password: '', logs: [] };
      instances.set(spec.id, instance);
    }
    // The desired state in full: credentials follow the spec on every call.
    instance.token = gotenbergToken(spec.password);
    instance.username = spec.username;
    instance.password = spec.password;
    if (instance.server?.listening) return runtime(instance);
    const wanted = spec.port ?? instance.port;
    try {
      instance.port = await listen(instance, wanted > 0 ? wanted : 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE' || wanted === 0) throw error;
      instance.port = await listen(instance, 0);
    }
    log(instance, `${new Date().toISOString()} listening on ${host}:${instance.port}`);
    return runtime(instance);
  }

  async function stop(ref: ServiceRef): Promise<void> {
    const instance = instances.get(ref.id);
    const server = instance?.server;
    if (!instance || !server) return;
    instance.server = undefined;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    log(instance, `${new Date().toISOString()} stopped`);
  }

  return {
    types: ['gotenberg'],
    provision: start,
    start,
    async restart(spec) {
      await stop({ id: spec.id, type: spec.type });
      return start(spec);
    },
    stop,
    async delete(ref) {
      await stop(ref);
      instances.delete(ref.id);
    },
    status(ref) {
      return Promise.resolve({ running: instances.get(ref.id)?.server?.listening === true, pid: null });
    },
    logs(ref, tail) {
      const lines = instances.get(ref.id)?.logs ?? [];
      return Promise.resolve(tail > 0 ? lines.slice(-tail) : []);
    },
    instance(id) {
      const instance = instances.get(id);
      return instance?.server ? { port: instance.port, path: `/${instance.token}` } : undefined;
    },
  };
}
