// Browser form uploads (POST Object): a multipart/form-data POST to the bucket whose fields carry a
// base64 policy document signed with SigV4. The signature proves the key holder issued the policy;
// the policy's conditions bound what the browser may send (key prefix, size, content type…).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Busboy, type BusboyHeaders, type BusboyInstance } from '@fastify/busboy';
import { createHash, createHmac } from 'node:crypto';
import { isPublicAcl, publicAclBlocked, requestedAcl, type CannedAcl } from './access.js';
import type { BlobWrite } from './blobs.js';
import {
  ALGORITHMS,
  checksummer,
  headerOf,
  type ChecksumAlgorithm,
  type StoredChecksum,
} from './checksums.js';
import { errors, S3Error } from './errors.js';
import { STORED_HEADERS } from './kit.js';
import type { BucketRow } from './metadata.js';
import type { AccessRequest } from './policy.js';
import { constantTimeHexEqual, headerValue, signingKey, uriEncode } from './sigv4.js';
import { parseTagging } from './tagging.js';
import { xmlDocument } from './xml.js';

export interface PostObjectDeps {
  now(): Date;
  accessKey(
    id: string,
  ): Promise<{ storageId: number; secret: string; allows(request: AccessRequest): boolean } | undefined>;
  /** The storage's bucket of that name. */
  bucket(storageId: number, name: string): Promise<BucketRow | undefined>;
  /** A new blob of the bucket (its length is not known beforehand). */
  begin(bucket: BucketRow): Promise<BlobWrite>;
  /** Stores a received blob as the object, as PutObject does; returns its quoted ETag. */
  store(
    bucket: BucketRow,
    key: string,
    blob: BlobWrite,
    size: number,
    md5: Buffer,
    headers: Record<string, string>,
    checksum: StoredChecksum | undefined,
    acl: CannedAcl,
    tags: string,
  ): Promise<string>;
  /** Whether public ACLs are blocked on the bucket (its PublicAccessBlock or the operator's). */
  blocksPublicAcls(bucket: BucketRow): boolean;
  /** The bucket an unsigned form names: of the endpoint's storage, else the first of that name. */
  unsignedBucket(storageId: number | undefined, name: string): Promise<BucketRow | undefined>;
  /** Whether the bucket's ACL or policy lets an unsigned request do this. */
  unsignedAllows(req: IncomingMessage, bucket: BucketRow, request: AccessRequest): boolean;
  maxObject: number;
}

/** S3's limit on the policy document; form fields are bounded alike so a form cannot fill memory. */
const MAX_FIELD = 20 * 1024;
const MAX_FIELDS = 100;
/**
 * Fields the policy does not have to name (S3's list), and the checksum fields, which only ask for the
 * file to be verified.
 */
const EXEMPT = new Set([
  'policy',
  'x-amz-signature',
  'file',
  'awsaccesskeyid',
  'signature',
  'x-amz-checksum-algorithm',
  ...ALGORITHMS.map(headerOf),
]);

/**
 * The checksum a form asks for: `x-amz-checksum-<algorithm>` (the value the file must have) and/or
 * `x-amz-checksum-algorithm` (computed and kept); undefined for none.
 */
export function formChecksum(
  fields: Map<string, string>,
): { algorithm: ChecksumAlgorithm; expected: string | undefined } | undefined {
  const named = fields.get('x-amz-checksum-algorithm');
  const sent = ALGORITHMS.filter((a) => fields.has(headerOf(a)));
  if (sent.length > 1) throw errors.invalidRequest('Expecting a single x-amz-checksum- field.');
  const algorithm =
    sent[0] ?? (named === undefined ? undefined : ALGORITHMS.find((a) => a === named.toUpperCase()));
  if (named !== undefined && algorithm?.toUpperCase() !== named.toUpperCase())
    throw errors.invalidRequest(
      `x-amz-checksum-algorithm must be one of ${ALGORITHMS.join(', ')} and name the x-amz-checksum- field sent`,
    );
  if (algorithm === undefined) return undefined;
  return { algorithm, expected: fields.get(headerOf(algorithm)) };
}
/** Form fields stored with the object as the same-named headers of a PUT would be. */
const STORED = STORED_HEADERS;

const policyRefused = (why: string) =>
  new S3Error('AccessDenied', 403, `Invalid according to Policy: ${why}`);

type Condition =
  | { op: 'eq' | 'starts-with'; field: string; value: string }
  | { op: 'content-length-range'; min: number; max: number };

/** Decodes and checks the shape of a policy document; throws on anything S3 would not accept. */
export function parsePolicy(base64: string, now: Date): Condition[] {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(base64, 'base64').toString('utf8'));
  } catch {
    throw errors.invalidArgument('Invalid Policy: Invalid JSON.');
  }
  const { expiration, conditions } = (doc ?? {}) as { expiration?: unknown; conditions?: unknown };
  if (typeof expiration !== 'string' || Number.isNaN(Date.parse(expiration)))
    throw errors.invalidArgument("Invalid Policy: Invalid 'expiration' value.");
  if (Date.parse(expiration) <= now.getTime()) throw policyRefused('Policy expired.');
  if (!Array.isArray(conditions)) throw errors.invalidArgument("Invalid Policy: Invalid 'conditions' value.");
  return conditions.map((c: unknown): Condition => {
    if (Array.isArray(c)) {
      const [op, a, b] = c as unknown[];
      if (op === 'content-length-range' && Number.isSafeInteger(a) && Number.isSafeInteger(b))
        return { op, min: a as number, max: b as number };
      if (
        (op === 'eq' || op === 'starts-with') &&
        typeof a === 'string' &&
        a.startsWith('$') &&
        typeof b === 'string'
      )
        return { op, field: a.slice(1).toLowerCase(), value: b };
    } else if (c !== null && typeof c === 'object') {
      const entries = Object.entries(c as Record<string, unknown>);
      const [name, value] = entries[0] ?? [];
      if (entries.length === 1 && name !== undefined && typeof value === 'string')
        return { op: 'eq', field: name.toLowerCase(), value };
    }
    throw errors.invalidArgument(`Invalid Policy: Invalid Simple-Condition: ${JSON.stringify(c)}`);
  });
}

/** Every field must be named by a condition, and every condition must hold (size is checked later). */
export function checkConditions(conditions: Condition[], fields: Map<string, string>): void {
  for (const c of conditions) {
    if (c.op === 'content-length-range') continue;
    const value = fields.get(c.field) ?? '';
    const ok = c.op === 'eq' ? value === c.value : value.startsWith(c.value);
    if (!ok) throw policyRefused(`Policy Condition failed: ["${c.op}", "$${c.field}", "${c.value}"]`);
  }
  const named = new Set(conditions.flatMap((c) => (c.op === 'content-length-range' ? [] : [c.field])));
  for (const name of fields.keys()) {
    if (!EXEMPT.has(name) && !name.startsWith('x-ignore-') && !named.has(name))
      throw policyRefused(`Extra input fields: ${name}`);
  }
}

/** Reads the form's fields, then hands the file part (the last part that counts) to `onFile`. */
function readForm<T>(
  req: IncomingMessage,
  onFile: (fields: Map<string, string>, file: Readable, filename: string) => Promise<T>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const fields = new Map<string, string>();
    let handled = false;
    let busboy: BusboyInstance;
    try {
      busboy = Busboy({
        headers: req.headers as BusboyHeaders,
        limits: { fieldSize: MAX_FIELD, fields: MAX_FIELDS, files: 1, parts: MAX_FIELDS + 1 },
        isPartAFile: (name: string | undefined) => name === 'file',
      });
    } catch {
      reject(errors.invalidRequest('POST requires exactly one file upload per request.'));
      return;
    }
    busboy.on('field', (name: string, value: string, _nameTruncated: boolean, valueTruncated: boolean) => {
      if (handled) return; // S3 ignores fields after the file
      if (valueTruncated) {
        reject(errors.invalidArgument(`Your POST form field ${name} is too long.`));
        return;
      }
      fields.set(name.toLowerCase(), value);
    });
    busboy.on('file', (_name: string, file: Readable, filename: string) => {
      handled = true;
      onFile(fields, file, filename).then(resolve, (error: unknown) => {
        file.resume();
        reject(error instanceof Error ? error : new Error(String(error)));
      });
    });
    busboy.on('finish', () => {
      if (!handled) reject(errors.invalidArgument('POST requires exactly one file upload per request.'));
    });
    busboy.on('error', (error: unknown) => reject(error instanceof Error ? error : new Error(String(error))));
    req.pipe(busboy);
  });
}

export function createPostObject(deps: PostObjectDeps) {
  /** Receives the file part into a new blob, refusing it past `max` bytes. */
  async function receive(
    file: Readable,
    max: number,
    bucket: BucketRow,
    algorithm: ChecksumAlgorithm | undefined,
  ) {
    const blob = await deps.begin(bucket);
    const md5 = createHash('md5');
    const summer = algorithm && checksummer(algorithm);
    let size = 0;
    try {
      await pipeline(
        file,
        async function* (source: AsyncIterable<Buffer>) {
          for await (const chunk of source) {
            size += chunk.length;
            if (size > max)
              throw new S3Error(
                'EntityTooLarge',
                400,
                'Your proposed upload exceeds the maximum allowed size',
              );
            md5.update(chunk);
            summer?.update(chunk);
            yield chunk;
          }
        },
        blob.sink,
      );
    } catch (error) {
      await blob.discard();
      throw error;
    }
    return { blob, size, md5: md5.digest(), checksum: summer?.digest() };
  }

  /** True for a form upload: a POST to a bucket itself, with a multipart/form-data body. */
  const matches = (req: IncomingMessage, key: string | undefined): boolean =>
    req.method === 'POST' &&
    key === undefined &&
    /^multipart\/form-data\s*;/i.test(headerValue(req.headers, 'content-type') ?? '');

  async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    bucketName: string,
    requestId: string,
    /** The storage the request's endpoint names; undefined on the shared endpoint (the key's storage). */
    storageId: number | undefined,
  ): Promise<void> {
    const done = await readForm(req, async (fields, file, filename) => {
      const field = (name: string) => {
        const value = fields.get(name);
        if (value === undefined)
          throw errors.invalidArgument(`Bucket POST must contain a field named '${name}'.`);
        return value;
      };
      // A form without a signed policy is an unsigned upload: served only where the bucket's ACL or
      // policy lets anyone write (access.ts), without conditions.
      const unsigned = !['policy', 'x-amz-signature', 'x-amz-credential', 'x-amz-algorithm'].some((f) =>
        fields.has(f),
      );
      const objectKey = field('key').replaceAll('${filename}', filename);
      if (objectKey === '' || Buffer.byteLength(objectKey) > 1024) throw errors.keyTooLong();
      let bucket: BucketRow | undefined;
      let conditions: Condition[] = [];
      let mayPublish: () => boolean;
      if (unsigned) {
        bucket = await deps.unsignedBucket(storageId, bucketName);
        if (!bucket) throw errors.noSuchBucket(bucketName);
        if (
          !deps.unsignedAllows(req, bucket, { action: 's3:PutObject', bucket: bucket.name, key: objectKey })
        )
          throw errors.accessDenied('Anonymous access is not allowed');
        // As S3 lets the writer who owns its object there (objects.ts objectAclOf).
        mayPublish = () => true;
      } else {
        if (field('x-amz-algorithm') !== 'AWS4-HMAC-SHA256')
          throw errors.invalidArgument('Only AWS4-HMAC-SHA256 is supported in x-amz-algorithm');
        const credential = /^([A-Za-z0-9]{1,128})\/(\d{8})\/([a-z0-9-]{1,32})\/s3\/aws4_request$/.exec(
          field('x-amz-credential'),
        );
        const amzDate = field('x-amz-date');
        if (!credential || !amzDate.startsWith(credential[2]!))
          throw errors.invalidArgument('Invalid x-amz-credential or x-amz-date');
        const policy = field('policy');
        const signature = field('x-amz-signature');
        const key = await deps.accessKey(credential[1]!);
        if (!key) throw errors.invalidAccessKeyId();
        const expected = createHmac('sha256', signingKey(key.secret, credential[2]!, credential[3]!, 's3'))
          .update(policy)
          .digest('hex');
        if (!constantTimeHexEqual(expected, signature)) throw errors.signatureDoesNotMatch();
        conditions = parsePolicy(policy, deps.now());
        fields.set('bucket', bucketName);
        checkConditions(conditions, fields);
        if (storageId !== undefined && storageId !== key.storageId) throw errors.accessDenied();
        bucket = await deps.bucket(key.storageId, bucketName);
        if (!bucket) throw errors.noSuchBucket(bucketName);
        if (!key.allows({ action: 's3:PutObject', bucket: bucket.name, key: objectKey }))
          throw errors.accessDenied();
        const target = bucket;
        mayPublish = () => key.allows({ action: 's3:PutObjectAcl', bucket: target.name, key: objectKey });
      }
      // hook: the form's canned ACL (access.ts), as x-amz-acl on a PUT
      const aclField = fields.get('acl');
      const acl =
        (aclField === undefined
          ? undefined
          : requestedAcl({ 'x-amz-acl': aclField }, String(bucket.object_storage_id))) ?? 'private';
      if (isPublicAcl(acl)) {
        if (deps.blocksPublicAcls(bucket)) throw publicAclBlocked();
        if (!mayPublish()) throw errors.accessDenied();
      }
      // hook: the form's `tagging` field (tagging.ts), as x-amz-tagging on a PUT
      const tagging = fields.get('tagging');
      const tags = tagging === undefined ? '{}' : JSON.stringify(parseTagging(tagging));
      const range = conditions.find((c) => c.op === 'content-length-range');
      const max = Math.min(deps.maxObject, range?.op === 'content-length-range' ? range.max : deps.maxObject);
      const wanted = formChecksum(fields); // hook: checksum fields (checksums.ts)
      const received = await receive(file, max, bucket, wanted?.algorithm);
      if (wanted?.expected !== undefined && wanted.expected !== received.checksum) {
        await received.blob.discard();
        throw errors.badDigest(
          `The ${headerOf(wanted.algorithm)} you specified did not match the calculated checksum.`,
        );
      }
      if (range?.op === 'content-length-range' && received.size < range.min) {
        await received.blob.discard();
        throw new S3Error(
          'EntityTooSmall',
          400,
          'Your proposed upload is smaller than the minimum allowed size',
        );
      }
      const headers: Record<string, string> = {};
      for (const [name, value] of fields) {
        if (STORED.includes(name) || name.startsWith('x-amz-meta-')) headers[name] = value;
      }
      headers['content-type'] ??= 'application/octet-stream';
      const checksum: StoredChecksum | undefined = wanted && {
        algorithm: wanted.algorithm,
        type: 'FULL_OBJECT',
        value: received.checksum!,
      };
      const etag = await deps.store(
        bucket,
        objectKey,
        received.blob,
        received.size,
        received.md5,
        headers,
        checksum,
        acl,
        tags,
      );
      return { key: objectKey, etag, fields };
    });
    const location = `/${bucketName}/${uriEncode(done.key, false)}`;
    const redirect = done.fields.get('success_action_redirect');
    const common = { 'x-amz-request-id': requestId, server: 'Berth', etag: done.etag, location };
    if (redirect !== undefined && /^https?:\/\//i.test(redirect)) {
      const target = new URL(redirect);
      target.searchParams.set('bucket', bucketName);
      target.searchParams.set('key', done.key);
      target.searchParams.set('etag', done.etag);
      res.writeHead(303, { ...common, location: target.toString(), 'content-length': 0 });
      res.end();
      return;
    }
    const status = done.fields.get('success_action_status');
    if (status === '201') {
      // Without the S3 namespace, as S3 writes this document (clients find <Key> unqualified).
      const body = xmlDocument('PostResponse', {
        Location: location,
        Bucket: bucketName,
        Key: done.key,
        ETag: done.etag,
      }).replace(' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"', '');
      res.writeHead(201, {
        ...common,
        'content-type': 'application/xml',
        'content-length': Buffer.byteLength(body),
      });
      res.end(body);
      return;
    }
    res.writeHead(status === '200' ? 200 : 204, { ...common, 'content-length': 0 });
    res.end();
  }

  return { matches, handle };
}
