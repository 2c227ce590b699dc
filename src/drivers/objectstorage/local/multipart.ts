// Multipart uploads: CreateMultipartUpload, UploadPart, UploadPartCopy, CompleteMultipartUpload,
// AbortMultipartUpload and ListParts. Parts are blobs of their own (blobs.ts) until completion joins
// them into one object blob; the object keeps each part's size and checksum for GET ?partNumber=.
import { createHash, randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import {
  checksumHeaders,
  checksumXml,
  checksummer,
  compositeOf,
  headerOf,
  uploadChecksum,
  xmlNameOf,
  type ChecksumAlgorithm,
  type ChecksumType,
  type StoredChecksum,
} from './checksums.js';
import { conditionalWrite } from './conditional.js';
import { errors, S3Error } from './errors.js';
import { bareEtag, MIN_PART, quoteEtag, type Exchange, type Kit } from './kit.js';
import type { BucketRow } from './metadata.js';
import { checksumColumn, objectAclOf, type objectHandlers } from './objects.js';
import { headerValue, uriEncode } from './sigv4.js';
import { headerTags } from './tagging.js';
import { parseCompleteMultipart } from './xml.js';

/** What an upload asked for at creation (s3_uploads.checksum). */
interface UploadChecksum {
  algorithm: ChecksumAlgorithm;
  type: ChecksumType;
}
/** A part's checksum as received (s3_upload_parts.checksum). */
interface PartChecksum {
  algorithm: ChecksumAlgorithm;
  value: string;
}

const parseJson = <T>(json: string | null | undefined): T | undefined =>
  json ? (JSON.parse(json) as T) : undefined;

/** `x-amz-copy-source-range: bytes=first-last`, both present, within the source. */
function copyRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d+)-(\d+)$/.exec(header.trim());
  if (!m)
    throw errors.invalidArgument('The x-amz-copy-source-range value must be of the form bytes=first-last.');
  const start = Number(m[1]);
  const end = Number(m[2]);
  if (end < start || end >= size)
    throw new S3Error('InvalidRange', 416, 'The requested range is not satisfiable');
  return { start, end };
}

export function multipartHandlers(kit: Kit, objects: ReturnType<typeof objectHandlers>) {
  const { meta, blobs, allow, send, sendXml } = kit;

  async function findUpload(x: Exchange, bucket: BucketRow, key: string) {
    const uploadId = x.params.get('uploadId') ?? '';
    const upload = await meta.findUpload(uploadId);
    if (!upload || upload.bucket_id !== bucket.id || upload.key !== key) throw errors.noSuchUpload(uploadId);
    return upload;
  }

  async function createUpload(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    kit.checkKey(key);
    const acl = objectAclOf(kit, x, bucket, key); // hook: canned ACLs (access.ts)
    const checksum = uploadChecksum(x.req.headers);
    x.req.resume();
    const uploadId = randomBytes(24).toString('base64url');
    await meta.createUpload({
      upload_id: uploadId,
      bucket_id: bucket.id,
      key,
      headers: kit.storedHeaders(x.req),
      created_at: kit.now(),
      tags: headerTags(x.req.headers), // hook: x-amz-tagging (tagging.ts)
      checksum: checksum ? JSON.stringify(checksum) : null,
      acl,
    });
    sendXml(
      x,
      'InitiateMultipartUploadResult',
      { Bucket: bucket.name, Key: key, UploadId: uploadId },
      checksum
        ? { 'x-amz-checksum-algorithm': checksum.algorithm, 'x-amz-checksum-type': checksum.type }
        : {},
    );
  }

  function partNumberOf(x: Exchange): number {
    const partNumber = Number(x.params.get('partNumber'));
    if (!Number.isInteger(partNumber) || partNumber < 1 || partNumber > 10_000)
      throw errors.invalidArgument('Part number must be an integer between 1 and 10000, inclusive');
    return partNumber;
  }

  /** Records a placed part blob; the part it replaces (a re-sent part) is removed. */
  async function storePart(
    uploadRowId: number,
    partNumber: number,
    file: string,
    values: { size: number; etag: string; checksum: PartChecksum | undefined },
  ): Promise<string> {
    const lastModified = kit.now();
    try {
      await blobs.remove(
        await meta.putPart(uploadRowId, partNumber, {
          size: values.size,
          etag: values.etag,
          file,
          last_modified: lastModified,
          checksum: values.checksum ? JSON.stringify(values.checksum) : null,
        }),
      );
    } catch (error) {
      await blobs.remove(file);
      throw error;
    }
    return lastModified;
  }

  async function uploadPart(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:PutObject', bucket: bucket.name, key });
    const partNumber = partNumberOf(x);
    const source = headerValue(x.req.headers, 'x-amz-copy-source');
    if (source !== undefined) return uploadPartCopy(x, bucket, key, partNumber, source);
    const upload = await findUpload(x, bucket, key);
    const asked = parseJson<UploadChecksum>(upload.checksum);
    const { blob, size, md5, checksum } = await kit.receiveBlob(x, 'parts', upload.id);
    if (asked && checksum && checksum.algorithm !== asked.algorithm) {
      await blob.discard();
      throw errors.invalidRequest(
        `Checksum Type mismatch occurred, expected checksum Type: ${asked.algorithm.toLowerCase()}, actual checksum Type: ${checksum.algorithm.toLowerCase()}`,
      );
    }
    const etag = quoteEtag(md5.toString('hex'));
    await storePart(upload.id, partNumber, await blob.place(), { size, etag, checksum });
    send(x, 200, { etag, ...(checksum ? { [headerOf(checksum.algorithm)]: checksum.value } : {}) });
  }

  /** UploadPartCopy: a part made of an existing object, or of `x-amz-copy-source-range` of it. */
  async function uploadPartCopy(
    x: Exchange,
    bucket: BucketRow,
    key: string,
    partNumber: number,
    source: string,
  ): Promise<void> {
    const { object } = await objects.copySource(x, source);
    const range = copyRange(headerValue(x.req.headers, 'x-amz-copy-source-range'), object.size);
    const upload = await findUpload(x, bucket, key);
    x.req.resume();
    const asked = parseJson<UploadChecksum>(upload.checksum);
    // The part's MD5 (its ETag) and, when the upload keeps checksums, its checksum, in the copy's pass.
    const md5 = createHash('md5');
    const summer = asked ? checksummer(asked.algorithm) : undefined;
    let size = 0;
    const file = await objects.copyBytes(object, 'parts', upload.id, {
      ...(range && object.size > 0 ? { range } : {}),
      observe(chunk) {
        size += chunk.length;
        md5.update(chunk);
        summer?.update(chunk);
      },
    });
    const etag = quoteEtag(md5.digest('hex'));
    const checksum = asked && summer ? { algorithm: asked.algorithm, value: summer.digest() } : undefined;
    const lastModified = await storePart(upload.id, partNumber, file, { size, etag, checksum });
    sendXml(x, 'CopyPartResult', {
      LastModified: lastModified,
      ETag: etag,
      ...(checksum ? { [xmlNameOf(checksum.algorithm)]: checksum.value } : {}),
    });
  }

  const completed = (bucket: BucketRow, key: string, etag: string, checksum?: StoredChecksum) => ({
    Location: `/${bucket.name}/${uriEncode(key, false)}`,
    Bucket: bucket.name,
    Key: key,
    ETag: etag,
    ...checksumXml(checksum),
  });

  /**
   * A repeated CompleteMultipartUpload (a client retrying after a lost answer) succeeds again when the
   * object at the key is the one those parts made: its ETag is the MD5 of the parts' MD5s.
   */
  async function completedBefore(x: Exchange, bucket: BucketRow, key: string): Promise<boolean> {
    const requested = parseCompleteMultipart(await kit.receiveXml(x, false));
    const object = await meta.findObject(bucket.id, key);
    if (!object || requested.length === 0) return false;
    const md5s = createHash('md5');
    for (const r of requested) {
      if (!/^[0-9a-f]{32}$/.test(r.etag)) return false;
      md5s.update(Buffer.from(r.etag, 'hex'));
    }
    if (object.etag !== quoteEtag(`${md5s.digest('hex')}-${requested.length}`)) return false;
    const stored = parseJson<StoredChecksum>(object.checksum);
    sendXml(x, 'CompleteMultipartUploadResult', completed(bucket, key, object.etag, stored));
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
    const asked = parseJson<UploadChecksum>(upload.checksum);
    const requested = parseCompleteMultipart(await kit.receiveXml(x, false));
    const stored = new Map((await meta.listParts(upload.id)).map((p) => [p.part_number, p]));
    let previous = 0;
    const chosen = requested.map((r, i) => {
      if (r.partNumber <= previous) throw errors.invalidPartOrder();
      previous = r.partNumber;
      const part = stored.get(r.partNumber);
      if (!part || bareEtag(part.etag) !== r.etag) throw errors.invalidPart();
      if (i < requested.length - 1 && part.size < MIN_PART) throw errors.entityTooSmall();
      const partChecksum = parseJson<PartChecksum>(part.checksum);
      if (asked) {
        // An upload that keeps checksums needs each part's; a part's checksum named in the request
        // must be the one received (as Ceph's RGW, the parts' own are used where none is named).
        if (partChecksum?.algorithm !== asked.algorithm)
          throw errors.badDigest(
            `The upload was created using a ${asked.algorithm} checksum; part ${r.partNumber} has none.`,
          );
        const named = r.checksums[xmlNameOf(asked.algorithm)];
        if (named !== undefined && named !== partChecksum.value) throw errors.invalidPart();
      }
      return { ...part, partChecksum };
    });
    // The whole object's checksum: of the parts' checksums (COMPOSITE) or of all the bytes, computed
    // while the parts are joined (FULL_OBJECT).
    const full = asked?.type === 'FULL_OBJECT' ? checksummer(asked.algorithm) : undefined;
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
        const bytes = part.size === 0 ? [] : await blobs.open(part.file);
        for await (const chunk of bytes as AsyncIterable<Buffer>) {
          full?.update(chunk);
          yield chunk;
        }
      }
    }
    const blob = await blobs.begin('data', bucket.id, size);
    try {
      await pipeline(partBytes, blob.sink);
    } catch (error) {
      await blob.discard();
      throw error;
    }
    let checksum: StoredChecksum | undefined;
    if (asked) {
      const value = full
        ? full.digest()
        : compositeOf(
            asked.algorithm,
            chosen.map((p) => p.partChecksum!.value),
          );
      checksum = { ...asked, value };
      const declared = headerValue(x.req.headers, headerOf(asked.algorithm));
      if (declared !== undefined && declared !== value) {
        await blob.discard();
        throw errors.badDigest();
      }
    }
    const etag = quoteEtag(`${md5s.digest('hex')}-${chosen.length}`);
    const file = await blob.place();
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
          last_modified: kit.now(),
          tags: upload.tags,
          checksum: checksumColumn(checksum),
          parts: JSON.stringify(chosen.map((p) => [p.size, p.partChecksum?.value ?? null])),
          acl: upload.acl,
        },
        guard?.commit,
      )
      .catch(async (error: unknown) => {
        await blobs.remove(file); // hook: a refused condition leaves no object file behind
        throw error;
      });
    if (!result.completed) {
      await blobs.remove(file);
      throw errors.noSuchUpload(upload.upload_id);
    }
    await blobs.remove(result.old);
    await blobs.removeTree('parts', upload.id);
    sendXml(
      x,
      'CompleteMultipartUploadResult',
      completed(bucket, key, etag, checksum),
      checksumHeaders(checksum),
    );
  }

  async function abortUpload(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:AbortMultipartUpload', bucket: bucket.name, key });
    const upload = await findUpload(x, bucket, key);
    await meta.abortUpload(upload.id);
    await blobs.removeTree('parts', upload.id);
    send(x, 204);
  }

  async function listParts(x: Exchange, bucket: BucketRow, key: string): Promise<void> {
    allow(x, { action: 's3:ListMultipartUploadParts', bucket: bucket.name, key });
    const upload = await findUpload(x, bucket, key);
    const asked = parseJson<UploadChecksum>(upload.checksum);
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
      Part: shown.map((p) => {
        const checksum = parseJson<PartChecksum>(p.checksum);
        return {
          PartNumber: p.part_number,
          LastModified: p.last_modified,
          ETag: p.etag,
          Size: p.size,
          ...(checksum ? { [xmlNameOf(checksum.algorithm)]: checksum.value } : {}),
        };
      }),
      StorageClass: 'STANDARD',
      ChecksumAlgorithm: asked?.algorithm,
      ChecksumType: asked?.type,
    });
  }

  return { createUpload, uploadPart, completeUpload, abortUpload, listParts };
}
