// The runtime API beyond one repository's deploy (issue 14): an application with no repository is
// deployed from an uploaded archive; a change applied with auto_deploy=false waits for POST …/deploy;
// a deployment's log and the application's output stream as server-sent events over real HTTP; a
// deploy of another branch records it; skip_build without a build is 422; the edge's TLS listener
// serves an application with the operator's certificate for its domain.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  applyYaml,
  edgeRequest,
  nodeDocument,
  startRuntime,
  waitForDeployment,
  type RuntimeHarness,
} from './helpers.js';
import { archiveOf, nodeAppFiles } from './node-app.js';

/** Reads server-sent events from `url` until `done` says so; the connection is then closed. */
async function readEvents(
  url: string,
  headers: Record<string, string>,
  done: (events: Array<{ event: string; data: string }>) => boolean,
  whileOpen: () => Promise<void> = () => Promise.resolve(),
): Promise<Array<{ event: string; data: string }>> {
  const abort = new AbortController();
  const response = await fetch(url, { headers, signal: abort.signal });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/event-stream');
  const events: Array<{ event: string; data: string }> = [];
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  const opened = whileOpen();
  try {
    while (!done(events)) {
      const { value, done: ended } = await reader.read();
      if (ended) break;
      buffered += decoder.decode(value, { stream: true });
      let blank: number;
      while ((blank = buffered.indexOf('\n\n')) >= 0) {
        const block = buffered.slice(0, blank);
        buffered = buffered.slice(blank + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1] ?? 'message';
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (data !== undefined) events.push({ event, data });
      }
    }
  } finally {
    abort.abort();
    await opened;
  }
  return events;
}

describe('the runtime API', () => {
  let h: RuntimeHarness;
  let base: string;
  let certificate: Buffer;

  const call = (method: string, url: string, payload?: unknown) =>
    h.t.request({
      method: method,
      url,
      headers: h.t.auth.platform,
      ...(payload !== undefined ? { payload } : {}),
    });

  beforeAll(async () => {
    h = await startRuntime('sqlite', { BERTH_EDGE_TLS_PORT: '0' }, (dataDir) => {
      // The operator's certificate for one application's domain, where the edge reads certificates.
      const certs = path.join(dataDir, 'certs');
      fs.mkdirSync(certs, { recursive: true });
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:P-256',
          '-nodes',
          '-days',
          '2',
          '-subj',
          '/CN=later.test',
          '-addext',
          'subjectAltName=DNS:later.test',
          '-keyout',
          path.join(certs, 'later.key'),
          '-out',
          path.join(certs, 'later.crt'),
        ],
        { stdio: 'ignore' },
      );
      certificate = fs.readFileSync(path.join(certs, 'later.crt'));
    });
    // createTestApp already listens on a free port.
    base = `http://127.0.0.1:${h.t.port}`;
  }, 120_000);
  afterAll(() => h.close());

  it('deploys an uploaded archive to an application without a repository', async () => {
    const document = nodeDocument('acme', 'upload', 'unused', {
      application: { repository: undefined, commands: { build: ['node build.js'], start: 'npm start' } },
    });
    const applied = await applyYaml(h.t, document);
    // Nothing to build yet: the deployment apply asked for fails, saying how to give it a source.
    const first = await waitForDeployment(h.t, applied.application_id, applied.deployment_id!);
    expect(first.status).toBe('failed');
    expect(first.error).toContain('berth deploy upload --source DIR');
    expect(first.error).toContain(`POST /api/v1/applications/${applied.application_id}/source`);

    const upload = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${applied.application_id}/source`,
      headers: { ...h.t.auth.platform, 'content-type': 'application/gzip' },
      payload: archiveOf(nodeAppFiles('uploaded'), 'shop-main'),
    });
    expect(upload.statusCode).toBe(202);
    const deploymentId = upload.json<{ data: { deployment: { id: number } } }>().data.deployment.id;
    const deployment = await waitForDeployment(h.t, applied.application_id, deploymentId);
    expect(deployment.error).toBeNull();
    const answer = JSON.parse((await edgeRequest(h.edgePort, 'upload.test', '/')).body) as {
      version: string;
    };
    expect(answer.version).toBe('uploaded');

    // An archive that cannot be unpacked is refused at upload (test/runtime/upload-check.test.ts has
    // every kind): no deployment is queued, and the live release keeps serving.
    const evil = await h.t.request({
      method: 'POST',
      url: `/api/v1/applications/${applied.application_id}/source`,
      headers: { ...h.t.auth.platform, 'content-type': 'application/zip' },
      payload: Buffer.from('not a zip at all'),
    });
    expect(evil.statusCode).toBe(422);
    expect(evil.json<{ errors: Record<string, string[]> }>().errors.body).toEqual([
      'The file is neither a .tar.gz nor a .zip archive',
    ]);
    const listed = await h.t.request({
      url: `/api/v1/applications/${applied.application_id}/deployments`,
      headers: h.t.auth.platform,
    });
    expect(listed.json<{ data: Array<{ id: number }> }>().data[0]?.id).toBe(deploymentId);
    expect((await edgeRequest(h.edgePort, 'upload.test', '/')).status).toBe(200);
  });

  it('waits with a change applied with auto_deploy=false until POST …/deploy, then streams its log', async () => {
    const repository = h.repository('later');
    repository.commit(nodeAppFiles('v1'));
    const applied = await applyYaml(h.t, nodeDocument('acme', 'later', h.git.url('later')));
    await waitForDeployment(h.t, applied.application_id, applied.deployment_id!);

    repository.commit(nodeAppFiles('v2'));
    const held = await applyYaml(
      h.t,
      nodeDocument('acme', 'later', h.git.url('later'), { settings: { memory: '300Mi' } }),
      '?auto_deploy=false',
    );
    expect(held.deployment_id).toBeNull();
    const version = async () =>
      (JSON.parse((await edgeRequest(h.edgePort, 'later.test', '/')).body) as { version: string }).version;
    expect(await version()).toBe('v1');

    const deploy = await call('POST', `/api/v1/applications/${applied.application_id}/deploy`, {});
    expect(deploy.statusCode).toBe(202);
    const id = deploy.json<{ data: { id: number } }>().data.id;
    const events = await readEvents(
      `${base}/api/v1/applications/${applied.application_id}/deployments/${id}/logs?follow=true`,
      h.t.auth.platform,
      (seen) => seen.some((e) => e.event === 'end'),
    );
    const lines = events
      .filter((e) => e.event === 'line')
      .map((e) => (JSON.parse(e.data) as { line: string }).line);
    expect(lines).toContain('==> rollout');
    expect(JSON.parse(events.find((e) => e.event === 'end')!.data)).toEqual({ status: 'success' });
    expect(await version()).toBe('v2');
  });

  it('serves an application over TLS with the certificate of its domain', async () => {
    const tlsPort = h.t.ctx.services.runtime.endpoints.https!;
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const request = https.get(
        {
          host: '127.0.0.1',
          port: tlsPort,
          servername: 'later.test',
          headers: { host: 'later.test' },
          ca: certificate,
          agent: false,
        },
        (response) => {
          let body = '';
          response.on('data', (chunk: Buffer) => (body += chunk.toString()));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
        },
      );
      request.on('error', reject);
    });
    expect(answer.status).toBe(200);
    expect((JSON.parse(answer.body) as { version: string }).version).toBe('v2');
    // A name without a certificate gets no handshake.
    await expect(
      new Promise((resolve, reject) =>
        https
          .get(
            {
              host: '127.0.0.1',
              port: tlsPort,
              servername: 'upload.test',
              rejectUnauthorized: false,
              agent: false,
            },
            resolve,
          )
          .on('error', reject),
      ),
    ).rejects.toThrow();
  });

  it("streams the application's output as it is written", async () => {
    const applications = await call('GET', '/api/v1/applications');
    const later = applications
      .json<{ data: Array<{ id: number; name: string }> }>()
      .data.find((a) => a.name === 'later')!;
    const events = await readEvents(
      `${base}/api/v1/applications/${later.id}/logs?follow=true&tail=1`,
      h.t.auth.platform,
      (seen) => seen.some((e) => e.data.includes('said by v2')),
      // The replica prints a line once the stream is open.
      async () => {
        expect((await edgeRequest(h.edgePort, 'later.test', '/say')).body).toBe('said');
      },
    );
    const said = events.map((e) => JSON.parse(e.data) as { stream: string; line: string; source: string });
    expect(said.find((e) => e.line === 'said by v2')).toMatchObject({ stream: 'stdout' });
  });

  it('deploys the branch asked for, and refuses skip_build before any build', async () => {
    const repository = h.repository('branchy');
    repository.commit(nodeAppFiles('main-version'));
    const applied = await applyYaml(
      h.t,
      nodeDocument('acme', 'branchy', h.git.url('branchy')),
      '?auto_deploy=false',
    );
    expect(applied.deployment_id).toBeNull();
    const skip = await call('POST', `/api/v1/applications/${applied.application_id}/deploy`, {
      skip_build: true,
    });
    expect(skip.statusCode).toBe(422);
    expect(skip.body).toContain('skip_build');

    const commit = repository.commitOn('feature', nodeAppFiles('feature-version'));
    const deploy = await call('POST', `/api/v1/applications/${applied.application_id}/deploy`, {
      branch: 'feature',
    });
    expect(deploy.statusCode).toBe(202);
    const deployment = await waitForDeployment(
      h.t,
      applied.application_id,
      deploy.json<{ data: { id: number } }>().data.id,
    );
    expect(deployment).toMatchObject({ status: 'success', commit_sha: commit });
    const answer = JSON.parse((await edgeRequest(h.edgePort, 'branchy.test', '/')).body) as {
      version: string;
    };
    expect(answer.version).toBe('feature-version');
  });
});
