// The suite set-up the public-access tests share (acl.test.ts, policy.test.ts): a test Berth on one
// dialect with its S3 endpoint, storages `main` and `other` (twoStorages), an S3 client for main's
// admin, and unsigned requests as a browser or curl sends them. Made before the suite, closed after it.
import type { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll } from 'vitest';
import type { Dialect } from '../../src/db/connect.js';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { s3Client, twoStorages } from './helpers.js';

export interface AccessFixture {
  t: TestApp;
  s3: S3Server;
  admin: S3Client;
  storages: Awaited<ReturnType<typeof twoStorages>>;
}

/** Registers the suite's set-up and tear-down; the fixture's fields are there from beforeAll on. */
export function useAccessFixture(dialect: Dialect, env: Record<string, string> = {}): AccessFixture {
  const fixture = {} as AccessFixture;
  beforeAll(async () => {
    fixture.t = await createTestApp(dialect, { env });
    fixture.s3 = await fixture.t.ctx.services.objectStorage.serveEndpoint();
    fixture.storages = await twoStorages(fixture.t);
    fixture.admin = s3Client(
      fixture.s3.url,
      fixture.storages.main.admin.id,
      fixture.storages.main.admin.secret,
    );
  });
  afterAll(async () => {
    fixture.admin?.destroy();
    await fixture.s3?.close();
    await fixture.t?.close();
  });
  return fixture;
}

/** An unsigned request to the fixture's endpoint. */
export const anonymousTo =
  (fixture: AccessFixture) =>
  (path: string, init: RequestInit = {}): Promise<Response> =>
    fetch(`${fixture.s3.url}${path}`, init);
