// Node.js majors (issue 14): an application that names no version runs on the host's Node.js; one that
// names another major gets it from the npm registry, downloaded once into the runtimes directory (this
// run's is shared by every test file); a major that is not offered (Ploi Cloud's list) is refused at
// apply, dry run included, naming what is.
//
// Builds (issue 26): devDependencies are installed for the build and pruned from the release, which
// runs with NODE_ENV=production; the registry is reached with the host's npm configuration (its CA
// file: this machine's npm trusts its network's CA only through it) on a downloaded major too; a
// registry that cannot be reached fails the build in seconds, naming it and the error.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ensureNodeRuntime, NODE_MAJORS_OFFERED } from '../../src/drivers/runtime/local/node-runtime.js';
import {
  applyYaml,
  edgeRequest,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { nodeAppFiles } from './node-app.js';

/** A major other than the host's, so it is really downloaded. */
const OTHER_MAJOR = Number(process.versions.node.split('.')[0]) === 22 ? 24 : 22;

describe('Node.js majors', () => {
  let h: RuntimeHarness;

  beforeAll(async () => {
    // npm installs from the registry in the build: more than the tests' usual 15 s deadline.
    h = await startRuntime('sqlite', { BERTH_DEPLOYMENT_TIMEOUT: '180' });
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

  /** A TypeScript-like app: its build needs a devDependency, its server reports what it runs with. */
  const devDependencyApp = (name: string) => ({
    'package.json': JSON.stringify({
      name,
      version: '1.0.0',
      scripts: { start: 'node server.js', build: 'node build.js' },
      devDependencies: { 'is-number': '7.0.0' },
    }),
    'build.js':
      "require('node:fs').writeFileSync('built.txt', String(require('is-number')(7)) + ' NODE_ENV=' + (process.env.NODE_ENV ?? 'unset'));",
    'server.js': `
const fs = require('node:fs');
let devDependency = true;
try { require.resolve('is-number'); } catch { devDependency = false; }
require('node:http').createServer((req, res) => res.end(JSON.stringify({
  built: fs.readFileSync('built.txt', 'utf8'), nodeEnv: process.env.NODE_ENV, devDependency,
}))).listen(Number(process.env.PORT), '127.0.0.1');
process.on('SIGTERM', () => process.exit(0));
`,
  });

  // The host's major (its npm reads the host's global npmrc) and a downloaded one (whose npm does not).
  it.each([
    { name: 'devhost', runtime: {} },
    { name: 'devother', runtime: { runtime: { nodejs_version: String(OTHER_MAJOR) } } },
  ])(
    'installs devDependencies for the build, then prunes them from the release ($name)',
    async ({ name, runtime }) => {
      h.repository(name).commit(devDependencyApp(name));
      const applied = await applyYaml(
        h.t,
        nodeDocument('acme', name, h.git.url(name), {
          application: {
            ...runtime,
            commands: { build: ['npm install', 'npm run build'], start: 'npm start' },
          },
        }),
      );
      const deployment = await waitForDeployment(
        h.t,
        applied.application_id,
        applied.deployment_id!,
        180_000,
      );
      const logs = await h.t.request({
        url: `/api/v1/applications/${applied.application_id}/deployments/${applied.deployment_id}/logs`,
        headers: h.t.auth.platform,
      });
      const text = logs
        .json<{ data: Array<{ line: string }> }>()
        .data.map((l) => l.line)
        .join('\n');
      expect(deployment.error, text).toBeNull();
      expect(text).toContain('Packages from the npm registry https://');
      expect(text).toContain('$ npm prune --omit=dev');
      const answer = await edgeRequest(h.edgePort, `${name}.test`, '/');
      expect(answer.status).toBe(200);
      // Built with the devDependency and without NODE_ENV; run with NODE_ENV=production, pruned.
      expect(JSON.parse(answer.body)).toEqual({
        built: 'true NODE_ENV=unset',
        nodeEnv: 'production',
        devDependency: false,
      });
    },
    240_000,
  );

  it('fails a build whose registry cannot be reached within seconds, naming the registry and the error', async () => {
    const closed = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const registry = `http://127.0.0.1:${closed}/`;
    const other = await startRuntime('sqlite', { BERTH_BUILD_REGISTRY: registry });
    try {
      other.repository('noregistry').commit(devDependencyApp('noregistry'));
      const started = Date.now();
      const applied = await applyYaml(
        other.t,
        nodeDocument('acme', 'noregistry', other.git.url('noregistry'), {
          application: { commands: { build: ['npm install'], start: 'npm start' } },
        }),
      );
      const deployment = await waitForDeployment(other.t, applied.application_id, applied.deployment_id!);
      expect(deployment.status).toBe('failed');
      expect(Date.now() - started).toBeLessThan(60_000);
      expect(deployment.error).toContain("'npm install' exited with 1");
      const logs = await other.t.request({
        url: `/api/v1/applications/${applied.application_id}/deployments/${applied.deployment_id}/logs`,
        headers: other.t.auth.platform,
      });
      const text = logs
        .json<{ data: Array<{ line: string }> }>()
        .data.map((l) => l.line)
        .join('\n');
      expect(text).toContain(`Packages from the npm registry ${registry}`);
      expect(text).toMatch(
        new RegExp(`127\\.0\\.0\\.1:${closed}.*ECONNREFUSED|ECONNREFUSED.*127\\.0\\.0\\.1:${closed}`),
      );
    } finally {
      await other.close();
    }
  }, 120_000);
});
