// docs/architecture.md, "Files over 500 lines", stays true: every source file over 500 lines is listed
// there with its reason, every file listed exists and is still that long, and each count is current
// within a tenth (an edit of a few lines does not make the page wrong; a split or a doubling does).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const relative = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sourceFiles(relative);
    return entry.name.endsWith('.ts') ? [relative] : [];
  });
}

const linesOf = (file: string): number =>
  fs.readFileSync(path.join(ROOT, file), 'utf8').split('\n').length - 1;

describe('docs/architecture.md, files over 500 lines', () => {
  const page = fs.readFileSync(path.join(ROOT, 'docs/architecture.md'), 'utf8');
  const section = page.slice(
    page.indexOf('## Files over 500 lines'),
    page.indexOf('\n## ', page.indexOf('## Files over 500 lines') + 5),
  );
  const listed = new Map(
    [...section.matchAll(/^- `([^`]+)` \((\d+)\): \S/gm)].map((m) => [m[1]!, Number(m[2])]),
  );

  it('lists every source file over 500 lines', () => {
    const long = sourceFiles('src').filter((file) => linesOf(file) > 500);
    expect(long.filter((file) => !listed.has(file))).toEqual([]);
  });

  it('names only files that exist, are over 500 lines, and counts them within a tenth', () => {
    expect(listed.size).toBeGreaterThan(0);
    for (const [file, count] of listed) {
      expect(fs.existsSync(path.join(ROOT, file)), file).toBe(true);
      const actual = linesOf(file);
      expect(actual, file).toBeGreaterThan(500);
      expect(
        Math.abs(actual - count) / actual,
        `${file}: listed ${count}, has ${actual}`,
      ).toBeLessThanOrEqual(0.1);
    }
  });
});
