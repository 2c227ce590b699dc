// docs/guides/typescript-app.md as a new user follows it (issue 26, "the quick start works for such an
// application end to end"): the built `berth` logs in with the platform token, applies
// examples/shop/shop.yaml with --no-deploy, sends examples/shop with `deploy --source` and follows the
// deployment: TypeScript compiled by a devDependency from the npm registry and pruned, the migration
// run as the init command against a real MySQL (MariaDB) service whose values the application reads
// only through `${services.db.…}` secrets, two replicas routed by their default host name. The guide's
// document is the example's, so the two cannot drift apart.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { edgeRequest, startRuntime, type RuntimeHarness } from '../runtime/helpers.js';
import { ensureBuilt, listen, ROOT, Shell } from './helpers.js';

const EXAMPLE = path.join(ROOT, 'examples/shop');
const GUIDE = path.join(ROOT, 'docs/guides/typescript-app.md');

let h: RuntimeHarness;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  // npm installs from the registry and the service's server starts in the deployment.
  h = await startRuntime('sqlite', { BERTH_DEPLOYMENT_TIMEOUT: '180' });
  await h.t.ctx.services.managedDatabases.driver.warmUp?.();
  shell = new Shell();
  const login = await shell.run(['login', '--url', await listen(h.t), '--token', h.t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await h?.close();
});

describe('docs/guides/typescript-app.md', () => {
  it('shows examples/shop/shop.yaml as the document to apply', () => {
    const guide = fs.readFileSync(GUIDE, 'utf8');
    const block = /```yaml\n([\s\S]*?)```/.exec(guide)?.[1];
    expect(block).toBeDefined();
    expect(parse(block!)).toEqual(parse(fs.readFileSync(path.join(EXAMPLE, 'shop.yaml'), 'utf8')));
  });

  it('builds, migrates and serves examples/shop with the commands the guide gives', async () => {
    // The guide's team is `default` (the first start's); this Berth's user is in `acme`.
    const apply = await shell.run([
      'apply',
      '-f',
      path.join(EXAMPLE, 'shop.yaml'),
      '--team',
      'acme',
      '--no-deploy',
    ]);
    expect(apply.code, apply.stderr).toBe(0);
    expect(apply.stdout).toContain('+ db (mysql)');
    expect(apply.stdout).toContain(
      'run berth deploy shop --source DIR|FILE (the document names no repository).',
    );

    const deploy = await shell.run(['deploy', 'shop', '--source', EXAMPLE], { timeoutMs: 240_000 });
    expect(deploy.code, deploy.stdout + deploy.stderr).toBe(0);
    // No .berthignore there: the progress line does not name one.
    expect(deploy.stderr).toMatch(
      /Packing \d+ files \([\d.]+ KB\) of .*examples\/shop \(as git lists them\)…/,
    );
    // tsc is a devDependency: installed for the build, pruned before the release is kept.
    expect(deploy.stderr).toContain('> tsc -p tsconfig.json');
    expect(deploy.stderr).toContain('npm prune --omit=dev');
    expect(deploy.stderr).toContain('migrations done');
    expect(deploy.stderr).toMatch(/Started 2 replicas/);
    expect(deploy.stderr).toMatch(/✓ Deployment \d+ succeeded/);

    const status = await shell.run(['status', 'shop']);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/replicas\s+2\/2 running/);
    const host = /hostnames\s+(shop-\d+\.localhost)/.exec(status.stdout)?.[1];
    expect(host, status.stdout).toBeDefined();

    // Each request writes a row through the service and counts them: the database is reached.
    const visit = async () => {
      const answer = await edgeRequest(h.edgePort, host!, '/');
      expect(answer.status, answer.body).toBe(200);
      return JSON.parse(answer.body) as { visits: number; node_env: string };
    };
    const first = await visit();
    expect(first.node_env).toBe('production');
    expect((await visit()).visits).toBe(first.visits + 1);

    const pruned = await shell.run(['exec', 'shop', '--', 'ls', 'node_modules']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(pruned.stdout).toContain('mysql2');
    expect(pruned.stdout).not.toContain('typescript');

    const logs = await shell.run(['logs', 'shop']);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toContain('shop listening on 127.0.0.1:');
  }, 300_000);
});
