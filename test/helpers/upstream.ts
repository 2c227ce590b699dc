// What every test of a driver on an upstream S3 bucket checks at start (the s3 object-storage driver, the
// s3 artifact store): a bucket that does not exist and a refused credential each fail the start, naming
// the settings to fix.
import { expect } from 'vitest';
import type { Dialect } from '../../src/db/connect.js';
import { startBackground } from '../../src/lifecycle.js';
import { createTestApp } from './app.js';

/** Starts a Berth on `upstreamEnv` with a missing bucket, then a wrong secret: both starts are refused. */
export async function expectUnusableUpstreamRefused(
  dialect: Dialect,
  upstreamEnv: Record<string, string>,
): Promise<void> {
  for (const [env, message] of [
    [
      { BERTH_S3_UPSTREAM_BUCKET: 'no-such-bucket' },
      /BERTH_S3_UPSTREAM_BUCKET 'no-such-bucket' at BERTH_S3_UPSTREAM_URL .*does not exist/,
    ],
    [
      { BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY: 'wrong' },
      /refused BERTH_S3_UPSTREAM_ACCESS_KEY_ID and BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY/,
    ],
  ] as const) {
    const wrong = await createTestApp(dialect, { env: { ...upstreamEnv, ...env } });
    try {
      await expect(startBackground(wrong.ctx)).rejects.toThrow(message);
    } finally {
      await wrong.close();
    }
  }
}
