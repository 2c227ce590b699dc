// In-process profile of the dry-run apply (no HTTP socket, no autocannon): run with
//   node --import tsx --cpu-prof --cpu-prof-dir=/tmp/prof bench/apply/profile.ts [count]
// and open the .cpuprofile in Chrome DevTools; prints the mean time per dry run and per no-op request.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { stringify } from 'yaml';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/index.js';
import { createContext } from '../../src/context.js';
import { representative } from './document.js';

const count = Number(process.argv[2] ?? '4000');
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-profile-'));
const ctx = await createContext(
  loadConfig({ BERTH_DATA_DIR: dataDir, BERTH_LOG_LEVEL: 'silent', BERTH_RATE_LIMIT_PER_MINUTE: '0' }),
);
try {
  const app = await buildApp(ctx);
  app.get('/bench/noop', { config: { auth: 'api_token' }, schema: { hide: true } }, () => ({ ok: true }));
  const user = await ctx.identity.createUser({ email: 'profile@example.com', team: 'profile' });
  const headers = { authorization: `Bearer ${user.api_token}`, 'content-type': 'application/yaml' };
  const payload = stringify(representative(user.team_id));
  const first = await app.inject({ method: 'POST', url: '/api/v1/infrastructure/apply', headers, payload });
  if (first.statusCode !== 200) throw new Error(first.body);
  const time = async (label: string, run: () => Promise<{ statusCode: number }>) => {
    for (let i = 0; i < 500; i += 1) await run();
    const t0 = performance.now();
    for (let i = 0; i < count; i += 1) {
      const response = await run();
      if (response.statusCode !== 200) throw new Error(`${label}: ${response.statusCode}`);
    }
    console.log(
      `${label.padEnd(10)} ${(((performance.now() - t0) / count) * 1000).toFixed(0)} µs per request`,
    );
  };
  await time('no-op', () => app.inject({ method: 'GET', url: '/bench/noop', headers }));
  await time('dry run', () =>
    app.inject({ method: 'POST', url: '/api/v1/infrastructure/apply?dry_run=true', headers, payload }),
  );
  await app.close();
} finally {
  await ctx.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
