// Settling an earlier Berth's deployments at start (DeploymentService.reconcile, which runs beside the
// API and the job runner): a deployment this Berth requested and started before the settling read its
// boundary is its own, not an earlier Berth's "interrupted" one. Before the fix, a deployment made
// while reconcile's first query was on its way failed with "Interrupted: Berth stopped during the
// deployment" (seen on a busy machine in test/architecture/drivers.test.ts).
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { stubRuntimeDriver, type CallLog } from '../helpers/stub-drivers.js';

const document = (team: string) =>
  stringify({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name: 'settled', team },
    spec: {
      application: {
        name: 'settled',
        type: 'nodejs',
        repository: { url: 'https://git.example.com/settled.git', branch: 'main' },
        commands: { start: 'npm start' },
      },
    },
  });

describe('settling unfinished deployments at start', () => {
  let t: TestApp;
  const calls: CallLog = [];
  const runtime = stubRuntimeDriver(calls);
  // The build waits until the test lets it go: the deployment stays `running` meanwhile.
  let letBuildGo!: () => void;
  const buildMayEnd = new Promise<void>((resolve) => (letBuildGo = resolve));
  const build = runtime.build.bind(runtime);
  runtime.build = async (...args) => {
    await buildMayEnd;
    return build(...args);
  };

  beforeAll(async () => {
    t = await createTestApp('sqlite', { services: { runtimeDriver: runtime } });
  });
  afterAll(() => t.close());

  const deploymentOf = async (appId: number, id: number) =>
    (
      await t.request({
        url: `/api/v1/applications/${appId}/deployments/${id}`,
        headers: t.auth.platform,
      })
    ).json<{ data: { status: string; error: string | null } }>().data;

  it('leaves a deployment this Berth is running alone', async () => {
    const applied = (
      await t.request({
        method: 'POST',
        url: '/api/v1/infrastructure/apply',
        headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
        payload: document(t.user.team),
      })
    ).json<{ application_id: number; deployment_id: number }>();
    const running = t.ctx.services.jobs.runner().runDue();
    for (
      let i = 0;
      (await deploymentOf(applied.application_id, applied.deployment_id)).status !== 'running';
      i++
    ) {
      if (i > 500) throw new Error('the deployment did not start');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // The settling, as a start runs it, while the deployment runs.
    await t.ctx.services.deployments.reconcile();
    expect(await deploymentOf(applied.application_id, applied.deployment_id)).toMatchObject({
      status: 'running',
    });
    letBuildGo();
    await running;
    expect(await deploymentOf(applied.application_id, applied.deployment_id)).toMatchObject({
      status: 'success',
      error: null,
    });
  });
});
