// POST /api/v1/applications/{id}/source reads the archive through before it answers (issue 24): a
// file that is no archive, a truncated one, a gzip without a tar inside, an archive of no files or
// with an entry that climbs out is a 422 naming the problem, and nothing is kept — no file in the
// artifact store, no new source on the application, no deployment. A good archive is 202 as before.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply } from '../infrastructure/helpers.js';

let work: string;
beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upload-check-'));
});
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

/** `tar` run in a fresh directory holding `files`; its output file's bytes. */
function tarOf(files: Record<string, string>, flags = '-czf'): Buffer {
  const dir = fs.mkdtempSync(path.join(work, 'src-'));
  fs.mkdirSync(path.join(dir, 'app'));
  for (const [name, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, 'app', name), content);
  const out = path.join(dir, 'out');
  execFileSync('tar', [flags, out, '-C', dir, 'app']);
  return fs.readFileSync(out);
}

/** A tar.gz with one entry named `name` (python's tarfile writes names as given, `../` included). */
function tarWithEntry(name: string): Buffer {
  const out = path.join(fs.mkdtempSync(path.join(work, 'crafted-')), 'evil.tgz');
  execFileSync('python3', [
    '-c',
    'import io,sys,tarfile\nwith tarfile.open(sys.argv[1], "w:gz") as t:\n  i = tarfile.TarInfo(sys.argv[2]); i.size = 2\n  t.addfile(i, io.BytesIO(b"hi"))',
    out,
    name,
  ]);
  return fs.readFileSync(out);
}

/** A zip of `files` (python's zipfile; an empty mapping makes the 22-byte empty zip). */
function zipOf(files: Record<string, string>): Buffer {
  const out = path.join(fs.mkdtempSync(path.join(work, 'zip-')), 'a.zip');
  execFileSync('python3', [
    '-c',
    'import json,sys,zipfile\nwith zipfile.ZipFile(sys.argv[1], "w") as z:\n  [z.writestr(k, v) for k, v in json.loads(sys.argv[2]).items()]',
    out,
    JSON.stringify(files),
  ]);
  return fs.readFileSync(out);
}

describe.each(DIALECTS)('source upload checks the archive (%s)', (dialect) => {
  let t: TestApp;
  let appId: number;
  // The artifact store's files: the application's sources, and the temporary files of writes.
  const sources = () => path.join(t.ctx.config.dataDir, 'artifacts', 'apps', String(appId), 'sources');
  const temporary = () => path.join(t.ctx.config.dataDir, 'artifacts', '.tmp');
  const kept = () =>
    [sources(), temporary()]
      .flatMap((dir) =>
        fs.existsSync(dir)
          ? fs.readdirSync(dir).map((name) => path.relative(t.ctx.config.dataDir, path.join(dir, name)))
          : [],
      )
      .sort();
  const keptSource = async () => [`artifacts/apps/${appId}/sources/${await storedSource()}`];

  beforeAll(async () => {
    t = await createTestApp(dialect);
    const res = await apply(t, {
      apiVersion: 'v1',
      kind: 'Infrastructure',
      metadata: { name: 'upload', team: t.user.team_id },
      spec: { application: { name: 'upload', type: 'nodejs', commands: { start: 'node server.js' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    appId = res.json<{ application_id: number }>().application_id;
  });
  afterAll(() => t.close());

  const upload = (payload: Buffer, contentType = 'application/gzip', query = '') =>
    t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/source${query}`,
      headers: { ...t.auth.platform, 'content-type': contentType },
      payload,
    });

  const deployments = async () =>
    (await t.request({ url: `/api/v1/applications/${appId}/deployments`, headers: t.auth.platform }))
      .json<{ data: Array<{ id: number }> }>()
      .data.map((d) => d.id);

  const storedSource = async () =>
    (
      await t.ctx.db
        .selectFrom('applications')
        .select(['uploaded_source'])
        .where('id', '=', appId)
        .executeTakeFirstOrThrow()
    ).uploaded_source;

  it('accepts a good tar.gz (202, a deployment) and a zip with deploy=false (200, kept only)', async () => {
    const good = await upload(tarOf({ 'server.js': 'console.log(1)\n', 'package.json': '{}\n' }));
    expect(good.statusCode, good.body).toBe(202);
    expect(good.json<{ data: { deployment: { id: number } } }>().data.deployment.id).toEqual(
      expect.any(Number),
    );
    expect(kept()).toEqual(await keptSource());

    const zip = await upload(zipOf({ 'server.js': 'console.log(2)\n' }), 'application/zip', '?deploy=false');
    expect(zip.statusCode, zip.body).toBe(200);
    expect(kept()).toEqual(await keptSource());
  });

  it('refuses a broken or hostile archive with 422 naming the problem, and keeps nothing of it', async () => {
    const good = tarOf({ 'server.js': 'console.log(1)\n'.repeat(2000) });
    const cases: Array<[string, Buffer, string, RegExp]> = [
      [
        'plain text',
        Buffer.from('just some text, not an archive\n'),
        'application/octet-stream',
        /neither a \.tar\.gz nor a \.zip/,
      ],
      ['an empty body', Buffer.alloc(0), 'application/gzip', /The file is empty/],
      [
        'a gzip of random bytes',
        zlib.gzipSync(randomBytes(4096)),
        'application/gzip',
        /does not hold a tar archive/,
      ],
      ['a gzip of a little text', zlib.gzipSync('hello'), 'application/gzip', /does not hold a tar archive/],
      [
        'a gzipped zip',
        zlib.gzipSync(zipOf({ 'a.txt': 'a' })),
        'application/gzip',
        /does not hold a tar archive/,
      ],
      ['a truncated tar.gz', good.subarray(0, Math.floor(good.length / 2)), 'application/gzip', /truncated/],
      ['an empty gzip', zlib.gzipSync(Buffer.alloc(0)), 'application/gzip', /holds no files/],
      ['a tar.gz of an empty directory', tarOf({}), 'application/gzip', /holds no files/],
      ['an empty zip', zipOf({}), 'application/zip', /holds no files/],
      [
        'a zip renamed from text',
        Buffer.from('PK but not really a zip'),
        'application/zip',
        /neither a \.tar\.gz nor a \.zip/,
      ],
      ['an uncompressed tar', tarOf({ 'a.txt': 'a' }, '-cf'), 'application/gzip', /uncompressed tar/],
      [
        'an entry that climbs out',
        tarWithEntry('../../etc/cron.d/evil'),
        'application/gzip',
        /"\.\.\/\.\.\/etc\/cron\.d\/evil" leaves the destination/,
      ],
      ['an absolute entry', tarWithEntry('/etc/passwd'), 'application/gzip', /has an absolute path/],
    ];
    const before = { files: kept(), source: await storedSource(), deployments: await deployments() };
    expect(before.files).toHaveLength(1);
    for (const [what, payload, contentType, problem] of cases) {
      for (const query of ['', '?deploy=false']) {
        const res = await upload(payload, contentType, query);
        expect(res.statusCode, `${what}: ${res.body}`).toBe(422);
        const body = res.json<{ message: string; errors: { body: string[] } }>();
        expect(body.errors.body, what).toEqual([expect.stringMatching(problem)]);
        expect(body.message, what).toMatch(/^The source archive cannot be used: /);
      }
    }
    expect({ files: kept(), source: await storedSource(), deployments: await deployments() }).toEqual(before);
  });
});
