// Object operations: PutObject, CopyObject, GetObject/HeadObject (ranges, conditions, partNumber,
// checksums), GetObjectAttributes, DeleteObject and DeleteObjects.
import { isPublicAcl, publicAclBlocked, requestedAcl } from './access.js';
import { sendBlob, type BlobBytes, type CopyOptions } from './blobs.js';
import { checksumHeaders, parseStored, xmlNameOf, type StoredChecksum } from './checksums.js';
import { conditionalWrite } from './conditional.js';
import { errors } from './errors.js';
import { bareEtag, quoteEtag, toWire, type Exchange, type Headers, type Kit } from './kit.js';
import type { BucketRow, ObjectRow } from './metadata.js';
import { headerValue, uriDecode } from './sigv4.js';
import { copyTags, headerTags, tagCountHeader } from './tagging.js';
import { parseDeleteObjects, type XmlNode } from './xml.js';

const RESPONSE_OVERRIDES: Record<string, string> = {
  'response-content-type': 'content-type',
  'response-content-language': 'content-language',
  'response-expires': 'expires',
  'response-cache-control': 'cache-control',
  'response-content-disposition': 'content-disposition',
  'response-content-encoding': 'content-encoding',
};

/** One part of an object made from parts: its size and checksum (s3_objects.parts). */
type PartLayout = [size: number, checksum: string | null];

export const partsOf = (object: ObjectRow): PartLayout[] | undefined =>
  object.parts ? (JSON.parse(object.parts) as PartLayout[]) : undefined;

/** The stored checksum as a column value, or null. */
export const checksumColumn = (stored: StoredChecksum | undefined) =>
  stored ? JSON.stringify(stored) : null;

/**
 * GET's preconditions (RFC 7232 as S3 applies them): throws 412, or returns 304 when the caller's
 * copy is current. `prefix` reads the same conditions on a copy's source (x-amz-copy-source-if-…).
 */
export function preconditions(x: Exchange, object: ObjectRow, prefix = ''): number | undefined {
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

/** A `Range: bytes=…` header as one range; multiple or malformed ranges mean the whole object. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
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

/** A copy source `bucket/key[?versionId=null]`, decoded. */
export function parseCopySource(source: string): { bucket: string; key: string } {
  const raw = source.split('?')[0]!.replace(/^\//, '');
  const slash = raw.indexOf('/');
  if (slash <= 0) throw errors.invalidArgument('x-amz-copy-source must be bucket/key');
  return { bucket: uriDecode(raw.slice(0, slash)), key: uriDecode(raw.slice(slash + 1)) };
}

/**
 * The ACL a write gives its object (x-amz-acl; private when absent). A public one is refused where
 * PublicAccessBlock blocks public ACLs, and for the storage's own users needs the right to set ACLs
 * (s3:PutObjectAcl); a writer from outside the storage, let in by the bucket's WRITE grant or its
 * policy, may give what it writes a canned ACL, as S3 lets the writer who owns its object there.
 */
export function objectAclOf(kit: Kit, x: Exchange, bucket: BucketRow, key: string): string {
  const acl = requestedAcl(x.req.headers, String(bucket.object_storage_id));
  return writeAcl(kit, x.caller.kind === 'user', acl, bucket, () =>
    kit.allow(x, { action: 's3:PutObjectAcl', bucket: bucket.name, key }),
  );
}

/** objectAclOf's rule, for a PUT and a browser form alike. */
export function writeAcl(
  kit: Pick<Kit, 'decision'>,
  ownUser: boolean,
  requested: string | undefined,
  bucket: BucketRow,
  allowAcl: () => void,
): string {
  const acl = requested ?? 'private';
  if (isPublicAcl(acl)) {
    if (kit.decision.block(bucket).BlockPublicAcls) throw publicAclBlocked();
    if (ownUser) allowAcl();
  }
  return acl;
}

export function objectHandlers(kit: Kit) {
  const { meta, blobs, allow, send, sendXml } = kit;

  async function putObject(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    kit.checkKey(key);
    const acl = objectAclOf(kit, x, bucket, key); // hook: canned ACLs (access.ts)
    const guard = conditionalWrite(x.req.headers, key); // hook: conditional writes (conditional.ts)
    guard?.before(await meta.findObject(bucket.id, key));
    const tags = headerTags(x.req.headers); // hook: x-amz-tagging (tagging.ts)
    const { blob, size, md5, checksum } = await kit.receiveBlob(x, 'data', bucket.id);
    const etag = quoteEtag(md5.toString('hex'));
    const stored: StoredChecksum | undefined = checksum && { ...checksum, type: 'FULL_OBJECT' };
    const file = await blob.place();
    let old: string | undefined;
    try {
      old = await meta.putObject(
        bucket.id,
        key,
        {
          size,
          etag,
          file,
          headers: kit.storedHeaders(x.req),
          last_modified: kit.now(),
          tags,
          checksum: checksumColumn(stored),
          parts: null,
          acl,
        },
        guard?.commit,
      );
    } catch (error) {
      await blobs.remove(file);
      throw error;
    }
    await blobs.remove(old);
    send(x, 200, { etag, ...checksumHeaders(stored) });
  }

  /**
   * `?partNumber=`: the bytes of one part of an object made from parts (an object written whole is
   * its own part 1), with the part count and, when known, the part's checksum.
   */
  function partOf(x: Exchange, object: ObjectRow) {
    const text = x.params.get('partNumber');
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!/^\d+$/.test(text) || n < 1 || n > 10_000)
      throw errors.invalidArgument('Part number must be an integer between 1 and 10000, inclusive');
    const layout = partsOf(object) ?? [[object.size, null]];
    if (n > layout.length) throw errors.invalidPart();
    let start = 0;
    for (let i = 0; i < n - 1; i++) start += layout[i]![0];
    const [size, partChecksum] = layout[n - 1]!;
    const stored = parseStored(object.checksum);
    return {
      range: size === 0 ? undefined : { start, end: start + size - 1 },
      // S3 sends x-amz-mp-parts-count only for objects uploaded in parts.
      headers: {
        ...(object.parts ? { 'x-amz-mp-parts-count': layout.length } : {}),
        ...(stored && partChecksum ? checksumHeaders({ ...stored, value: partChecksum }) : {}),
      },
    };
  }

  async function getObject(x: Exchange, bucket: BucketRow, key: string, head: boolean): Promise<void> {
    const object = await meta.findObject(bucket.id, key);
    // The object's own ACL may be what grants the read (access.ts).
    kit.allowRead(x, { action: 's3:GetObject', bucket: bucket.name, key }, object);
    if (!object) throw errors.noSuchKey(key);
    const stored = Object.entries(JSON.parse(object.headers) as Record<string, string>);
    const headers: Headers = {
      etag: object.etag,
      'last-modified': new Date(object.last_modified).toUTCString(),
      'accept-ranges': 'bytes',
      ...Object.fromEntries(stored.map(([name, value]) => [name, toWire(value)])),
      ...tagCountHeader(object.tags), // hook: x-amz-tagging-count (tagging.ts)
    };
    for (const [param, header] of Object.entries(RESPONSE_OVERRIDES)) {
      const value = x.params.get(param);
      if (value !== undefined) headers[header] = value;
    }
    const notModified = preconditions(x, object);
    if (notModified !== undefined) {
      send(x, notModified, { etag: object.etag, 'last-modified': headers['last-modified']! });
      return;
    }
    const part = partOf(x, object);
    const range = part ? part.range : parseRange(headerValue(x.req.headers, 'range'), object.size);
    // The whole object's checksum describes the whole object only: not a range of it.
    const checksumMode = headerValue(x.req.headers, 'x-amz-checksum-mode')?.toUpperCase() === 'ENABLED';
    if (part) Object.assign(headers, part.headers);
    else if (checksumMode && !range) Object.assign(headers, checksumHeaders(parseStored(object.checksum)));
    const start = range?.start ?? 0;
    const end = range?.end ?? object.size - 1;
    const length = object.size === 0 ? 0 : end - start + 1;
    if (range) headers['content-range'] = `bytes ${start}-${end}/${object.size}`;
    if (head || length === 0) {
      send(x, range ? 206 : 200, { ...headers, 'content-length': length });
      return;
    }
    // Opened before answering: a blob replaced after the lookup stays readable (local) or is a 404.
    let bytes: BlobBytes;
    try {
      bytes = await blobs.open(object.file, { start, end });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw errors.noSuchKey(key);
      throw error;
    }
    x.res.writeHead(range ? 206 : 200, {
      'x-amz-request-id': x.requestId,
      server: 'Berth',
      ...headers,
      'content-length': length,
    });
    await sendBlob(bytes, x.res);
  }

  /** GetObjectAttributes: what `x-amz-object-attributes` names, without the bytes. */
  async function getAttributes(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:GetObject', bucket: bucket.name, key });
    const wanted = new Set(
      (headerValue(x.req.headers, 'x-amz-object-attributes') ?? '').split(',').map((a) => a.trim()),
    );
    const known = ['ETag', 'Checksum', 'ObjectParts', 'StorageClass', 'ObjectSize'];
    if (![...wanted].some((a) => known.includes(a)))
      throw errors.invalidArgument(`x-amz-object-attributes must name some of ${known.join(', ')}`);
    const object = await meta.findObject(bucket.id, key);
    if (!object) throw errors.noSuchKey(key);
    const stored = parseStored(object.checksum);
    const layout = partsOf(object);
    let objectParts: XmlNode | undefined;
    if (wanted.has('ObjectParts') && layout) {
      const marker = Number(headerValue(x.req.headers, 'x-amz-part-number-marker') ?? '0') || 0;
      const maxParts = Math.min(
        1000,
        Number(headerValue(x.req.headers, 'x-amz-max-parts') ?? '1000') || 1000,
      );
      const shown = layout.map((p, i) => ({ n: i + 1, p })).filter(({ n }) => n > marker);
      const page = shown.slice(0, maxParts);
      objectParts = {
        PartsCount: layout.length, // the SDKs call it TotalPartsCount
        PartNumberMarker: marker,
        NextPartNumberMarker: page.at(-1)?.n ?? marker,
        MaxParts: maxParts,
        IsTruncated: shown.length > page.length,
        Part: page.map(({ n, p }) => ({
          PartNumber: n,
          Size: p[0],
          ...(stored && p[1] ? { [xmlNameOf(stored.algorithm)]: p[1] } : {}),
        })),
      };
    }
    sendXml(
      x,
      'GetObjectAttributesResponse',
      {
        ETag: wanted.has('ETag') ? bareEtag(object.etag) : undefined,
        Checksum:
          wanted.has('Checksum') && stored
            ? { [xmlNameOf(stored.algorithm)]: stored.value, ChecksumType: stored.type }
            : undefined,
        ObjectParts: objectParts,
        StorageClass: wanted.has('StorageClass') ? 'STANDARD' : undefined,
        ObjectSize: wanted.has('ObjectSize') ? object.size : undefined,
      },
      { 'last-modified': new Date(object.last_modified).toUTCString() },
    );
  }

  async function deleteObject(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:DeleteObject', bucket: bucket.name, key });
    await blobs.remove(await meta.deleteObject(bucket.id, key));
    send(x, 204);
  }

  async function deleteObjects(x: Exchange, bucket: BucketRow): Promise<void> {
    const { quiet, objects } = parseDeleteObjects(await kit.receiveXml(x));
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
      if (!kit.allows(x, { action: 's3:DeleteObject', bucket: bucket.name, key })) {
        failed.push({ Key: key, Code: 'AccessDenied', Message: 'Access Denied' });
        continue;
      }
      await blobs.remove(await meta.deleteObject(bucket.id, key));
      if (!quiet) deleted.push({ Key: key, VersionId: versionId });
    }
    sendXml(x, 'DeleteResult', { Deleted: deleted, Error: failed });
  }

  /** The source object of a copy (CopyObject, UploadPartCopy), checked against its conditions. */
  async function copySource(x: Exchange, source: string): Promise<{ bucket: BucketRow; object: ObjectRow }> {
    const named = parseCopySource(source);
    const sourceBucket = await kit.ownBucket(x, named.bucket);
    const object = await meta.findObject(sourceBucket.id, named.key);
    kit.allowRead(x, { action: 's3:GetObject', bucket: sourceBucket.name, key: named.key }, object);
    if (!object) throw errors.noSuchKey(named.key);
    // A copy has no 304: a source the caller's conditions rule out is a failed precondition.
    if (preconditions(x, object, 'x-amz-copy-source-') !== undefined) throw errors.preconditionFailed();
    return { bucket: sourceBucket, object };
  }

  /** The source's bytes (or a range of them) as a new blob of `owner`; a source gone meanwhile is a 404. */
  async function copyBytes(
    object: ObjectRow,
    area: 'data' | 'parts',
    owner: number,
    options?: CopyOptions,
  ): Promise<string> {
    try {
      return await blobs.copy(object.file, area, owner, options);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw errors.noSuchKey(object.key);
      throw error;
    }
  }

  async function copyObject(x: Exchange, bucket: BucketRow, key: string, source: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    const acl = objectAclOf(kit, x, bucket, key); // hook: canned ACLs (access.ts)
    const { bucket: sourceBucket, object } = await copySource(x, source);
    kit.checkKey(key);
    const replace = headerValue(x.req.headers, 'x-amz-metadata-directive') === 'REPLACE';
    if (!replace && sourceBucket.id === bucket.id && object.key === key) {
      throw errors.invalidRequest(
        "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata.",
      );
    }
    x.req.resume();
    const file = await copyBytes(object, 'data', bucket.id);
    const lastModified = kit.now();
    const old = await meta.putObject(bucket.id, key, {
      size: object.size,
      etag: object.etag,
      file,
      headers: replace ? kit.storedHeaders(x.req) : object.headers,
      last_modified: lastModified,
      tags: copyTags(x.req.headers, object.tags), // hook: tagging directive (tagging.ts)
      // The bytes are the same, so is what describes them (ETag, checksum, part layout).
      checksum: object.checksum ?? null,
      parts: object.parts ?? null,
      acl,
    });
    await blobs.remove(old);
    const stored = parseStored(object.checksum);
    sendXml(x, 'CopyObjectResult', {
      LastModified: lastModified,
      ETag: object.etag,
      ...(stored?.type === 'FULL_OBJECT' ? { [xmlNameOf(stored.algorithm)]: stored.value } : {}),
    });
  }

  async function putOrCopy(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    const source = headerValue(x.req.headers, 'x-amz-copy-source');
    return source === undefined ? putObject(x, bucket, key) : copyObject(x, bucket, key, source);
  }

  return { putOrCopy, getObject, getAttributes, deleteObject, deleteObjects, copySource, copyBytes };
}
