// What Berth asks of an object-storage backend. The local driver serves buckets itself (S3 endpoint
// over files in the data directory); a cloud driver would map the same calls onto a provider's admin
// API (create buckets, create access keys, attach policies).
export interface ObjectStorageUserSpec {
  username?: string | undefined;
  policies: unknown[];
}

export interface ObjectStorageSpec {
  /** Row id of `object_storages`. */
  id: number;
  uuid: string;
  name: string;
  buckets: string[];
  /**
   * What the storage's document says of a bucket's access, by bucket (the others are left as they are):
   * `public-read` is a public-read ACL and anyone's read of its objects (a bucket policy statement
   * Berth keeps, Sid DOCUMENT_PUBLIC_READ_SID); `private` takes both away.
   */
  bucketAcls: Record<string, 'private' | 'public-read'>;
  users: ObjectStorageUserSpec[];
}

export interface ObjectStorageCredential {
  username: string;
  accessKeyId: string;
  /** Plaintext secret key; only for callers allowed to see it. */
  secretKey: string;
  policies: unknown[];
}

/** The canned ACLs a bucket may have (S3's names); `private` unless its owner made it otherwise. */
export const BUCKET_ACLS = ['private', 'public-read', 'public-read-write', 'authenticated-read'] as const;
export type BucketAcl = (typeof BUCKET_ACLS)[number];

/** A problem a retry cannot fix (an invalid bucket name, a policy not understood). */
export class ProvisionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProvisionError';
  }
}

/** A storage entry of the document, as apply validates it. */
export interface ObjectStorageEntry {
  buckets: readonly string[];
  users: ReadonlyArray<{ username?: string | undefined; policies: unknown }>;
}

/** What a driver serves on this machine (the local driver's S3 endpoint). */
export interface ServedEndpoint {
  port: number;
  url: string;
  close(): Promise<void>;
}

/** A storage's endpoint of its own: it names the storage without a credential (docs/decisions/0008). */
export interface StorageEndpoints {
  /** Path style under a prefix: `<endpoint>/<uuid>` (no DNS needed). */
  path: string;
  /** `<uuid>.<host>` (buckets as `<bucket>.<uuid>.<host>`); null when the public host is an IP address. */
  virtualHost: string | null;
}

export interface ObjectStorageDriver {
  readonly name: string;
  /** The shared URL S3 clients use: the access key that signs a request picks its storage. */
  endpoint(): string;
  /** The storage's own endpoint; its buckets, and only its, are named there. */
  storageEndpoints(uuid: string): StorageEndpoints;
  /**
   * Starts what this machine must serve for the storage (the local driver's S3 endpoint on `listen`);
   * undefined for a driver whose provider serves it.
   */
  serve(listen: { host: string; port: number }): Promise<ServedEndpoint | undefined>;
  /**
   * What provisioning would refuse (bucket names, policies in a form the driver does not accept), for
   * apply to report as 422 field errors before anything is created. Paths are relative to the entry
   * (`buckets[0]`, `users[1].policies`).
   */
  problems(entry: ObjectStorageEntry): Array<{ path: string; message: string }>;
  /**
   * Makes the storage match its spec: creates missing buckets (never deletes one), creates an access
   * key for each new user, updates policies, revokes keys of users no longer listed. Idempotent and
   * all or nothing: the caller records the storage as running after it, and a retry is always safe.
   */
  provision(spec: ObjectStorageSpec): Promise<void>;
  credentials(storageId: number): Promise<ObjectStorageCredential[]>;
  buckets(storageId: number): Promise<string[]>;
  /** A bucket's canned ACL; undefined when the storage has no bucket of that name. */
  bucketAcl(storageId: number, bucket: string): Promise<BucketAcl | undefined>;
  /**
   * Sets a bucket's canned ACL, as PutBucketAcl does (the endpoint's look-ups see it within a second);
   * false when the storage has no bucket of that name. A public ACL where public ACLs are blocked
   * (BERTH_S3_BLOCK_PUBLIC_ACCESS, or the bucket's PublicAccessBlock) is a ProvisionError.
   */
  setBucketAcl(storageId: number, bucket: string, acl: BucketAcl): Promise<boolean>;
  /**
   * The storage's buckets that grant access without its keys (GetBucketPolicyStatus's IsPublic: a public
   * ACL or a public policy), as the bucket's PublicAccessBlock and BERTH_S3_BLOCK_PUBLIC_ACCESS leave them.
   */
  publicBuckets(storageId: number): Promise<string[]>;
  /** Removes every bucket, object, upload and access key of the storage: rows and files. */
  remove(storageId: number): Promise<void>;
}
