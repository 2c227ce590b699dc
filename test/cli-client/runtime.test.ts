// The client on a running application (the runtime of test/runtime): apply --wait returns once the app
// serves, with its build output streamed; status, deployments, logs (and -f), exec, deploy --wait of a
// failing release (exit 1), rollback (to the previous release, and to a deployment named) and
// suspend/resume, all through the built binary.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  edgeRequest,
  eventually,
  nodeDocument,
  startRuntime,
  type RuntimeHarness,
} from '../runtime/helpers.js';
import { nodeAppFiles } from '../runtime/node-app.js';
import { ensureBuilt, listen, runInBackground, Shell } from './helpers.js';

let h: RuntimeHarness;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  // A loaded two-core machine can take longer than the runtime tests' 15 s to start a replica.
  h = await startRuntime('sqlite', { BERTH_DEPLOYMENT_TIMEOUT: '45' });
  const url = await listen(h.t);
  shell = new Shell();
  const login = await shell.run(['login', '--url', url, '--token', h.t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await h?.close();
});

const serves = async (version: string) =>
  eventually(
    async () => {
      const answer = await edgeRequest(h.edgePort, 'web.test', '/');
      return answer.status === 200 && (JSON.parse(answer.body) as { version: string }).version === version;
    },
    30_000,
    `web serving ${version}`,
  );

describe('an application through the client', () => {
  it('apply --wait streams the deployment and returns once the app serves', async () => {
    const repository = h.repository('web');
    repository.commit(nodeAppFiles('v1'));
    const file = shell.file('web.yaml', nodeDocument('acme', 'web', h.git.url('web')));
    const run = await shell.run(['apply', '-f', file, '--wait'], { timeoutMs: 120_000 });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('Applied: 4 created');
    expect(run.stdout).toMatch(/Deployment \d+ started for web\./);
    expect(run.stderr).toMatch(/│ /); // the deployment's log, streamed
    expect(run.stderr).toMatch(/✓ Deployment \d+ succeeded/);
    // Returned only once it serves: the first request after it already answers.
    const answer = await edgeRequest(h.edgePort, 'web.test', '/');
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ version: 'v1', secret: 'secret-of-web' });

    const status = await shell.run(['status', 'web', '--output', 'json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({
      status: 'active',
      replicas: { desired: 1, running: 1 },
    });
    const human = await shell.run(['status', 'web']);
    expect(human.stdout).toMatch(/^web {2}active/);
    expect(human.stdout).toContain('web.test');
    const deployments = await shell.run(['deployments', 'web']);
    expect(deployments.stdout).toMatch(/^ID\s+STATUS/);
    expect(deployments.stdout).toMatch(/\d+\s+success\s+/);
  }, 180_000);

  it('logs shows what the app printed, and -f follows new lines', async () => {
    await edgeRequest(h.edgePort, 'web.test', '/say');
    await eventually(
      async () =>
        (await shell.run(['logs', 'web', '--tail', '50'])).stdout.includes('said by v1') || undefined,
      15_000,
      'the line in the logs',
    );
    const json = await shell.run(['logs', 'web', '--output', 'json']);
    const lines = JSON.parse(json.stdout) as Array<{ line: string }>;
    expect(lines.some((l) => l.line.includes('said by v1'))).toBe(true);

    const follow = runInBackground(shell, ['logs', 'web', '-f', '--tail', '1']);
    try {
      await eventually(
        () => Promise.resolve(follow.output().includes('said by v1') || undefined),
        15_000,
        'the tail',
      );
      const before = follow.output().split('said by v1').length;
      await edgeRequest(h.edgePort, 'web.test', '/say');
      await eventually(
        () => Promise.resolve(follow.output().split('said by v1').length > before || undefined),
        15_000,
        'a followed line',
      );
    } finally {
      await follow.stop();
    }
  }, 60_000);

  it('exec prints the output and exits with the command’s code', async () => {
    const cat = await shell.run(['exec', 'web', '--', 'cat', 'version.txt']);
    expect(cat.code, cat.stderr).toBe(0);
    expect(cat.stdout.trim()).toBe('v1');
    const failing = await shell.run(['exec', 'web', '--', 'sh -c "exit 3"']);
    expect(failing.code).toBe(3);
  }, 60_000);

  it('deploy --wait exits 1 when the release fails; rollback and suspend/resume work', async () => {
    h.repository('web').commit(nodeAppFiles('v2', 'unhealthy'));
    const failed = await shell.run(['deploy', 'web', '--wait'], { timeoutMs: 120_000 });
    expect(failed.code, failed.stderr).toBe(1);
    expect(failed.stderr).toMatch(/✗ Deployment \d+ failed/);
    await serves('v1'); // the live release kept serving

    h.repository('web').commit(nodeAppFiles('v3'));
    const deployed = await shell.run(['deploy', 'web', '--wait', '--output', 'json'], { timeoutMs: 120_000 });
    expect(deployed.code, deployed.stderr).toBe(0);
    expect(JSON.parse(deployed.stdout)).toMatchObject({ status: 'success' });
    await serves('v3');

    const rolled = await shell.run(['rollback', 'web', '--wait'], { timeoutMs: 120_000 });
    expect(rolled.code, rolled.stderr).toBe(0);
    await serves('v1');

    // rollback APP DEPLOYMENT: the deployment named, not the default (the release before the live
    // one, v3's now). A failed deployment is refused by the server, so the id is what it received.
    interface Listed {
      id: number;
      status: string;
      reason: string;
      release: string | null;
      rollback_of: number | null;
    }
    const listed = JSON.parse(
      (await shell.run(['deployments', 'web', '--output', 'json'])).stdout,
    ) as Listed[];
    const first = listed.find((d) => d.reason === 'apply')!;
    const broken = listed.find((d) => d.status === 'failed')!;
    const refused = await shell.run(['rollback', 'web', String(broken.id)]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^berth: Only a successful deployment can be rolled back to\. \(422\)/);
    const explicit = await shell.run(['rollback', 'web', String(first.id), '--wait', '--output', 'json'], {
      timeoutMs: 120_000,
    });
    expect(explicit.code, explicit.stderr).toBe(0);
    const ended = JSON.parse(explicit.stdout) as Listed;
    expect(ended).toMatchObject({
      status: 'success',
      reason: 'rollback',
      rollback_of: first.id,
      release: first.release,
    });
    const after = JSON.parse(
      (await shell.run(['deployments', 'web', '--output', 'json'])).stdout,
    ) as Listed[];
    expect(after[0]).toMatchObject({ id: ended.id, rollback_of: first.id });
    expect(after).toHaveLength(listed.length + 1); // the refused one made no deployment
    await serves('v1');
    expect(
      JSON.parse((await shell.run(['status', 'web', '--output', 'json'])).stdout) as {
        live_deployment_id: number;
      },
    ).toMatchObject({ live_deployment_id: ended.id });

    expect((await shell.run(['suspend', 'web'])).code).toBe(0);
    await eventually(
      async () => (await edgeRequest(h.edgePort, 'web.test', '/')).status === 503 || undefined,
      15_000,
    );
    expect((await shell.run(['resume', 'web'])).code).toBe(0);
    await serves('v1');
    expect(fs.existsSync(shell.configFile)).toBe(true);
  }, 300_000);
});
