// Receiving a request body as S3 does: decode aws-chunked framing, hash while streaming (MD5 for the
// ETag, SHA-256 when the signature covers the payload, the x-amz-checksum the client sends or asks
// for: checksums.ts) and check everything once the last byte has arrived. Bytes flow to a sink; nothing is
// held in memory beyond one chunk.
import { createHash, type Hash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Transform, Writable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { AwsChunkedDecoder } from './chunked.js';
import {
  bodyChecksumAlgorithm,
  checksummer,
  headerOf,
  type ChecksumAlgorithm,
  type Checksummer,
} from './checksums.js';
import { errors } from './errors.js';
import { startMd5, type Md5Job } from './md5-pool.js';
import { headerValue, signingKey, type ParsedSignature } from './sigv4.js';

export interface ReceivedBody {
  size: number;
  md5: Buffer;
  /** The body's checksum, verified against the declared one, when the client sent or asked for one. */
  checksum?: { algorithm: ChecksumAlgorithm; value: string };
}

/**
 * Bodies at least this large hash their MD5 on a worker thread (see md5-pool.ts). For 1 MiB bodies
 * the worker made no measurable difference on two shared cores and costs messages (docs/benchmarks/s3.md).
 */
const OFFLOAD_MD5_BYTES = 4 * 1024 * 1024;

class Digests extends Transform {
  size = 0;
  private readonly inlineMd5: Hash | undefined;
  private readonly workerMd5: Md5Job | undefined;
  readonly sha256: Hash | undefined;
  readonly checksum: Checksummer | undefined;

  constructor(
    payloadSha256: boolean,
    algorithm: ChecksumAlgorithm | undefined,
    private readonly limit: number,
    offloadMd5: boolean,
  ) {
    super();
    this.workerMd5 = offloadMd5 ? startMd5() : undefined;
    this.inlineMd5 = offloadMd5 ? undefined : createHash('md5');
    this.sha256 = payloadSha256 ? createHash('sha256') : undefined;
    this.checksum = algorithm === undefined ? undefined : checksummer(algorithm);
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      callback(errors.entityTooLarge());
      return;
    }
    this.sha256?.update(chunk);
    this.checksum?.update(chunk);
    if (this.workerMd5) {
      this.workerMd5.update(chunk, () => callback(null, chunk));
    } else {
      this.inlineMd5?.update(chunk);
      callback(null, chunk);
    }
  }

  md5Digest(): Promise<Buffer> {
    return this.workerMd5 ? this.workerMd5.digest() : Promise.resolve(this.inlineMd5!.digest());
  }

  dropMd5(): void {
    this.workerMd5?.drop();
  }
}

/**
 * Streams the body of an authenticated request into `sink` and verifies it: payload SHA-256, chunk
 * signatures, decoded length, Content-MD5 and the x-amz-checksum the client declared.
 */
export async function receiveBody(
  request: IncomingMessage,
  signature: ParsedSignature,
  secret: string,
  sink: Writable,
  limit: number,
  /** False when x-amz-checksum-* describes something else than this body (CompleteMultipartUpload). */
  bodyChecksum = true,
): Promise<ReceivedBody> {
  const { payload } = signature;
  const algorithm = bodyChecksum ? bodyChecksumAlgorithm(request.headers) : undefined;
  const declared = Number(
    headerValue(request.headers, 'x-amz-decoded-content-length') ??
      headerValue(request.headers, 'content-length') ??
      0,
  );
  const digests = new Digests(payload.kind === 'sha256', algorithm, limit, declared >= OFFLOAD_MD5_BYTES);
  let decoder: AwsChunkedDecoder | undefined;
  if (payload.kind === 'chunked') {
    decoder = new AwsChunkedDecoder(
      payload.signed
        ? {
            key: signingKey(secret, signature.date, signature.region, signature.service),
            parsed: signature,
            seed: signature.signature,
          }
        : undefined,
      payload.trailer,
    );
  }
  try {
    if (decoder) await pipeline(request, decoder, digests, sink);
    else await pipeline(request, digests, sink);
  } catch (error) {
    digests.dropMd5();
    throw error;
  }
  const md5 = await digests.md5Digest();

  if (payload.kind === 'sha256' && digests.sha256?.digest('hex') !== payload.hex)
    throw errors.sha256Mismatch();
  const decodedLength = headerValue(request.headers, 'x-amz-decoded-content-length');
  if (decoder && decodedLength !== undefined && Number(decodedLength) !== digests.size) {
    throw errors.incompleteBody();
  }
  const contentMd5 = headerValue(request.headers, 'content-md5');
  if (contentMd5 !== undefined && contentMd5 !== md5.toString('base64')) throw errors.badDigest();
  if (algorithm === undefined) return { size: digests.size, md5 };
  const value = digests.checksum!.digest();
  const declaredChecksum =
    headerValue(request.headers, headerOf(algorithm)) ?? decoder?.trailers.get(headerOf(algorithm));
  if (declaredChecksum !== undefined && declaredChecksum !== value) throw errors.badDigest();
  return { size: digests.size, md5, checksum: { algorithm, value } };
}

/** A sink that keeps a small body in memory (XML requests), refusing more than `limit` bytes. */
export function memorySink(limit: number): Writable & { text(): string } {
  const parts: Buffer[] = [];
  let size = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      size += chunk.length;
      if (size > limit) return callback(errors.malformedXml());
      parts.push(chunk);
      callback();
    },
  });
  return Object.assign(sink, { text: () => Buffer.concat(parts).toString('utf8') });
}

/**
 * The body bytes of a request read to its end, as its headers declare them (the object's bytes for an
 * aws-chunked upload, without the chunk signatures); 0 for a body left unread (a refusal). The socket's
 * counters cannot tell: Node reads ahead, often the whole body before the request is dispatched.
 */
export function bodyBytesRead(req: IncomingMessage): number {
  if (!req.complete) return 0;
  const declared = req.headers['x-amz-decoded-content-length'] ?? req.headers['content-length'];
  const bytes = Number(Array.isArray(declared) ? declared[0] : declared);
  return Number.isSafeInteger(bytes) && bytes > 0 ? bytes : 0;
}
