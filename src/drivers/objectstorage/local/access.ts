// Public buckets and bucket policies (issue 30): canned ACLs on buckets and objects, a bucket's policy,
// its PublicAccessBlock, and the one decision that weighs them with the caller's own policies.
//
// Who may do what, in order (docs/security.md, "Public buckets and bucket policies"):
//   1. an explicit Deny in the caller's user policy or in the bucket policy refuses (a Deny for `*`
//      binds every caller but the storage's own users, who are bound only where named: policy.ts);
//   2. the caller's user policy (the storage's own users only) allows;
//   3. the bucket policy allows, for the principals it names (`*`: anyone, signed or not);
//   4. the ACLs allow: a bucket's READ lets anyone its grantee covers list it, its WRITE put and delete
//      objects in it; an object's READ lets them read the object.
// A bucket policy and ACLs speak of the four data actions only (get, list, put, delete): configuring a
// bucket is for the storage's own users, by their user policies. PublicAccessBlock (the bucket's, or
// the operator's BERTH_S3_BLOCK_PUBLIC_ACCESS, which turns all four settings on) refuses public ACLs and
// policies as they are set, and ignores those already set.
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import { BUCKET_ACLS, type BucketAcl } from '../driver.js';
import { errors, S3Error } from './errors.js';
import type { FeatureExchange } from './exchange.js';
import type { BucketRow, ObjectMetadata } from './metadata.js';
import {
  compileBucketPolicy,
  decide,
  isPublicPolicy,
  MalformedPolicy,
  type AccessRequest,
  type RequestContext,
  type Statement,
} from './policy.js';
import { headerValue } from './sigv4.js';
import { elements, escapeXml, text } from './xml.js';

export const CANNED_ACLS = BUCKET_ACLS;
export type CannedAcl = BucketAcl;

const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';
const AUTHENTICATED_USERS = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers';

/** The group grants each canned ACL adds to the owner's FULL_CONTROL. */
const GRANTS: Record<CannedAcl, Array<[uri: string, permission: 'READ' | 'WRITE']>> = {
  private: [],
  'public-read': [[ALL_USERS, 'READ']],
  'public-read-write': [
    [ALL_USERS, 'READ'],
    [ALL_USERS, 'WRITE'],
  ],
  'authenticated-read': [[AUTHENTICATED_USERS, 'READ']],
};

export const isCannedAcl = (value: string): value is CannedAcl =>
  (CANNED_ACLS as readonly string[]).includes(value);

/** The stored ACL of a row: anything unknown is private. */
const aclOf = (value: string | undefined): CannedAcl => (value && isCannedAcl(value) ? value : 'private');

export const isPublicAcl = (acl: string): boolean => acl !== 'private';

/** The grant headers S3 takes in place of x-amz-acl, and the permission each grants. */
export const GRANT_HEADERS = {
  'x-amz-grant-read': 'READ',
  'x-amz-grant-write': 'WRITE',
  'x-amz-grant-read-acp': 'READ_ACP',
  'x-amz-grant-write-acp': 'WRITE_ACP',
  'x-amz-grant-full-control': 'FULL_CONTROL',
} as const;

/**
 * The canned ACL that the ACL a request asks for is: its `x-amz-acl` header, or its `x-amz-grant-*`
 * headers when they are exactly equivalent to one (grants to `ownerId`, the bucket's owner, say nothing);
 * undefined when it asks for none. `bucket-owner-read` and `bucket-owner-full-control` are `private`
 * here: a storage owns its buckets and every object in them.
 */
export function requestedAcl(headers: IncomingHttpHeaders, ownerId: string): CannedAcl | undefined {
  const value = headerValue(headers, 'x-amz-acl');
  const granted = Object.keys(GRANT_HEADERS).some((name) => headers[name] !== undefined);
  if (value !== undefined && granted)
    throw errors.invalidRequest('Specifying both Canned ACLs and Header Grants is not allowed');
  if (granted) return grantedAcl(headers, ownerId);
  if (value === undefined) return undefined;
  if (value === 'bucket-owner-read' || value === 'bucket-owner-full-control') return 'private';
  if (isCannedAcl(value)) return value;
  if (value === 'aws-exec-read' || value === 'log-delivery-write')
    throw errors.notImplemented(
      `The canned ACL ${value} is not implemented (accepted: ${CANNED_ACLS.join(', ')})`,
    );
  throw errors.invalidArgument(`x-amz-acl must be one of ${CANNED_ACLS.join(', ')}`);
}

const foreignGrant = () =>
  errors.notImplemented(
    'Grants to other accounts (by ID or e-mail address) are not implemented: use a canned ACL (private, public-read, public-read-write, authenticated-read)',
  );

/** Grants as an ACL document or grant headers list them; `id` alone for the owner's. */
interface Grant {
  permission: string;
  id?: string;
  uri?: string;
  email?: string;
}

/**
 * The canned ACL a list of grants is exactly equivalent to. The owner's own grants say nothing (it
 * keeps FULL_CONTROL); a grant to another account, or a set of group grants that is no canned ACL, is
 * refused before anything changes.
 */
function cannedAclOf(grants: Grant[], ownerId: string): CannedAcl {
  const groups = new Set<string>();
  for (const { permission, id, uri, email } of grants) {
    if (email !== undefined) throw foreignGrant();
    if (id !== undefined) {
      if (id !== ownerId) throw foreignGrant();
      continue;
    }
    if (uri !== ALL_USERS && uri !== AUTHENTICATED_USERS)
      throw errors.notImplemented(`Grants to ${uri ?? 'that grantee'} are not implemented`);
    groups.add(`${uri} ${permission}`);
  }
  const found = CANNED_ACLS.find((acl) => {
    const grants = GRANTS[acl].map(([u, p]) => `${u} ${p}`);
    return grants.length === groups.size && grants.every((g) => groups.has(g));
  });
  if (found === undefined)
    throw errors.notImplemented(
      'Only ACLs equivalent to a canned ACL are implemented: AllUsers READ (public-read), AllUsers READ and WRITE (public-read-write), AuthenticatedUsers READ (authenticated-read), or none (private)',
    );
  return found;
}

/** The canned ACL an AccessControlPolicy document is exactly equivalent to (cannedAclOf). */
export function parseAccessControlPolicy(xml: string, ownerId: string): CannedAcl {
  if (!/<AccessControlPolicy[\s>]/.test(xml)) throw errors.malformedXml();
  const grants: Grant[] = [];
  for (const grant of elements(xml, 'Grant')) {
    const permission = text(grant, 'Permission');
    if (permission === undefined) throw errors.malformedXml();
    grants.push({
      permission,
      id: text(grant, 'ID'),
      uri: text(grant, 'URI'),
      email: text(grant, 'EmailAddress'),
    });
  }
  return cannedAclOf(grants, ownerId);
}

/**
 * The canned ACL the x-amz-grant-* headers are exactly equivalent to (cannedAclOf). Each lists
 * grantees as `id="…"`, `uri="…"` or `emailAddress="…"`, comma-separated.
 */
function grantedAcl(headers: IncomingHttpHeaders, ownerId: string): CannedAcl {
  const grants: Grant[] = [];
  for (const [name, permission] of Object.entries(GRANT_HEADERS)) {
    const value = headerValue(headers, name);
    if (value === undefined) continue;
    for (const item of value.split(',')) {
      const grantee = /^\s*(id|uri|emailAddress)\s*=\s*"?([^"]*)"?\s*$/i.exec(item);
      if (!grantee)
        throw errors.invalidArgument(`${name} lists grantees as id="…", uri="…" or emailAddress="…"`);
      const [, type = '', who = ''] = grantee;
      const kind = type.toLowerCase();
      grants.push({
        permission,
        ...(kind === 'id' ? { id: who } : kind === 'uri' ? { uri: who } : { email: who }),
      });
    }
  }
  return cannedAclOf(grants, ownerId);
}

/** GetBucketAcl/GetObjectAcl: the owner's FULL_CONTROL and the canned ACL's group grants. */
export function aclDocument(acl: string, owner: { ID: string; DisplayName: string }): string {
  const xsi = 'xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"';
  const ownerXml = `<ID>${escapeXml(owner.ID)}</ID><DisplayName>${escapeXml(owner.DisplayName)}</DisplayName>`;
  // The group grants first, then the owner's, in the order RGW lists them (Ceph's s3-tests expect it).
  const grants = [
    ...GRANTS[aclOf(acl)].map(
      ([uri, permission]) =>
        `<Grant><Grantee ${xsi} xsi:type="Group"><URI>${uri}</URI></Grantee><Permission>${permission}</Permission></Grant>`,
    ),
    `<Grant><Grantee ${xsi} xsi:type="CanonicalUser">${ownerXml}</Grantee><Permission>FULL_CONTROL</Permission></Grant>`,
  ];
  return `<?xml version="1.0" encoding="UTF-8"?>\n<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner>${ownerXml}</Owner><AccessControlList>${grants.join('')}</AccessControlList></AccessControlPolicy>`;
}

// ---- PublicAccessBlock ----

export interface PublicAccessBlock {
  BlockPublicAcls: boolean;
  IgnorePublicAcls: boolean;
  BlockPublicPolicy: boolean;
  RestrictPublicBuckets: boolean;
}
const PAB_FIELDS = [
  'BlockPublicAcls',
  'IgnorePublicAcls',
  'BlockPublicPolicy',
  'RestrictPublicBuckets',
] as const;
const ALL_BLOCKED: PublicAccessBlock = {
  BlockPublicAcls: true,
  IgnorePublicAcls: true,
  BlockPublicPolicy: true,
  RestrictPublicBuckets: true,
};
const NONE_BLOCKED: PublicAccessBlock = {
  BlockPublicAcls: false,
  IgnorePublicAcls: false,
  BlockPublicPolicy: false,
  RestrictPublicBuckets: false,
};

export function parsePublicAccessBlock(xml: string): PublicAccessBlock {
  if (!/<PublicAccessBlockConfiguration[\s>]/.test(xml)) throw errors.malformedXml();
  const config = { ...NONE_BLOCKED };
  for (const field of PAB_FIELDS) {
    const value = text(xml, field)?.trim().toLowerCase();
    if (value === undefined) continue;
    if (value !== 'true' && value !== 'false') throw errors.malformedXml();
    config[field] = value === 'true';
  }
  return config;
}

/** What applies to a bucket: its own settings, each forced on by the operator's default. */
export function effectiveBlock(bucket: BucketRow, blockAll: boolean): PublicAccessBlock {
  if (blockAll) return ALL_BLOCKED;
  return bucket.public_access_block
    ? { ...NONE_BLOCKED, ...(JSON.parse(bucket.public_access_block) as Partial<PublicAccessBlock>) }
    : NONE_BLOCKED;
}

// ---- callers and the decision ----

/** Who signed a request, as ACLs and bucket policies see it. */
export type CallerKind =
  /** One of the bucket's storage's own users: its user policy applies. */
  | 'user'
  /** A valid key of another storage, on this storage's own endpoint: an AuthenticatedUsers member. */
  | 'other'
  /** No signature at all. */
  | 'anonymous';

/** The data actions ACLs and bucket policies speak of (see the header comment). */
const DATA_ACTIONS = new Set(['s3:GetObject', 's3:ListBucket', 's3:PutObject', 's3:DeleteObject']);

export interface AccessSubject {
  kind: CallerKind;
  statements: readonly Statement[];
  accessKeyId?: string;
  username?: string;
  sourceIp: string;
}

export function createAccessDecision(blockAll: boolean) {
  const compiled = new Map<string, readonly Statement[]>();

  /** The bucket's compiled policy; a stored policy is one that compiled when it was put. */
  function policyOf(bucket: BucketRow): readonly Statement[] | undefined {
    if (bucket.policy === null || bucket.policy === undefined) return undefined;
    const cacheKey = `${bucket.object_storage_id}/${bucket.name}\n${bucket.policy}`;
    let found = compiled.get(cacheKey);
    if (!found) {
      try {
        found = compileBucketPolicy(bucket.policy, bucket.name, String(bucket.object_storage_id));
      } catch {
        found = [{ effect: 'Deny', actions: [/.*/], resources: [{ pattern: '*', regex: /.*/ }] }];
      }
      if (compiled.size > 1000) compiled.clear();
      compiled.set(cacheKey, found);
    }
    return found;
  }

  /**
   * Whether the caller may do what `request` asks on `bucket` (undefined: no bucket, as ListBuckets).
   * `objectAcl`: the ACL of the object a GetObject reads, once it is known.
   */
  function allows(
    subject: AccessSubject,
    request: AccessRequest,
    bucket: BucketRow | undefined,
    objectAcl?: string,
  ): boolean {
    const own = subject.kind === 'user' ? decide(subject.statements, request) : undefined;
    if (own === 'Deny') return false;
    if (bucket === undefined || !DATA_ACTIONS.has(request.action)) return own === 'Allow';
    const block = effectiveBlock(bucket, blockAll);
    const policy = policyOf(bucket);
    const context: RequestContext = {
      sourceIp: subject.sourceIp,
      ...(subject.kind === 'user' ? { accessKeyId: subject.accessKeyId, username: subject.username } : {}),
    };
    const byPolicy = policy && decide(policy, request, context);
    if (byPolicy === 'Deny') return false;
    if (own === 'Allow') return true;
    // RestrictPublicBuckets: a public policy grants the storage's own users only.
    if (
      byPolicy === 'Allow' &&
      !(block.RestrictPublicBuckets && subject.kind !== 'user' && isPublicPolicy(policy!))
    )
      return true;
    if (block.IgnorePublicAcls) return false;
    const covers = (acl: CannedAcl, permission: 'READ' | 'WRITE') =>
      GRANTS[acl].some(([uri, p]) => p === permission && (uri === ALL_USERS || subject.kind !== 'anonymous'));
    switch (request.action) {
      case 's3:ListBucket':
        return covers(aclOf(bucket.acl), 'READ');
      case 's3:PutObject':
      case 's3:DeleteObject':
        return covers(aclOf(bucket.acl), 'WRITE');
      default:
        return objectAcl !== undefined && covers(aclOf(objectAcl), 'READ');
    }
  }

  return {
    allows,
    /** GetBucketPolicyStatus: a public ACL or a public policy. */
    isPublic(bucket: BucketRow): boolean {
      const policy = policyOf(bucket);
      return isPublicAcl(aclOf(bucket.acl)) || (policy !== undefined && isPublicPolicy(policy));
    },
    block: (bucket: BucketRow) => effectiveBlock(bucket, blockAll),
    /** CreateBucket: no bucket settings yet, only the operator's. */
    blocksPublicAcls: () => blockAll,
  };
}

export type AccessDecision = ReturnType<typeof createAccessDecision>;

// ---- the client's address ----

/** A set of addresses and CIDRs (validated by loadConfig). */
export function addressSet(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [address = '', bits] = entry.split('/');
    const family = isIPv4(address) ? 'ipv4' : 'ipv6';
    if (!isIPv4(address) && !isIPv6(address)) continue;
    list.addSubnet(address, bits === undefined ? (family === 'ipv4' ? 32 : 128) : Number(bits), family);
  }
  return list;
}

const plain = (address: string) => address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '');
const inSet = (set: BlockList, address: string) =>
  (isIPv4(address) || isIPv6(address)) && set.check(address, isIPv4(address) ? 'ipv4' : 'ipv6');

/**
 * The client's address (aws:SourceIp): the peer's, or, when the peer is a trusted proxy
 * (BERTH_TRUSTED_PROXIES), the last X-Forwarded-For entry that is not one.
 */
export function sourceAddress(req: IncomingMessage, proxies: BlockList | undefined): string {
  let address = plain(req.socket.remoteAddress ?? '');
  if (proxies === undefined || !inSet(proxies, address)) return address;
  const forwarded = (headerValue(req.headers, 'x-forwarded-for') ?? '')
    .split(',')
    .map((a) => plain(a.trim()))
    .filter(Boolean);
  while (forwarded.length > 0 && inSet(proxies, address)) address = forwarded.pop()!;
  return address;
}

// ---- the operations ----

const noSuchPolicy = (bucket: string) =>
  new S3Error('NoSuchBucketPolicy', 404, 'The bucket policy does not exist', { BucketName: bucket });
const noSuchBlock = (bucket: string) =>
  new S3Error(
    'NoSuchPublicAccessBlockConfiguration',
    404,
    'The public access block configuration was not found',
    {
      BucketName: bucket,
    },
  );
export const publicAclBlocked = () =>
  errors.accessDenied('Public ACLs are blocked by the PublicAccessBlock of this bucket or storage');

export interface AccessFeatureDeps {
  meta: ObjectMetadata;
  decision: AccessDecision;
  /** Forgets the bucket in the look-up caches, so that a change here applies at once. */
  forget: (bucket: BucketRow) => void;
  owner: (bucket: BucketRow) => { ID: string; DisplayName: string };
}

export function createAccessFeature({ meta, decision, forget, owner }: AccessFeatureDeps) {
  /** The ACL a PutBucketAcl/PutObjectAcl asks for: x-amz-acl, x-amz-grant-* or an AccessControlPolicy body. */
  async function aclOfRequest(x: FeatureExchange, bucket: BucketRow): Promise<CannedAcl> {
    const header = requestedAcl(x.req.headers, owner(bucket).ID);
    const body = await x.readXml();
    if (header !== undefined) return header;
    if (body.trim() === '') throw errors.invalidRequest('Specify x-amz-acl or an AccessControlPolicy');
    return parseAccessControlPolicy(body, owner(bucket).ID);
  }

  return {
    getBucketAcl: (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:GetBucketAcl', bucket: bucket.name });
      x.replyDocument(aclDocument(bucket.acl, owner(bucket)));
      return Promise.resolve();
    },

    putBucketAcl: async (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:PutBucketAcl', bucket: bucket.name });
      const acl = await aclOfRequest(x, bucket);
      if (isPublicAcl(acl) && decision.block(bucket).BlockPublicAcls) throw publicAclBlocked();
      await meta.setBucketAccess(bucket.id, { acl });
      forget(bucket);
      x.reply(200);
    },

    getObjectAcl: async (x: FeatureExchange, bucket: BucketRow, key: string): Promise<void> => {
      x.allow({ action: 's3:GetObjectAcl', bucket: bucket.name, key });
      const object = await meta.findObject(bucket.id, key);
      if (!object) throw errors.noSuchKey(key);
      x.replyDocument(aclDocument(object.acl ?? 'private', owner(bucket)));
    },

    putObjectAcl: async (x: FeatureExchange, bucket: BucketRow, key: string): Promise<void> => {
      x.allow({ action: 's3:PutObjectAcl', bucket: bucket.name, key });
      const acl = await aclOfRequest(x, bucket);
      if (isPublicAcl(acl) && decision.block(bucket).BlockPublicAcls) throw publicAclBlocked();
      if (!(await meta.setObjectAcl(bucket.id, key, acl))) throw errors.noSuchKey(key);
      x.reply(200);
    },

    getPolicy: (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:GetBucketPolicy', bucket: bucket.name });
      if (bucket.policy === null || bucket.policy === undefined) throw noSuchPolicy(bucket.name);
      x.replyDocument(bucket.policy, 'application/json');
      return Promise.resolve();
    },

    putPolicy: async (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:PutBucketPolicy', bucket: bucket.name });
      const text = await x.readXml();
      let statements: Statement[];
      try {
        statements = compileBucketPolicy(text, bucket.name, owner(bucket).ID);
      } catch (error) {
        if (error instanceof MalformedPolicy) throw new S3Error('MalformedPolicy', 400, error.message);
        throw error;
      }
      if (isPublicPolicy(statements) && decision.block(bucket).BlockPublicPolicy)
        throw errors.accessDenied(
          'Public policies are blocked by the PublicAccessBlock of this bucket or storage',
        );
      await meta.setBucketAccess(bucket.id, { policy: text });
      forget(bucket);
      x.reply(204);
    },

    deletePolicy: async (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:DeleteBucketPolicy', bucket: bucket.name });
      await meta.setBucketAccess(bucket.id, { policy: null });
      forget(bucket);
      x.reply(204);
    },

    policyStatus: (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:GetBucketPolicyStatus', bucket: bucket.name });
      x.replyXml('PolicyStatus', { IsPublic: decision.isPublic(bucket) });
      return Promise.resolve();
    },

    getBlock: (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:GetBucketPublicAccessBlock', bucket: bucket.name });
      if (!bucket.public_access_block) throw noSuchBlock(bucket.name);
      const config = { ...NONE_BLOCKED, ...(JSON.parse(bucket.public_access_block) as PublicAccessBlock) };
      x.replyXml('PublicAccessBlockConfiguration', { ...config });
      return Promise.resolve();
    },

    putBlock: async (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:PutBucketPublicAccessBlock', bucket: bucket.name });
      const config = parsePublicAccessBlock(await x.readXml());
      await meta.setBucketAccess(bucket.id, { public_access_block: JSON.stringify(config) });
      forget(bucket);
      x.reply(200);
    },

    deleteBlock: async (x: FeatureExchange, bucket: BucketRow): Promise<void> => {
      x.allow({ action: 's3:PutBucketPublicAccessBlock', bucket: bucket.name });
      await meta.setBucketAccess(bucket.id, { public_access_block: null });
      forget(bucket);
      x.reply(204);
    },
  };
}
