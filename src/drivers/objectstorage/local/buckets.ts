// Bucket operations: ListBuckets, CreateBucket, HeadBucket, DeleteBucket, GetBucketLocation and the
// three listings (ListObjects V1/V2, ListObjectVersions, ListMultipartUploads).
import { isPublicAcl, publicAclBlocked, requestedAcl } from './access.js';
import { STORAGE_LABEL } from './auth.js';
import { errors } from './errors.js';
import { bucketCacheKey, SKIP_UNDER, type Exchange, type Kit } from './kit.js';
import type { BucketRow } from './metadata.js';
import { uriEncode } from './sigv4.js';

export function isValidBucketName(name: string): boolean {
  return (
    /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(name) &&
    !name.includes('..') &&
    !name.includes('.-') &&
    !name.includes('-.') &&
    !/^\d+\.\d+\.\d+\.\d+$/.test(name) &&
    !name.startsWith('xn--') &&
    // A storage's own endpoint is named by its uuid (auth.ts): no bucket may read as one.
    !STORAGE_LABEL.test(name)
  );
}

/** `max-keys` and the like: a non-negative integer, capped at 1000 as S3 does. */
function pageSize(x: Exchange, param: string): number {
  const text = x.params.get(param) ?? '1000';
  if (!/^\d+$/.test(text)) throw errors.invalidArgument(`${param} must be a non-negative integer`);
  return Math.min(1000, Number(text));
}

/** `encoding-type`: only `url` exists; the returned function encodes keys when it was asked for. */
function keyEncoding(x: Exchange): { urlEncode: boolean; enc: (s: string) => string } {
  const urlEncode = x.params.get('encoding-type') === 'url';
  if (x.params.has('encoding-type') && !urlEncode)
    throw errors.invalidArgument('Invalid Encoding Method specified in Request');
  return { urlEncode, enc: (s) => (urlEncode ? uriEncode(s, false) : s) };
}

/**
 * Where a V1-style listing resumes: after the marker, and after everything under it when the marker
 * is a common prefix (everything under it was already rolled up).
 */
const resumeAfter = (marker: string, prefix: string, delimiter: string) =>
  delimiter !== '' && marker.startsWith(prefix) && marker.endsWith(delimiter) ? marker + SKIP_UNDER : marker;

export function bucketHandlers(kit: Kit) {
  const { meta, blobs, allow, send, sendXml, ownerOf } = kit;

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

  async function createBucket(x: Exchange): Promise<void> {
    const name = x.bucket!;
    allow(x, { action: 's3:CreateBucket', bucket: name });
    if (!isValidBucketName(name)) throw errors.invalidBucketName(name);
    // hook: canned ACLs (access.ts); a new bucket has no PublicAccessBlock but the operator's.
    const acl = requestedAcl(x.req.headers, String(x.caller.storageId)) ?? 'private';
    if (isPublicAcl(acl)) {
      allow(x, { action: 's3:PutBucketAcl', bucket: name });
      if (kit.decision.blocksPublicAcls()) throw publicAclBlocked();
    }
    x.req.resume();
    // Names are the storage's own (migration 024): a name another storage holds is free here, and
    // us-east-1, the region Berth advertises, answers a caller re-creating its own bucket with 200.
    await meta.createBucket(x.caller.storageId, name, kit.now(), acl);
    send(x, 200, { location: `/${name}` });
  }

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

  async function deleteBucket(x: Exchange, bucket: BucketRow): Promise<void> {
    allow(x, { action: 's3:DeleteBucket', bucket: bucket.name });
    const { deleted, uploads } = await meta.deleteBucket(bucket.id);
    if (!deleted) throw errors.bucketNotEmpty(bucket.name);
    kit.bucketCache.forget(bucketCacheKey(bucket.object_storage_id, bucket.name));
    await blobs.removeTree('data', bucket.id);
    for (const upload of uploads) await blobs.removeTree('parts', upload);
    send(x, 204);
  }

  async function listObjects(x: Exchange, bucket: BucketRow): Promise<void> {
    const p = x.params;
    const v2 = p.get('list-type') === '2';
    const prefix = p.get('prefix') ?? '';
    const delimiter = p.get('delimiter') ?? '';
    allow(x, { action: 's3:ListBucket', bucket: bucket.name, listPrefix: prefix });
    const maxKeys = pageSize(x, 'max-keys');
    const { urlEncode, enc } = keyEncoding(x);
    let after = '';
    const token = p.get('continuation-token');
    if (v2) {
      if (token !== undefined && token !== '') {
        after = Buffer.from(token, 'base64url').toString('utf8');
        if (after === '') throw errors.invalidArgument('The continuation token provided is incorrect');
      } else after = p.get('start-after') ?? '';
    } else {
      after = resumeAfter(p.get('marker') ?? '', prefix, delimiter);
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
        ContinuationToken: token, // echoed even when empty, as S3 does
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
    const maxKeys = pageSize(x, 'max-keys');
    const marker = p.get('key-marker') ?? '';
    const after = resumeAfter(marker, prefix, delimiter);
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

  /**
   * ListMultipartUploads: the uploads in progress, by key and then by when they started. A bucket
   * holds few uploads in progress, so those under the prefix are read whole and paged here.
   */
  async function listUploads(x: Exchange, bucket: BucketRow): Promise<void> {
    const p = x.params;
    const prefix = p.get('prefix') ?? '';
    const delimiter = p.get('delimiter') ?? '';
    allow(x, { action: 's3:ListBucketMultipartUploads', bucket: bucket.name });
    const maxUploads = pageSize(x, 'max-uploads');
    const { urlEncode, enc } = keyEncoding(x);
    const keyMarker = p.get('key-marker') ?? '';
    const idMarker = keyMarker === '' ? '' : (p.get('upload-id-marker') ?? '');
    const all = await meta.listUploads(bucket.id, prefix);
    // Resume after the upload the markers name, or after the key marker (and under it, when it is
    // a common prefix already shown).
    const named =
      idMarker === '' ? -1 : all.findIndex((u) => u.key === keyMarker && u.upload_id === idMarker);
    const after = resumeAfter(keyMarker, prefix, delimiter);
    let start = named >= 0 ? named + 1 : all.findIndex((u) => u.key > after);
    if (start < 0) start = all.length;
    const uploads: typeof all = [];
    const prefixes: string[] = [];
    let truncated = false;
    let last: { key: string; uploadId: string } | undefined;
    for (let i = start; i < all.length; i++) {
      const upload = all[i]!;
      const cut = delimiter === '' ? -1 : upload.key.indexOf(delimiter, prefix.length);
      const common = cut < 0 ? undefined : upload.key.slice(0, cut + delimiter.length);
      if (common !== undefined && prefixes.at(-1) === common) continue;
      if (uploads.length + prefixes.length >= maxUploads) {
        truncated = true;
        break;
      }
      if (common !== undefined) {
        prefixes.push(common);
        last = { key: common, uploadId: '' };
      } else {
        uploads.push(upload);
        last = { key: upload.key, uploadId: upload.upload_id };
      }
    }
    sendXml(x, 'ListMultipartUploadsResult', {
      Bucket: bucket.name,
      KeyMarker: enc(keyMarker),
      UploadIdMarker: idMarker,
      NextKeyMarker: truncated && last ? enc(last.key) : undefined,
      NextUploadIdMarker: truncated && last ? last.uploadId : undefined,
      Prefix: enc(prefix),
      Delimiter: delimiter === '' ? undefined : enc(delimiter),
      MaxUploads: maxUploads,
      EncodingType: urlEncode ? 'url' : undefined,
      IsTruncated: truncated,
      Upload: uploads.map((u) => ({
        Key: enc(u.key),
        UploadId: u.upload_id,
        Initiator: ownerOf(x),
        Owner: ownerOf(x),
        StorageClass: 'STANDARD',
        Initiated: u.created_at,
      })),
      CommonPrefixes: prefixes.map((cp) => ({ Prefix: enc(cp) })),
    });
  }

  return {
    listBuckets,
    createBucket,
    headBucket,
    bucketLocation,
    deleteBucket,
    listObjects,
    listVersions,
    listUploads,
  };
}
