// A backup target in an S3 bucket: `s3://<bucket>/<prefix>`, reached with the endpoint and credential
// of BERTH_S3_UPSTREAM_* (docs/operations.md, "Backup and restore"). The manifest is one PUT, which
// S3 makes visible whole or not at all.
import fs from 'node:fs';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createUpstreamClient, isMissingUpstream } from '../objectstorage/upstream-client.js';
import { blobPath, MANIFEST, type BackupTarget } from './types.js';

export interface S3TargetSettings {
  url: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
}

/** `s3://bucket/prefix` split, or a message naming what is wrong with it. */
export function parseS3Url(text: string): { bucket: string; prefix: string } | string {
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/([A-Za-z0-9._\-/]*))?$/.exec(text);
  if (!match || match[2]?.split('/').some((part) => part === '..' || part === '.'))
    return `'${text}' is not s3://<bucket>/<prefix> (a bucket name, then letters, digits, '.', '_', '-' and '/')`;
  const prefix = (match[2] ?? '').replace(/^\/+|\/+$/g, '');
  return { bucket: match[1]!, prefix: prefix === '' ? '' : `${prefix}/` };
}

export function createS3Target(url: string, settings: S3TargetSettings): BackupTarget {
  const parsed = parseS3Url(url);
  if (typeof parsed === 'string') throw new Error(parsed);
  const { bucket, prefix } = parsed;
  const client = createUpstreamClient({ ...settings, bucket });
  const body = async (key: string): Promise<Readable | undefined> => {
    try {
      const answer = await client.send(new GetObjectCommand({ Bucket: bucket, Key: prefix + key }));
      return answer.Body as Readable;
    } catch (error) {
      if (isMissingUpstream(error)) return undefined;
      throw error;
    }
  };
  return {
    description: url,
    async hasBlob(sha256) {
      try {
        await client.send(new HeadObjectCommand({ Bucket: bucket, Key: prefix + blobPath(sha256) }));
        return true;
      } catch (error) {
        if (isMissingUpstream(error)) return false;
        throw error;
      }
    },
    async putBlob(sha256, file) {
      const size = (await fs.promises.stat(file)).size;
      await client.send(
        new PutObjectCommand({
          Bucket: bucket,
          Key: prefix + blobPath(sha256),
          Body: fs.createReadStream(file),
          ContentLength: size,
        }),
      );
    },
    async getBlob(sha256, to) {
      const stream = await body(blobPath(sha256));
      if (!stream) throw new Error(`${url}: blob ${sha256} is missing`);
      await pipeline(stream, fs.createWriteStream(to, { mode: 0o600 }));
    },
    async readManifest() {
      const stream = await body(MANIFEST);
      if (!stream) return undefined;
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks);
    },
    async writeManifest(data) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: prefix + MANIFEST, Body: data }));
    },
  };
}
