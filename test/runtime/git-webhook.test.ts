/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment,
   @typescript-eslint/no-unsafe-argument --
   HTTP bodies are untyped JSON; the assertions are what check their shape. */
// Issue 31, item 5: push to deploy. An owner reads the application's git webhook URL and secret; a
// GitHub push event to the application's branch, signed with that secret and carrying no Berth
// credential, deploys it (202 with the deployment, which builds the pushed commit from the repository on
// loopback); a badly signed or unsigned one is 401 and deploys nothing; another branch, another event
// and a ping are answered 200 without a deployment; GitLab's token and Gitea's signature verify the
// same way; a rotated secret retires the old one. The team's webhooks hear the deployment start and
// succeed (item 4, end to end through the running job queue).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from '../helpers/store.js';
import { startWebhookSink, type WebhookSink } from '../helpers/webhook-sink.js';
import {
  applyYaml,
  eventually,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { nodeAppFiles } from './node-app.js';

const sign = (secret: string, body: string) => createHmac('sha256', secret).update(body).digest('hex');

const pushEvent = (branch: string, after: string) =>
  JSON.stringify({
    ref: `refs/heads/${branch}`,
    before: '0'.repeat(39) + '1',
    after,
    repository: { name: 'shop', default_branch: 'main' },
    pusher: { name: 'someone' },
  });

describe.each(DIALECTS)('push to deploy (%s)', (dialect) => {
  let h: RuntimeHarness;
  let sink: WebhookSink;
  let appId: number;
  let hookUrl: string;
  let secret: string;
  let commit: string;

  const hook = (headers: Record<string, string>, body: string) =>
    // No Authorization: the forge has no Berth credential, only the secret.
    h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/git-webhook`,
      headers: { 'content-type': 'application/json', ...headers },
      payload: body,
    });
  const github = (event: string, body: string, key = secret) =>
    hook({ 'x-github-event': event, 'x-hub-signature-256': `sha256=${sign(key, body)}` }, body);
  const deployments = async () =>
    (
      await h.t.request({ url: `/api/v1/applications/${appId}/deployments`, headers: h.t.auth.platform })
    ).json().meta.total as number;

  beforeAll(async () => {
    sink = await startWebhookSink();
    // The sink is on loopback: allowed as the tools tests allow their sites.
    h = await startRuntime(dialect, { BERTH_TOOLS_ALLOW_PRIVATE: '127.0.0.1' });
    commit = h.repository('shop').commit(nodeAppFiles('v1'));
    const applied = await applyYaml(
      h.t,
      nodeDocument('acme', 'shop', h.git.url('shop')),
      '?auto_deploy=false',
    );
    expect(applied.deployment_id).toBeNull();
    appId = applied.application_id;
  }, 180_000);
  afterAll(async () => {
    await h?.close();
    await sink.close();
  });

  it('gives owners the URL and a secret that is made once and stored sealed', async () => {
    const first = await h.t.request({
      url: `/api/v1/applications/${appId}/git-webhook`,
      headers: h.t.auth.platform,
    });
    expect(first.statusCode, first.body).toBe(200);
    ({ url: hookUrl, secret } = first.json().data);
    expect(hookUrl).toBe(`${h.t.ctx.config.publicUrl}/api/v1/applications/${appId}/git-webhook`);
    expect(secret).toMatch(/^[A-Za-z0-9_-]{40,}$/);
    const again = await h.t.request({
      url: `/api/v1/applications/${appId}/git-webhook`,
      headers: h.t.auth.platform,
    });
    expect(again.json().data.secret).toBe(secret);
    const row = await h.t.ctx.db
      .selectFrom('applications')
      .select('git_webhook_secret')
      .where('id', '=', appId)
      .executeTakeFirstOrThrow();
    expect(row.git_webhook_secret).not.toContain(secret);
    expect(h.t.ctx.secretBox.decrypt(row.git_webhook_secret!)).toBe(secret);
  });

  it('answers 401 to a missing or bad signature and deploys nothing', async () => {
    const body = pushEvent('main', commit);
    const unsigned = await hook({ 'x-github-event': 'push' }, body);
    expect(unsigned.statusCode).toBe(401);
    expect(unsigned.json().message).toContain('not signed');
    expect((await github('push', body, 'not-the-secret')).statusCode).toBe(401);
    // Signed over other bytes than were sent.
    const forged = await hook(
      {
        'x-github-event': 'push',
        'x-hub-signature-256': `sha256=${sign(secret, pushEvent('main', 'f'.repeat(40)))}`,
      },
      body,
    );
    expect(forged.statusCode).toBe(401);
    expect((await hook({ 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': 'guess' }, body)).statusCode).toBe(
      401,
    );
    expect(
      (await hook({ 'x-gitea-event': 'push', 'x-gitea-signature': sign('guess', body) }, body)).statusCode,
    ).toBe(401);
    expect(await deployments()).toBe(0);
  });

  it('answers a ping, another event and another branch with 200 and deploys nothing', async () => {
    const ping = await github('ping', JSON.stringify({ zen: 'Keep it logically awesome.' }));
    expect(ping.statusCode).toBe(200);
    expect(ping.json()).toEqual({ status: 'pong' });
    const issue = await github('issues', JSON.stringify({ action: 'opened' }));
    expect(issue.json()).toEqual({ status: 'ignored', reason: "the github event 'issues' is not a push" });
    const other = await github('push', pushEvent('feature', commit));
    expect(other.statusCode).toBe(200);
    expect(other.json()).toEqual({
      status: 'ignored',
      reason: 'the push is to branch "feature"; the application deploys "main"',
    });
    // GitLab's token and Gitea's signature are accepted the same way (and the branch decides).
    const gitlab = await hook(
      { 'x-gitlab-event': 'Push Hook', 'x-gitlab-token': secret },
      pushEvent('feature', commit),
    );
    expect(gitlab.statusCode).toBe(200);
    expect(gitlab.json().status).toBe('ignored');
    const body = pushEvent('feature', commit);
    const gitea = await hook({ 'x-gitea-event': 'push', 'x-gitea-signature': sign(secret, body) }, body);
    expect(gitea.statusCode).toBe(200);
    expect(gitea.json().status).toBe('ignored');
    expect(await deployments()).toBe(0);
  });

  it("deploys a signed push to the application's branch, and the team's webhooks hear it", async () => {
    const registered = await h.t.request({
      method: 'POST',
      url: '/api/v1/teams/acme/webhooks',
      headers: h.t.auth.platform,
      payload: { url: sink.url, events: ['deployment.started', 'deployment.succeeded', 'deployment.failed'] },
    });
    expect(registered.statusCode, registered.body).toBe(201);
    const signingSecret: string = registered.json().data.secret;

    const pushed = await github('push', pushEvent('main', commit));
    expect(pushed.statusCode, pushed.body).toBe(202);
    expect(pushed.json()).toEqual({ status: 'deploying', deployment_id: expect.any(Number) });
    const deployment = await waitForDeployment(h.t, appId, pushed.json().deployment_id);
    expect(deployment.error).toBeNull();
    expect(deployment.status).toBe('success');
    expect(deployment.commit_sha).toBe(commit);

    const events = await eventually(
      () => Promise.resolve(sink.received.length >= 2 ? sink.received : undefined),
      30_000,
      'the deployment webhooks',
    );
    expect(events.map((e) => e.headers['x-berth-event'])).toEqual([
      'deployment.started',
      'deployment.succeeded',
    ]);
    for (const event of events) {
      const [, t, v1] = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(String(event.headers['x-berth-signature']))!;
      expect(v1).toBe(createHmac('sha256', signingSecret).update(`${t}.${event.body}`).digest('hex'));
      expect(JSON.parse(event.body).data).toMatchObject({
        application: { id: appId, name: 'shop' },
        deployment: { id: deployment.id, reason: 'git push (github)' },
      });
    }
    expect(JSON.parse(events[1]!.body).data.deployment).toMatchObject({
      status: 'success',
      commit_sha: commit,
    });
  }, 120_000);

  it('refuses the old secret once the secret is rotated, and a body over the limit', async () => {
    const rotated = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/git-webhook/rotate`,
      headers: h.t.auth.platform,
    });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const fresh: string = rotated.json().data.secret;
    expect(fresh).not.toBe(secret);
    const body = pushEvent('feature', commit);
    expect((await github('push', body)).statusCode).toBe(401);
    expect((await github('push', body, fresh)).statusCode).toBe(200);

    const large = JSON.stringify({ ref: 'refs/heads/feature', padding: 'x'.repeat(1024 * 1024) });
    const tooLarge = await github('push', large, fresh);
    expect(tooLarge.statusCode).toBe(413);
  });
});
