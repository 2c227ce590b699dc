// Runs Ceph's s3-tests against Berth's S3 endpoint (not part of CI; see docs/benchmarks/s3-compatibility.md).
// Usage: npx tsx scripts/s3-compat.ts <s3-tests checkout> [pytest arguments…]
// Provisions three object storages with the `admin` policy (the suite's main, alt and tenant users)
// on a throw-away SQLite store and data directory, writes the suite's config file, runs the suite with
// Debian's Python, and tears everything down.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestApp } from '../test/helpers/app.js';
import { applyObjectStorage } from '../test/object-storage/helpers.js';

const [suite, ...pytestArgs] = process.argv.slice(2);
if (!suite) throw new Error('usage: s3-compat.ts <s3-tests checkout> [pytest arguments…]');
const t = await createTestApp('sqlite');
const s3 = await t.ctx.services.objectStorage.serveEndpoint();
const roles = ['main', 'alt', 'tenant'];
for (const role of roles) {
  await applyObjectStorage(t.ctx, t.user.team_id, {
    name: `suite-${role}`,
    buckets: [],
    users: [{ username: 'admin', policies: ['admin'] }],
  });
}
await t.ctx.services.jobs.runner().runDue();
const storages = await t.ctx.services.objectStorage.view({ id: t.user.team_id, role: 'owner' });
const ids = await t.ctx.db.selectFrom('object_storages').select(['id', 'name']).execute();
const sections = roles.map((role) => {
  const storage = storages.find((s) => s.name === `suite-${role}`)!;
  const id = ids.find((r) => r.name === `suite-${role}`)!.id;
  const user = storage.users[0]!;
  return [
    `[s3 ${role}]`,
    `display_name = storage-${id}`,
    `user_id = ${id}`,
    `email = ${role}@example.com`,
    `access_key = ${user.access_key_id}`,
    `secret_key = ${user.secret_key!}`,
    ...(role === 'tenant' ? ['tenant = testx'] : []),
    '',
  ].join('\n');
});
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-s3-compat-'));
const conf = path.join(dir, 's3tests.conf');
fs.writeFileSync(
  conf,
  [
    '[DEFAULT]',
    'host = 127.0.0.1',
    `port = ${s3.port}`,
    'is_secure = False',
    'ssl_verify = False',
    '',
    '[fixtures]',
    'bucket prefix = berth-{random}-',
    '',
    ...sections,
    // IAM is not part of Berth's endpoint: unknown keys, so those tests fail without side effects.
    ...['iam', 'iam root', 'iam alt root'].map((name, i) =>
      [
        `[${name}]`,
        `access_key = UNKNOWNIAMKEY${i}AAAAAA`,
        'secret_key = unknownunknownunknownunknownunknownunkno',
        `user_id = iam${i}`,
        `email = iam${i}@example.com`,
        'display_name = iam',
        '',
      ].join('\n'),
    ),
  ].join('\n'),
  { mode: 0o600 },
);
// Not spawnSync: the endpoint answers the suite from this process's event loop.
const status = await new Promise<number | null>((resolve, reject) => {
  const child = spawn('/usr/bin/python3', ['-m', 'pytest', ...pytestArgs], {
    cwd: suite,
    stdio: 'inherit',
    // A wide terminal keeps each failure's message whole in the summary that s3-compat-report.ts reads.
    env: { ...process.env, S3TEST_CONF: conf, COLUMNS: '400' },
  });
  child.on('error', reject);
  child.on('exit', resolve);
});
await s3.close();
await t.close();
fs.rmSync(dir, { recursive: true, force: true });
process.exitCode = status ?? 1;
