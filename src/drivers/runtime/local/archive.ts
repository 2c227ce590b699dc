// Uploaded source archives (.tar.gz and .zip) unpacked into a release directory, and a release directory
// packed back into a .tar.gz for download.
//
// An archive is a tenant's bytes, so it is parsed here in Node rather than by `tar` or `unzip`: every
// entry's name, type, link target and size is checked before anything of it reaches the disk, and the
// byte count is enforced while inflating (a zip bomb stops at `maxBytes`, whatever its headers claim).
// Entries land in a private temp directory beside `dest` that is renamed into place only when the whole
// archive passed, so a refused archive leaves nothing behind. Symbolic links are created last, after
// every file and directory, and no entry may have a link (or a file) as an ancestor: nothing is ever
// written through a link. A link whose target leaves the tree is refused, since Berth (root) later reads
// files of a release (package.json, …) and must not be led to /etc or another tenant's files.
import { execFile } from 'node:child_process';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { promisify } from 'node:util';
import zlib from 'node:zlib';

const execFileAsync = promisify(execFile);

export class ArchiveError extends Error {
  constructor(
    message: string,
    readonly entry?: string,
  ) {
    super(message);
    this.name = 'ArchiveError';
  }
}

export interface ExtractOptions {
  /** The uploaded archive; its format is read from its first bytes, never from its name. */
  file: string;
  /** Must not exist yet; created only when the whole archive is accepted. */
  dest: string;
  /** Total uncompressed bytes of all files. */
  maxBytes: number;
  maxEntries: number;
}

export interface ExtractResult {
  files: number;
  bytes: number;
}

/** A symbolic link chain longer than this is treated as a loop (the kernel's own limit is 40). */
const MAX_LINK_HOPS = 40;
/** pax headers, GNU long names and link targets are metadata: small, and bounded in total. */
const MAX_METADATA_BYTES = 1024 * 1024;
const MAX_LINK_TARGET_BYTES = 4096;

const printable = (name: string) => JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name);

/**
 * The first link (archive-relative path → target) whose resolution leaves the tree, following links
 * through each other as the kernel would. Absolute targets always leave: the tree moves after extraction.
 */
export function findEscapingLink(
  links: ReadonlyMap<string, string>,
): { path: string; target: string } | undefined {
  for (const [linkPath, target] of links) {
    if (!resolvesInside(linkPath, target, links)) return { path: linkPath, target };
  }
  return undefined;
}

function resolvesInside(linkPath: string, target: string, links: ReadonlyMap<string, string>): boolean {
  // `resolved` only ever holds real directories of the tree, so `..` pops exactly what the kernel pops.
  const resolved = linkPath.split('/').slice(0, -1);
  const pending = target.split('/');
  if (target.startsWith('/')) return false;
  let hops = 0;
  while (pending.length > 0) {
    const part = pending.shift() as string;
    if (part === '' || part === '.') continue;
    if (part === '..') {
      if (resolved.length === 0) return false;
      resolved.pop();
      continue;
    }
    resolved.push(part);
    const next = links.get(resolved.join('/'));
    if (next === undefined) continue;
    if (next.startsWith('/') || ++hops > MAX_LINK_HOPS) return false;
    resolved.pop();
    pending.unshift(...next.split('/'));
  }
  return true;
}

type EntryKind = 'file' | 'dir' | 'link';

/**
 * What an extraction has accepted so far, and the temp directory it writes into; without one
 * (checkArchive) every entry is checked alike and nothing is written.
 */
class Extraction {
  private readonly kinds = new Map<string, EntryKind>();
  private readonly links = new Map<string, string>();
  private entries = 0;
  files = 0;
  bytes = 0;

  constructor(
    readonly root: string | undefined,
    private readonly options: Omit<ExtractOptions, 'dest'>,
  ) {}

  /** An entry's name as a clean path relative to the root; '' for the root itself. */
  entryPath(raw: string): string {
    if (raw.length === 0) throw new ArchiveError('An entry has an empty name');
    if (/[\u0000-\u001f\u007f]/.test(raw)) {
      throw new ArchiveError(`The entry ${printable(raw)} has control characters in its name`, raw);
    }
    if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) {
      throw new ArchiveError(`The entry ${printable(raw)} has an absolute path`, raw);
    }
    const clean = path.posix.normalize(raw).replace(/\/+$/, '');
    if (clean === '..' || clean.startsWith('../')) {
      throw new ArchiveError(`The entry ${printable(raw)} leaves the destination`, raw);
    }
    return clean === '.' ? '' : clean;
  }

  /** Counts an entry and claims its path; false when it is a directory that already exists. */
  private claim(entry: string, kind: EntryKind, raw: string): boolean {
    if (++this.entries > this.options.maxEntries) {
      throw new ArchiveError(`The archive has more than ${this.options.maxEntries} entries`, raw);
    }
    const parts = entry.split('/');
    for (let i = 1; i < parts.length; i++) {
      const ancestor = parts.slice(0, i).join('/');
      const ancestorKind = this.kinds.get(ancestor);
      if (ancestorKind === 'link') {
        throw new ArchiveError(
          `The entry ${printable(raw)} would be written through the link ${ancestor}`,
          raw,
        );
      }
      if (ancestorKind === 'file') {
        throw new ArchiveError(`The entry ${printable(raw)} is inside the file ${ancestor}`, raw);
      }
      this.kinds.set(ancestor, 'dir');
    }
    const existing = this.kinds.get(entry);
    if (existing === 'dir' && kind === 'dir') return false;
    if (existing !== undefined) throw new ArchiveError(`The entry ${printable(raw)} appears twice`, raw);
    this.kinds.set(entry, kind);
    return true;
  }

  async directory(raw: string): Promise<void> {
    const entry = this.entryPath(raw);
    if (entry === '') return;
    if (this.claim(entry, 'dir', raw) && this.root !== undefined)
      await fs.mkdir(path.join(this.root, entry), { recursive: true });
  }

  /**
   * Writes a regular file from `data`, which must yield exactly `size` bytes: the size is charged
   * before the first byte is written and checked again on every chunk, whatever a header claimed.
   */
  async file(raw: string, mode: number, size: number, data: AsyncIterable<Buffer>): Promise<void> {
    const entry = this.entryPath(raw);
    if (entry === '') throw new ArchiveError(`The entry ${printable(raw)} is a file at the root`, raw);
    this.claim(entry, 'file', raw);
    this.charge(size, raw);
    if (this.root === undefined) {
      await this.count(raw, size, data);
      return;
    }
    const target = path.join(this.root, entry);
    await fs.mkdir(path.dirname(target), { recursive: true });
    // Executable bits survive; setuid, setgid and sticky bits never do.
    const handle = await fs.open(target, 'wx', mode & 0o111 ? 0o755 : 0o644);
    let written = 0;
    try {
      for await (const chunk of data) {
        written += chunk.length;
        if (written > size)
          throw new ArchiveError(`The entry ${printable(raw)} is larger than it declares`, raw);
        await handle.write(chunk);
      }
    } finally {
      await handle.close();
    }
    if (written !== size) throw new ArchiveError(`The entry ${printable(raw)} is truncated`, raw);
    this.files++;
  }

  /** file() without a disk: the same size checks on every chunk. */
  private async count(raw: string, size: number, data: AsyncIterable<Buffer>): Promise<void> {
    let read = 0;
    for await (const chunk of data) {
      read += chunk.length;
      if (read > size) throw new ArchiveError(`The entry ${printable(raw)} is larger than it declares`, raw);
    }
    if (read !== size) throw new ArchiveError(`The entry ${printable(raw)} is truncated`, raw);
    this.files++;
  }

  private charge(size: number, raw: string): void {
    if (!Number.isSafeInteger(size) || size < 0 || this.bytes + size > this.options.maxBytes) {
      throw new ArchiveError(
        `The archive holds more than ${this.options.maxBytes} bytes (at the entry ${printable(raw)})`,
        raw,
      );
    }
    this.bytes += size;
  }

  /** Links are only recorded here: they are checked and created once every other entry is on disk. */
  symlink(raw: string, target: string): void {
    const entry = this.entryPath(raw);
    if (entry === '') throw new ArchiveError(`The entry ${printable(raw)} is a link at the root`, raw);
    if (target.length === 0 || /[\u0000-\u001f\u007f]/.test(target)) {
      throw new ArchiveError(`The link ${printable(raw)} has an empty or unprintable target`, raw);
    }
    this.claim(entry, 'link', raw);
    this.links.set(entry, target);
  }

  /** A hard link may only name a regular file this archive already wrote. */
  async hardLink(raw: string, rawTarget: string): Promise<void> {
    const entry = this.entryPath(raw);
    const target = this.entryPath(rawTarget);
    if (this.kinds.get(target) !== 'file') {
      throw new ArchiveError(
        `The hard link ${printable(raw)} points at ${printable(rawTarget)}, which is not a file of the archive`,
        raw,
      );
    }
    if (entry === '') throw new ArchiveError(`The entry ${printable(raw)} is a link at the root`, raw);
    this.claim(entry, 'file', raw);
    if (this.root !== undefined) {
      await fs.mkdir(path.dirname(path.join(this.root, entry)), { recursive: true });
      await fs.link(path.join(this.root, target), path.join(this.root, entry));
    }
    this.files++;
  }

  /** The single top-level directory to flatten (GitHub's `repo-main/…`), if there is one. */
  private topDirectory(): string | undefined {
    const tops = new Set<string>();
    for (const entry of this.kinds.keys()) tops.add(entry.split('/')[0] as string);
    const [only] = tops;
    return tops.size === 1 && only !== undefined && this.kinds.get(only) === 'dir' ? only : undefined;
  }

  /** Checks and creates the links, then returns the directory that becomes `dest` (none when checking). */
  async finish(): Promise<string | undefined> {
    const top = this.topDirectory();
    const strip = top === undefined ? 0 : top.length + 1;
    // Links are judged against the tree as it will be after flattening.
    const finalLinks = new Map<string, string>();
    for (const [entry, target] of this.links) finalLinks.set(entry.slice(strip), target);
    const escaping = findEscapingLink(finalLinks);
    if (escaping) {
      const raw = top === undefined ? escaping.path : `${top}/${escaping.path}`;
      throw new ArchiveError(
        `The link ${printable(raw)} points outside the archive (${printable(escaping.target)})`,
        raw,
      );
    }
    // An archive of nothing (an empty gzip, a zip of folders) would deploy an empty release.
    if (this.files === 0) throw new ArchiveError('The archive holds no files');
    const root = this.root;
    if (root === undefined) return undefined;
    for (const [entry, target] of this.links) {
      const where = path.join(root, entry);
      await fs.mkdir(path.dirname(where), { recursive: true });
      await fs.symlink(target, where);
    }
    return top === undefined ? root : path.join(root, top);
  }
}

/** Extracts a .tar.gz or .zip into `dest`, refusing anything that could write or point outside it. */
export async function extractArchive(options: ExtractOptions): Promise<ExtractResult> {
  const dest = path.resolve(options.dest);
  if (await exists(dest)) throw new ArchiveError(`The destination ${dest} already exists`);
  const format = await detectFormat(options.file);
  // Beside dest, so the final rename stays on one file system; 0700 until it is complete.
  const root = await fs.mkdtemp(path.join(path.dirname(dest), `.${path.basename(dest)}.extract-`));
  try {
    const extraction = new Extraction(root, options);
    const tree = (await readArchive(format, extraction, options)) as string;
    await fs.rename(tree, dest);
    // Its owner's alone: a release is no other account's to read (issue 24).
    await fs.chmod(dest, 0o700);
    return { files: extraction.files, bytes: extraction.bytes };
  } finally {
    await fs.rm(root, { recursive: true, force: true });
  }
}

/**
 * Reads an archive through exactly as extractArchive does, writing nothing: the same refusals (format,
 * truncation, every entry, the limits, no files), so an upload can be answered 422 before it is kept.
 */
export async function checkArchive(options: Omit<ExtractOptions, 'dest'>): Promise<ExtractResult> {
  const format = await detectFormat(options.file);
  const extraction = new Extraction(undefined, options);
  await readArchive(format, extraction, options);
  return { files: extraction.files, bytes: extraction.bytes };
}

/** Every entry into `extraction`, then its links; a stream's failure as the ArchiveError it means. */
async function readArchive(
  format: 'tar.gz' | 'zip',
  extraction: Extraction,
  options: Omit<ExtractOptions, 'dest'>,
): Promise<string | undefined> {
  try {
    if (format === 'tar.gz') await readTarGz(options.file, extraction, options);
    else await readZip(options.file, extraction, options.maxEntries);
    return await extraction.finish();
  } catch (error) {
    if (error instanceof ArchiveError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'Z_BUF_ERROR' || code === 'ERR_STREAM_PREMATURE_CLOSE') {
      throw new ArchiveError(`The archive is truncated: ${(error as Error).message}`);
    }
    if (code === 'Z_DATA_ERROR')
      throw new ArchiveError(`The archive is corrupt: ${(error as Error).message}`);
    throw error;
  }
}

async function exists(file: string): Promise<boolean> {
  return fs.lstat(file).then(
    () => true,
    () => false,
  );
}

async function detectFormat(file: string): Promise<'tar.gz' | 'zip'> {
  const handle = await fs.open(file, 'r');
  try {
    const magic = Buffer.alloc(4);
    const { bytesRead } = await handle.read(magic, 0, 4, 0);
    if (bytesRead === 0) throw new ArchiveError('The file is empty; expected a .tar.gz or .zip archive');
    if (bytesRead >= 2 && magic[0] === 0x1f && magic[1] === 0x8b) return 'tar.gz';
    const signature = bytesRead === 4 ? magic.readUInt32LE(0) : 0;
    // A local file header, or the end record alone (an empty zip).
    if (signature === 0x04034b50 || signature === 0x06054b50) return 'zip';
    const ustar = Buffer.alloc(5);
    await handle.read(ustar, 0, 5, 257);
    if (ustar.toString('latin1') === 'ustar') {
      throw new ArchiveError('The file is an uncompressed tar; gzip it (tar -czf) or send a .zip archive');
    }
  } finally {
    await handle.close();
  }
  throw new ArchiveError('The file is neither a .tar.gz nor a .zip archive');
}

// ---------------------------------------------------------------------------------------------------
// tar (ustar, pax and GNU long names) over gunzip

/** Reads exact byte counts from a stream, refusing to pull more than `limit` bytes in total. */
class StreamReader {
  private readonly iterator: AsyncIterator<Buffer>;
  private buffered: Buffer = Buffer.alloc(0);
  private total = 0;

  constructor(
    private readonly stream: Readable,
    private readonly limit: number,
  ) {
    this.iterator = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  }

  private async fill(wanted: number): Promise<void> {
    while (this.buffered.length < wanted) {
      const next = await this.iterator.next();
      if (next.done) return;
      this.total += next.value.length;
      if (this.total > this.limit) throw new ArchiveError('The archive inflates beyond its size limit');
      this.buffered = this.buffered.length === 0 ? next.value : Buffer.concat([this.buffered, next.value]);
    }
  }

  /** Exactly `count` bytes, or undefined at the end of the stream. */
  async read(count: number): Promise<Buffer | undefined> {
    await this.fill(count);
    if (this.buffered.length === 0) return undefined;
    if (this.buffered.length < count) throw new ArchiveError('The archive is truncated');
    const out = this.buffered.subarray(0, count);
    this.buffered = this.buffered.subarray(count);
    return out;
  }

  /** `count` bytes as a sequence of chunks, without holding them all. */
  async *chunks(count: number): AsyncGenerator<Buffer> {
    let left = count;
    while (left > 0) {
      if (this.buffered.length === 0) await this.fill(1);
      if (this.buffered.length === 0) throw new ArchiveError('The archive is truncated');
      const take = Math.min(left, this.buffered.length);
      yield this.buffered.subarray(0, take);
      this.buffered = this.buffered.subarray(take);
      left -= take;
    }
  }

  async skip(count: number): Promise<void> {
    // Drain without holding: the data of an entry already refused or ignored.
    for await (const chunk of this.chunks(count)) void chunk;
  }

  close(): void {
    this.stream.destroy();
  }
}

const BLOCK = 512;

function field(header: Buffer, offset: number, length: number): string {
  const slice = header.subarray(offset, offset + length);
  const end = slice.indexOf(0);
  return slice.subarray(0, end === -1 ? length : end).toString('utf8');
}

function numeric(header: Buffer, offset: number, length: number): number {
  const first = header[offset] as number;
  if (first & 0x80) {
    // GNU base-256, for sizes beyond 8 GiB; a negative number (0xff) is never a valid size.
    if (first === 0xff) return Number.NaN;
    let value = first & 0x7f;
    for (let i = 1; i < length; i++) value = value * 256 + (header[offset + i] as number);
    return value;
  }
  const text = field(header, offset, length).trim();
  return text === '' ? 0 : /^[0-7]+$/.test(text) ? parseInt(text, 8) : Number.NaN;
}

function checksumMatches(header: Buffer): boolean {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (header[i] as number);
  return numeric(header, 148, 8) === sum;
}

/** pax records: `<length> <key>=<value>\n`. */
function parsePax(data: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let at = 0;
  while (at < data.length) {
    const space = data.indexOf(0x20, at);
    const length = space === -1 ? Number.NaN : Number(data.subarray(at, space).toString('ascii'));
    if (!Number.isSafeInteger(length) || length <= 0 || at + length > data.length) {
      throw new ArchiveError('The archive has a malformed pax header');
    }
    const record = data.subarray(space + 1, at + length - 1).toString('utf8');
    const equals = record.indexOf('=');
    if (equals > 0) records.set(record.slice(0, equals), record.slice(equals + 1));
    at += length;
  }
  return records;
}

async function readTarGz(
  file: string,
  extraction: Extraction,
  options: Omit<ExtractOptions, 'dest'>,
): Promise<void> {
  const compressed = createReadStream(file);
  const gunzip = zlib.createGunzip();
  // pipe() does not carry a read error on: without this a failing read would wait forever.
  compressed.on('error', (error) => gunzip.destroy(error));
  compressed.pipe(gunzip);
  // Headers and padding are bounded by the entry limit, file data by maxBytes: beyond that it is a bomb.
  const limit = options.maxBytes + (options.maxEntries * 4 + 16) * BLOCK * 2 + MAX_METADATA_BYTES;
  const reader = new StreamReader(gunzip, limit);
  let metadataBytes = 0;
  let longName: string | undefined;
  let longLink: string | undefined;
  let pax = new Map<string, string>();
  const readMetadata = async (size: number): Promise<Buffer> => {
    metadataBytes += size;
    if (metadataBytes > MAX_METADATA_BYTES)
      throw new ArchiveError('The archive has too much header metadata');
    const data = (await reader.read(size)) ?? Buffer.alloc(0);
    await reader.skip(padding(size));
    return data;
  };
  let first = true;
  try {
    for (;;) {
      // What a gzip holds must be a tar from its first block on (a gzipped zip or text is not one).
      const header = await reader.read(BLOCK).catch((error: unknown) => {
        if (first && error instanceof ArchiveError && error.message === 'The archive is truncated')
          throw new ArchiveError(
            'The gzip file does not hold a tar archive (it holds less than one tar block)',
          );
        throw error;
      });
      // The end: a zero block (or, leniently, the end of the stream).
      if (header === undefined || header.every((byte) => byte === 0)) return;
      if (!checksumMatches(header))
        throw new ArchiveError(
          first
            ? 'The gzip file does not hold a tar archive (its first block is no tar header)'
            : 'The archive is corrupt (a tar header checksum fails)',
        );
      first = false;
      const type = String.fromCharCode(header[156] as number);
      const size = numeric(header, 124, 12);
      if (!Number.isSafeInteger(size) || size < 0)
        throw new ArchiveError('The archive has an invalid entry size');
      if (type === 'x' || type === 'g' || type === 'L' || type === 'K') {
        const data = await readMetadata(size);
        // A global header (git archive's commit id) changes nothing we keep.
        if (type === 'x') pax = parsePax(data);
        if (type === 'L') longName = data.toString('utf8').replace(/\0+$/, '');
        if (type === 'K') longLink = data.toString('utf8').replace(/\0+$/, '');
        continue;
      }
      const prefix = field(header, 257, 6).startsWith('ustar') ? field(header, 345, 155) : '';
      const plainName = prefix ? `${prefix}/${field(header, 0, 100)}` : field(header, 0, 100);
      const name = pax.get('path') ?? longName ?? plainName;
      const linkName = pax.get('linkpath') ?? longLink ?? field(header, 157, 100);
      const paxSize = pax.get('size');
      const dataSize = paxSize !== undefined && /^\d+$/.test(paxSize) ? Number(paxSize) : size;
      pax = new Map();
      longName = undefined;
      longLink = undefined;
      const mode = numeric(header, 100, 8) || 0o644;

      if (type === '0' || type === '\0' || type === '7') {
        // Old tars mark directories by a trailing slash alone.
        if (name.endsWith('/')) await extraction.directory(name);
        else await extraction.file(name, mode, dataSize, reader.chunks(dataSize));
      } else if (type === '5') {
        await extraction.directory(name);
        await reader.skip(dataSize);
      } else if (type === '2') {
        extraction.symlink(name, linkName);
        await reader.skip(dataSize);
      } else if (type === '1') {
        await extraction.hardLink(name, linkName);
        await reader.skip(dataSize);
      } else if (type === '3' || type === '4' || type === '6') {
        const what = type === '6' ? 'a fifo' : type === '3' ? 'a character device' : 'a block device';
        throw new ArchiveError(`The entry ${printable(name)} is ${what}`, name);
      } else {
        throw new ArchiveError(
          `The entry ${printable(name)} has an unsupported type (${JSON.stringify(type)})`,
          name,
        );
      }
      await reader.skip(padding(dataSize));
    }
  } finally {
    reader.close();
    compressed.destroy();
  }
}

const padding = (size: number) => (BLOCK - (size % BLOCK)) % BLOCK;

// ---------------------------------------------------------------------------------------------------
// zip: the central directory is the truth; each entry's data is read from its local header on

interface ZipEntry {
  name: string;
  kind: 'file' | 'dir' | 'link';
  mode: number;
  method: number;
  crc: number;
  compressedSize: number;
  size: number;
  localOffset: number;
}

const UNIX_TYPE_MASK = 0o170000;

async function readZip(file: string, extraction: Extraction, maxEntries: number): Promise<void> {
  const handle = await fs.open(file, 'r');
  try {
    const { size: fileSize } = await handle.stat();
    const entries = await centralDirectory(handle, fileSize, maxEntries);
    for (const entry of entries) {
      if (entry.kind === 'dir') {
        await extraction.directory(entry.name);
        continue;
      }
      const dataStart = await localDataOffset(handle, entry, fileSize);
      if (entry.kind === 'link') {
        if (entry.size > MAX_LINK_TARGET_BYTES) {
          throw new ArchiveError(`The link ${printable(entry.name)} has an oversized target`, entry.name);
        }
        const chunks: Buffer[] = [];
        for await (const chunk of zipData(file, entry, dataStart)) chunks.push(chunk);
        extraction.symlink(entry.name, Buffer.concat(chunks).toString('utf8'));
      } else {
        await extraction.file(entry.name, entry.mode, entry.size, zipData(file, entry, dataStart));
      }
    }
  } finally {
    await handle.close();
  }
}

async function readAt(handle: fs.FileHandle, position: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  const { bytesRead } = await handle.read(buffer, 0, length, position);
  if (bytesRead !== length) throw new ArchiveError('The zip archive is truncated');
  return buffer;
}

async function centralDirectory(
  handle: fs.FileHandle,
  fileSize: number,
  maxEntries: number,
): Promise<ZipEntry[]> {
  // The end record is in the last 22 bytes plus a comment of at most 65535.
  const tailLength = Math.min(fileSize, 22 + 0xffff);
  const tail = await readAt(handle, fileSize - tailLength, tailLength);
  let end = -1;
  for (let i = tail.length - 22; i >= 0; i--) {
    if (tail.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end === -1) throw new ArchiveError('The zip archive has no central directory');
  if (tail.readUInt16LE(end + 4) !== 0 || tail.readUInt16LE(end + 6) !== 0) {
    throw new ArchiveError('Multi-part zip archives are not supported');
  }
  let count = tail.readUInt16LE(end + 10);
  let directorySize = tail.readUInt32LE(end + 12);
  let directoryOffset = tail.readUInt32LE(end + 16);
  if (count === 0xffff || directorySize === 0xffffffff || directoryOffset === 0xffffffff) {
    const locatorAt = fileSize - tailLength + end - 20;
    const locator = locatorAt >= 0 ? await readAt(handle, locatorAt, 20) : undefined;
    if (!locator || locator.readUInt32LE(0) !== 0x07064b50)
      throw new ArchiveError('The zip64 end record is missing');
    const zip64End = await readAt(handle, Number(locator.readBigUInt64LE(8)), 56);
    if (zip64End.readUInt32LE(0) !== 0x06064b50) throw new ArchiveError('The zip64 end record is corrupt');
    count = Number(zip64End.readBigUInt64LE(32));
    directorySize = Number(zip64End.readBigUInt64LE(40));
    directoryOffset = Number(zip64End.readBigUInt64LE(48));
  }
  // Refused before anything is read or written.
  if (count > maxEntries) {
    throw new ArchiveError(`The archive has more than ${maxEntries} entries`);
  }
  if (directoryOffset + directorySize > fileSize)
    throw new ArchiveError('The zip central directory is corrupt');
  const directory = await readAt(handle, directoryOffset, directorySize);
  const entries: ZipEntry[] = [];
  let at = 0;
  for (let index = 0; index < count; index++) {
    if (at + 46 > directory.length || directory.readUInt32LE(at) !== 0x02014b50) {
      throw new ArchiveError('The zip central directory is corrupt');
    }
    const madeBy = directory.readUInt16LE(at + 4) >> 8;
    const flags = directory.readUInt16LE(at + 8);
    const method = directory.readUInt16LE(at + 10);
    const nameLength = directory.readUInt16LE(at + 28);
    const extraLength = directory.readUInt16LE(at + 30);
    const commentLength = directory.readUInt16LE(at + 32);
    const external = directory.readUInt32LE(at + 38);
    const nameStart = at + 46;
    const rawName = directory
      .subarray(nameStart, nameStart + nameLength)
      .toString(flags & 0x800 ? 'utf8' : 'latin1');
    // Windows tools write backslashes; on Linux they would be part of one odd name.
    const name = rawName.replace(/\\/g, '/');
    const extra = directory.subarray(nameStart + nameLength, nameStart + nameLength + extraLength);
    let size = directory.readUInt32LE(at + 24);
    let compressedSize = directory.readUInt32LE(at + 20);
    let localOffset = directory.readUInt32LE(at + 42);
    if (size === 0xffffffff || compressedSize === 0xffffffff || localOffset === 0xffffffff) {
      const zip64 = zip64Extra(extra);
      const take = () => {
        const value = zip64.shift();
        if (value === undefined)
          throw new ArchiveError(`The entry ${printable(name)} lacks its zip64 sizes`, name);
        return value;
      };
      if (size === 0xffffffff) size = take();
      if (compressedSize === 0xffffffff) compressedSize = take();
      if (localOffset === 0xffffffff) localOffset = take();
    }
    if (flags & 0x1) throw new ArchiveError(`The entry ${printable(name)} is encrypted`, name);
    // Unix hosts (3) and macOS (19) keep the file type in the high half of the external attributes.
    const unixMode = madeBy === 3 || madeBy === 19 ? external >>> 16 : 0;
    const type = unixMode & UNIX_TYPE_MASK;
    let kind: ZipEntry['kind'];
    if (type === 0o120000) kind = 'link';
    else if (type === 0o040000 || name.endsWith('/') || (unixMode === 0 && external & 0x10)) kind = 'dir';
    else if (type === 0o100000 || type === 0) kind = 'file';
    else throw new ArchiveError(`The entry ${printable(name)} is a device, fifo or socket`, name);
    if (kind !== 'dir' && method !== 0 && method !== 8) {
      throw new ArchiveError(
        `The entry ${printable(name)} uses an unsupported compression method (${method})`,
        name,
      );
    }
    const crc = directory.readUInt32LE(at + 16);
    entries.push({ name, kind, mode: unixMode & 0o777, method, crc, compressedSize, size, localOffset });
    at = nameStart + nameLength + extraLength + commentLength;
  }
  return entries;
}

/** The 64-bit values of a zip64 extra field (id 1), in the order the spec gives them. */
function zip64Extra(extra: Buffer): number[] {
  for (let at = 0; at + 4 <= extra.length;) {
    const id = extra.readUInt16LE(at);
    const length = extra.readUInt16LE(at + 2);
    if (id === 1) {
      const values: number[] = [];
      for (let i = 0; i + 8 <= length && at + 4 + i + 8 <= extra.length; i += 8) {
        values.push(Number(extra.readBigUInt64LE(at + 4 + i)));
      }
      return values;
    }
    at += 4 + length;
  }
  return [];
}

async function localDataOffset(handle: fs.FileHandle, entry: ZipEntry, fileSize: number): Promise<number> {
  const header = await readAt(handle, entry.localOffset, 30);
  if (header.readUInt32LE(0) !== 0x04034b50) {
    throw new ArchiveError(`The entry ${printable(entry.name)} has no local header`, entry.name);
  }
  const start = entry.localOffset + 30 + header.readUInt16LE(26) + header.readUInt16LE(28);
  if (start + entry.compressedSize > fileSize) {
    throw new ArchiveError(`The entry ${printable(entry.name)} is truncated`, entry.name);
  }
  return start;
}

/**
 * An entry's inflated bytes. The caller stops at the declared size (a bomb's output is cut there), and
 * the CRC is checked at the end, so a corrupted or doctored entry is refused rather than half-kept.
 */
async function* zipData(file: string, entry: ZipEntry, start: number): AsyncGenerator<Buffer> {
  let crc = 0;
  let produced = 0;
  if (entry.compressedSize > 0) {
    const raw = createReadStream(file, { start, end: start + entry.compressedSize - 1 });
    const inflate = entry.method === 8 ? zlib.createInflateRaw() : undefined;
    // pipe() does not carry a read error on: without this a failing read would wait forever.
    if (inflate) raw.on('error', (error) => inflate.destroy(error));
    const stream = inflate ? raw.pipe(inflate) : raw;
    try {
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        produced += chunk.length;
        // Checked here too, so a link target (read whole) is bounded as well.
        if (produced > entry.size) {
          throw new ArchiveError(`The entry ${printable(entry.name)} is larger than it declares`, entry.name);
        }
        crc = zlib.crc32(chunk, crc);
        yield chunk;
      }
    } finally {
      raw.destroy();
      inflate?.destroy();
    }
  }
  if (produced === entry.size && crc !== entry.crc) {
    throw new ArchiveError(`The entry ${printable(entry.name)} fails its CRC check`, entry.name);
  }
}

// ---------------------------------------------------------------------------------------------------

/**
 * Packs a release directory into a .tar.gz (the source as fetched, for download). Our own paths only,
 * absolute and in `--opt=value` form, so nothing can be read as an option; links are stored, not
 * followed; owners are numeric zeros so no account names leak. Written beside `outFile`, then renamed.
 */
export async function packDirectory(dir: string, outFile: string): Promise<void> {
  const source = path.resolve(dir);
  const out = path.resolve(outFile);
  const partial = `${out}.partial-${process.pid}-${Date.now()}`;
  try {
    await execFileAsync(
      'tar',
      [
        '--create',
        '--gzip',
        '--format=pax',
        '--sort=name',
        '--numeric-owner',
        '--owner=0',
        '--group=0',
        `--file=${partial}`,
        `--directory=${source}`,
        '.',
      ],
      { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C' }, maxBuffer: 1024 * 1024 },
    );
    await fs.rename(partial, out);
  } catch (error) {
    await fs.rm(partial, { force: true });
    const stderr = (error as { stderr?: string }).stderr;
    throw new Error(`Packing ${source} failed${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`, {
      cause: error,
    });
  }
}
