// `berth deploy APP --source` (issue 26, item 4) against a running Berth with its runtime: a directory
// in a git work tree is packed as git lists it (a .gitignore'd file and a .berthignore'd one left out,
// an untracked one kept, a file named like a tar option packed as a file), a plain directory with its
// .gitignore files, and an archive file sent as it is; each deployment is followed to success and the
// application serves what was sent. A file that is no archive gets the server's 422 message, exit 1;
// one past 100 MB is not sent.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  applyYaml,
  edgeRequest,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { nodeAppFiles } from '../runtime/node-app.js';
import { sourceKey } from '../../src/drivers/artifacts/types.js';
import { ensureBuilt, listen, Shell } from './helpers.js';

let h: RuntimeHarness;
let shell: Shell;
let appId: number;

beforeAll(async () => {
  await ensureBuilt();
  h = await startRuntime('sqlite', { BERTH_DEPLOYMENT_TIMEOUT: '45' });
  shell = new Shell();
  const login = await shell.run(['login', '--url', await listen(h.t), '--token', h.t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
  const applied = await applyYaml(
    h.t,
    nodeDocument('acme', 'upload', 'unused', {
      application: { repository: undefined, commands: { build: ['node build.js'], start: 'npm start' } },
    }),
  );
  appId = applied.application_id;
  // Nothing to build yet: the deployment apply asked for fails before the uploads.
  await waitForDeployment(h.t, appId, applied.deployment_id!);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await h?.close();
});

/** Writes `files` (nested paths allowed) under `dir`. */
function writeTree(dir: string, files: Record<string, string>): void {
  for (const [name, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    fs.writeFileSync(path.join(dir, name), content);
  }
}

/** The names in the archive Berth stored for the application, sorted. */
async function storedNames(): Promise<string[]> {
  const row = await h.t.ctx.db
    .selectFrom('applications')
    .select(['uploaded_source'])
    .where('id', '=', appId)
    .executeTakeFirstOrThrow();
  // Where the artifact store keeps it (a file on this host for the local store).
  const file = await h.t.ctx.services.artifacts.localFile(sourceKey(appId, row.uploaded_source!));
  return execFileSync('tar', ['-tzf', file!.path], { encoding: 'utf8' }).split('\n').filter(Boolean).sort();
}

const servedVersion = async () =>
  (JSON.parse((await edgeRequest(h.edgePort, 'upload.test', '/')).body) as { version: string }).version;

const deploymentCount = async () =>
  (await h.t.request({ url: `/api/v1/applications/${appId}/deployments`, headers: h.t.auth.platform })).json<{
    data: unknown[];
  }>().data.length;

// A name tar would obey as an option if it ever reached its argv.
const OPTION_LIKE = '--checkpoint-action=exec=touch PWNED';

describe('berth deploy --source', () => {
  it('packs a git work tree as git lists it, less .berthignore, and follows the deployment', async () => {
    const dir = path.join(shell.home, 'repo');
    writeTree(dir, {
      ...nodeAppFiles('from-git'),
      '.gitignore': 'secret.env\nlocal/\n',
      '.berthignore': '*.log\ndocs/\n',
      'secret.env': 'PASSWORD=hunter2\n',
      'local/cache.bin': 'cache\n',
      'logs/debug.log': 'noise\n',
      'docs/guide.md': '# guide\n',
      'lib/util.js': 'module.exports = 1;\n',
      [OPTION_LIKE]: 'just a file\n',
    });
    execFileSync('git', ['init', '-q'], { cwd: dir });
    execFileSync('git', ['add', '.'], { cwd: dir });
    fs.writeFileSync(path.join(dir, 'untracked.txt'), 'not yet added\n');

    const run = await shell.run(['deploy', 'upload', '--source', 'repo'], { timeoutMs: 150_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(
      /Packing 10 files \([\d.]+ KB\) of repo \(as git lists them, less \.berthignore\)…/,
    );
    expect(run.stderr).toMatch(/Uploaded [\d.]+ (B|KB)\./);
    expect(run.stdout).toMatch(/Deployment \d+ of upload queued\./);
    expect(run.stderr).toMatch(/✓ Deployment \d+ succeeded/);
    expect(await servedVersion()).toBe('from-git');

    expect(await storedNames()).toEqual(
      [
        '.berthignore',
        '.gitignore',
        OPTION_LIKE,
        'build.js',
        'lib/util.js',
        'mode.txt',
        'package.json',
        'server.js',
        'untracked.txt',
        'version.txt',
      ].sort(),
    );
    expect(fs.existsSync(path.join(dir, 'PWNED'))).toBe(false);
  }, 180_000);

  it('packs a plain directory with its nested .gitignore files, never .git/', async () => {
    const dir = path.join(shell.home, 'plain');
    writeTree(dir, {
      ...nodeAppFiles('from-plain'),
      '.gitignore': 'node_modules/\n/top.txt\n*.tmp\n!keep.tmp\n',
      '.berthignore': 'notes/**\n',
      'top.txt': 'ignored at the top\n',
      'sub/top.txt': 'kept below (the pattern is anchored)\n',
      'sub/.gitignore': '*.md\n',
      'sub/readme.md': 'ignored here\n',
      'readme.md': 'kept: sub/.gitignore does not reach up\n',
      'scratch.tmp': 'ignored\n',
      'keep.tmp': 'kept: the negation comes after *.tmp\n',
      'node_modules/x/index.js': 'ignored\n',
      'notes/a/b.txt': 'ignored by .berthignore\n',
      // A directory named .git that git would not take for a repository: still never sent.
      '.git/config': 'not a real repository\n',
    });
    const run = await shell.run(['deploy', 'upload', '--source', dir], { timeoutMs: 150_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(
      /Packing 11 files \([\d.]+ KB\) of .*plain \(\.gitignore files applied, less \.berthignore\)…/,
    );
    expect(run.stderr).not.toContain('as git lists them');
    expect(run.stderr).toMatch(/✓ Deployment \d+ succeeded/);
    expect(await servedVersion()).toBe('from-plain');
    expect(await storedNames()).toEqual(
      [
        '.berthignore',
        '.gitignore',
        'build.js',
        'keep.tmp',
        'mode.txt',
        'package.json',
        'readme.md',
        'server.js',
        'sub/.gitignore',
        'sub/top.txt',
        'version.txt',
      ].sort(),
    );
  }, 180_000);

  it('sends an archive file as it is; --output json prints the ended deployment', async () => {
    const work = path.join(shell.home, 'archive-src');
    writeTree(work, nodeAppFiles('from-archive'));
    execFileSync('tar', ['-czf', path.join(shell.home, 'app.tgz'), '-C', work, '.']);
    const run = await shell.run(['deploy', 'upload', '--source', 'app.tgz', '--output', 'json'], {
      timeoutMs: 150_000,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/Sending app\.tgz \([\d.]+ KB\)/);
    expect(JSON.parse(run.stdout)).toMatchObject({ application_id: appId, status: 'success' });
    expect(await servedVersion()).toBe('from-archive');
  }, 180_000);

  it("refuses a file that is no archive with the server's 422 message (exit 1), deploying nothing", async () => {
    const before = await deploymentCount();
    shell.file('broken.tar.gz', 'this is not gzip at all\n');
    const run = await shell.run(['deploy', 'upload', '--source', 'broken.tar.gz']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^berth: The source archive cannot be used: .+ \(422\) — body: .+$/m);

    shell.file('notes.txt', 'text\n');
    const wrongKind = await shell.run(['deploy', 'upload', '--source', 'notes.txt']);
    expect(wrongKind.code).toBe(2);
    expect(wrongKind.stderr).toContain(
      "--source must be a directory or a .tar.gz, .tgz or .zip archive; got 'notes.txt'",
    );
    // Past the server's 100 MB nothing is sent (a sparse file: no disk, no time).
    fs.truncateSync(shell.file('huge.tar.gz', ''), 100 * 1024 * 1024 + 1);
    const huge = await shell.run(['deploy', 'upload', '--source', 'huge.tar.gz']);
    expect(huge.code).toBe(2);
    expect(huge.stderr).toContain(
      'huge.tar.gz is 104857601 bytes: more than 104857600 (100 MB), the most Berth takes',
    );
    const missing = await shell.run(['deploy', 'upload', '--source', 'nowhere']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--source nowhere: no such file or directory');
    expect(await deploymentCount()).toBe(before);
    expect(await servedVersion()).toBe('from-archive');
  }, 60_000);
});
