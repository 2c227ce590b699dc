// AWS Signature Version 4 as S3 checks it: the Authorization header form and presigned URLs (X-Amz-*
// query). Pure functions over the request's method, raw URL and headers, so they can be tested against
// AWS's published examples.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { errors } from './errors.js';

export const ALGORITHM = 'AWS4-HMAC-SHA256';
export const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';
const MAX_SKEW_MS = 15 * 60_000;
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

export type PayloadMode =
  | { kind: 'unsigned' }
  | { kind: 'sha256'; hex: string }
  /** aws-chunked body; `signed` chunks carry chunk-signature, `trailer` ends with trailing headers. */
  | { kind: 'chunked'; signed: boolean; trailer: boolean };

export interface SignedRequest {
  method: string;
  /** Raw request target: path and query exactly as received. */
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

/** What the signature claims; the caller looks the access key up and then calls `verify`. */
export interface ParsedSignature {
  accessKeyId: string;
  /** YYYYMMDD of the credential scope. */
  date: string;
  region: string;
  service: string;
  amzDate: string;
  signedHeaders: string[];
  signature: string;
  presigned: boolean;
  payloadHash: string;
  payload: PayloadMode;
}

export const sha256Hex = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');
const hmac = (key: Buffer | string, data: string): Buffer => createHmac('sha256', key).update(data).digest();

/** RFC 3986 encoding as SigV4 wants it: everything but A-Z a-z 0-9 - . _ ~ is %XX (upper case). */
export function uriEncode(text: string, encodeSlash = true): string {
  const encoded = encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return encodeSlash ? encoded : encoded.replace(/%2F/g, '/');
}

export function uriDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw errors.invalidArgument('Malformed percent-encoding in the request URL');
  }
}

export function splitTarget(url: string): { path: string; query: string } {
  const q = url.indexOf('?');
  return q < 0 ? { path: url, query: '' } : { path: url.slice(0, q), query: url.slice(q + 1) };
}

/** Query parameters decoded, in order; repeated names keep the first value. */
export function parseQuery(query: string): Map<string, string> {
  const params = new Map<string, string>();
  if (query === '') return params;
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = uriDecode(eq < 0 ? pair : pair.slice(0, eq));
    const value = eq < 0 ? '' : uriDecode(pair.slice(eq + 1));
    if (!params.has(name)) params.set(name, value);
  }
  return params;
}

function canonicalUri(path: string): string {
  // S3 signs the path encoded once, segment by segment (no normalisation of . or //).
  return path
    .split('/')
    .map((segment) => uriEncode(uriDecode(segment)))
    .join('/');
}

function canonicalQuery(query: string, omit: string | undefined): string {
  if (query === '') return '';
  const pairs: Array<[string, string]> = [];
  for (const pair of query.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const name = uriDecode(eq < 0 ? pair : pair.slice(0, eq));
    if (name === omit) continue;
    const value = eq < 0 ? '' : uriDecode(pair.slice(eq + 1));
    pairs.push([uriEncode(name), uriEncode(value)]);
  }
  pairs.sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  return pairs.map(([k, v]) => `${k}=${v}`).join('&');
}

export function headerValue(headers: SignedRequest['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

function canonicalHeaders(headers: SignedRequest['headers'], names: string[]): string {
  return names
    .map((name) => `${name}:${(headerValue(headers, name) ?? '').trim().replace(/\s+/g, ' ')}\n`)
    .join('');
}

function parseAmzDate(text: string): Date | undefined {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(text);
  if (!m) return undefined;
  const date = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** An HTTP date (RFC 7231) in SigV4's basic format, '' when absent or unreadable. */
function amzDateOf(httpDate: string | undefined): string {
  const t = httpDate === undefined ? NaN : Date.parse(httpDate);
  return Number.isNaN(t) ? '' : new Date(t).toISOString().replace(/[-:]|\.\d{3}/g, '');
}

function parseCredential(credential: string) {
  const parts = credential.split('/');
  if (parts.length !== 5 || parts[4] !== 'aws4_request' || parts[3] !== 's3' || !/^\d{8}$/.test(parts[1]!)) {
    throw errors.invalidArgument(`Invalid credential scope '${parts.slice(1).join('/')}'`);
  }
  return { accessKeyId: parts[0]!, date: parts[1]!, region: parts[2]!, service: parts[3] };
}

export function payloadModeOf(hash: string): PayloadMode {
  switch (hash) {
    case 'UNSIGNED-PAYLOAD':
      return { kind: 'unsigned' };
    case 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD':
      return { kind: 'chunked', signed: true, trailer: false };
    case 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER':
      return { kind: 'chunked', signed: true, trailer: true };
    case 'STREAMING-UNSIGNED-PAYLOAD-TRAILER':
      return { kind: 'chunked', signed: false, trailer: true };
    default:
      if (/^[0-9a-f]{64}$/.test(hash)) return { kind: 'sha256', hex: hash };
      throw errors.invalidArgument(`x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-… or a SHA-256`);
  }
}

/**
 * The signature a request carries, or undefined when it carries none (anonymous). Format problems
 * and expired or skewed requests throw S3 errors; the signature itself is checked by `verify`.
 */
export function parseSignature(request: SignedRequest, now: Date): ParsedSignature | undefined {
  const { query } = splitTarget(request.url);
  const params = parseQuery(query);
  const authorization = headerValue(request.headers, 'authorization');
  if (params.has('X-Amz-Algorithm')) {
    if (params.get('X-Amz-Algorithm') !== ALGORITHM)
      throw errors.invalidArgument('Unsupported X-Amz-Algorithm');
    const credential = parseCredential(params.get('X-Amz-Credential') ?? '');
    const amzDate = params.get('X-Amz-Date') ?? '';
    const signedAt = parseAmzDate(amzDate);
    const expires = Number(params.get('X-Amz-Expires') ?? 'NaN');
    const signature = params.get('X-Amz-Signature') ?? '';
    const signedHeaders = (params.get('X-Amz-SignedHeaders') ?? '').split(';').filter(Boolean);
    if (!signedAt || amzDate.slice(0, 8) !== credential.date)
      throw errors.invalidArgument('Invalid X-Amz-Date');
    // S3 answers an expiry out of range as it answers an expired URL.
    if (!Number.isInteger(expires) || expires < 1 || expires > MAX_PRESIGN_SECONDS) {
      throw errors.accessDenied('X-Amz-Expires must be from 1 to 604800 seconds');
    }
    if (!/^[0-9a-f]{64}$/.test(signature)) throw errors.signatureDoesNotMatch();
    if (!signedHeaders.includes('host')) throw errors.invalidArgument('host must be a signed header');
    if (signedAt.getTime() - now.getTime() > MAX_SKEW_MS)
      throw errors.accessDenied('Request is not valid yet');
    if (now.getTime() > signedAt.getTime() + expires * 1000) throw errors.accessDenied('Request has expired');
    const payloadHash = params.get('X-Amz-Content-Sha256') ?? 'UNSIGNED-PAYLOAD';
    return {
      ...credential,
      amzDate,
      signedHeaders,
      signature,
      presigned: true,
      payloadHash,
      payload: payloadModeOf(payloadHash),
    };
  }
  if (authorization === undefined) return undefined;
  if (!authorization.startsWith(`${ALGORITHM} `)) {
    throw errors.invalidArgument('Only AWS4-HMAC-SHA256 (Signature Version 4) is supported');
  }
  const fields = new Map<string, string>();
  for (const part of authorization.slice(ALGORITHM.length + 1).split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
  }
  const credential = parseCredential(fields.get('Credential') ?? '');
  const signedHeaders = (fields.get('SignedHeaders') ?? '').split(';').filter(Boolean);
  const signature = fields.get('Signature') ?? '';
  // SigV4 takes the time from x-amz-date, or else from Date (botocore signs with it when set).
  const amzDate =
    headerValue(request.headers, 'x-amz-date') ?? amzDateOf(headerValue(request.headers, 'date'));
  const signedAt = parseAmzDate(amzDate);
  if (!signedAt || amzDate.slice(0, 8) !== credential.date) {
    throw errors.accessDenied('AWS authentication requires a valid x-amz-date matching the credential scope');
  }
  if (Math.abs(signedAt.getTime() - now.getTime()) > MAX_SKEW_MS) throw errors.requestTimeTooSkewed();
  if (!/^[0-9a-f]{64}$/.test(signature)) throw errors.signatureDoesNotMatch();
  if (!signedHeaders.includes('host')) throw errors.invalidArgument('host must be a signed header');
  const payloadHash = headerValue(request.headers, 'x-amz-content-sha256');
  if (payloadHash === undefined) {
    throw errors.invalidRequest('Missing required header for this request: x-amz-content-sha256');
  }
  return {
    ...credential,
    amzDate,
    signedHeaders,
    signature,
    presigned: false,
    payloadHash,
    payload: payloadModeOf(payloadHash),
  };
}

const keyCache = new Map<string, Buffer>();

/** The derived signing key; cached because every request of a day reuses it. */
export function signingKey(secret: string, date: string, region: string, service: string): Buffer {
  const cacheKey = `${sha256Hex(secret)}/${date}/${region}/${service}`;
  let key = keyCache.get(cacheKey);
  if (!key) {
    key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), 'aws4_request');
    if (keyCache.size > 1000) keyCache.clear();
    keyCache.set(cacheKey, key);
  }
  return key;
}

export const scopeOf = (s: Pick<ParsedSignature, 'date' | 'region' | 'service'>): string =>
  `${s.date}/${s.region}/${s.service}/aws4_request`;

export function canonicalRequest(request: SignedRequest, parsed: ParsedSignature): string {
  const { path, query } = splitTarget(request.url);
  return [
    request.method,
    canonicalUri(path),
    canonicalQuery(query, parsed.presigned ? 'X-Amz-Signature' : undefined),
    canonicalHeaders(request.headers, parsed.signedHeaders),
    parsed.signedHeaders.join(';'),
    parsed.payloadHash,
  ].join('\n');
}

export function constantTimeHexEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Throws SignatureDoesNotMatch unless the request was signed with `secret`. */
export function verifySignature(request: SignedRequest, parsed: ParsedSignature, secret: string): void {
  const canonical = canonicalRequest(request, parsed);
  const key = signingKey(secret, parsed.date, parsed.region, parsed.service);
  const signs = (hashed: Buffer | string) =>
    constantTimeHexEqual(
      createHmac('sha256', key)
        .update([ALGORITHM, parsed.amzDate, scopeOf(parsed), sha256Hex(hashed)].join('\n'))
        .digest('hex'),
      parsed.signature,
    );
  // Node hands header values over as latin1, one character per byte. Clients sign the bytes they
  // send (botocore sends UTF-8 metadata), so those bytes are hashed as they came; everything else in
  // the canonical request is ASCII. The JavaScript SDK instead signs the UTF-8 of a string that Node
  // then sends as latin1; that reading is accepted too, and only tried for non-ASCII requests.
  if (signs(Buffer.from(canonical, 'latin1'))) return;
  if (/[^\x00-\x7f]/.test(canonical) && signs(canonical)) return;
  throw errors.signatureDoesNotMatch();
}

/** Signature of one aws-chunked chunk, chained from the previous one (the seed is the header's). */
export function chunkSignature(
  key: Buffer,
  parsed: Pick<ParsedSignature, 'amzDate' | 'date' | 'region' | 'service'>,
  previous: string,
  chunkSha256: string,
): string {
  return createHmac('sha256', key)
    .update(
      ['AWS4-HMAC-SHA256-PAYLOAD', parsed.amzDate, scopeOf(parsed), previous, EMPTY_SHA256, chunkSha256].join(
        '\n',
      ),
    )
    .digest('hex');
}

/** Signature over the trailing headers of a signed aws-chunked body. */
export function trailerSignature(
  key: Buffer,
  parsed: Pick<ParsedSignature, 'amzDate' | 'date' | 'region' | 'service'>,
  previous: string,
  canonicalTrailer: string,
): string {
  return createHmac('sha256', key)
    .update(
      [
        'AWS4-HMAC-SHA256-TRAILER',
        parsed.amzDate,
        scopeOf(parsed),
        previous,
        sha256Hex(canonicalTrailer),
      ].join('\n'),
    )
    .digest('hex');
}

/**
 * A presigned URL (query authentication, only `host` signed, UNSIGNED-PAYLOAD), as an S3 client's
 * presigner makes it but synchronously: `path` is the request path (`/bucket/key` path-style), each
 * segment encoded here. Signed with the same canonical form the endpoint verifies.
 */
export function presignUrl(options: {
  method: 'GET' | 'PUT';
  /** The service's base URL (scheme, host, port, and a path prefix if any). */
  endpoint: string;
  path: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  now: Date;
  expiresSeconds: number;
}): string {
  const base = new URL(options.endpoint);
  const amzDate = options.now
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
  const date = amzDate.slice(0, 8);
  const scope = { date, region: options.region, service: 's3' };
  const path =
    base.pathname.replace(/\/+$/, '') +
    options.path
      .split('/')
      .map((segment) => uriEncode(segment))
      .join('/');
  const query = [
    ['X-Amz-Algorithm', ALGORITHM],
    ['X-Amz-Credential', `${options.accessKeyId}/${scopeOf(scope)}`],
    ['X-Amz-Date', amzDate],
    ['X-Amz-Expires', String(options.expiresSeconds)],
    ['X-Amz-SignedHeaders', 'host'],
  ]
    .map(([name, value]) => `${name}=${uriEncode(value!)}`)
    .join('&');
  const canonical = canonicalRequest(
    { method: options.method, url: `${path}?${query}`, headers: { host: base.host } },
    { presigned: true, signedHeaders: ['host'], payloadHash: 'UNSIGNED-PAYLOAD' } as ParsedSignature,
  );
  const signature = createHmac('sha256', signingKey(options.secretAccessKey, date, options.region, 's3'))
    .update([ALGORITHM, amzDate, scopeOf(scope), sha256Hex(canonical)].join('\n'))
    .digest('hex');
  return `${base.protocol}//${base.host}${path}?${query}&X-Amz-Signature=${signature}`;
}
