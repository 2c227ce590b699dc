// Packing a source directory for `berth deploy --source`: the files git would commit (or, outside a git
// work tree, those no .gitignore excludes), minus the patterns of the directory's .berthignore, never
// `.git/`; streamed through `tar czf -`, which reads the names on its stdin (never as options).
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';

interface Rule {
  /** The directory (relative, '' for the root) whose ignore file holds the pattern. */
  base: string;
  negate: boolean;
  dirOnly: boolean;
  regex: RegExp;
}

/** A gitignore glob as a regular expression: `*`, `?`, `[…]`, `**` and `\` escapes. */
function globSource(glob: string): string {
  let out = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      const before = i === 0 || glob[i - 1] === '/';
      const after = glob[i + 2];
      if (before && after === '/') {
        out += '(?:.*/)?'; // `**/`: any number of directories, none included
        i += 2;
        continue;
      }
      if (before && after === undefined) {
        out += '.*'; // a trailing `/**`: everything inside
        i += 1;
        continue;
      }
      out += '[^/]*'; // elsewhere `**` is two `*`
      i += 1;
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else if (c === '\\' && i + 1 < glob.length) out += escapeRegex(glob[++i]!);
    else if (c === '[') {
      const end = glob.indexOf(']', i + 2);
      if (end < 0) {
        out += '\\[';
        continue;
      }
      let body = glob.slice(i + 1, end);
      if (body.startsWith('!')) body = '^' + body.slice(1);
      out += `[${body.replace(/\\/g, '\\\\')}]`;
      i = end;
    } else out += escapeRegex(c);
  }
  return out;
}

const escapeRegex = (c: string) => c.replace(/[.+^${}()|[\]\\/*?]/g, '\\$&');

/** The rules of one ignore file (gitignore syntax) found in directory `base`. */
export function parseIgnore(text: string, base = ''): Rule[] {
  const rules: Rule[] = [];
  for (const raw of text.split(/\r?\n/)) {
    let line = raw.replace(/(?<!\\)\s+$/, '');
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    if (negate) line = line.slice(1);
    const dirOnly = line.endsWith('/');
    if (dirOnly) line = line.replace(/\/+$/, '');
    if (line === '') continue;
    // A slash other than a trailing one anchors the pattern to its file's directory.
    const anchored = line.includes('/');
    if (line.startsWith('/')) line = line.slice(1);
    const source = globSource(line);
    rules.push({
      base,
      negate,
      dirOnly,
      regex: new RegExp(anchored ? `^${source}$` : `^(?:.*/)?${source}$`),
    });
  }
  return rules;
}

/** Whether the last rule matching `relative` (a file, or a directory when `isDir`) excludes it. */
export function ignoredBy(rules: Rule[], relative: string, isDir: boolean): boolean {
  let ignored = false;
  for (const rule of rules) {
    if (rule.dirOnly && !isDir) continue;
    let local = relative;
    if (rule.base !== '') {
      if (!relative.startsWith(rule.base + '/')) continue;
      local = relative.slice(rule.base.length + 1);
    }
    if (rule.regex.test(local)) ignored = !rule.negate;
  }
  return ignored;
}

/** Excluded by the rules, itself or through a directory above it (which git never looks into). */
function excluded(rules: Rule[], relative: string): boolean {
  const parts = relative.split('/');
  for (let i = 1; i < parts.length; i++) if (ignoredBy(rules, parts.slice(0, i).join('/'), true)) return true;
  return ignoredBy(rules, relative, false);
}

function readRules(file: string, base: string): Rule[] {
  try {
    return parseIgnore(fs.readFileSync(file, 'utf8'), base);
  } catch {
    return [];
  }
}

export interface SourceList {
  /** Paths relative to the directory, sorted: regular files and symbolic links. */
  files: string[];
  /** Their total size before compression. */
  bytes: number;
  /** Listed by `git ls-files` (true) or by walking the directory with its .gitignore files. */
  git: boolean;
  /** Whether the directory has a .berthignore (said in the progress line only when it does). */
  berthignore: boolean;
}

/** The files of `dir` that git would track or list as untracked, or undefined outside a work tree. */
function gitFiles(dir: string): string[] | undefined {
  const inside = spawnSync('git', ['rev-parse', '--is-inside-work-tree'], { cwd: dir, encoding: 'utf8' });
  if (inside.status !== 0 || inside.stdout.trim() !== 'true') return undefined;
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: dir,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (listed.status !== 0) return undefined;
  return [...new Set(listed.stdout.split('\0').filter((f) => f !== ''))];
}

/** Walks `dir`, each directory's .gitignore applying below it; `.git` is never entered. */
function walk(dir: string): string[] {
  const files: string[] = [];
  const visit = (relative: string, inherited: Rule[]) => {
    const full = relative === '' ? dir : path.join(dir, relative);
    const rules = [...inherited, ...readRules(path.join(full, '.gitignore'), relative)];
    for (const entry of fs.readdirSync(full, { withFileTypes: true })) {
      if (entry.name === '.git') continue;
      const child = relative === '' ? entry.name : `${relative}/${entry.name}`;
      if (entry.isDirectory()) {
        if (!ignoredBy(rules, child, true)) visit(child, rules);
      } else if ((entry.isFile() || entry.isSymbolicLink()) && !ignoredBy(rules, child, false))
        files.push(child);
    }
  };
  visit('', []);
  return files;
}

/** What `deploy --source DIR` sends. */
export function listSource(dir: string): SourceList {
  const listed = gitFiles(dir);
  const berthignoreFile = path.join(dir, '.berthignore');
  const berthignore = readRules(berthignoreFile, '');
  const files: string[] = [];
  let bytes = 0;
  for (const file of (listed ?? walk(dir)).sort()) {
    // Never git's own files, whatever an ignore file says (a `.git` file marks a submodule).
    if (file.split('/').includes('.git')) continue;
    if (excluded(berthignore, file)) continue;
    // git lists a tracked file deleted since, and a submodule as one path: only files and links go.
    const stat = fs.lstatSync(path.join(dir, file), { throwIfNoEntry: false });
    if (!stat || !(stat.isFile() || stat.isSymbolicLink())) continue;
    files.push(file);
    bytes += stat.size;
  }
  return { files, bytes, git: listed !== undefined, berthignore: fs.existsSync(berthignoreFile) };
}

export interface Packing {
  /** The tar.gz as it is written. */
  stream: Readable;
  /** tar's exit: its code and what it said on stderr. */
  done: Promise<{ code: number; stderr: string }>;
  /** The exit if tar has ended already (before the client stopped reading, it ended by itself). */
  ended(): { code: number; stderr: string } | undefined;
}

/**
 * `tar czf -` of `files` in `dir`: run in that directory, the names given NUL-separated on stdin and
 * taken verbatim (a name starting with `-` is a file, never an option), directories not recursed into.
 */
export function packDirectory(dir: string, files: string[]): Packing {
  const tar = spawn(
    'tar',
    ['--create', '--gzip', '--file=-', '--no-recursion', '--null', '--verbatim-files-from', '--files-from=-'],
    { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  let stderr = '';
  tar.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exit: { code: number; stderr: string } | undefined;
  const done = new Promise<{ code: number; stderr: string }>((resolve) => {
    tar.on('error', (error) => resolve((exit = { code: -1, stderr: error.message })));
    tar.on('close', (code) => resolve((exit = { code: code ?? -1, stderr })));
  });
  tar.stdin.on('error', () => undefined); // tar gone early: its exit says why
  tar.stdin.end(files.map((f) => `${f}\0`).join(''));
  return { stream: tar.stdout, done, ended: () => exit };
}

export function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KB', 'MB', 'GB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
