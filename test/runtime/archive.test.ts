// Uploaded source archives: honest ones unpack (flattened when GitHub-style), hostile ones are refused
// with the entry named, and a refused archive leaves nothing where the release would have been.
// Fixtures are made at test time: honest ones with `tar` and `zip`, hostile ones with python3.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  ArchiveError,
  checkArchive,
  extractArchive,
  packDirectory,
} from '../../src/drivers/runtime/local/archive.js';
import zlib from 'node:zlib';

const run = promisify(execFile);

interface FixtureEntry {
  name: string;
  type: 'file' | 'dir' | 'symlink' | 'hardlink' | 'char' | 'block' | 'fifo';
  data?: string;
  /** A file of this many zero bytes (compresses to almost nothing). */
  zeros?: number;
  linkname?: string;
  mode?: number;
}

// Writes exactly the entries asked for: python's tarfile and zipfile keep names and types as given.
const WRITER = String.raw`
import json, sys, tarfile, zipfile, io
spec = json.loads(sys.stdin.read())
def payload(e):
    return b'\0' * e['zeros'] if 'zeros' in e else e.get('data', '').encode()
if spec['format'] == 'tar':
    kinds = {'file': tarfile.REGTYPE, 'dir': tarfile.DIRTYPE, 'symlink': tarfile.SYMTYPE,
             'hardlink': tarfile.LNKTYPE, 'char': tarfile.CHRTYPE, 'block': tarfile.BLKTYPE,
             'fifo': tarfile.FIFOTYPE}
    with tarfile.open(spec['out'], 'w:gz', format=tarfile.PAX_FORMAT) as tar:
        for e in spec['entries']:
            info = tarfile.TarInfo(e['name'])
            info.type = kinds[e['type']]
            info.mode = e.get('mode', 0o644)
            info.linkname = e.get('linkname', '')
            data = payload(e) if e['type'] == 'file' else b''
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
else:
    unix = {'file': 0o100000, 'dir': 0o040000, 'symlink': 0o120000, 'char': 0o020000,
            'block': 0o060000, 'fifo': 0o010000}
    with zipfile.ZipFile(spec['out'], 'w', zipfile.ZIP_DEFLATED) as z:
        for e in spec['entries']:
            info = zipfile.ZipInfo(e['name'])
            info.create_system = 3
            info.external_attr = (unix[e['type']] | e.get('mode', 0o644)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            data = e['linkname'].encode() if e['type'] == 'symlink' else payload(e)
            z.writestr(info, data)
`;

let work: string;
let dest: string;

beforeEach(async () => {
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'berth-archive-test-'));
  dest = path.join(work, 'release');
});

afterEach(async () => {
  await fs.rm(work, { recursive: true, force: true });
});

async function craft(format: 'tar' | 'zip', entries: FixtureEntry[]): Promise<string> {
  const out = path.join(
    work,
    `crafted-${Math.random().toString(36).slice(2)}.${format === 'tar' ? 'tgz' : 'zip'}`,
  );
  const child = run('python3', ['-c', WRITER]);
  child.child.stdin?.end(JSON.stringify({ format, out, entries }));
  await child;
  return out;
}

const limits = { maxBytes: 10 * 1024 * 1024, maxEntries: 1000 };

/**
 * The refusal, and proof that nothing was left: no dest, no temp directory beside it. checkArchive
 * (the upload's check) refuses it first with the same message, writing nothing at all.
 */
async function expectRefused(file: string, message: RegExp, options = limits): Promise<ArchiveError> {
  const listing = await fs.readdir(work, { recursive: true });
  const checked = await checkArchive({ file, ...options }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(checked).toBeInstanceOf(ArchiveError);
  expect((checked as Error).message).toMatch(message);
  expect(await fs.readdir(work, { recursive: true })).toEqual(listing);
  const error = await extractArchive({ file, dest, ...options }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ArchiveError);
  expect((error as Error).message).toMatch(message);
  await expect(fs.lstat(dest)).rejects.toThrow(/ENOENT/);
  expect((await fs.readdir(work)).filter((name) => name.startsWith('.release'))).toEqual([]);
  return error as ArchiveError;
}

/** Every path under `dir`, with `-> target` for links. */
async function tree(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(dir, { recursive: true, withFileTypes: true })) {
    const full = path.join(entry.parentPath, entry.name);
    const relative = path.relative(dir, full);
    out.push(entry.isSymbolicLink() ? `${relative} -> ${await fs.readlink(full)}` : relative);
  }
  return out.sort();
}

async function honestSource(): Promise<string> {
  const root = path.join(work, 'src', 'app-main');
  await fs.mkdir(path.join(root, 'lib'), { recursive: true });
  await fs.writeFile(path.join(root, 'package.json'), '{"name":"app"}\n');
  await fs.writeFile(path.join(root, 'lib', 'index.js'), 'console.log(1)\n');
  await fs.writeFile(path.join(root, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 });
  await fs.symlink('lib/index.js', path.join(root, 'main.js'));
  return path.join(work, 'src');
}

describe('honest archives', () => {
  it('unpacks a GitHub-style tar.gz, flattening its one top directory', async () => {
    const src = await honestSource();
    const file = path.join(work, 'upload.bin');
    await run('tar', ['-czf', file, '-C', src, 'app-main']);
    const listing = await fs.readdir(work, { recursive: true });
    const checked = await checkArchive({ file, ...limits });
    // The upload's check reads it all and writes nothing.
    expect(await fs.readdir(work, { recursive: true })).toEqual(listing);
    const result = await extractArchive({ file, dest, ...limits });
    expect(checked).toEqual(result);
    expect(await tree(dest)).toEqual([
      'lib',
      'lib/index.js',
      'main.js -> lib/index.js',
      'package.json',
      'run.sh',
    ]);
    expect(result).toEqual({ files: 3, bytes: 15 + 15 + 10 });
    expect((await fs.stat(path.join(dest, 'run.sh'))).mode & 0o777).toBe(0o755);
    expect(await fs.readFile(path.join(dest, 'main.js'), 'utf8')).toBe('console.log(1)\n');
  });

  it('unpacks a zip (format read from the bytes, not the name), flattening too', async () => {
    const src = await honestSource();
    const file = path.join(work, 'upload.tar.gz');
    await run('zip', ['-q', '-r', '-y', file, 'app-main'], { cwd: src });
    const result = await extractArchive({ file, dest, ...limits });
    expect(await tree(dest)).toEqual([
      'lib',
      'lib/index.js',
      'main.js -> lib/index.js',
      'package.json',
      'run.sh',
    ]);
    expect(result.files).toBe(3);
    expect((await fs.stat(path.join(dest, 'run.sh'))).mode & 0o777).toBe(0o755);
  });

  it('reads GNU long names and pax long names (paths over 100 bytes)', async () => {
    const src = await honestSource();
    const deep = path.join('app-main', 'd'.repeat(90), 'e'.repeat(90));
    await fs.mkdir(path.join(src, deep), { recursive: true });
    await fs.writeFile(path.join(src, deep, `${'f'.repeat(120)}.txt`), 'deep\n');
    for (const format of ['gnu', 'pax']) {
      const file = path.join(work, `long-${format}.tgz`);
      await run('tar', [`--format=${format}`, '-czf', file, '-C', src, 'app-main']);
      const target = path.join(work, `release-${format}`);
      await extractArchive({ file, dest: target, ...limits });
      const flattened = path.relative('app-main', deep);
      expect(await fs.readFile(path.join(target, flattened, `${'f'.repeat(120)}.txt`), 'utf8')).toBe(
        'deep\n',
      );
    }
  });

  it('keeps several top-level entries as they are', async () => {
    const src = await honestSource();
    await fs.writeFile(path.join(src, 'README'), 'hi\n');
    const file = path.join(work, 'upload.tgz');
    await run('tar', ['-czf', file, '-C', src, 'app-main', 'README']);
    await extractArchive({ file, dest, ...limits });
    expect(await tree(dest)).toContain('app-main/package.json');
    expect(await tree(dest)).toContain('README');
  });

  it('refuses a file that is neither format, and a corrupt gzip', async () => {
    const text = path.join(work, 'notes.zip');
    await fs.writeFile(text, 'just text');
    await expectRefused(text, /neither a \.tar\.gz nor a \.zip/);
    const corrupt = path.join(work, 'corrupt.tgz');
    await fs.writeFile(
      corrupt,
      Buffer.concat([Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3]), Buffer.alloc(600, 7)]),
    );
    await expectRefused(corrupt, /corrupt|truncated/);
  });

  it('refuses a truncated tar.gz, a gzip without a tar in it, an uncompressed tar and an empty file', async () => {
    const src = await honestSource();
    const whole = path.join(work, 'whole.tgz');
    await fs.writeFile(path.join(src, 'app-main', 'big.txt'), 'some text\n'.repeat(50_000));
    await run('tar', ['-czf', whole, '-C', src, 'app-main']);
    const bytes = await fs.readFile(whole);
    const truncated = path.join(work, 'truncated.tgz');
    await fs.writeFile(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
    await expectRefused(truncated, /^The archive is truncated/);
    const notTar = path.join(work, 'not-tar.tgz');
    await fs.writeFile(notTar, zlib.gzipSync(Buffer.alloc(2048, 'x')));
    await expectRefused(notTar, /^The gzip file does not hold a tar archive/);
    const short = path.join(work, 'short.tgz');
    await fs.writeFile(short, zlib.gzipSync('hello'));
    await expectRefused(short, /^The gzip file does not hold a tar archive/);
    const plain = path.join(work, 'plain.tar');
    await run('tar', ['-cf', plain, '-C', src, 'app-main']);
    await expectRefused(plain, /uncompressed tar; gzip it/);
    const empty = path.join(work, 'empty.tgz');
    await fs.writeFile(empty, '');
    await expectRefused(empty, /^The file is empty/);
  });

  it('refuses an archive that holds no files (an empty gzip, only directories, an empty zip)', async () => {
    const emptyGzip = path.join(work, 'nothing.tgz');
    await fs.writeFile(emptyGzip, zlib.gzipSync(Buffer.alloc(0)));
    await expectRefused(emptyGzip, /^The archive holds no files$/);
    for (const format of ['tar', 'zip'] as const) {
      await expectRefused(await craft(format, [{ name: 'logs/', type: 'dir' }]), /holds no files/);
      await expectRefused(await craft(format, []), /holds no files/);
    }
  });

  it('packDirectory packs a release that extracts to the same tree', async () => {
    const src = await honestSource();
    await fs.writeFile(path.join(src, 'top.txt'), 'top\n');
    const packed = path.join(work, 'source.tar.gz');
    await packDirectory(src, packed);
    const listing = (await run('tar', ['-tzvf', packed])).stdout;
    expect(listing).toMatch(/main\.js -> lib\/index\.js/);
    expect(listing).not.toMatch(/root/);
    await extractArchive({ file: packed, dest, ...limits });
    expect(await tree(dest)).toEqual(await tree(src));
  });
});

describe.each(['tar', 'zip'] as const)('hostile %s archives are refused, naming the entry', (format) => {
  it('an entry that climbs out with ..', async () => {
    const file = await craft(format, [
      { name: 'ok.txt', type: 'file', data: 'ok' },
      { name: 'sub/../../evil', type: 'file', data: 'x' },
    ]);
    const error = await expectRefused(file, /"sub\/\.\.\/\.\.\/evil" leaves the destination/);
    expect(error.entry).toBe('sub/../../evil');
    await expect(fs.lstat(path.join(work, 'evil'))).rejects.toThrow(/ENOENT/);
  });

  it('an absolute path', async () => {
    const file = await craft(format, [{ name: '/tmp/berth-abs-evil', type: 'file', data: 'x' }]);
    await expectRefused(file, /"\/tmp\/berth-abs-evil" has an absolute path/);
    await expect(fs.lstat('/tmp/berth-abs-evil')).rejects.toThrow(/ENOENT/);
  });

  it('a symbolic link to /etc, and one leaving through another link', async () => {
    await expectRefused(
      await craft(format, [{ name: 'app/etc', type: 'symlink', linkname: '/etc' }]),
      /"app\/etc" points outside/,
    );
    await expectRefused(
      await craft(format, [{ name: 'app/up', type: 'symlink', linkname: '../../..' }]),
      /"app\/up" points outside/,
    );
    // `here` -> `.` is harmless, but `here/..` is the parent of the release: lexically inside, really out.
    await expectRefused(
      await craft(format, [
        { name: 'a.txt', type: 'file', data: 'a' },
        { name: 'here', type: 'symlink', linkname: '.' },
        { name: 'sneaky', type: 'symlink', linkname: 'here/../etc' },
      ]),
      /"sneaky" points outside/,
    );
  });

  it('a link that points out only once the top directory is flattened', async () => {
    await expectRefused(
      await craft(format, [
        { name: 'repo-main/a.txt', type: 'file', data: 'a' },
        { name: 'repo-main/other', type: 'symlink', linkname: '../sibling' },
      ]),
      /"repo-main\/other" points outside/,
    );
  });

  it('a file written through an earlier link, and a duplicate path', async () => {
    await expectRefused(
      await craft(format, [
        { name: 'sub/keep.txt', type: 'file', data: 'k' },
        { name: 'd', type: 'symlink', linkname: 'sub' },
        { name: 'd/x', type: 'file', data: 'through' },
      ]),
      /"d\/x" would be written through the link d/,
    );
    await expectRefused(
      await craft(format, [
        { name: 'same.txt', type: 'file', data: 'one' },
        { name: 'same.txt', type: 'file', data: 'two' },
      ]),
      /"same\.txt" appears twice/,
    );
  });

  it('device and fifo entries', async () => {
    await expectRefused(
      await craft(format, [{ name: 'null', type: 'char' }]),
      /"null" is (a character device|a device)/,
    );
    await expectRefused(
      await craft(format, [{ name: 'disk', type: 'block' }]),
      /"disk" is (a block device|a device)/,
    );
    await expectRefused(await craft(format, [{ name: 'pipe', type: 'fifo' }]), /"pipe" is (a fifo|a device)/);
  });

  it('more entries than allowed', async () => {
    const entries = Array.from({ length: 11 }, (_, i): FixtureEntry => ({
      name: `f${i}`,
      type: 'file',
      data: 'x',
    }));
    await expectRefused(await craft(format, entries), /more than 10 entries/, {
      maxBytes: 1000,
      maxEntries: 10,
    });
  });

  it('a bomb: more uncompressed bytes than allowed', async () => {
    const file = await craft(format, [{ name: 'zeros', type: 'file', zeros: 20 * 1024 * 1024 }]);
    expect((await fs.stat(file)).size).toBeLessThan(100 * 1024);
    await expectRefused(file, /more than 1048576 bytes \(at the entry "zeros"\)/, {
      maxBytes: 1024 * 1024,
      maxEntries: 10,
    });
  });
});

describe('tar-only and zip-only tricks', () => {
  it('a hard link to a file outside, or to one the archive does not hold', async () => {
    await expectRefused(
      await craft('tar', [{ name: 'passwd', type: 'hardlink', linkname: '/etc/passwd' }]),
      /"\/etc\/passwd" has an absolute path/,
    );
    await expectRefused(
      await craft('tar', [{ name: 'passwd', type: 'hardlink', linkname: '../../../etc/passwd' }]),
      /leaves the destination/,
    );
    await expectRefused(
      await craft('tar', [{ name: 'x', type: 'hardlink', linkname: 'missing' }]),
      /"x" points at "missing", which is not a file of the archive/,
    );
  });

  it('empty files and directories are kept, in both formats', async () => {
    for (const format of ['tar', 'zip'] as const) {
      const file = await craft(format, [
        { name: 'empty.txt', type: 'file', data: '' },
        { name: 'logs/', type: 'dir' },
      ]);
      const target = path.join(work, `release-${format}`);
      expect(await extractArchive({ file, dest: target, ...limits })).toEqual({ files: 1, bytes: 0 });
      expect(await tree(target)).toEqual(['empty.txt', 'logs']);
    }
  });

  it('a hard link inside the archive is kept', async () => {
    const file = await craft('tar', [
      { name: 'a.txt', type: 'file', data: 'shared' },
      { name: 'b.txt', type: 'hardlink', linkname: 'a.txt' },
    ]);
    expect(await extractArchive({ file, dest, ...limits })).toEqual({ files: 2, bytes: 6 });
    expect(await fs.readFile(path.join(dest, 'b.txt'), 'utf8')).toBe('shared');
  });

  it('a zip entry that inflates beyond the size its header declares is cut off', async () => {
    const file = await craft('zip', [{ name: 'liar', type: 'file', zeros: 5 * 1024 * 1024 }]);
    // Doctor both headers to claim 100 bytes: the central directory (offset 24) and the local one (22).
    const bytes = await fs.readFile(file);
    const central = bytes.indexOf(Buffer.from([0x50, 0x4b, 0x01, 0x02]));
    bytes.writeUInt32LE(100, central + 24);
    bytes.writeUInt32LE(100, 22);
    await fs.writeFile(file, bytes);
    await expectRefused(file, /"liar" is larger than it declares/);
  });
});
