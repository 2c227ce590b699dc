// Just enough XML for S3: building responses and reading the two small request documents S3 clients
// send (DeleteObjects and CompleteMultipartUpload). The inputs are flat, so element matching suffices.
import { errors } from './errors.js';

export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (c) =>
    c === '&' ? '&amp;' : c === '<' ? '&lt;' : c === '>' ? '&gt;' : c === '"' ? '&quot;' : '&apos;',
  );
}

function unescapeXml(text: string): string {
  return text.replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_m, entity: string) => {
    if (entity.startsWith('#x')) return String.fromCodePoint(parseInt(entity.slice(2), 16));
    if (entity.startsWith('#')) return String.fromCodePoint(parseInt(entity.slice(1), 10));
    return { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }[entity] ?? '';
  });
}

export type XmlValue = string | number | boolean | undefined | XmlNode | XmlNode[] | string[];
export interface XmlNode {
  [name: string]: XmlValue;
}

function render(name: string, value: XmlValue): string {
  if (value === undefined) return '';
  if (Array.isArray(value)) return value.map((v) => render(name, v)).join('');
  if (typeof value === 'object') {
    return `<${name}>${Object.entries(value)
      .map(([k, v]) => render(k, v))
      .join('')}</${name}>`;
  }
  return `<${name}>${escapeXml(String(value))}</${name}>`;
}

/** A response document: `<Root xmlns=…>…</Root>`; arrays repeat their element. */
export function xmlDocument(root: string, body: XmlNode): string {
  const inner = Object.entries(body)
    .map(([k, v]) => render(k, v))
    .join('');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<${root} xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${inner}</${root}>`;
}

export function elements(xml: string, name: string): string[] {
  const out: string[] = [];
  const re = new RegExp(`<${name}(?:\\s[^>]*)?>([\\s\\S]*?)</${name}>`, 'g');
  for (let m = re.exec(xml); m; m = re.exec(xml)) out.push(m[1]!);
  return out;
}

export function text(xml: string, name: string): string | undefined {
  const found = elements(xml, name)[0];
  return found === undefined ? undefined : unescapeXml(found);
}

export function parseDeleteObjects(xml: string): {
  quiet: boolean;
  objects: Array<{ key: string; versionId: string | undefined }>;
} {
  if (!/<Delete[\s>]/.test(xml)) throw errors.malformedXml();
  const objects = elements(xml, 'Object').map((o) => {
    const key = text(o, 'Key');
    if (key === undefined) throw errors.malformedXml();
    return { key, versionId: text(o, 'VersionId') };
  });
  if (objects.length === 0 || objects.length > 1000) throw errors.malformedXml();
  return { quiet: text(xml, 'Quiet')?.trim() === 'true', objects };
}

/** The checksum elements a part of CompleteMultipartUpload may carry. */
const PART_CHECKSUMS = [
  'ChecksumCRC32',
  'ChecksumCRC32C',
  'ChecksumCRC64NVME',
  'ChecksumSHA1',
  'ChecksumSHA256',
];

export function parseCompleteMultipart(
  xml: string,
): Array<{ partNumber: number; etag: string; checksums: Record<string, string> }> {
  if (!/<CompleteMultipartUpload[\s>]/.test(xml)) throw errors.malformedXml();
  const parts = elements(xml, 'Part').map((p) => {
    const partNumber = Number(text(p, 'PartNumber')?.trim());
    const etag = text(p, 'ETag')?.trim();
    if (!Number.isInteger(partNumber) || etag === undefined) throw errors.malformedXml();
    const checksums: Record<string, string> = {};
    for (const name of PART_CHECKSUMS) {
      const value = text(p, name)?.trim();
      if (value !== undefined) checksums[name] = value;
    }
    return { partNumber, etag: etag.replace(/^"|"$/g, ''), checksums };
  });
  if (parts.length === 0) throw errors.malformedXml();
  return parts;
}
