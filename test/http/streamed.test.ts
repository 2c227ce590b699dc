// Issue 24, item 1: every route whose body or answer is a stream, over a real socket. inject() hands a
// route a fake request object; over TCP the source upload's body is the request stream itself, which
// the input guard walked (socket, server, every connection) until the heap ran out and Berth died.
// Each route here must answer, and Berth must go on serving: source upload, S3 PUT, tools uploads
// (multipart), and server-sent logs. A JSON body with more values than any route needs is refused
// with 413 instead of being walked.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { PutObjectCommand, GetObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { PDFDocument } from 'pdf-lib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BODY_VALUES } from '../../src/domain/control-characters.js';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { applyObjectStorage, s3Client } from '../object-storage/helpers.js';
import { applyYaml, nodeDocument } from '../runtime/helpers.js';
import { nodeAppFiles } from '../runtime/node-app.js';

/** A plain `tar czf` of a small Node.js application. */
function tarball(): Buffer {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-streamed-'));
  try {
    for (const [name, content] of Object.entries(nodeAppFiles('streamed')))
      fs.writeFileSync(path.join(dir, name), content);
    return execFileSync('tar', ['-czf', '-', '-C', dir, '.']);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function pdf(): Promise<Buffer> {
  const document = await PDFDocument.create();
  document.addPage();
  return Buffer.from(await document.save());
}

describe.each(DIALECTS)('streamed routes over a real socket (%s)', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  let appId: number;

  beforeAll(async () => {
    t = await createTestApp(dialect);
    const document = nodeDocument(t.user.team, 'streamed', 'unused', {
      application: { repository: undefined },
      spec: { domains: [], volumes: [] },
    });
    appId = (await applyYaml(t, document, '?auto_deploy=false')).application_id;
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    await applyObjectStorage(t.ctx, t.user.team_id, {
      name: 'streamed',
      buckets: ['streamed-bucket'],
      users: [{ username: 'admin', policies: ['admin'] }],
    });
    await t.ctx.services.jobs.runner().runDue();
    const [storage] = await t.ctx.services.objectStorage.view({ id: t.user.team_id, role: 'owner' });
    const user = storage!.users[0]!;
    client = s3Client(s3.url, user.access_key_id, user.secret_key!);
  });
  afterAll(async () => {
    client?.destroy();
    await s3?.close();
    await t?.close();
  });

  /** Berth still answers on the same port. */
  async function stillServing(): Promise<void> {
    expect((await t.request('/healthz')).statusCode).toBe(200);
  }

  it('stores an uploaded source archive and answers (the guard never walks the request stream)', async () => {
    const archive = tarball();
    const upload = await t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/source?deploy=false`,
      headers: { ...t.auth.platform, 'content-type': 'application/gzip' },
      payload: archive,
    });
    expect(upload.statusCode, upload.body).toBe(200);
    expect(upload.json<{ data: { size: number } }>().data.size).toBe(archive.length);
    // Sent as a chunked stream, as curl -T - or a CLI pipe sends it.
    const chunked = await t.request({
      method: 'POST',
      url: `/api/v1/applications/${appId}/source?deploy=false`,
      headers: { ...t.auth.platform, 'content-type': 'application/gzip', 'transfer-encoding': 'chunked' },
      payload: Readable.from([archive.subarray(0, 100), archive.subarray(100)]),
    });
    expect(chunked.statusCode, chunked.body).toBe(200);
    await stillServing();
  });

  it('takes an S3 PUT streamed without a length and reads it back', async () => {
    const body = Buffer.alloc(3 * 1024 * 1024, 7);
    await client.send(
      new PutObjectCommand({
        Bucket: 'streamed-bucket',
        Key: 'big.bin',
        Body: body,
        ContentLength: body.length,
      }),
    );
    const got = await client.send(new GetObjectCommand({ Bucket: 'streamed-bucket', Key: 'big.bin' }));
    expect(Buffer.from(await got.Body!.transformToByteArray()).equals(body)).toBe(true);
    await stillServing();
  });

  it('takes a multipart tools upload (PDF merge)', async () => {
    const boundary = 'berth-streamed-boundary';
    const file = await pdf();
    const part = (name: string) =>
      Buffer.concat([
        Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="files"; filename="${name}"\r\nContent-Type: application/pdf\r\n\r\n`,
        ),
        file,
        Buffer.from('\r\n'),
      ]);
    const merged = await t.request({
      method: 'POST',
      url: '/api/v1/tools/pdf/merge',
      headers: { ...t.auth.tools, 'content-type': `multipart/form-data; boundary=${boundary}` },
      payload: Buffer.concat([part('a.pdf'), part('b.pdf'), Buffer.from(`--${boundary}--\r\n`)]),
    });
    expect(merged.statusCode, merged.body).toBe(200);
    expect((await PDFDocument.load(merged.rawPayload)).getPageCount()).toBe(2);
    await stillServing();
  });

  it("streams the application's log as server-sent events", async () => {
    const events = await new Promise<string>((resolve, reject) => {
      const request = http.get(
        `http://127.0.0.1:${t.port}/api/v1/applications/${appId}/logs?follow=true`,
        { headers: t.auth.platform },
        (response) => {
          expect(response.statusCode).toBe(200);
          expect(response.headers['content-type']).toContain('text/event-stream');
          let text = '';
          response.on('data', (chunk: Buffer) => {
            text += chunk.toString();
            // The first event (or comment) is enough: the stream is open and Berth is not stuck in it.
            if (text.includes('\n\n')) {
              request.destroy();
              resolve(text);
            }
          });
        },
      );
      request.on('error', reject);
    });
    expect(events.length).toBeGreaterThan(0);
    await stillServing();
  });

  it(`refuses a JSON body of more than ${MAX_BODY_VALUES} values with 413, quickly`, async () => {
    const response = await t.request({
      method: 'POST',
      url: '/api/v1/auth/sign-in',
      headers: { 'content-type': 'application/json' },
      payload: `{"email":"a@b.c","password":"x","padding":[${'0,'.repeat(MAX_BODY_VALUES)}0]}`,
    });
    expect(response.statusCode).toBe(413);
    expect(response.json<{ message: string }>().message).toContain(String(MAX_BODY_VALUES));
    await stillServing();
  });
});
