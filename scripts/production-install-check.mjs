// Run by production-install-check.sh from a production install: starts `berth serve` from dist/, applies
// a managed PostgreSQL, runs an upgrade check to 16 through /1.3 and exits 0 only when it succeeds.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';

const dataDir = process.argv[2];
fs.mkdirSync(dataDir, { recursive: true });
const child = spawn(
  process.execPath,
  ['dist/cli/index.js', 'serve', '--data-dir', dataDir, '--port', '0', '--s3-port', '0', '--edge-port', '0'],
  { env: { ...process.env, BERTH_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'] },
);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
try {
  const api = await new Promise((resolve, reject) => {
    let buffered = '';
    child.stdout.on('data', (chunk) => {
      buffered += chunk;
      for (const line of buffered.split('\n'))
        if (line.includes('Berth is ready')) resolve(JSON.parse(line).api);
    });
    child.once('exit', (code) => reject(new Error(`berth serve exited with ${code}`)));
  });
  const boot = JSON.parse(fs.readFileSync(`${dataDir}/bootstrap.json`, 'utf8'));
  const bearer = { authorization: `Bearer ${boot.api_token}` };
  const basic = {
    authorization: `Basic ${Buffer.from(`${boot.db_api_username}:${boot.db_api_password}`).toString('base64')}`,
  };
  const document = [
    'apiVersion: v1',
    'kind: Infrastructure',
    'metadata: { name: prod, team: default }',
    'spec:',
    '  managed_databases:',
    '    - { name: main, type: pg, plan: 1x1xCPU-2GB-25GB, zone: fi-hel1 }',
  ].join('\n');
  const applied = await fetch(`${api}/api/v1/infrastructure/apply`, {
    method: 'POST',
    headers: { ...bearer, 'content-type': 'application/yaml' },
    body: document,
  });
  if (!applied.ok) throw new Error(`apply: ${applied.status} ${await applied.text()}`);
  const listed = await (
    await fetch(`${api}/api/v1/teams/default/managed-databases`, { headers: bearer })
  ).json();
  const uuid = (listed.data ?? listed)[0].uuid;
  for (let i = 0; ; i += 1) {
    const state = (await (await fetch(`${api}/1.3/database/${uuid}`, { headers: basic })).json()).state;
    if (state === 'running') break;
    if (i > 120) throw new Error(`the database is still ${state}`);
    await sleep(1000);
  }
  const created = await fetch(`${api}/1.3/database/${uuid}/tasks`, {
    method: 'POST',
    headers: { ...basic, 'content-type': 'application/json' },
    body: JSON.stringify({ operation: 'upgrade_check', upgrade_check: { target_version: '16' } }),
  });
  const task = await created.json();
  for (let i = 0; ; i += 1) {
    const now = await (
      await fetch(`${api}/1.3/database/${uuid}/tasks/${task.id}`, { headers: basic })
    ).json();
    if (now.success !== null) {
      console.log(`upgrade check: ${now.success ? 'passed' : 'failed'}: ${now.result}`);
      process.exitCode = now.success ? 0 : 1;
      break;
    }
    if (i > 300) throw new Error('the upgrade check did not finish');
    await sleep(1000);
  }
} finally {
  // A stopped Berth leaves what serves running (docs/runtime.md): stop-all ends the database too.
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  spawnSync(process.execPath, ['dist/cli/index.js', 'admin', 'stop-all', '--data-dir', dataDir], {
    stdio: 'inherit',
  });
}
