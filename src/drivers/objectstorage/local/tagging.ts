// Object tags: Put/Get/DeleteObjectTagging, `x-amz-tagging` on PUT, copy and multipart create, and
// `x-amz-tagging-count` on GET/HEAD. Tags are stored with the object row, so an overwrite replaces
// them as on S3 (see 011_s3_features).
import type { IncomingHttpHeaders } from 'node:http';
import { errors, S3Error } from './errors.js';
import type { FeatureExchange } from './exchange.js';
import type { BucketRow, ObjectMetadata } from './metadata.js';
import { headerValue } from './sigv4.js';
import { elements, text } from './xml.js';

export type Tags = Record<string, string>;

/** S3's limits on tags: ten per object, fifty per bucket. */
const MAX_OBJECT_TAGS = 10;
const MAX_BUCKET_TAGS = 50;
const MAX_KEY = 128;
const MAX_VALUE = 256;
/** The characters S3 allows in tag keys and values. */
const TAG_TEXT = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;

const invalidTag = (message: string) => new S3Error('InvalidTag', 400, message);

/** Validates a list of tags against S3's limits; returns them as one JSON-able object. */
export function validTags(pairs: Array<[string, string]>, max = MAX_OBJECT_TAGS): Tags {
  if (pairs.length > max)
    throw invalidTag(`${max === MAX_OBJECT_TAGS ? 'Object' : 'Bucket'} tags cannot be greater than ${max}`);
  const tags: Tags = {};
  for (const [key, value] of pairs) {
    if ([...key].length < 1 || [...key].length > MAX_KEY || !TAG_TEXT.test(key))
      throw invalidTag('The TagKey you have provided is invalid');
    if ([...value].length > MAX_VALUE || !TAG_TEXT.test(value))
      throw invalidTag('The TagValue you have provided is invalid');
    if (key.startsWith('aws:')) throw invalidTag('Your TagKey cannot be prefixed with aws:');
    if (Object.hasOwn(tags, key)) throw invalidTag('Cannot provide multiple Tags with the same key');
    tags[key] = value;
  }
  return tags;
}

/** The tags of an `x-amz-tagging` header (URL query encoding), '{}' when absent. */
export function headerTags(headers: IncomingHttpHeaders): string {
  const header = headerValue(headers, 'x-amz-tagging');
  if (header === undefined || header === '') return '{}';
  return JSON.stringify(validTags([...new URLSearchParams(header)]));
}

export function parseTagging(xml: string, max = MAX_OBJECT_TAGS): Tags {
  if (!/<Tagging[\s>]/.test(xml)) throw errors.malformedXml();
  // An empty set may come as <TagSet/> (what the AWS SDK sends to remove every tag).
  const sets = /<TagSet\s*\/>/.test(xml) ? [''] : elements(xml, 'TagSet');
  if (sets.length !== 1) throw errors.malformedXml();
  return validTags(
    elements(sets[0]!, 'Tag').map((t): [string, string] => {
      const key = text(t, 'Key');
      const value = text(t, 'Value');
      if (key === undefined || value === undefined) throw errors.malformedXml();
      return [key, value];
    }),
    max,
  );
}

/** `x-amz-tagging-count` for GET/HEAD, present only when the object has tags (as on S3). */
export function tagCountHeader(tags: string | undefined): Record<string, number> {
  const count = Object.keys(JSON.parse(tags ?? '{}') as Tags).length;
  return count > 0 ? { 'x-amz-tagging-count': count } : {};
}

/** The copy's tags: the source's unless `x-amz-tagging-directive: REPLACE` (then the header's). */
export function copyTags(headers: IncomingHttpHeaders, sourceTags: string | undefined): string {
  const directive = headerValue(headers, 'x-amz-tagging-directive') ?? 'COPY';
  if (directive === 'REPLACE') return headerTags(headers);
  if (directive !== 'COPY') throw errors.invalidArgument('Unknown tagging directive.');
  return sourceTags ?? '{}';
}

export function createTagging(meta: ObjectMetadata) {
  return {
    async put(x: FeatureExchange, bucket: BucketRow, key: string): Promise<void> {
      x.allow({ action: 's3:PutObjectTagging', bucket: bucket.name, key });
      const tags = parseTagging(await x.readXml());
      if (!(await meta.setTags(bucket.id, key, JSON.stringify(tags)))) throw errors.noSuchKey(key);
      x.reply(200);
    },

    async get(x: FeatureExchange, bucket: BucketRow, key: string): Promise<void> {
      x.allow({ action: 's3:GetObjectTagging', bucket: bucket.name, key });
      const object = await meta.findObject(bucket.id, key);
      if (!object) throw errors.noSuchKey(key);
      x.replyXml('Tagging', tagSet(JSON.parse(object.tags ?? '{}') as Tags));
    },

    async delete(x: FeatureExchange, bucket: BucketRow, key: string): Promise<void> {
      x.allow({ action: 's3:DeleteObjectTagging', bucket: bucket.name, key });
      if (!(await meta.setTags(bucket.id, key, '{}'))) throw errors.noSuchKey(key);
      x.reply(204);
    },

    // Bucket tags: a bucket without a tag set answers 404 NoSuchTagSet, as on S3.
    async putBucket(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      x.allow({ action: 's3:PutBucketTagging', bucket: bucket.name });
      await meta.setBucketTags(bucket.id, JSON.stringify(parseTagging(await x.readXml(), MAX_BUCKET_TAGS)));
      x.reply(204);
    },

    async getBucket(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      x.allow({ action: 's3:GetBucketTagging', bucket: bucket.name });
      const tags = await meta.bucketTags(bucket.id);
      if (tags === null) throw new S3Error('NoSuchTagSet', 404, 'The TagSet does not exist');
      x.replyXml('Tagging', tagSet(JSON.parse(tags) as Tags));
    },

    async deleteBucket(x: FeatureExchange, bucket: BucketRow): Promise<void> {
      x.allow({ action: 's3:PutBucketTagging', bucket: bucket.name });
      await meta.setBucketTags(bucket.id, null);
      x.reply(204);
    },
  };
}

/** A TagSet in key order, as S3 lists it. */
const tagSet = (tags: Tags) => ({
  TagSet: {
    Tag: Object.entries(tags)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([Key, Value]) => ({ Key, Value })),
  },
});
