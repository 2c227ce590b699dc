// Tables of the local object-storage driver: buckets, access keys, objects and multipart uploads.
// Bucket names are unique within their object storage (migration 024); everything else hangs off a
// bucket or a storage.
import type { ColumnType, Generated } from 'kysely';

export interface S3BucketsTable {
  id: Generated<number>;
  object_storage_id: number;
  /** Unique within the storage (024_bucket_namespaces); other storages may hold the same name. */
  name: string;
  created_at: string;
  /** JSON object of the bucket's tags; null when it has no tag set (see 018_s3_checksums). */
  tags: ColumnType<string | null, string | null | undefined, string | null>;
  /** Canned ACL: private, public-read, public-read-write or authenticated-read (025_bucket_access). */
  acl: ColumnType<string, string | undefined, string>;
  /** The bucket policy as the owner put it (JSON); null for none. */
  policy: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON PublicAccessBlockConfiguration (four booleans); null for none. */
  public_access_block: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface S3AccessKeysTable {
  id: Generated<number>;
  object_storage_id: number;
  /** The document's username (or `user-<n>` when it has none); unique within the storage. */
  username: string;
  access_key_id: string;
  /** SecretBox-sealed secret access key: the server needs the plaintext to verify SigV4. */
  secret_encrypted: string;
  /** JSON: the policies as written in the document. */
  policies: string;
  created_at: string;
  updated_at: string;
}

export interface S3ObjectsTable {
  id: Generated<number>;
  bucket_id: number;
  /** Compared byte-wise (SQLite BINARY, PostgreSQL COLLATE "C") so listings sort as S3's do. */
  key: string;
  size: number;
  /** Quoted ETag as S3 returns it. */
  etag: string;
  /** Path of the bytes relative to `<dataDir>/objects`. */
  file: string;
  /** JSON: content-type, user metadata and the other headers that are stored with an object. */
  headers: string;
  last_modified: string;
  /** JSON object of the object's tags (see 011_s3_features). */
  tags: ColumnType<string, string | undefined, string>;
  /** JSON {algorithm, type, value} the writer sent; null for none (see 018_s3_checksums). */
  checksum: ColumnType<string | null, string | null | undefined, string | null>;
  /** JSON [[size, checksum | null], …] of an object made from parts; null for one written whole. */
  parts: ColumnType<string | null, string | null | undefined, string | null>;
  /** Canned ACL of the object (025_bucket_access). */
  acl: ColumnType<string, string | undefined, string>;
}

export interface S3UploadsTable {
  id: Generated<number>;
  upload_id: string;
  bucket_id: number;
  key: string;
  /** JSON, as S3ObjectsTable.headers. */
  headers: string;
  created_at: string;
  /** JSON object of the tags the completed object gets. */
  tags: ColumnType<string, string | undefined, string>;
  /** JSON {algorithm, type} CreateMultipartUpload asked for; null for none. */
  checksum: ColumnType<string | null, string | null | undefined, string | null>;
  /** Canned ACL the completed object gets (025_bucket_access). */
  acl: ColumnType<string, string | undefined, string>;
}

export interface S3BucketCorsTable {
  bucket_id: number;
  /** JSON array of CORS rules (see cors.ts). */
  rules: string;
}

export interface S3UploadPartsTable {
  id: Generated<number>;
  upload_id: number;
  part_number: number;
  size: number;
  etag: string;
  file: string;
  last_modified: string;
  /** JSON {algorithm, value} of the part as received; null when the client sent none. */
  checksum: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface ObjectStorageTables {
  s3_buckets: S3BucketsTable;
  s3_access_keys: S3AccessKeysTable;
  s3_objects: S3ObjectsTable;
  s3_uploads: S3UploadsTable;
  s3_upload_parts: S3UploadPartsTable;
  s3_bucket_cors: S3BucketCorsTable;
}
