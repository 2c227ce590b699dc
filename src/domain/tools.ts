// The tools API's rules that are not HTTP: limits, page lengths in Gotenberg's units, which URLs and
// office files are accepted, and the names of the files answered. Field problems are 422s naming
// the field (docs/tools.md).
import { fieldError, FieldErrorCollector } from './errors.js';

const MiB = 1024 * 1024;
export const TOOLS_LIMITS = {
  urlLength: 2048,
  htmlChars: 5 * MiB,
  markdownChars: MiB,
  fileBytes: 25 * MiB,
  mergeMin: 2,
  mergeMax: 20,
  sizeMin: 100,
  sizeMax: 4096,
} as const;

export const OFFICE_EXTENSIONS = [
  'docx',
  'doc',
  'xlsx',
  'xls',
  'pptx',
  'ppt',
  'odt',
  'ods',
  'odp',
  'rtf',
  'txt',
  'csv',
];

/** The page layout of a PDF (what the Chromium driver's PdfSettings takes). */
export interface PageLayout {
  landscape: boolean;
  printBackground: boolean;
  scale: number;
  width: string;
  height: string;
  margin: { top: string; bottom: string; left: string; right: string };
}

/** The optional layout fields of a PDF request, as Gotenberg names them. */
export interface PdfOptions {
  landscape?: boolean;
  printBackground?: boolean;
  scale?: number;
  paperWidth?: string;
  paperHeight?: string;
  marginTop?: string;
  marginBottom?: string;
  marginLeft?: string;
  marginRight?: string;
}

/** Gotenberg's units: a bare number is inches; pt and pc are converted, px/in/cm/mm pass through. */
export function parseLength(value: string): string | undefined {
  const match = /^\s*(\d+(?:\.\d+)?|\.\d+)\s*(pt|px|in|mm|cm|pc)?\s*$/i.exec(value);
  if (!match?.[1]) return undefined;
  const n = Number(match[1]);
  const unit = (match[2] ?? 'in').toLowerCase();
  if (unit === 'pt') return `${n / 72}in`;
  if (unit === 'pc') return `${n / 6}in`;
  return `${n}${unit}`;
}

/** The layout a request asks for, with Gotenberg's defaults; every bad length is one field error. */
export function pdfLayout(body: PdfOptions): PageLayout {
  const errors = new FieldErrorCollector();
  const length = (field: keyof PdfOptions, fallback: string): string => {
    const raw = body[field];
    if (raw === undefined || raw === '') return fallback;
    const parsed = typeof raw === 'string' ? parseLength(raw) : undefined;
    if (parsed === undefined) {
      errors.add(
        field,
        `The ${field} field must be a length such as 8.5, 8.5in, 210mm, 21cm, 800px or 612pt.`,
      );
      return fallback;
    }
    return parsed;
  };
  // Gotenberg's defaults: US Letter, 0.39 in margins.
  const settings: PageLayout = {
    landscape: body.landscape ?? false,
    printBackground: body.printBackground ?? false,
    scale: body.scale ?? 1,
    width: length('paperWidth', '8.5in'),
    height: length('paperHeight', '11in'),
    margin: {
      top: length('marginTop', '0.39in'),
      bottom: length('marginBottom', '0.39in'),
      left: length('marginLeft', '0.39in'),
      right: length('marginRight', '0.39in'),
    },
  };
  errors.throwIfAny();
  return settings;
}

/** An http(s) URL, or the 422 that names the field. */
export function httpUrl(value: string, field = 'url'): URL {
  let url: URL | undefined;
  try {
    url = new URL(value.trim());
  } catch {
    url = undefined;
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw fieldError(field, `The ${field} field must be a valid http or https URL.`);
  }
  return url;
}

/** The file's signature must match its extension, so a renamed image is refused before LibreOffice runs. */
export function officeTypeProblem(bytes: Buffer, extension: string): string | undefined {
  const zip = bytes.subarray(0, 4).equals(Buffer.from([0x50, 0x4b, 0x03, 0x04]));
  const ole = bytes.subarray(0, 8).equals(Buffer.from([0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1]));
  if (bytes.length === 0) return 'The file is empty.';
  switch (extension) {
    case 'docx':
    case 'xlsx':
    case 'pptx':
    case 'odt':
    case 'ods':
    case 'odp':
      return zip ? undefined : `The file is not a .${extension} document.`;
    case 'doc':
    case 'xls':
    case 'ppt':
      // Old Office files are OLE containers; Word also saves RTF or HTML under .doc.
      return ole ||
        zip ||
        bytes.subarray(0, 5).toString('latin1') === '{\\rtf' ||
        !bytes.subarray(0, 8192).includes(0)
        ? undefined
        : `The file is not a .${extension} document.`;
    case 'rtf':
      return bytes.subarray(0, 5).toString('latin1') === '{\\rtf'
        ? undefined
        : 'The file is not an RTF document.';
    case 'txt':
    case 'csv':
      return bytes.subarray(0, 8192).includes(0) ? `The file is not a .${extension} text file.` : undefined;
    default:
      return `The file must be one of: ${OFFICE_EXTENSIONS.map((e) => `.${e}`).join(', ')}.`;
  }
}

/** The extension of an uploaded office file, or the 422 that says why it is refused. */
export function officeFile(filename: string, bytes: Buffer): { extension: string; base: string } {
  const extension = /\.([A-Za-z0-9]+)$/.exec(filename)?.[1]?.toLowerCase() ?? '';
  const problem = OFFICE_EXTENSIONS.includes(extension)
    ? officeTypeProblem(bytes, extension)
    : `The file must be a file of type: ${OFFICE_EXTENSIONS.join(', ')}.`;
  if (problem) throw fieldError('file', problem);
  return { extension, base: filename.replace(/^.*[\\/]/, '').replace(/\.[^.]*$/, '') || 'document' };
}

/** The number of files a merge needs, or the 422 that says what is wrong with it. */
export function checkMergeCount(count: number): void {
  if (count > TOOLS_LIMITS.mergeMax)
    throw fieldError('files', `The files field must not have more than ${TOOLS_LIMITS.mergeMax} items.`);
  if (count === 0) throw fieldError('files', 'The files field is required.');
  if (count < TOOLS_LIMITS.mergeMin)
    throw fieldError('files', `The files field must have at least ${TOOLS_LIMITS.mergeMin} items.`);
}

/** The name of a PDF made from a URL: the last path segment without extension, else the host. */
export function pdfName(url: URL): string {
  const last = url.pathname.split('/').filter(Boolean).pop();
  // The last path segment without its extension (invoice.html → invoice), else the host name.
  const base = (last === undefined ? '' : last.replace(/\.[a-z0-9]{1,5}$/i, '')) || url.hostname;
  return `${base.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 100)}.pdf`;
}
