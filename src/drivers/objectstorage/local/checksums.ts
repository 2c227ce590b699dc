// S3's additional checksums (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256): computed
// while a body streams in, checked against what the client declared, kept with the object and answered
// back (on the write, and on GET/HEAD with `x-amz-checksum-mode: ENABLED`). Current AWS SDKs send
// CRC32 on every PutObject and UploadPart by default.
//
// A multipart object's checksum is either COMPOSITE (the checksum of the parts' checksums, `-N`
// appended) or FULL_OBJECT (the checksum of the whole data, which Berth computes while it joins the
// parts); CRC64NVME exists only as FULL_OBJECT, SHA-1/SHA-256 only as COMPOSITE.
import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import zlib from 'node:zlib';
import { errors } from './errors.js';
import { headerValue } from './sigv4.js';

export const ALGORITHMS = ['CRC32', 'CRC32C', 'CRC64NVME', 'SHA1', 'SHA256'] as const;
export type ChecksumAlgorithm = (typeof ALGORITHMS)[number];
export type ChecksumType = 'COMPOSITE' | 'FULL_OBJECT';

/** What an object keeps (JSON in s3_objects.checksum). */
export interface StoredChecksum {
  algorithm: ChecksumAlgorithm;
  type: ChecksumType;
  /** Base64, with `-<parts>` for a composite checksum. */
  value: string;
}

export interface Checksummer {
  update(chunk: Buffer): void;
  /** The checksum as S3 writes it: base64 of the big-endian digest. */
  digest(): string;
}

export const headerOf = (algorithm: ChecksumAlgorithm) => `x-amz-checksum-${algorithm.toLowerCase()}`;
export const xmlNameOf = (algorithm: ChecksumAlgorithm) => `Checksum${algorithm}`;

function parseAlgorithm(value: string | undefined): ChecksumAlgorithm | undefined {
  if (value === undefined) return undefined;
  const upper = value.toUpperCase();
  const found = ALGORITHMS.find((a) => a === upper);
  if (!found)
    throw errors.invalidRequest(`Checksum algorithm ${value} is not one of ${ALGORITHMS.join(', ')}.`);
  return found;
}

/**
 * The checksum a request body comes with: a checksum header, a declared trailer, or only the
 * algorithm (`x-amz-sdk-checksum-algorithm`), in which case Berth computes and keeps it all the same.
 */
export function bodyChecksumAlgorithm(headers: IncomingHttpHeaders): ChecksumAlgorithm | undefined {
  const trailers = (headerValue(headers, 'x-amz-trailer') ?? '')
    .toLowerCase()
    .split(',')
    .map((t) => t.trim());
  const sent = ALGORITHMS.filter((a) => headers[headerOf(a)] !== undefined || trailers.includes(headerOf(a)));
  if (sent.length > 1) throw errors.invalidRequest('Expecting a single x-amz-checksum- header.');
  return sent[0] ?? parseAlgorithm(headerValue(headers, 'x-amz-sdk-checksum-algorithm'));
}

/** CreateMultipartUpload's `x-amz-checksum-algorithm` and `x-amz-checksum-type`, checked together. */
export function uploadChecksum(
  headers: IncomingHttpHeaders,
): { algorithm: ChecksumAlgorithm; type: ChecksumType } | undefined {
  const algorithm = parseAlgorithm(headerValue(headers, 'x-amz-checksum-algorithm'));
  const typeText = headerValue(headers, 'x-amz-checksum-type')?.toUpperCase();
  if (typeText !== undefined && typeText !== 'COMPOSITE' && typeText !== 'FULL_OBJECT')
    throw errors.invalidRequest('The x-amz-checksum-type header must be COMPOSITE or FULL_OBJECT.');
  if (algorithm === undefined) {
    if (typeText !== undefined)
      throw errors.invalidRequest('The x-amz-checksum-type header requires x-amz-checksum-algorithm.');
    return undefined;
  }
  const type = typeText ?? (algorithm === 'CRC64NVME' ? 'FULL_OBJECT' : 'COMPOSITE');
  if (type === 'FULL_OBJECT' && algorithm.startsWith('SHA'))
    throw errors.invalidRequest(
      `The FULL_OBJECT checksum type cannot be used with the ${algorithm} algorithm.`,
    );
  if (type === 'COMPOSITE' && algorithm === 'CRC64NVME')
    throw errors.invalidRequest('The COMPOSITE checksum type cannot be used with the CRC64NVME algorithm.');
  return { algorithm, type };
}

/** Headers that answer a stored checksum. */
export function checksumHeaders(stored: StoredChecksum | undefined): Record<string, string> {
  if (!stored) return {};
  return { [headerOf(stored.algorithm)]: stored.value, 'x-amz-checksum-type': stored.type };
}

/** The same, as XML elements of CompleteMultipartUploadResult, ListParts… */
export function checksumXml(stored: StoredChecksum | undefined): Record<string, string> {
  if (!stored) return {};
  return { [xmlNameOf(stored.algorithm)]: stored.value, ChecksumType: stored.type };
}

export const parseStored = (json: string | null | undefined): StoredChecksum | undefined =>
  json ? (JSON.parse(json) as StoredChecksum) : undefined;

/** The composite checksum of parts: the checksum of their concatenated digests, then `-<count>`. */
export function compositeOf(algorithm: ChecksumAlgorithm, partValues: readonly string[]): string {
  const summer = checksummer(algorithm);
  for (const value of partValues) summer.update(Buffer.from(value, 'base64'));
  return `${summer.digest()}-${partValues.length}`;
}

export function checksummer(algorithm: ChecksumAlgorithm): Checksummer {
  switch (algorithm) {
    case 'CRC32': {
      let crc = 0;
      return {
        update: (chunk) => void (crc = zlib.crc32(chunk, crc)),
        digest: () => uint32(crc),
      };
    }
    case 'CRC32C': {
      let crc = 0xffffffff;
      return {
        update: (chunk) => void (crc = crc32cUpdate(crc, chunk)),
        digest: () => uint32(~crc),
      };
    }
    case 'CRC64NVME':
      return crc64nvme();
    case 'SHA1':
    case 'SHA256': {
      const hash = createHash(algorithm === 'SHA1' ? 'sha1' : 'sha256');
      return { update: (chunk) => void hash.update(chunk), digest: () => hash.digest('base64') };
    }
  }
}

function uint32(value: number): string {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value >>> 0);
  return out.toString('base64');
}

/** Reflected table of a CRC-32 polynomial. */
function table32(poly: number): Uint32Array {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
}

const CRC32C_TABLE = table32(0x82f63b78);

function crc32cUpdate(crc: number, chunk: Buffer): number {
  let c = crc;
  for (let i = 0; i < chunk.length; i++) c = CRC32C_TABLE[(c ^ chunk[i]!) & 0xff]! ^ (c >>> 8);
  return c;
}

// CRC-64/NVME (reflected polynomial 0x9a6c9329ac4bc9b5), kept as two 32-bit halves: BigInt per byte
// would be tens of times slower.
const CRC64_LO = new Uint32Array(256);
const CRC64_HI = new Uint32Array(256);
{
  const polyLo = 0xac4bc9b5;
  const polyHi = 0x9a6c9329;
  for (let n = 0; n < 256; n++) {
    let lo = n;
    let hi = 0;
    for (let k = 0; k < 8; k++) {
      const bit = lo & 1;
      lo = ((lo >>> 1) | ((hi & 1) << 31)) >>> 0;
      hi = hi >>> 1;
      if (bit) {
        lo = (lo ^ polyLo) >>> 0;
        hi = (hi ^ polyHi) >>> 0;
      }
    }
    CRC64_LO[n] = lo;
    CRC64_HI[n] = hi;
  }
}

function crc64nvme(): Checksummer {
  let lo = 0xffffffff;
  let hi = 0xffffffff;
  return {
    update(chunk) {
      let l = lo;
      let h = hi;
      for (let i = 0; i < chunk.length; i++) {
        const index = (l ^ chunk[i]!) & 0xff;
        l = ((l >>> 8) | (h << 24)) ^ CRC64_LO[index]!;
        h = (h >>> 8) ^ CRC64_HI[index]!;
      }
      lo = l >>> 0;
      hi = h >>> 0;
    },
    digest() {
      const out = Buffer.alloc(8);
      out.writeUInt32BE(~hi >>> 0, 0);
      out.writeUInt32BE(~lo >>> 0, 4);
      return out.toString('base64');
    },
  };
}
