// Node.js majors (issue 14): an application that names no version runs on the host's Node.js; one that
// names another major gets it from the npm registry, downloaded once into the runtimes directory (this
// run's is shared by every test file); a major that is not offered (Ploi Cloud's list) is refused at
// apply, dry run included, naming what is.
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureNodeRuntime, NODE_MAJORS_OFFERED } from '../../src/drivers/runtime/local/node-runtime.js';
import { applyYaml, nodeDocument, startRuntime, waitForDeployment, type RuntimeHarness } from './helpers.js';
import { nodeAppFiles } from './node-app.js';

/** A major other than the host's, so it is really downloaded. */
const OTHER_MAJOR = Number(process.versions.node.split('.')[0]) === 22 ? 24 : 22;

describe('Node.js majors', () => {
  let h: RuntimeHarness;

  beforeAll(async () => {
    h = await startRuntime('sqlite');
    // The download is timed here, not against a deployment's (test-short) deadline.
    await ensureNodeRuntime(OTHER_MAJOR, inject('runtimesDir'));
  }, 300_000);
  afterAll(() => h.close());

  const nodeVersionOf = async (name: string, version?: string): Promise<string> => {
    h.repository(name).commit(nodeAppFiles(name));
    const applied = await applyYaml(
      h.t,
      nodeDocument('acme', name, h.git.url(name), {
        application: version === undefined ? {} : { runtime: { nodejs_version: version } },
      }),
    );
    const deployment = await waitForDeployment(h.t, applied.application_id, applied.deployment_id!);
    expect(deployment.error).toBeNull();
    const exec = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${applied.application_id}/exec`,
      headers: h.t.auth.platform,
      payload: { command: 'node --version; npm --version' },
    });
    expect(exec.statusCode).toBe(200);
    return exec.json<{ data: { output: string } }>().data.output;
  };

  it("runs an application that names no version on the host's Node.js", async () => {
    const output = await nodeVersionOf('hostnode');
    expect(output.split('\n')[0]).toBe(process.version);
  });

  it('runs an application on the major it names, with npm beside it', async () => {
    const [node, npm] = (await nodeVersionOf('othernode', String(OTHER_MAJOR))).split('\n');
    expect(node).toMatch(new RegExp(`^v${OTHER_MAJOR}\\.`));
    expect(npm).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('refuses a major that is not offered, naming the ones that are', async () => {
    for (const query of ['?dry_run=true', '']) {
      const response = await h.t.request({
        method: 'POST',
        url: `/api/v1/infrastructure/apply${query}`,
        headers: { ...h.t.auth.platform, 'content-type': 'application/yaml' },
        payload: nodeDocument('acme', 'oldnode', h.git.url('oldnode'), {
          application: { runtime: { nodejs_version: '15' } },
        }),
      });
      expect(response.statusCode).toBe(422);
      expect(response.json()).toEqual({
        message: 'YAML validation failed',
        errors: {
          'spec.application.runtime.nodejs_version': [
            `Application 'oldnode' runtime: field 'nodejs_version' must be one of none, ${NODE_MAJORS_OFFERED.join(', ')}; got '15'.`,
          ],
        },
      });
    }
  });
});
