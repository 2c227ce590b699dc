// Berth's S3-compatible endpoint: a plain node:http server (no framework between the socket and the
// bytes) that authenticates every request with SigV4, checks that the bucket belongs to the caller's
// object storage and that the caller's policies allow the action, then serves the operation from
// blobs (files in the data directory, or an upstream bucket with the s3 driver: blobs.ts) and
// metadata in the store.
//
// This file routes; the operations live in buckets.ts, objects.ts and multipart.ts, the steps they
// share in kit.ts, addressing and signatures in auth.ts, and the features in cors.ts, tagging.ts,
// post-object.ts, conditional.ts and checksums.ts.
import { once } from 'node:events';
import { randomBytes } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { addressSet, createAccessDecision, createAccessFeature, sourceAddress } from './access.js';
import { addressOf, anonymousSignature, claimedAccessKey, createAuthenticator } from './auth.js';
import { bucketHandlers } from './buckets.js';
import { bodyBytesRead } from './body.js';
import { createCors } from './cors.js';
import { createPostObject } from './post-object.js';
import { createTagging } from './tagging.js';
import { errors, S3Error } from './errors.js';
import { localBlobStore, type BlobStore } from './blobs.js';
import {
  bucketCacheKey,
  createKit,
  MAX_OBJECT,
  quoteEtag,
  type AccessKey,
  type Caller,
  type Exchange,
  type S3ServerDeps,
} from './kit.js';
import { lookupCache } from './lookup-cache.js';
import { refuseUnhonoured, routeTable } from './routes.js';
import { createObjectMetadata, type BucketRow } from './metadata.js';
import { multipartHandlers } from './multipart.js';
import { objectHandlers } from './objects.js';
import { isAllowed, type AccessRequest } from './policy.js';
import { splitTarget, parseQuery } from './sigv4.js';
import { xmlDocument } from './xml.js';

export type { S3ServerDeps } from './kit.js';
export { isValidBucketName } from './buckets.js';

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

export function createS3Handler(deps: S3ServerDeps, blobs = deps.blobs ?? localBlobStore(deps.dataDir)) {
  const meta = createObjectMetadata(deps.db, deps.dialect);
  const suffixes = deps.virtualHostSuffixes.map((s) => s.toLowerCase());
  const ttl = deps.lookupTtlMs ?? LOOKUP_TTL_MS;
  const keyCache = lookupCache<AccessKey>(ttl);
  const bucketCache = lookupCache<BucketRow>(ttl);
  /** Storage ids by uuid, for the endpoints of their own; a storage keeps its uuid for life. */
  const storageCache = lookupCache<number>(ttl);
  const decision = createAccessDecision(deps.blockPublicAccess ?? false);
  const proxies = deps.trustedProxies?.length ? addressSet(deps.trustedProxies) : undefined;
  const kit = createKit(deps, meta, blobs, bucketCache, decision);
  const owner = (b: BucketRow) => ({
    ID: String(b.object_storage_id),
    DisplayName: `storage-${b.object_storage_id}`,
  });
  const access = createAccessFeature({
    meta,
    decision,
    owner,
    forget(b) {
      bucketCache.forget(bucketCacheKey(b.object_storage_id, b.name));
      bucketCache.forget(anyStorage(b.name));
    },
  });
  /** Where the shared endpoint remembers the bucket an unsigned request names (the first of that name). */
  const anyStorage = (name: string) => `*/${name}`;
  const { loadKey, authenticate } = createAuthenticator(deps, meta, keyCache);
  const corsFeature = createCors(meta, ttl);
  const tagging = createTagging(meta);
  const buckets = bucketHandlers(kit);
  const objects = objectHandlers(kit);
  const multipart = multipartHandlers(kit, objects);
  /**
   * What the request addresses, and the id of the storage its endpoint names (undefined: the shared
   * endpoint). A uuid-shaped label no storage has is a bucket named so before such names were refused.
   */
  async function address(host: string | undefined, path: string) {
    const named = addressOf(suffixes, host, path);
    if (named.storage === undefined) return { ...named, storageId: undefined };
    const storageId = await storageCache.get(named.storage, () => meta.findStorage(named.storage!));
    return storageId === undefined
      ? { ...addressOf(suffixes, host, path, false), storageId: undefined }
      : { ...named, storageId };
  }

  // Browser form uploads: authenticated by their signed policy, not by a signed request.
  const postObject = createPostObject({
    now: () => deps.clock.now(),
    async accessKey(id) {
      const key = await loadKey(id);
      return key && { ...key, allows: (request: AccessRequest) => isAllowed(key.statements, request) };
    },
    bucket: (storageId, name) =>
      bucketCache.get(bucketCacheKey(storageId, name), () => meta.findBucket(storageId, name)),
    begin: (bucket) => blobs.begin('data', bucket.id),
    blocksPublicAcls: (bucket) => decision.block(bucket).BlockPublicAcls,
    unsignedBucket: (storageId, name) =>
      storageId === undefined
        ? bucketCache.get(anyStorage(name), () => meta.firstBucketNamed(name))
        : bucketCache.get(bucketCacheKey(storageId, name), () => meta.findBucket(storageId, name)),
    unsignedAllows: (req, bucket, request) =>
      decision.allows(
        { kind: 'anonymous', statements: [], sourceIp: sourceAddress(req, proxies) },
        request,
        bucket,
      ),
    async store(bucket, key, blob, size, md5, headers, checksum, acl, tags) {
      const etag = quoteEtag(md5.toString('hex'));
      const file = await blob.place();
      const values = {
        size,
        etag,
        file,
        headers: JSON.stringify(headers),
        last_modified: kit.now(),
        checksum: checksum ? JSON.stringify(checksum) : null,
        parts: null,
        acl,
        tags,
      };
      const old = await meta.putObject(bucket.id, key, values).catch(async (error: unknown) => {
        await blobs.remove(file);
        throw error;
      });
      await blobs.remove(old);
      return etag;
    },
    maxObject: MAX_OBJECT,
  });

  // ---- dispatch ----

  type Handler = (x: Exchange) => Promise<void>;
  const inBucket =
    (fn: (x: Exchange, bucket: BucketRow) => Promise<void>): Handler =>
    async (x) =>
      fn(x, await kit.ownBucket(x, x.bucket!));
  const onObject =
    (fn: (x: Exchange, bucket: BucketRow, key: string) => Promise<void>): Handler =>
    async (x) =>
      fn(x, await kit.ownBucket(x, x.bucket!), x.key!);
  const refuse: Handler = () => Promise.reject(errors.notImplemented());

  /**
   * Everything the endpoint answers; anything not listed is refused before the bucket or object is
   * read. CORS configuration and tagging live in cors.ts and tagging.ts; a browser form upload (POST
   * on a bucket) is answered in `handle`, before request signatures are looked at (post-object.ts).
   */
  const routes = routeTable<Handler>([
    { method: 'GET', form: 'service', sub: '', op: 'ListBuckets', handler: buckets.listBuckets },
    {
      method: 'PUT',
      form: 'bucket',
      sub: '',
      op: 'CreateBucket',
      handler: buckets.createBucket,
    },
    { method: 'HEAD', form: 'bucket', sub: '', op: 'HeadBucket', handler: inBucket(buckets.headBucket) },
    {
      method: 'DELETE',
      form: 'bucket',
      sub: '',
      op: 'DeleteBucket',
      handler: inBucket(buckets.deleteBucket),
    },
    { method: 'GET', form: 'bucket', sub: '', op: 'ListObjects', handler: inBucket(buckets.listObjects) },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'location',
      op: 'GetBucketLocation',
      handler: inBucket(buckets.bucketLocation),
    },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'versions',
      op: 'ListObjectVersions',
      handler: inBucket(buckets.listVersions),
    },
    {
      method: 'POST',
      form: 'bucket',
      sub: 'delete',
      op: 'DeleteObjects',
      handler: inBucket(objects.deleteObjects),
    },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'cors',
      op: 'GetBucketCors',
      handler: inBucket((x, b) => corsFeature.get(kit.feature(x), b)),
    },
    {
      method: 'PUT',
      form: 'bucket',
      sub: 'cors',
      op: 'PutBucketCors',
      handler: inBucket((x, b) => corsFeature.put(kit.feature(x), b)),
    },
    {
      method: 'DELETE',
      form: 'bucket',
      sub: 'cors',
      op: 'DeleteBucketCors',
      handler: inBucket((x, b) => corsFeature.delete(kit.feature(x), b)),
    },
    { method: 'POST', form: 'bucket', sub: '', op: 'PostObject', handler: refuse },
    { method: 'PUT', form: 'object', sub: '', op: 'PutObject', handler: onObject(objects.putOrCopy) },
    {
      method: 'GET',
      form: 'object',
      sub: '',
      op: 'GetObject',
      handler: onObject((x, b, k) => objects.getObject(x, b, k, false)),
    },
    {
      method: 'HEAD',
      form: 'object',
      sub: '',
      op: 'HeadObject',
      handler: onObject((x, b, k) => objects.getObject(x, b, k, true)),
    },
    {
      method: 'DELETE',
      form: 'object',
      sub: '',
      op: 'DeleteObject',
      handler: onObject(objects.deleteObject),
    },
    {
      method: 'POST',
      form: 'object',
      sub: 'uploads',
      op: 'CreateMultipartUpload',
      handler: onObject(multipart.createUpload),
    },
    {
      method: 'PUT',
      form: 'object',
      sub: 'uploadId',
      op: 'UploadPart',
      handler: onObject(multipart.uploadPart),
    },
    {
      method: 'POST',
      form: 'object',
      sub: 'uploadId',
      op: 'CompleteMultipartUpload',
      handler: onObject(multipart.completeUpload),
    },
    {
      method: 'DELETE',
      form: 'object',
      sub: 'uploadId',
      op: 'AbortMultipartUpload',
      handler: onObject(multipart.abortUpload),
    },
    {
      method: 'GET',
      form: 'object',
      sub: 'uploadId',
      op: 'ListParts',
      handler: onObject(multipart.listParts),
    },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'uploads',
      op: 'ListMultipartUploads',
      handler: inBucket(buckets.listUploads),
    },
    {
      method: 'GET',
      form: 'object',
      sub: 'attributes',
      op: 'GetObjectAttributes',
      handler: onObject(objects.getAttributes),
    },
    // hook: ACLs, bucket policies and PublicAccessBlock (access.ts)
    ...(
      [
        ['GET', 'bucket', 'acl', 'GetBucketAcl', access.getBucketAcl],
        ['PUT', 'bucket', 'acl', 'PutBucketAcl', access.putBucketAcl],
        ['GET', 'bucket', 'policy', 'GetBucketPolicy', access.getPolicy],
        ['PUT', 'bucket', 'policy', 'PutBucketPolicy', access.putPolicy],
        ['DELETE', 'bucket', 'policy', 'DeleteBucketPolicy', access.deletePolicy],
        ['GET', 'bucket', 'policyStatus', 'GetBucketPolicyStatus', access.policyStatus],
        ['GET', 'bucket', 'publicAccessBlock', 'GetPublicAccessBlock', access.getBlock],
        ['PUT', 'bucket', 'publicAccessBlock', 'PutPublicAccessBlock', access.putBlock],
        ['DELETE', 'bucket', 'publicAccessBlock', 'DeletePublicAccessBlock', access.deleteBlock],
      ] as const
    ).map(([method, form, sub, op, fn]) => ({
      method,
      form,
      sub,
      op,
      handler: inBucket((x, b) => fn(kit.feature(x), b)),
    })),
    {
      method: 'GET',
      form: 'object',
      sub: 'acl',
      op: 'GetObjectAcl',
      handler: onObject((x, b, k) => access.getObjectAcl(kit.feature(x), b, k)),
    },
    {
      method: 'PUT',
      form: 'object',
      sub: 'acl',
      op: 'PutObjectAcl',
      handler: onObject((x, b, k) => access.putObjectAcl(kit.feature(x), b, k)),
    },
    {
      method: 'GET',
      form: 'bucket',
      sub: 'tagging',
      op: 'GetBucketTagging',
      handler: inBucket((x, b) => tagging.getBucket(kit.feature(x), b)),
    },
    {
      method: 'PUT',
      form: 'bucket',
      sub: 'tagging',
      op: 'PutBucketTagging',
      handler: inBucket((x, b) => tagging.putBucket(kit.feature(x), b)),
    },
    {
      method: 'DELETE',
      form: 'bucket',
      sub: 'tagging',
      op: 'DeleteBucketTagging',
      handler: inBucket((x, b) => tagging.deleteBucket(kit.feature(x), b)),
    },
    {
      method: 'GET',
      form: 'object',
      sub: 'tagging',
      op: 'GetObjectTagging',
      handler: onObject((x, b, k) => tagging.get(kit.feature(x), b, k)),
    },
    {
      method: 'PUT',
      form: 'object',
      sub: 'tagging',
      op: 'PutObjectTagging',
      handler: onObject((x, b, k) => tagging.put(kit.feature(x), b, k)),
    },
    {
      method: 'DELETE',
      form: 'object',
      sub: 'tagging',
      op: 'DeleteObjectTagging',
      handler: onObject((x, b, k) => tagging.delete(kit.feature(x), b, k)),
    },
  ]);

  /**
   * Who asks. On a storage's own endpoint a key of another storage is an `other` caller (ACLs and
   * policies may grant it what they grant any signed or unsigned request; nothing else); an unsigned
   * request names a bucket of the storage the endpoint names or, on the shared endpoint, the first
   * bucket of that name, and is refused with the 403 it always had when there is none.
   */
  async function callerOf(
    req: IncomingMessage,
    storageId: number | undefined,
    bucket: string | undefined,
  ): Promise<Caller> {
    const sourceIp = sourceAddress(req, proxies);
    const signed = await authenticate(req);
    if (signed === undefined) {
      const storage =
        bucket === undefined
          ? undefined
          : (storageId ??
            (await bucketCache.get(anyStorage(bucket), () => meta.firstBucketNamed(bucket)))
              ?.object_storage_id);
      // A name no storage has is answered as S3 answers it: bucket names are not secret there either.
      if (storage === undefined) {
        if (bucket === undefined) throw errors.accessDenied('Anonymous access is not allowed');
        throw errors.noSuchBucket(bucket);
      }
      return {
        kind: 'anonymous',
        storageId: storage,
        statements: [],
        secret: '',
        accessKeyId: '',
        username: '',
        signature: anonymousSignature(req),
        sourceIp,
      };
    }
    if (storageId !== undefined && signed.storageId !== storageId) {
      if (bucket === undefined) throw errors.accessDenied('The access key belongs to another object storage');
      return { ...signed, kind: 'other', storageId, statements: [], sourceIp };
    }
    return { ...signed, kind: 'user', sourceIp };
  }

  async function dispatch(x: Exchange, seen: { operation: string }): Promise<void> {
    const form = x.bucket === undefined ? 'service' : x.key === undefined ? 'bucket' : 'object';
    const route = routes.find(x.req.method ?? 'GET', form, x.params);
    seen.operation = route.op;
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
    const seen = { operation: 'Unknown' };
    if (deps.onRequest) {
      const onRequest = deps.onRequest;
      const socket = req.socket;
      const written = socket.bytesWritten;
      res.once('close', () =>
        onRequest({
          operation: seen.operation,
          status: res.statusCode,
          bytesIn: bodyBytesRead(req),
          bytesOut: socket.bytesWritten - written,
        }),
      );
    }
    try {
      const { bucket, key, storageId } = await address(req.headers.host, path);
      const params = parseQuery(query);
      // hook: browsers' CORS answers from the bucket's rules (cors.ts), of the storage the endpoint
      // names or, on the shared endpoint, of the storage of the key the request claims.
      const claimed =
        storageId === undefined && req.headers.origin !== undefined
          ? claimedAccessKey(req, params)
          : undefined;
      const corsStorage =
        storageId ?? (claimed === undefined ? undefined : (await loadKey(claimed))?.storageId);
      if (req.method === 'OPTIONS') seen.operation = 'Options';
      if (await corsFeature.answer(req, res, corsStorage, bucket)) return;
      // C1 control characters are not text; S3 refuses keys that hold them.
      if (key !== undefined && /[\u0080-\u009f]/.test(key)) throw errors.invalidUri();
      // hook: browser form uploads (post-object.ts)
      if (bucket !== undefined && postObject.matches(req, key)) {
        seen.operation = 'PostObject';
        return await postObject.handle(req, res, bucket, requestId, storageId);
      }
      const caller = await callerOf(req, storageId, bucket);
      let continued = !expectContinue;
      const x: Exchange = {
        req,
        res,
        requestId,
        params,
        bucket,
        key,
        caller,
        seen: new Map(),
        proceed() {
          if (!continued) {
            continued = true;
            res.writeContinue();
          }
        },
      };
      await dispatch(x, seen);
    } catch (error) {
      sendError(req, res, requestId, error, path);
    }
  };
}

export async function startS3Server(
  deps: S3ServerDeps,
  listen: { host: string; port: number },
): Promise<S3Server> {
  const blobs = deps.blobs ?? localBlobStore(deps.dataDir);
  // A store that cannot be reached (an upstream bucket) fails the start, naming what to fix.
  await blobs.check();
  // File times are wall-clock times, so the wall clock (not the injected one) judges their age.
  await blobs.sweepTemp(new Date(), 24 * 3600_000);
  const sweeper = orphanSweeper(deps, blobs);
  const handle = createS3Handler(deps, blobs);
  // Uploads of several GiB may take longer than Node's default 5-minute request timeout; a socket
  // that stays silent for two minutes is dropped instead.
  const server = http.createServer({ keepAliveTimeout: 5000, requestTimeout: 0 });
  server.timeout = 120_000;
  server.on('request', (req: IncomingMessage, res: ServerResponse) => void handle(req, res, false));
  // Authenticate before the client sends a large body it would send in vain.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => void handle(req, res, true));
  server.listen(listen.port, listen.host);
  await once(server, 'listening'); // rejects with the 'error' of a port that cannot be had
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
function orphanSweeper(deps: S3ServerDeps, blobs: BlobStore) {
  const meta = createObjectMetadata(deps.db, deps.dialect);
  let running: Promise<void> | undefined;
  const sweep = (): void => {
    // File times are wall-clock times, so the wall clock (not the injected one) judges their age.
    running ??= blobs
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
