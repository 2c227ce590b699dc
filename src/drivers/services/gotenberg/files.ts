// The files of a form as Gotenberg picks them: by extension in its alphanumeric order, the page's
// index.html, and the other files as the page's assets.
import type { PageAsset } from '../../chromium/engine.js';
import { badForm } from './errors.js';
import type { Form, Upload } from './form.js';

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

export function filesWith(form: Form, extensions: readonly string[]): Upload[] {
  return [...form.files.values()]
    .filter((f) => extensions.some((ext) => f.filename.toLowerCase().endsWith(ext)))
    .sort((a, b) => alphanumericLess(a.filename, b.filename));
}

export const missingExtensions = (extensions: readonly string[]) =>
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

export function assetsOf(form: Form, except: string): Map<string, PageAsset> {
  const assets = new Map<string, PageAsset>();
  for (const file of form.files.values()) {
    if (file.filename === except) continue;
    const ext = /\.([^.]+)$/.exec(file.filename)?.[1]?.toLowerCase() ?? '';
    assets.set(file.filename, { body: file.bytes, type: MIME[ext] ?? 'application/octet-stream' });
  }
  return assets;
}

export function indexHtml(form: Form): Upload {
  for (const [name, file] of form.files) {
    const lowerExt = name.replace(/\.[^.]*$/, (ext) => ext.toLowerCase());
    if (name === 'index.html' || lowerExt === 'index.html') return file;
  }
  throw badForm(["form file 'index.html' is required"]);
}
