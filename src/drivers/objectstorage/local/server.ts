// Berth's S3-compatible endpoint: a plain node:http server (no framework between the socket and the
// bytes) that authenticates every request with SigV4, checks that the bucket belongs to the caller's
// object storage and that the caller's policies allow the action, then serves the operation from
// files in the data directory and metadata in the store.
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline } from 'node:stream/promises';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Dialect } from '../../../db/connect.js';
import type { Database } from '../../../db/schema/index.js';
import { iso, type Clock } from '../../../domain/clock.js';
import type { SecretBox } from '../../../services/secret-box.js';
import { memorySink, receiveBody } from './body.js';
import { conditionalWrite } from './conditional.js';
import { createCors } from './cors.js';
import type { FeatureExchange } from './exchange.js';
import { FileSink } from './file-sink.js';
import { createPostObject } from './post-object.js';
import { copyTags, createTagging, headerTags, tagCountHeader } from './tagging.js';
import { errors, S3Error } from './errors.js';
import { createObjectFiles, type ObjectFiles } from './files.js';
import { lookupCache } from './lookup-cache.js';
import { refuseUnhonoured, routeTable } from './routes.js';
import { createObjectMetadata, type BucketRow, type ObjectRow } from './metadata.js';
import { compilePolicies, isAllowed, type AccessRequest, type Statement } from './policy.js';
import {
  headerValue,
  parseQuery,
  parseSignature,
  splitTarget,
  uriDecode,
  uriEncode,
  verifySignature,
  type ParsedSignature,
} from './sigv4.js';
import { xmlDocument, parseCompleteMultipart, parseDeleteObjects, type XmlNode } from './xml.js';

export interface S3ServerDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  secretBox: SecretBox;
  logger: Logger;
  dataDir: string;
  /** Host names under which `<bucket>.<host>` means virtual-host-style addressing. */
  virtualHostSuffixes: readonly string[];
  /** How long access keys and buckets looked up in the store are reused (default LOOKUP_TTL_MS). */
  lookupTtlMs?: number;
}

export interface S3Server {
  readonly port: number;
  readonly url: string;
  close(): Promise<void>;
}

/**
 * A revoked key, a changed policy or a deleted bucket takes effect within this bound. Every request
 * needs both look-ups; reusing them saves two queries and a decryption per request.
 */
export const LOOKUP_TTL_MS = 1000;
const MAX_OBJECT = 5 * 1024 ** 3;
const MIN_PART = 5 * 1024 ** 2;
const MAX_XML = 2 * 1024 * 1024;
const STORED_HEADERS = [
  'content-type',
  'content-encoding',
  'content-disposition',
  'content-language',
  'cache-control',
  'expires',
];
const RESPONSE_OVERRIDES: Record<string, string> = {
  'response-content-type': 'content-type',
  'response-content-language': 'content-language',
  'response-expires': 'expires',
  'response-cache-control': 'cache-control',
  'response-content-disposition': 'content-disposition',
  'response-content-encoding': 'content-encoding',
};

export function isValidBucketName(name: string): boolean {
  return (
    /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) &&
    !name.includes('..') &&
    !/^\d+\.\d+\.\d+\.\d+$/.test(name) &&
    !name.startsWith('xn--')
  );
}

interface AccessKey {
  storageId: number;
  statements: readonly Statement[];
  secret: string;
}

interface Caller extends AccessKey {
  signature: ParsedSignature;
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  requestId: string;
  params: Map<string, string>;
  bucket: string | undefined;
  key: string | undefined;
  caller: Caller;
  /** Sends 100 Continue once the request is authenticated (Expect: 100-continue). */
  proceed(): void;
}

/** Sorts after every key that starts with the text before it (see metadata.listObjects). */
const SKIP_UNDER = '\u{10FFFF}';

const quoteEtag = (hex: string) => `"${hex}"`;
const bareEtag = (etag: string) => etag.replace(/^"|"$/g, '');

export function createS3Handler(deps: S3ServerDeps, files = createObjectFiles(deps.dataDir)) {
  const meta = createObjectMetadata(deps.db, deps.dialect);
  const compiled = new Map<string, readonly Statement[]>();
  const suffixes = deps.virtualHostSuffixes.map((s) => s.toLowerCase());
  const ttl = deps.lookupTtlMs ?? LOOKUP_TTL_MS;
  const keyCache = lookupCache<AccessKey>(ttl);
  const bucketCache = lookupCache<BucketRow>(ttl);
  const corsFeature = createCors(meta, ttl);
  const tagging = createTagging(meta);

  function statementsOf(policies: string): readonly Statement[] {
    let found = compiled.get(policies);
    if (!found) {
      try {
        found = compilePolicies(JSON.parse(policies));
      } catch {
        found = []; // provisioning refuses policies it cannot compile; anything else grants nothing
      }
      if (compiled.size > 1000) compiled.clear();
      compiled.set(policies, found);
    }
    return found;
  }

  function address(host: string | undefined, path: string): { bucket?: string; key?: string } {
    const hostname = (host ?? '').toLowerCase().replace(/:\d+$/, '');
    const suffix = suffixes.find((s) => hostname.endsWith(`.${s}`));
    if (suffix && !hostname.startsWith('[')) {
      const bucket = hostname.slice(0, -(suffix.length + 1));
      const key = path.length > 1 ? uriDecode(path.slice(1)) : undefined;
      return { bucket, ...(key !== undefined ? { key } : {}) };
    }
    const slash = path.indexOf('/', 1);
    const bucketPart = slash < 0 ? path.slice(1) : path.slice(1, slash);
    if (bucketPart === '') return {};
    const keyPart = slash < 0 ? '' : path.slice(slash + 1);
    return { bucket: uriDecode(bucketPart), ...(keyPart !== '' ? { key: uriDecode(keyPart) } : {}) };
  }

  const loadKey = (accessKeyId: string) =>
    keyCache.get(accessKeyId, async () => {
      const row = await meta.findAccessKey(accessKeyId);
      return (
        row && {
          storageId: row.object_storage_id,
          statements: statementsOf(row.policies),
          secret: deps.secretBox.decrypt(row.secret_encrypted),
        }
      );
    });

  // Browser form uploads: authenticated by their signed policy, not by a signed request.
  const postObject = createPostObject({
    now: () => deps.clock.now(),
    async accessKey(id) {
      const key = await loadKey(id);
      return key && { ...key, allows: (request: AccessRequest) => isAllowed(key.statements, request) };
    },
    bucket: (name) => bucketCache.get(name, () => meta.findBucket(name)),
    temp: () => files.temp(),
    sink: (temp) => new FileSink(temp),
    discard: (temp) => files.removeTemp(temp),
    async store(bucket, key, temp, size, md5, headers) {
      const etag = quoteEtag(md5.toString('hex'));
      const file = await files.place(temp, 'data', bucket.id);
      const values = {
        size,
        etag,
        file,
        headers: JSON.stringify(headers),
        last_modified: iso(deps.clock.now()),
      };
      const old = await meta.putObject(bucket.id, key, values).catch(async (error: unknown) => {
        await files.remove(file);
        throw error;
      });
      await files.remove(old);
      return etag;
    },
    maxObject: MAX_OBJECT,
  });

  async function authenticate(req: IncomingMessage): Promise<Caller> {
    const signature = parseSignature(
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
      deps.clock.now(),
    );
    if (!signature) throw errors.accessDenied('Anonymous access is not allowed');
    const key = await loadKey(signature.accessKeyId);
    if (!key) throw errors.invalidAccessKeyId();
    verifySignature(
      { method: req.method ?? 'GET', url: req.url ?? '/', headers: req.headers },
      signature,
      key.secret,
    );
    return { ...key, signature };
  }

  function allow(x: Exchange, request: AccessRequest): void {
    if (!isAllowed(x.caller.statements, request)) throw errors.accessDenied();
  }

  /** The caller's bucket: 404 if it does not exist, 403 if it belongs to another object storage. */
  async function ownBucket(x: Exchange, name: string): Promise<BucketRow> {
    const bucket = await bucketCache.get(name, () => meta.findBucket(name));
    if (!bucket) throw errors.noSuchBucket(name);
    if (bucket.object_storage_id !== x.caller.storageId) throw errors.accessDenied();
    return bucket;
  }

  function send(
    x: Exchange,
    status: number,
    headers: Record<string, string | number> = {},
    body?: string,
  ): void {
    x.res.writeHead(status, {
      'x-amz-request-id': x.requestId,
      server: 'Berth',
      ...(body !== undefined
        ? { 'content-type': 'application/xml', 'content-length': Buffer.byteLength(body) }
        : { 'content-length': 0 }),
      ...headers,
    });
    x.res.end(body);
  }

  const sendXml = (x: Exchange, root: string, body: XmlNode, headers: Record<string, string | number> = {}) =>
    send(x, 200, headers, xmlDocument(root, body));

  /** Receives a body into a fresh temp file; on any failure the temp file is gone. */
  async function receiveToTemp(x: Exchange): Promise<{ temp: string; size: number; md5: Buffer }> {
    const temp = await files.temp();
    x.proceed();
    try {
      const { size, md5 } = await receiveBody(
        x.req,
        x.caller.signature,
        x.caller.secret,
        new FileSink(temp),
        MAX_OBJECT,
      );
      return { temp, size, md5 };
    } catch (error) {
      await files.removeTemp(temp);
      throw error;
    }
  }

  async function receiveXml(x: Exchange): Promise<string> {
    x.proceed();
    const sink = memorySink(MAX_XML);
    await receiveBody(x.req, x.caller.signature, x.caller.secret, sink, MAX_XML);
    return sink.text();
  }

  function storedHeaders(req: IncomingMessage): string {
    const stored: Record<string, string> = {};
    for (const name of STORED_HEADERS) {
      let value = headerValue(req.headers, name);
      if (name === 'content-encoding' && value !== undefined) {
        // aws-chunked describes the transfer, not the object.
        value =
          value
            .split(',')
            .map((v) => v.trim())
            .filter((v) => v !== '' && v !== 'aws-chunked')
            .join(',') || undefined;
      }
      if (value !== undefined) stored[name] = value;
    }
    for (const [name, value] of Object.entries(req.headers)) {
      if (name.startsWith('x-amz-meta-') && value !== undefined)
        stored[name] = Array.isArray(value) ? value.join(',') : value;
    }
    stored['content-type'] ??= 'application/octet-stream';
    return JSON.stringify(stored);
  }

  function checkKey(key: string): void {
    if (Buffer.byteLength(key) > 1024) throw errors.keyTooLong();
  }

  /** What the feature modules (cors.ts…) see of a request. */
  function feature(x: Exchange): FeatureExchange {
    return {
      req: x.req,
      allow: (request) => allow(x, request),
      readXml: () => receiveXml(x),
      reply: (status, headers) => send(x, status, headers),
      replyXml: (root, body, headers) => sendXml(x, root, body, headers),
    };
  }

  // ---- buckets ----

  const ownerOf = (x: Exchange) => ({
    ID: String(x.caller.storageId),
    DisplayName: `storage-${x.caller.storageId}`,
  });

  async function listBuckets(x: Exchange): Promise<void> {
    allow(x, { action: 's3:ListAllMyBuckets' });
    const maxText = x.params.get('max-buckets') ?? '10000';
    if (!/^\d+$/.test(maxText) || Number(maxText) < 1 || Number(maxText) > 10000)
      throw errors.invalidArgument('max-buckets must be an integer from 1 to 10000');
    const token = x.params.get('continuation-token') ?? '';
    const after = Buffer.from(token, 'base64url').toString('utf8');
    // An object storage holds few buckets: they are listed whole and paged here.
    const buckets = (await meta.listBuckets(x.caller.storageId)).filter((b) => b.name > after);
    const shown = buckets.slice(0, Number(maxText));
    const truncated = buckets.length > shown.length;
    sendXml(x, 'ListAllMyBucketsResult', {
      Owner: ownerOf(x),
      Buckets: { Bucket: shown.map((b) => ({ Name: b.name, CreationDate: b.created_at })) },
      ContinuationToken: truncated
        ? Buffer.from(shown.at(-1)!.name, 'utf8').toString('base64url')
        : undefined,
    });
  }

  async function createBucket(x: Exchange, name: string): Promise<void> {
    allow(x, { action: 's3:CreateBucket', bucket: name });
    if (!isValidBucketName(name)) throw errors.invalidBucketName(name);
    x.req.resume();
    const id = await meta.createBucket(x.caller.storageId, name, iso(deps.clock.now()));
    if (id === undefined) {
      const holder = await meta.findBucket(name);
      // us-east-1, the region Berth advertises, answers a caller re-creating its own bucket with 200.
      if (holder?.object_storage_id !== x.caller.storageId) throw errors.bucketAlreadyExists(name);
    }
    send(x, 200, { location: `/${name}` });
  }

  async function deleteBucket(x: Exchange, bucket: BucketRow): Promise<void> {
    allow(x, { action: 's3:DeleteBucket', bucket: bucket.name });
    const { deleted, uploads } = await meta.deleteBucket(bucket.id);
    if (!deleted) throw errors.bucketNotEmpty(bucket.name);
    bucketCache.forget(bucket.name);
    await files.removeTree('data', bucket.id);
    for (const upload of uploads) await files.removeTree('parts', upload);
    send(x, 204);
  }

  async function listObjects(x: Exchange, bucket: BucketRow): Promise<void> {
    const p = x.params;
    const v2 = p.get('list-type') === '2';
    const prefix = p.get('prefix') ?? '';
    const delimiter = p.get('delimiter') ?? '';
    allow(x, { action: 's3:ListBucket', bucket: bucket.name, listPrefix: prefix });
    const maxKeysText = p.get('max-keys') ?? '1000';
    const maxKeys = Math.min(1000, Number(maxKeysText));
    if (!/^\d+$/.test(maxKeysText)) throw errors.invalidArgument('max-keys must be a non-negative integer');
    const urlEncode = p.get('encoding-type') === 'url';
    if (p.has('encoding-type') && !urlEncode)
      throw errors.invalidArgument('Invalid Encoding Method specified in Request');
    const enc = (s: string) => (urlEncode ? uriEncode(s, false) : s);
    let after = '';
    const token = p.get('continuation-token');
    if (v2) {
      if (token !== undefined && token !== '') {
        after = Buffer.from(token, 'base64url').toString('utf8');
        if (after === '') throw errors.invalidArgument('The continuation token provided is incorrect');
      } else after = p.get('start-after') ?? '';
    } else {
      // V1 clients resume from the last key or common prefix they saw; after a common prefix,
      // everything under it was already rolled up.
      after = p.get('marker') ?? '';
      if (delimiter !== '' && after.startsWith(prefix) && after.endsWith(delimiter)) after += SKIP_UNDER;
    }
    const page =
      maxKeys === 0
        ? { contents: [], prefixes: [], truncated: false, next: undefined }
        : await meta.listObjects(bucket.id, { prefix, delimiter, after, maxKeys });
    const withOwner = !v2 || p.get('fetch-owner') === 'true';
    const contents = page.contents.map((o) => ({
      Key: enc(o.key),
      LastModified: o.last_modified,
      ETag: o.etag,
      Size: o.size,
      StorageClass: 'STANDARD',
      Owner: withOwner ? ownerOf(x) : undefined,
    }));
    const common = page.prefixes.map((cp) => ({ Prefix: enc(cp) }));
    const nextToken = page.truncated && page.next !== undefined ? page.next : undefined;
    if (v2) {
      sendXml(x, 'ListBucketResult', {
        Name: bucket.name,
        Prefix: enc(prefix),
        Delimiter: delimiter === '' ? undefined : enc(delimiter),
        MaxKeys: maxKeys,
        KeyCount: contents.length + common.length,
        IsTruncated: page.truncated,
        ContinuationToken: token === '' ? undefined : token,
        NextContinuationToken:
          nextToken === undefined ? undefined : Buffer.from(nextToken, 'utf8').toString('base64url'),
        StartAfter: p.has('start-after') ? enc(p.get('start-after') ?? '') : undefined,
        EncodingType: urlEncode ? 'url' : undefined,
        Contents: contents,
        CommonPrefixes: common,
      });
    } else {
      sendXml(x, 'ListBucketResult', {
        Name: bucket.name,
        Prefix: prefix, // V1 echoes the prefix as sent, even with encoding-type=url
        Marker: enc(p.get('marker') ?? ''),
        NextMarker: nextToken === undefined ? undefined : enc(nextToken.replace(SKIP_UNDER, '')),
        Delimiter: delimiter === '' ? undefined : enc(delimiter),
        MaxKeys: maxKeys,
        IsTruncated: page.truncated,
        EncodingType: urlEncode ? 'url' : undefined,
        Contents: contents,
        CommonPrefixes: common,
      });
    }
  }

  /**
   * ListObjectVersions on a bucket without versioning: every object is its only version, `null`
   * (clients, S3's own test suite among them, empty buckets this way).
   */
  async function listVersions(x: Exchange, bucket: BucketRow): Promise<void> {
    const p = x.params;
    const prefix = p.get('prefix') ?? '';
    const delimiter = p.get('delimiter') ?? '';
    // Each object has one version: listing versions shows what ListBucket shows.
    allow(x, { action: 's3:ListBucket', bucket: bucket.name, listPrefix: prefix });
    const maxKeysText = p.get('max-keys') ?? '1000';
    if (!/^\d+$/.test(maxKeysText)) throw errors.invalidArgument('max-keys must be a non-negative integer');
    const maxKeys = Math.min(1000, Number(maxKeysText));
    const marker = p.get('key-marker') ?? '';
    const after =
      delimiter !== '' && marker.startsWith(prefix) && marker.endsWith(delimiter)
        ? marker + SKIP_UNDER
        : marker;
    const page =
      maxKeys === 0
        ? { contents: [], prefixes: [], truncated: false, next: undefined }
        : await meta.listObjects(bucket.id, { prefix, delimiter, after, maxKeys });
    const next = page.truncated && page.next !== undefined ? page.next.replace(SKIP_UNDER, '') : undefined;
    sendXml(x, 'ListVersionsResult', {
      Name: bucket.name,
      Prefix: prefix,
      KeyMarker: marker,
      VersionIdMarker: p.get('version-id-marker') ?? '',
      NextKeyMarker: next,
      NextVersionIdMarker: next === undefined ? undefined : 'null',
      Delimiter: delimiter === '' ? undefined : delimiter,
      MaxKeys: maxKeys,
      IsTruncated: page.truncated,
      Version: page.contents.map((o) => ({
        Key: o.key,
        VersionId: 'null',
        IsLatest: true,
        LastModified: o.last_modified,
        ETag: o.etag,
        Size: o.size,
        StorageClass: 'STANDARD',
        Owner: ownerOf(x),
      })),
      CommonPrefixes: page.prefixes.map((cp) => ({ Prefix: cp })),
    });
  }

  // ---- objects ----

  async function putObject(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    checkKey(key);
    const guard = conditionalWrite(x.req.headers, key); // hook: conditional writes (conditional.ts)
    guard?.before(await meta.findObject(bucket.id, key));
    const tags = headerTags(x.req.headers); // hook: x-amz-tagging (tagging.ts)
    const { temp, size, md5 } = await receiveToTemp(x);
    const etag = quoteEtag(md5.toString('hex'));
    const file = await files.place(temp, 'data', bucket.id);
    let old: string | undefined;
    try {
      old = await meta.putObject(
        bucket.id,
        key,
        {
          size,
          etag,
          file,
          headers: storedHeaders(x.req),
          last_modified: iso(deps.clock.now()),
          tags,
        },
        guard?.commit,
      );
    } catch (error) {
      await files.remove(file);
      throw error;
    }
    await files.remove(old);
    send(x, 200, { etag });
  }

  /**
   * GET's preconditions (RFC 7232 as S3 applies them): throws 412, or returns 304 when the caller's
   * copy is current. `prefix` reads the same conditions on a copy's source (x-amz-copy-source-if-…).
   */
  function conditional(x: Exchange, object: ObjectRow, prefix = ''): number | undefined {
    const header = (name: string) => headerValue(x.req.headers, prefix + name);
    const matches = (list: string) =>
      list.trim() === '*' || list.split(',').some((e) => bareEtag(e.trim()) === bareEtag(object.etag));
    const modified = Math.floor(Date.parse(object.last_modified) / 1000) * 1000;
    const after = (date: string | undefined) => {
      const t = date === undefined ? NaN : Date.parse(date);
      return Number.isNaN(t) ? undefined : modified > t;
    };
    const ifMatch = header('if-match');
    if (ifMatch !== undefined && !matches(ifMatch)) throw errors.preconditionFailed();
    if (ifMatch === undefined && after(header('if-unmodified-since')) === true)
      throw errors.preconditionFailed();
    const ifNoneMatch = header('if-none-match');
    if (ifNoneMatch !== undefined && matches(ifNoneMatch)) return 304;
    if (ifNoneMatch === undefined && after(header('if-modified-since')) === false) return 304;
    return undefined;
  }

  function parseRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
    if (header === undefined) return undefined;
    const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
    if (!m || (m[1] === '' && m[2] === '')) return undefined; // multiple or malformed ranges: whole object
    if (m[1] === '') {
      const n = Number(m[2]);
      if (n === 0 || size === 0) throw errors.invalidRange();
      return { start: Math.max(0, size - n), end: size - 1 };
    }
    const start = Number(m[1]);
    const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
    if (start >= size) throw errors.invalidRange();
    return end < start ? undefined : { start, end };
  }

  /**
   * `?partNumber=`: a single-part object is its own part 1. Berth does not keep the part sizes of a
   * completed multipart upload, so it cannot cut those into parts and says so.
   */
  function partOf(x: Exchange, object: ObjectRow) {
    const text = x.params.get('partNumber');
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!/^\d+$/.test(text) || n < 1 || n > 10_000)
      throw errors.invalidArgument('Part number must be an integer between 1 and 10000, inclusive');
    if (/-\d+"$/.test(object.etag))
      throw errors.notImplemented('partNumber on objects uploaded in parts is not implemented');
    if (n !== 1) throw errors.invalidPart();
    // S3 sends x-amz-mp-parts-count only for objects uploaded in parts.
    return { range: object.size === 0 ? undefined : { start: 0, end: object.size - 1 } };
  }

  async function getObject(x: Exchange, bucket: BucketRow, key: string, head: boolean): Promise<void> {
    allow(x, { action: 's3:GetObject', bucket: bucket.name, key });
    const object = await meta.findObject(bucket.id, key);
    if (!object) throw errors.noSuchKey(key);
    const headers: Record<string, string | number> = {
      etag: object.etag,
      'last-modified': new Date(object.last_modified).toUTCString(),
      'accept-ranges': 'bytes',
      ...(JSON.parse(object.headers) as Record<string, string>),
      ...tagCountHeader(object.tags), // hook: x-amz-tagging-count (tagging.ts)
    };
    for (const [param, header] of Object.entries(RESPONSE_OVERRIDES)) {
      const value = x.params.get(param);
      if (value !== undefined) headers[header] = value;
    }
    const notModified = conditional(x, object);
    if (notModified !== undefined) {
      send(x, notModified, { etag: object.etag, 'last-modified': headers['last-modified']! });
      return;
    }
    const part = partOf(x, object);
    const range = part ? part.range : parseRange(headerValue(x.req.headers, 'range'), object.size);
    const start = range?.start ?? 0;
    const end = range?.end ?? object.size - 1;
    const length = object.size === 0 ? 0 : end - start + 1;
    if (range) headers['content-range'] = `bytes ${start}-${end}/${object.size}`;
    if (head || length === 0) {
      send(x, range ? 206 : 200, { ...headers, 'content-length': length });
      return;
    }
    // Open before answering: a file replaced after the lookup stays readable through its handle.
    let handle: fs.promises.FileHandle;
    try {
      handle = await fs.promises.open(files.absolute(object.file), 'r');
    } catch {
      throw errors.noSuchKey(key);
    }
    x.res.writeHead(range ? 206 : 200, {
      'x-amz-request-id': x.requestId,
      server: 'Berth',
      ...headers,
      'content-length': length,
    });
    await pipeline(handle.createReadStream({ start, end, highWaterMark: 1024 * 1024 }), x.res);
  }

  async function deleteObject(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:DeleteObject', bucket: bucket.name, key });
    await files.remove(await meta.deleteObject(bucket.id, key));
    send(x, 204);
  }

  async function deleteObjects(x: Exchange, bucket: BucketRow): Promise<void> {
    const { quiet, objects } = parseDeleteObjects(await receiveXml(x));
    const deleted: XmlNode[] = [];
    const failed: XmlNode[] = [];
    for (const { key, versionId } of objects) {
      // Only the `null` version exists; deleting another one must not delete the object.
      if (versionId !== undefined && versionId !== 'null') {
        failed.push({
          Key: key,
          VersionId: versionId,
          Code: 'NoSuchVersion',
          Message: 'The specified version does not exist.',
        });
        continue;
      }
      if (!isAllowed(x.caller.statements, { action: 's3:DeleteObject', bucket: bucket.name, key })) {
        failed.push({ Key: key, Code: 'AccessDenied', Message: 'Access Denied' });
        continue;
      }
      await files.remove(await meta.deleteObject(bucket.id, key));
      if (!quiet) deleted.push({ Key: key, VersionId: versionId });
    }
    sendXml(x, 'DeleteResult', { Deleted: deleted, Error: failed });
  }

  async function copyObject(x: Exchange, bucket: BucketRow, key: string, source: string): Promise<void> {
    const raw = source.split('?')[0]!.replace(/^\//, '');
    const slash = raw.indexOf('/');
    if (slash <= 0) throw errors.invalidArgument('x-amz-copy-source must be bucket/key');
    const sourceBucketName = uriDecode(raw.slice(0, slash));
    const sourceKey = uriDecode(raw.slice(slash + 1));
    const sourceBucket = await ownBucket(x, sourceBucketName);
    allow(x, { action: 's3:GetObject', bucket: sourceBucket.name, key: sourceKey });
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    checkKey(key);
    const object = await meta.findObject(sourceBucket.id, sourceKey);
    if (!object) throw errors.noSuchKey(sourceKey);
    // A copy has no 304: a source the caller's conditions rule out is a failed precondition.
    if (conditional(x, object, 'x-amz-copy-source-') !== undefined) throw errors.preconditionFailed();
    const replace = headerValue(x.req.headers, 'x-amz-metadata-directive') === 'REPLACE';
    if (!replace && sourceBucket.id === bucket.id && sourceKey === key) {
      throw errors.invalidRequest(
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata.",
      );
    }
    x.req.resume();
    const temp = await files.temp();
    try {
      await fs.promises.copyFile(files.absolute(object.file), temp);
    } catch {
      await files.removeTemp(temp);
      throw errors.noSuchKey(sourceKey);
    }
    try {
      await files.syncData(temp);
    } catch (error) {
      await files.removeTemp(temp);
      throw error;
    }
    const file = await files.place(temp, 'data', bucket.id);
    const lastModified = iso(deps.clock.now());
    const old = await meta.putObject(bucket.id, key, {
      size: object.size,
      etag: object.etag,
      file,
      headers: replace ? storedHeaders(x.req) : object.headers,
      last_modified: lastModified,
      tags: copyTags(x.req.headers, object.tags), // hook: tagging directive (tagging.ts)
    });
    await files.remove(old);
    sendXml(x, 'CopyObjectResult', { LastModified: lastModified, ETag: object.etag });
  }

  // ---- multipart ----

  async function findUpload(x: Exchange, bucket: BucketRow, key: string) {
    const uploadId = x.params.get('uploadId') ?? '';
    const upload = await meta.findUpload(uploadId);
    if (!upload || upload.bucket_id !== bucket.id || upload.key !== key) throw errors.noSuchUpload(uploadId);
    return upload;
  }

  async function createUpload(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    checkKey(key);
    x.req.resume();
    const uploadId = randomBytes(24).toString('base64url');
    await meta.createUpload({
      upload_id: uploadId,
      bucket_id: bucket.id,
      key,
      headers: storedHeaders(x.req),
      created_at: iso(deps.clock.now()),
      tags: headerTags(x.req.headers), // hook: x-amz-tagging (tagging.ts)
    });
    sendXml(x, 'InitiateMultipartUploadResult', { Bucket: bucket.name, Key: key, UploadId: uploadId });
  }

  async function uploadPart(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    const partNumber = Number(x.params.get('partNumber'));
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000) {
      throw errors.invalidArgument('Part number must be an integer between 1 and 10000, inclusive');
    }
    if (x.req.headers['x-amz-copy-source'] !== undefined) throw errors.notImplemented();
    const upload = await findUpload(x, bucket, key);
    const { temp, size, md5 } = await receiveToTemp(x);
    const etag = quoteEtag(md5.toString('hex'));
    const file = await files.place(temp, 'parts', upload.id);
    try {
      await files.remove(
        await meta.putPart(upload.id, partNumber, { size, etag, file, last_modified: iso(deps.clock.now()) }),
      );
    } catch (error) {
      await files.remove(file);
      throw error;
    }
    send(x, 200, { etag });
  }

  const completed = (bucket: BucketRow, key: string, etag: string) => ({
    Location: `/${bucket.name}/${uriEncode(key, false)}`,
    Bucket: bucket.name,
    Key: key,
    ETag: etag,
  });

  /**
   * A repeated CompleteMultipartUpload (a client retrying after a lost answer) succeeds again when the
   * object at the key is the one those parts made: its ETag is the MD5 of the parts' MD5s.
   */
  async function completedBefore(x: Exchange, bucket: BucketRow, key: string): Promise<boolean> {
    const requested = parseCompleteMultipart(await receiveXml(x));
    const object = await meta.findObject(bucket.id, key);
    if (!object || requested.length === 0) return false;
    const md5s = createHash('md5');
    for (const r of requested) {
      if (!/^[0-9a-f]{32}$/.test(r.etag)) return false;
      md5s.update(Buffer.from(r.etag, 'hex'));
    }
    if (object.etag !== quoteEtag(`${md5s.digest('hex')}-${requested.length}`)) return false;
    sendXml(x, 'CompleteMultipartUploadResult', completed(bucket, key, object.etag));
    return true;
  }

  async function completeUpload(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    const uploadId = x.params.get('uploadId') ?? '';
    const upload = await meta.findUpload(uploadId);
    if (!upload || upload.bucket_id !== bucket.id || upload.key !== key) {
      if (await completedBefore(x, bucket, key)) return;
      throw errors.noSuchUpload(uploadId);
    }
    const guard = conditionalWrite(x.req.headers, key); // hook: conditional writes (conditional.ts)
    guard?.before(await meta.findObject(bucket.id, key));
    const requested = parseCompleteMultipart(await receiveXml(x));
    const stored = new Map((await meta.listParts(upload.id)).map((p) => [p.part_number, p]));
    let previous = 0;
    const chosen = requested.map((r, i) => {
      if (r.partNumber <= previous) throw errors.invalidPartOrder();
      previous = r.partNumber;
      const part = stored.get(r.partNumber);
      if (!part || bareEtag(part.etag) !== r.etag) throw errors.invalidPart();
      if (i < requested.length - 1 && part.size < MIN_PART) throw errors.entityTooSmall();
      return part;
    });
    const temp = await files.temp();
    let size = 0;
    const md5s = createHash('md5');
    for (const part of chosen) {
      size += part.size;
      md5s.update(Buffer.from(bareEtag(part.etag), 'hex'));
    }
    // One pipeline for all parts: a pipeline per part into the same sink left a listener behind on
    // it each time (MaxListenersExceededWarning on uploads of more than a few parts).
    async function* partBytes() {
      for (const part of chosen) {
        yield* fs.createReadStream(files.absolute(part.file), {
          highWaterMark: 1024 * 1024,
        }) as AsyncIterable<Buffer>;
      }
    }
    try {
      await pipeline(partBytes, new FileSink(temp));
    } catch (error) {
      await files.removeTemp(temp);
      throw error;
    }
    const etag = quoteEtag(`${md5s.digest('hex')}-${chosen.length}`);
    const file = await files.place(temp, 'data', bucket.id);
    const result = await meta
      .completeUpload(
        upload.id,
        bucket.id,
        key,
        {
          size,
          etag,
          file,
          headers: upload.headers,
          last_modified: iso(deps.clock.now()),
          tags: upload.tags,
        },
        guard?.commit,
      )
      .catch(async (error: unknown) => {
        await files.remove(file); // hook: a refused condition leaves no object file behind
        throw error;
      });
    if (!result.completed) {
      await files.remove(file);
      throw errors.noSuchUpload(upload.upload_id);
    }
    await files.remove(result.old);
    await files.removeTree('parts', upload.id);
    sendXml(x, 'CompleteMultipartUploadResult', completed(bucket, key, etag));
  }

  async function abortUpload(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:AbortMultipartUpload', bucket: bucket.name, key });
    const upload = await findUpload(x, bucket, key);
    await meta.abortUpload(upload.id);
    await files.removeTree('parts', upload.id);
    send(x, 204);
  }

  async function listParts(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:ListMultipartUploadParts', bucket: bucket.name, key });
    const upload = await findUpload(x, bucket, key);
    const marker = Number(x.params.get('part-number-marker') ?? '0') || 0;
    const maxParts = Math.min(1000, Number(x.params.get('max-parts') ?? '1000') || 1000);
    const parts = await meta.listParts(upload.id, marker, maxParts + 1);
    const truncated = parts.length > maxParts;
    const shown = parts.slice(0, maxParts);
    sendXml(x, 'ListPartsResult', {
      Bucket: bucket.name,
      Key: key,
      UploadId: upload.upload_id,
      PartNumberMarker: marker,
      NextPartNumberMarker: shown.at(-1)?.part_number ?? marker,
      MaxParts: maxParts,
      IsTruncated: truncated,
      Part: shown.map((p) => ({
        PartNumber: p.part_number,
        LastModified: p.last_modified,
        ETag: p.etag,
        Size: p.size,
      })),
      StorageClass: 'STANDARD',
    });
  }

  // ---- dispatch ----

  type Handler = (x: Exchange) => Promise<void>;
  const inBucket =
    (fn: (x: Exchange, bucket: BucketRow) => Promise<void>): Handler =>
    async (x) =>
      fn(x, await ownBucket(x, x.bucket!));
  const onObject =
    (fn: (x: Exchange, bucket: BucketRow, key: string) => Promise<void>): Handler =>
    async (x) =>
      fn(x, await ownBucket(x, x.bucket!), x.key!);
  const refuse: Handler = () => Promise.reject(errors.notImplemented());

  /**
   * Everything the endpoint answers; anything not listed is refused before the bucket or object is
   * read. CORS configuration and tagging live in cors.ts and tagging.ts; a browser form upload (POST
   * on a bucket) is answered in `handle`, before request signatures are looked at (post-object.ts).
   */
  const routes = routeTable<Handler>([
    { method: 'GET', form: 'service', sub: '', op: 'ListBuckets', handler: listBuckets },
    {
      method: 'PUT',
      form: 'bucket',
      sub: '',
      op: 'CreateBucket',
      handler: (x) => createBucket(x, x.bucket!),
    },
    { method: 'HEAD', form: 'bucket', sub: '', op: 'HeadBucket', handler: inBucket(headBucket) },
    { method: 'DELETE', form: 'bucket', sub: '', op: 'DeleteBucket', handler: inBucket(deleteBucket) },
    { method: 'GET', form: 'bucket', sub: '', op: 'ListObjects', handler: inBucket(listObjects) },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'location',
      op: 'GetBucketLocation',
      handler: inBucket(bucketLocation),
    },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'versions',
      op: 'ListObjectVersions',
      handler: inBucket(listVersions),
    },
    { method: 'POST', form: 'bucket', sub: 'delete', op: 'DeleteObjects', handler: inBucket(deleteObjects) },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'cors',
      op: 'GetBucketCors',
      handler: inBucket((x, b) => corsFeature.get(feature(x), b)),
    },
    {
      method: 'PUT',
      form: 'bucket',
      sub: 'cors',
      op: 'PutBucketCors',
      handler: inBucket((x, b) => corsFeature.put(feature(x), b)),
    },
    {
      method: 'DELETE',
      form: 'bucket',
      sub: 'cors',
      op: 'DeleteBucketCors',
      handler: inBucket((x, b) => corsFeature.delete(feature(x), b)),
    },
    { method: 'POST', form: 'bucket', sub: '', op: 'PostObject', handler: refuse },
    { method: 'PUT', form: 'object', sub: '', op: 'PutObject', handler: onObject(putOrCopy) },
    {
      method: 'GET',
      form: 'object',
      sub: '',
      op: 'GetObject',
      handler: onObject((x, b, k) => getObject(x, b, k, false)),
    },
    {
      method: 'HEAD',
      form: 'object',
      sub: '',
      op: 'HeadObject',
      handler: onObject((x, b, k) => getObject(x, b, k, true)),
    },
    { method: 'DELETE', form: 'object', sub: '', op: 'DeleteObject', handler: onObject(deleteObject) },
    {
      method: 'POST',
      form: 'object',
      sub: 'uploads',
      op: 'CreateMultipartUpload',
      handler: onObject(createUpload),
    },
    { method: 'PUT', form: 'object', sub: 'uploadId', op: 'UploadPart', handler: onObject(uploadPart) },
    {
      method: 'POST',
      form: 'object',
      sub: 'uploadId',
      op: 'CompleteMultipartUpload',
      handler: onObject(completeUpload),
    },
    {
      method: 'DELETE',
      form: 'object',
      sub: 'uploadId',
      op: 'AbortMultipartUpload',
      handler: onObject(abortUpload),
    },
    { method: 'GET', form: 'object', sub: 'uploadId', op: 'ListParts', handler: onObject(listParts) },
    {
      method: 'GET',
      form: 'object',
      sub: 'tagging',
      op: 'GetObjectTagging',
      handler: onObject((x, b, k) => tagging.get(feature(x), b, k)),
    },
    {
      method: 'PUT',
      form: 'object',
      sub: 'tagging',
      op: 'PutObjectTagging',
      handler: onObject((x, b, k) => tagging.put(feature(x), b, k)),
    },
    {
      method: 'DELETE',
      form: 'object',
      sub: 'tagging',
      op: 'DeleteObjectTagging',
      handler: onObject((x, b, k) => tagging.delete(feature(x), b, k)),
    },
  ]);

  function headBucket(x: Exchange, bucket: BucketRow): Promise<void> {
    allow(x, { action: 's3:ListBucket', bucket: bucket.name });
    send(x, 200, { 'x-amz-bucket-region': x.caller.signature.region });
    return Promise.resolve();
  }

  function bucketLocation(x: Exchange, bucket: BucketRow): Promise<void> {
    allow(x, { action: 's3:GetBucketLocation', bucket: bucket.name });
    sendXml(x, 'LocationConstraint', {});
    return Promise.resolve();
  }

  async function putOrCopy(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    const source = headerValue(x.req.headers, 'x-amz-copy-source');
    return source === undefined ? putObject(x, bucket, key) : copyObject(x, bucket, key, source);
  }

  async function dispatch(x: Exchange): Promise<void> {
    const form = x.bucket === undefined ? 'service' : x.key === undefined ? 'bucket' : 'object';
    const route = routes.find(x.req.method ?? 'GET', form, x.params);
    refuseUnhonoured(route.op, x.req.headers, x.params, String(x.caller.storageId));
    return route.handler(x);
  }

  function sendError(
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    error: unknown,
    resource: string,
  ): void {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    let s3: S3Error;
    if (error instanceof S3Error) s3 = error;
    else if (code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'ECONNRESET' || req.destroyed) {
      s3 = errors.incompleteBody(); // the client went away mid-request: nothing to log
    } else {
      deps.logger.error({ err: error, method: req.method }, 's3 request failed');
      s3 = errors.internal();
    }
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const body =
      req.method === 'HEAD'
        ? undefined
        : xmlDocument('Error', {
            Code: s3.code,
            Message: s3.message,
            ...s3.details,
            Resource: resource,
            RequestId: requestId,
          }).replace(' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"', '');
    res.writeHead(s3.status, {
      'x-amz-request-id': requestId,
      server: 'Berth',
      'content-type': 'application/xml',
      'content-length': body === undefined ? 0 : Buffer.byteLength(body),
      // A body we did not read must not be taken for the next request on this connection.
      ...(req.complete ? {} : { connection: 'close' }),
    });
    res.end(body);
  }

  return async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    expectContinue: boolean,
  ): Promise<void> {
    const requestId = randomBytes(8).toString('hex').toUpperCase();
    const { path, query } = splitTarget(req.url ?? '/');
    try {
      // hook: browsers' CORS answers from the bucket's rules (cors.ts)
      if (await corsFeature.answer(req, res, address(req.headers.host, path).bucket)) return;
      const params = parseQuery(query);
      const { bucket, key } = address(req.headers.host, path);
      // hook: browser form uploads (post-object.ts)
      if (bucket !== undefined && postObject.matches(req, key))
        return await postObject.handle(req, res, bucket, requestId);
      const caller = await authenticate(req);
      let continued = !expectContinue;
      const x: Exchange = {
        req,
        res,
        requestId,
        params,
        bucket,
        key,
        caller,
        proceed() {
          if (!continued) {
            continued = true;
            res.writeContinue();
          }
        },
      };
      await dispatch(x);
    } catch (error) {
      sendError(req, res, requestId, error, path);
    }
  };
}

export async function startS3Server(
  deps: S3ServerDeps,
  listen: { host: string; port: number },
): Promise<S3Server> {
  const files = createObjectFiles(deps.dataDir);
  // File times are wall-clock times, so the wall clock (not the injected one) judges their age.
  await files.sweepTemp(new Date(), 24 * 3600_000);
  const sweeper = orphanSweeper(deps, files);
  const handle = createS3Handler(deps, files);
  // Uploads of several GiB may take longer than Node's default 5-minute request timeout; a socket
  // that stays silent for two minutes is dropped instead.
  const server = http.createServer({ keepAliveTimeout: 5000, requestTimeout: 0 });
  server.timeout = 120_000;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => void handle(req, res, false));
  // Authenticate before the client sends a large body it would send in vain.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => void handle(req, res, true));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${port}`,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }).then(() => sweeper.stop());
      return closing;
    },
  };
}

/** Object files older than this that no row names are orphans (see files.sweepOrphans). */
const ORPHAN_AGE_MS = 3600_000;
const ORPHAN_SWEEP_EVERY_MS = 24 * 3600_000;

/** Sweeps orphaned object files in the background, at start and then daily; a failure waits for the next. */
function orphanSweeper(deps: S3ServerDeps, files: ObjectFiles) {
  const meta = createObjectMetadata(deps.db, deps.dialect);
  let running: Promise<void> | undefined;
  const sweep = (): void => {
    // File times are wall-clock times, so the wall clock (not the injected one) judges their age.
    running ??= files
      .sweepOrphans((paths) => meta.namedFiles(paths), new Date(), ORPHAN_AGE_MS)
      .then(
        (removed) => {
          if (removed > 0) deps.logger.info({ removed }, 'removed object files no object or part names');
        },
        (error: unknown) => deps.logger.warn({ err: error }, 'sweeping orphaned object files failed'),
      )
      .finally(() => {
        running = undefined;
      });
  };
  sweep();
  const timer = setInterval(sweep, ORPHAN_SWEEP_EVERY_MS);
  timer.unref();
  return {
    /** Stops the daily sweep and waits for one in progress, which uses the store. */
    async stop(): Promise<void> {
      clearInterval(timer);
      await running;
    },
  };
}
