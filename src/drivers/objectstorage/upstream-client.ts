// The client of the upstream S3 service (BERTH_S3_UPSTREAM_*), shared by what keeps bytes there: the s3
// object-storage driver's blobs (keys under objects/) and the s3 artifact store (keys under artifacts/).
// One place for how Berth talks to the upstream, how a missing key looks, listing and deleting by
// prefix, and the start check that names the variable to fix.
import { DeleteObjectsCommand, HeadBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';

export interface UpstreamSettings {
  url: string;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/** How many keys one DeleteObjects removes (S3's limit). */
const DELETE_BATCH = 1000;

export function createUpstreamClient(settings: UpstreamSettings): S3Client {
  const quiet = () => undefined;
  return new S3Client({
    // The SDK's own warnings (a failed streaming request) are reported by the caller, as Berth's.
    logger: { debug: quiet, info: quiet, warn: quiet, error: quiet },
    endpoint: settings.url,
    region: settings.region,
    forcePathStyle: true,
    credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
    // Berth checks every body itself; the upstream's checksums would hash every byte again.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    // A stream cannot be sent twice: a failed request fails the operation, the caller retries it.
    maxAttempts: 1,
  });
}

/** The upstream answered that the key (or bucket) is not there. */
export function isMissingUpstream(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}

/** Every key under a prefix with its age, page by page; `fail` maps an upstream failure. */
export async function* listUpstreamKeys(
  client: S3Client,
  Bucket: string,
  prefix: string,
  fail: (error: unknown) => never,
): AsyncGenerator<{ key: string; modified: Date | undefined }> {
  let token: string | undefined;
  do {
    const page = await client
      .send(new ListObjectsV2Command({ Bucket, Prefix: prefix, ContinuationToken: token }))
      .catch(fail);
    for (const item of page.Contents ?? []) yield { key: item.Key!, modified: item.LastModified };
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
}

/** Deletes keys in batches; a key the upstream refused to delete fails it (through `fail`). */
export async function deleteUpstreamKeys(
  client: S3Client,
  Bucket: string,
  keys: string[],
  fail: (error: unknown) => never,
): Promise<void> {
  for (let i = 0; i < keys.length; i += DELETE_BATCH) {
    const batch = keys.slice(i, i + DELETE_BATCH);
    const out = await client
      .send(
        new DeleteObjectsCommand({ Bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }),
      )
      .catch(fail);
    const refused = out.Errors?.[0];
    if (refused) fail(new Error(`upstream refused to delete ${refused.Key}: ${refused.Code}`));
  }
}

/**
 * The start check: a HEAD of the bucket. A bucket that is not there, a refused key or an upstream that
 * cannot be reached fails the start with the variable to fix named.
 */
export async function checkUpstreamBucket(client: S3Client, settings: UpstreamSettings): Promise<void> {
  try {
    await client.send(new HeadBucketCommand({ Bucket: settings.bucket }));
  } catch (error) {
    const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
    const why =
      status === 404
        ? 'the bucket does not exist there'
        : status === 403 || status === 401
          ? 'the upstream refused BERTH_S3_UPSTREAM_ACCESS_KEY_ID and BERTH_S3_UPSTREAM_SECRET_ACCESS_KEY'
          : `the upstream could not be reached (${(error as Error).message || (error as Error).name})`;
    throw new Error(
      `BERTH_S3_UPSTREAM_BUCKET '${settings.bucket}' at BERTH_S3_UPSTREAM_URL ${settings.url} cannot be used: ${why}`,
    );
  }
}
