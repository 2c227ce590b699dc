// The client's other APIs with the credentials of a profile: the tools key (balance, merge, a PDF
// from Markdown through Chromium, a screenshot, an office document through LibreOffice) and the
// managed-database API over /1.3 (list, show with the password masked, migration status), and object
// storage.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { imageSize, makePdf, pdfInfo, pdfText } from '../tools/helpers.js';
import { ensureBuilt, Shell, startBerth } from './helpers.js';

let t: TestApp;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  let url: string;
  ({ t, url } = await startBerth({ env: { BERTH_TOOLS_MONTHLY_CREDITS: '10' } }));
  shell = new Shell();
  const login = await shell.run(
    [
      'login',
      '--url',
      url,
      '--token',
      t.user.api_token,
      '--tools-key',
      t.user.tools_api_key,
      '--db-user',
      t.user.db_api_username,
      '--db-password',
      '-',
    ],
    { input: `${t.user.db_api_password}\n` },
  );
  expect(login.code, login.stderr).toBe(0);
  expect(login.stdout).toContain('token, tools_key, db_api');
  expect(login.stdout).not.toContain(t.user.db_api_password);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await t?.close();
});

describe('tools', () => {
  it('merges PDFs in order, converts Markdown to PDF, and the balance counts both', async () => {
    shell.file('a.pdf', await makePdf(1, 'Alpha'));
    shell.file('b.pdf', await makePdf(2, 'Beta'));
    const merged = await shell.run(['tools', 'merge', 'a.pdf', 'b.pdf', '-o', 'merged.pdf']);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toMatch(/^Wrote merged\.pdf \(\d+ bytes; 9 credits left\)\.\n$/);
    const bytes = fs.readFileSync(`${shell.home}/merged.pdf`);
    expect(pdfInfo(bytes).pages).toBe(3);
    expect(pdfText(bytes).indexOf('Alpha page 1')).toBeLessThan(pdfText(bytes).indexOf('Beta page 1'));

    shell.file('notes.md', '# Release notes\n\nThe **client** works.\n');
    const pdf = await shell.run(
      ['tools', 'pdf', '--markdown', 'notes.md', '-o', 'notes.pdf', '--output', 'json'],
      {
        timeoutMs: 120_000,
      },
    );
    expect(pdf.code, pdf.stderr).toBe(0);
    expect(JSON.parse(pdf.stdout)).toMatchObject({ file: 'notes.pdf', credits_remaining: 8 });
    expect(pdfText(fs.readFileSync(`${shell.home}/notes.pdf`))).toContain('Release notes');

    const balance = await shell.run(['tools', 'balance', '--output', 'json']);
    expect(JSON.parse(balance.stdout)).toMatchObject({ allowance: 10, used: 2, remaining: 8 });

    const wrong = await shell.run(['tools', 'pdf', '--url', 'http://127.0.0.1:1/', '-o', 'x.pdf']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^berth: .+\(422\) — url: /);
    expect(fs.existsSync(`${shell.home}/x.pdf`)).toBe(false);
  }, 180_000);
});

/** A minimal Word document (the three parts Word and LibreOffice need), zipped by `zip`. */
function writeDocx(dir: string, file: string, paragraphs: string[]): void {
  const parts: Record<string, string> = {
    '[Content_Types].xml':
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>' +
      '<Default Extension="xml" ContentType="application/xml"/>' +
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>' +
      '</Types>',
    '_rels/.rels':
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
      '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>' +
      '</Relationships>',
    'word/document.xml':
      '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>' +
      '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>' +
      paragraphs.map((p) => `<w:p><w:r><w:t>${p}</w:t></w:r></w:p>`).join('') +
      '</w:body></w:document>',
  };
  const work = fs.mkdtempSync(path.join(dir, 'docx-'));
  for (const [name, content] of Object.entries(parts)) {
    fs.mkdirSync(path.dirname(path.join(work, name)), { recursive: true });
    fs.writeFileSync(path.join(work, name), content);
  }
  execFileSync('zip', ['-q', '-X', '-r', path.join(dir, file), ...Object.keys(parts)], { cwd: work });
  fs.rmSync(work, { recursive: true, force: true });
}

interface Balance {
  allowance: number;
  used: number;
  remaining: number;
}
const balanceOf = async () =>
  JSON.parse((await shell.run(['tools', 'balance', '--output', 'json'])).stdout) as Balance;

describe('tools: screenshots and office documents', () => {
  it('writes a PNG of the size asked for, converts a Word document, and each costs a credit', async () => {
    const before = await balanceOf();
    shell.file(
      'page.html',
      '<html><body style="margin:0;background:#1d6f42"><h1 style="color:white">Berth screenshot</h1></body></html>',
    );
    const shot = await shell.run(
      ['tools', 'screenshot', '--html', 'page.html', '--width', '640', '--height', '480', '-o', 'page.png'],
      { timeoutMs: 120_000 },
    );
    expect(shot.code, shot.stderr).toBe(0);
    expect(shot.stdout).toBe(
      `Wrote page.png (${fs.statSync(`${shell.home}/page.png`).size} bytes; ${before.remaining - 1} credits left).\n`,
    );
    const png = fs.readFileSync(`${shell.home}/page.png`);
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(imageSize(png)).toEqual({ format: 'png', width: 640, height: 480 });
    const bad = await shell.run([
      'tools',
      'screenshot',
      '--html',
      'page.html',
      '--width',
      'wide',
      '-o',
      'x.png',
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--width must be a whole number; got 'wide'");

    writeDocx(shell.home, 'report.docx', ['Quarterly report', 'Revenue grew by twelve percent.']);
    const office = await shell.run(['tools', 'pdf', '--office', 'report.docx', '-o', 'report.pdf'], {
      timeoutMs: 120_000,
    });
    expect(office.code, office.stderr).toBe(0);
    expect(office.stdout).toBe(
      `Wrote report.pdf (${fs.statSync(`${shell.home}/report.pdf`).size} bytes; ${before.remaining - 2} credits left).\n`,
    );
    const pdf = fs.readFileSync(`${shell.home}/report.pdf`);
    expect(pdf.subarray(0, 5).toString()).toBe('%PDF-');
    expect(pdfInfo(pdf).pages).toBe(1);
    expect(pdfText(pdf)).toMatch(/Quarterly report\s+Revenue grew by twelve percent\./);

    expect(await balanceOf()).toMatchObject({
      allowance: before.allowance,
      used: before.used + 2,
      remaining: before.remaining - 2,
    });
    const human = await shell.run(['tools', 'balance']);
    expect(human.stdout).toMatch(
      new RegExp(
        `^${before.remaining - 2} of ${before.allowance} credits left \\(${before.used + 2} used\\); resets \\S+\\.\\n$`,
      ),
    );
  }, 240_000);
});

describe('managed databases and object storage', { timeout: 120_000 }, () => {
  beforeAll(async () => {
    const file = shell.file(
      'team.yaml',
      `apiVersion: v1
kind: Infrastructure
metadata:
  name: acme
  team: acme
spec:
  managed_databases:
    - name: main-db
      type: pg
      plan: 1x1xCPU-2GB-25GB
      zone: de-fra1
  object_storage:
    - name: files
      zone: europe-1
      buckets: [acme-uploads]
`,
    );
    const applied = await shell.run(['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
  });

  it('db list, show and migration-status over /1.3 with the profile’s credential', async () => {
    const list = await shell.run(['db', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+TYPE\s+VERSION\s+PLAN\s+ZONE\s+STATE\s+UUID\n/);
    expect(list.stdout).toMatch(/main-db\s+pg\s+.*1x1xCPU-2GB-25GB\s+de-fra1\s+pending\s+[0-9a-f-]{36}/);
    const services = JSON.parse((await shell.run(['db', 'list', '--json'])).stdout) as Array<{
      uuid: string;
    }>;
    const show = await shell.run(['db', 'show', services[0]!.uuid, '--output', 'json']);
    expect(show.code, show.stderr).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ name: 'main-db', type: 'pg', state: 'pending' });

    const status = await shell.run(['db', 'migration-status', 'main-db', '--output', 'json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'done', databases: [] });

    const missing = await shell.run(['db', 'show', 'nope']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("no managed database 'nope'");

    // Without the credential nor an API token in the profile (the token alone would do:
    // credentials.test.ts), the command says how to add one.
    const bare = new Shell({ BERTH_URL: 'http://127.0.0.1:1' });
    try {
      const run = await bare.run(['db', 'list']);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain('berth login --token T (or --db-user U --db-password P)');
    } finally {
      bare.remove();
    }
  });

  it('storage list and credentials; secrets only when asked', async () => {
    const list = await shell.run(['storage', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/files\s+europe-1\s+\w+\s+acme-uploads/);
    const credentials = await shell.run(['storage', 'credentials', 'files', '--output', 'json']);
    expect(credentials.code, credentials.stderr).toBe(0);
    const view = JSON.parse(credentials.stdout) as {
      endpoint: string;
      users: Array<{ secret_key: string | null }>;
    };
    expect(view.endpoint).toMatch(/^http/);
    for (const user of view.users) expect(user.secret_key === null || user.secret_key === '****').toBe(true);
    // The storage's own endpoint, which names it: the shared one with its uuid as a prefix.
    const shown = await shell.run(['storage', 'credentials', 'files']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(/storage endpoint http:\/\/\S+:\d+\/[0-9a-f-]{36}/);
  });
});
