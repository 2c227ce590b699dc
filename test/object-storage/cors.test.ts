// Per-bucket CORS with the real AWS SDK and a real browser: Chromium on a page from another loopback
// origin uploads straight to storage with a presigned URL, allowed or refused by the bucket's rules.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  DeleteBucketCorsCommand,
  GetBucketCorsCommand,
  GetObjectCommand,
  PutBucketCorsCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM_ARGS } from '../../src/drivers/chromium/engine.js';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { adminStorage, refusal } from './helpers.js';

/** A web application's origin: serves one empty page on a free loopback port. */
async function pageOrigin(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end('<!doctype html><title>app</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe.each(DIALECTS)('bucket CORS on %s', (dialect) => {
  let t: TestApp;
  let s3: S3Server;
  let client: S3Client;
  let browser: Browser;
  let allowed: Awaited<ReturnType<typeof pageOrigin>>;
  let other: Awaited<ReturnType<typeof pageOrigin>>;
  const Bucket = 'uploads';

  beforeAll(async () => {
    t = await createTestApp(dialect);
    s3 = await t.ctx.services.objectStorage.serveEndpoint();
    client = await adminStorage(t.ctx, t.user.team_id, s3.url, Bucket);
    allowed = await pageOrigin();
    other = await pageOrigin();
    browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: [...CHROMIUM_ARGS.filter((a) => !a.startsWith('--proxy')), '--no-proxy-server'], // loopback origins, never a proxy
    });
  });

  afterAll(async () => {
    await browser?.close();
    await allowed?.close();
    await other?.close();
    client?.destroy();
    await s3?.close();
    await t?.close();
  });

  /** Uploads from a page on `origin` with fetch, as a web application would; returns what the page saw. */
  async function browserUpload(origin: string, url: string, body: string) {
    const page = await browser.newPage();
    try {
      await page.goto(origin);
      return await page.evaluate(
        async ({ url, body }) => {
          try {
            // application/json is not a "simple" content type: the browser sends a preflight first.
            const res = await fetch(url, {
              method: 'PUT',
              body,
              headers: { 'content-type': 'application/json' },
            });
            return { status: res.status, etag: res.headers.get('etag'), error: undefined };
          } catch (error) {
            return { status: 0, etag: null, error: String(error) };
          }
        },
        { url, body },
      );
    } finally {
      await page.close();
    }
  }

  it('stores, returns, validates and deletes the configuration', async () => {
    expect(await refusal(client.send(new GetBucketCorsCommand({ Bucket })))).toEqual({
      code: 'NoSuchCORSConfiguration',
      status: 404,
    });
    const rules = [
      {
        ID: 'app',
        AllowedOrigins: ['https://app.example', 'https://*.app.example'],
        AllowedMethods: ['PUT', 'GET'],
        AllowedHeaders: ['content-type', 'x-amz-*'],
        ExposeHeaders: ['ETag'],
        MaxAgeSeconds: 600,
      },
    ];
    await client.send(new PutBucketCorsCommand({ Bucket, CORSConfiguration: { CORSRules: rules } }));
    const got = await client.send(new GetBucketCorsCommand({ Bucket }));
    expect(got.CORSRules).toEqual(rules);
    const invalid = (rule: {
      AllowedOrigins: string[];
      AllowedMethods: string[];
      AllowedHeaders?: string[];
    }) =>
      refusal(client.send(new PutBucketCorsCommand({ Bucket, CORSConfiguration: { CORSRules: [rule] } })));
    expect(await invalid({ AllowedOrigins: ['*'], AllowedMethods: ['PATCH'] })).toEqual({
      code: 'InvalidRequest',
      status: 400,
    });
    expect(await invalid({ AllowedOrigins: ['https://*.*.example'], AllowedMethods: ['GET'] })).toEqual({
      code: 'InvalidRequest',
      status: 400,
    });
    // A value that would end up in a response header may not carry a line break.
    expect(
      await invalid({
        AllowedOrigins: ['*'],
        AllowedMethods: ['GET'],
        AllowedHeaders: ['a\r\nset-cookie: x'],
      }),
    ).toMatchObject({ status: 400 });
    expect((await client.send(new GetBucketCorsCommand({ Bucket }))).CORSRules).toEqual(rules);
    await client.send(new DeleteBucketCorsCommand({ Bucket }));
    expect(await refusal(client.send(new GetBucketCorsCommand({ Bucket })))).toMatchObject({ status: 404 });
  });

  it("lets a browser upload with a presigned URL only from the origins the bucket's rules allow", async () => {
    await client.send(
      new PutBucketCorsCommand({
        Bucket,
        CORSConfiguration: {
          CORSRules: [
            {
              AllowedOrigins: [allowed.url],
              AllowedMethods: ['PUT'],
              AllowedHeaders: ['content-type'],
              ExposeHeaders: ['ETag'],
              MaxAgeSeconds: 60,
            },
          ],
        },
      }),
    );
    const presign = (Key: string) =>
      getSignedUrl(client, new PutObjectCommand({ Bucket, Key }), { expiresIn: 300 });

    const ok = await browserUpload(allowed.url, await presign('from-app.json'), '{"a":1}');
    expect(ok).toMatchObject({ status: 200 });
    expect(ok.etag).toMatch(/^"[0-9a-f]{32}"$/); // readable only because the rule exposes it
    const stored = await client.send(new GetObjectCommand({ Bucket, Key: 'from-app.json' }));
    expect(await stored.Body!.transformToString()).toBe('{"a":1}');

    // Another origin: the preflight is refused, so the browser never sends the upload.
    const refused = await browserUpload(other.url, await presign('from-other.json'), '{"b":2}');
    expect(refused.status).toBe(0);
    expect(refused.error).toMatch(/Failed to fetch/);
    expect(
      await refusal(client.send(new GetObjectCommand({ Bucket, Key: 'from-other.json' }))),
    ).toMatchObject({
      code: 'NoSuchKey',
    });
    const preflight = await fetch(await presign('x'), {
      method: 'OPTIONS',
      headers: { origin: other.url, 'access-control-request-method': 'PUT' },
    });
    expect(preflight.status).toBe(403);
    expect(await preflight.text()).toContain('<Code>AccessForbidden</Code>');
    // A header the rule does not allow is refused too.
    const header = await fetch(await presign('x'), {
      method: 'OPTIONS',
      headers: {
        origin: allowed.url,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'content-type, x-custom',
      },
    });
    expect(header.status).toBe(403);
    const good = await fetch(await presign('x'), {
      method: 'OPTIONS',
      headers: {
        origin: allowed.url,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'content-type',
      },
    });
    expect(good.status).toBe(200);
    expect(good.headers.get('access-control-allow-origin')).toBe(allowed.url);
    expect(good.headers.get('access-control-allow-methods')).toBe('PUT');
    expect(good.headers.get('access-control-max-age')).toBe('60');
  });
});
