// Decoder for `Content-Encoding: aws-chunked` bodies: `<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n`
// repeated, a zero-size chunk, optional trailing headers, and an empty line. With a signing key every
// chunk's signature is checked against the chain that starts at the request's seed signature.
import { createHash, type Hash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { errors, S3Error } from './errors.js';
import { chunkSignature, constantTimeHexEqual, trailerSignature, type ParsedSignature } from './sigv4.js';

export interface ChunkSigning {
  key: Buffer;
  parsed: Pick<ParsedSignature, 'amzDate' | 'date' | 'region' | 'service'>;
  seed: string;
}

const MAX_LINE = 4096;
const CRLF = Buffer.from('\r\n');

type State = 'header' | 'data' | 'data-crlf' | 'trailer' | 'done';

export class AwsChunkedDecoder extends Transform {
  /** Trailing headers (lower-case names), e.g. x-amz-checksum-crc32. */
  readonly trailers = new Map<string, string>();
  decodedLength = 0;
  private state: State = 'header';
  private line = Buffer.alloc(0);
  private remaining = 0;
  private declared = '';
  private previous: string;
  private chunkHash: Hash | undefined;
  private crlfSeen = 0;
  private canonicalTrailer = '';
  private blankSkipped = false;

  constructor(
    private readonly signing: ChunkSigning | undefined,
    /** The body ends with trailing headers (…-TRAILER payloads); signed bodies sign them too. */
    private readonly expectTrailer: boolean,
  ) {
    super();
    this.previous = signing?.seed ?? '';
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    try {
      this.consume(chunk);
      callback();
    } catch (error) {
      callback(error as Error);
    }
  }

  override _flush(callback: TransformCallback): void {
    callback(this.state === 'done' ? null : errors.incompleteBody());
  }

  private consume(input: Buffer): void {
    let buf = input;
    while (buf.length > 0) {
      switch (this.state) {
        case 'header':
        case 'trailer': {
          const line = this.takeLine(buf);
          if (line === undefined) return;
          buf = line.rest;
          if (this.state === 'header') this.startChunk(line.text);
          else this.trailerLine(line.text);
          break;
        }
        case 'data': {
          const n = Math.min(this.remaining, buf.length);
          const piece = buf.subarray(0, n);
          this.chunkHash?.update(piece);
          this.push(piece);
          this.decodedLength += n;
          this.remaining -= n;
          buf = buf.subarray(n);
          if (this.remaining === 0) {
            this.endChunk();
            this.state = 'data-crlf';
            this.crlfSeen = 0;
          }
          break;
        }
        case 'data-crlf': {
          while (this.crlfSeen < 2 && buf.length > 0) {
            if (buf[0] !== CRLF[this.crlfSeen]) throw errors.incompleteBody();
            this.crlfSeen += 1;
            buf = buf.subarray(1);
          }
          if (this.crlfSeen === 2) this.state = 'header';
          break;
        }
        case 'done':
          // Bytes after the final empty line are not part of any chunk.
          throw errors.incompleteBody();
      }
    }
  }

  private takeLine(buf: Buffer): { text: string; rest: Buffer } | undefined {
    const joined = this.line.length > 0 ? Buffer.concat([this.line, buf]) : buf;
    const end = joined.indexOf(CRLF);
    if (end < 0) {
      if (joined.length > MAX_LINE) throw errors.incompleteBody();
      this.line = Buffer.from(joined);
      return undefined;
    }
    this.line = Buffer.alloc(0);
    return { text: joined.subarray(0, end).toString('latin1'), rest: joined.subarray(end + 2) };
  }

  private startChunk(text: string): void {
    const [sizeText = '', ...extensions] = text.split(';');
    if (!/^[0-9a-fA-F]{1,16}$/.test(sizeText.trim())) throw errors.incompleteBody();
    const size = parseInt(sizeText.trim(), 16);
    const signature = extensions.map((e) => e.trim()).find((e) => e.startsWith('chunk-signature='));
    if (this.signing) {
      if (!signature) throw errors.signatureDoesNotMatch();
      this.declared = signature.slice('chunk-signature='.length);
      this.chunkHash = createHash('sha256');
    }
    if (size === 0) {
      this.endChunk();
      this.state = 'trailer';
      return;
    }
    this.remaining = size;
    this.state = 'data';
  }

  private endChunk(): void {
    if (!this.signing || !this.chunkHash) return;
    const expected = chunkSignature(
      this.signing.key,
      this.signing.parsed,
      this.previous,
      this.chunkHash.digest('hex'),
    );
    this.chunkHash = undefined;
    if (!constantTimeHexEqual(expected, this.declared)) throw errors.signatureDoesNotMatch();
    this.previous = this.declared;
  }

  private trailerLine(text: string): void {
    // Some encoders put an empty line between the last chunk and the trailing headers.
    if (text === '' && this.expectTrailer && this.trailers.size === 0 && !this.blankSkipped) {
      this.blankSkipped = true;
      return;
    }
    if (text === '') {
      if (this.expectTrailer && this.signing && !this.trailers.has('x-amz-trailer-signature')) {
        throw errors.signatureDoesNotMatch();
      }
      this.state = 'done';
      return;
    }
    const colon = text.indexOf(':');
    if (colon <= 0) throw errors.incompleteBody();
    const name = text.slice(0, colon).trim().toLowerCase();
    const value = text.slice(colon + 1).trim();
    if (name === 'x-amz-trailer-signature' && this.signing && this.expectTrailer) {
      const expected = trailerSignature(
        this.signing.key,
        this.signing.parsed,
        this.previous,
        this.canonicalTrailer,
      );
      if (!constantTimeHexEqual(expected, value)) throw errors.signatureDoesNotMatch();
    } else if (name !== 'x-amz-trailer-signature') {
      this.canonicalTrailer += `${name}:${value}\n`;
    }
    this.trailers.set(name, value);
  }
}

export const isS3Error = (error: unknown): error is S3Error => error instanceof S3Error;
