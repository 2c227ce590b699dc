// Access policies of an object-storage user. Accepted forms (each element of a user's `policies`):
//   - a canned name: `read`, `write`, `readwrite`, `admin`, optionally scoped as `read:<bucket>` or
//     `readwrite:<bucket>/<prefix>`;
//   - an S3-style statement `{Effect, Action, Resource}` (Action/Resource a string or a list, `*` and
//     `?` wildcards, resources as `arn:aws:s3:::bucket` and `arn:aws:s3:::bucket/key-pattern`);
//   - a policy document `{Version?, Statement: [statement, …]}`.
// An explicit Deny wins over any Allow; nothing allowed means denied, so an empty list grants nothing.
// Whatever a policy says, only the buckets of the user's own object storage are reachable: the server
// checks ownership before it asks the policy.
//
// A bucket's policy (PutBucketPolicy, access.ts) is compiled here too, by the same matcher, with what a
// user's policy has no use for: a Principal and Conditions (compileBucketPolicy).
import { BlockList, isIPv4, isIPv6 } from 'node:net';

export interface Statement {
  effect: 'Allow' | 'Deny';
  actions: RegExp[];
  /** Resource patterns as written, and compiled. */
  resources: Array<{ pattern: string; regex: RegExp }>;
  /** A bucket policy's: whom the statement speaks of; a user's statements speak of the user. */
  principal?: Principal;
  /** A bucket policy's conditions, all of which must hold. */
  conditions?: Condition[];
}

/**
 * `*` (anyone, signed or not), or the storage's own users: by access key id or user name, or all of
 * them (`root`: the storage's account).
 */
export type Principal =
  { anyone: true } | { anyone: false; keys: Set<string>; users: Set<string>; everyUser: boolean };

export type Condition =
  | { operator: 'IpAddress' | 'NotIpAddress'; ips: BlockList }
  | { operator: 'StringEquals' | 'StringLike'; prefixes: RegExp[] };

/** What a bucket policy's principals and conditions are matched against. */
export interface RequestContext {
  /** The caller's access key id and user name when it is one of the storage's own users. */
  accessKeyId?: string;
  username?: string;
  /** The client's address (aws:SourceIp). */
  sourceIp: string;
}

export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyError';
  }
}

const ARN = 'arn:aws:s3:::';

const READ = ['s3:ListAllMyBuckets', 's3:ListBucket', 's3:GetBucketLocation', 's3:GetObject'];
const WRITE = [
  's3:PutObject',
  's3:DeleteObject',
  's3:AbortMultipartUpload',
  's3:ListMultipartUploadParts',
  's3:ListBucketMultipartUploads',
];
const CANNED: Record<string, string[]> = {
  read: READ,
  write: WRITE,
  readwrite: [...READ, ...WRITE],
  admin: ['s3:*'],
};

function wildcard(pattern: string, flags = ''): RegExp {
  const body = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`, flags);
}

function list(value: unknown, what: string): string[] {
  const items = typeof value === 'string' ? [value] : value;
  if (!Array.isArray(items) || items.length === 0 || !items.every((v) => typeof v === 'string' && v !== '')) {
    throw new PolicyError(`${what} must be a non-empty string or list of strings`);
  }
  return items as string[];
}

function statement(effect: 'Allow' | 'Deny', actions: string[], resources: string[]): Statement {
  for (const action of actions) {
    if (action !== '*' && !/^s3:[A-Za-z*?]+$/.test(action)) {
      throw new PolicyError(`action '${action}' is not an s3:… action`);
    }
  }
  for (const resource of resources) {
    if (resource !== '*' && !resource.startsWith(ARN)) {
      throw new PolicyError(`resource '${resource}' must be '*' or start with '${ARN}'`);
    }
  }
  return {
    effect,
    actions: actions.map((a) => wildcard(a === '*' ? 's3:*' : a, 'i')),
    resources: resources.map((r) => {
      const pattern = r === '*' ? `${ARN}*` : r;
      return { pattern, regex: wildcard(pattern) };
    }),
  };
}

function canned(text: string): Statement {
  const colon = text.indexOf(':');
  const name = (colon < 0 ? text : text.slice(0, colon)).toLowerCase();
  const actions = CANNED[name];
  if (!actions) {
    throw new PolicyError(
      `unknown policy '${text}': use read, write, readwrite or admin (optionally ':<bucket>[/<prefix>]') or an S3 statement`,
    );
  }
  if (colon < 0) return statement('Allow', actions, [`${ARN}*`]);
  const scope = text.slice(colon + 1);
  const slash = scope.indexOf('/');
  const bucket = slash < 0 ? scope : scope.slice(0, slash);
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new PolicyError(`policy '${text}' names an invalid bucket '${bucket}'`);
  }
  // A prefix scope grants the objects under it and listing within it, not the whole bucket.
  return slash < 0
    ? statement('Allow', actions, [`${ARN}${bucket}`, `${ARN}${bucket}/*`])
    : statement('Allow', actions, [`${ARN}${bucket}/${scope.slice(slash + 1)}*`]);
}

function fromObject(value: Record<string, unknown>, where: string): Statement[] {
  if ('Statement' in value) {
    const statements = Array.isArray(value.Statement) ? (value.Statement as unknown[]) : [value.Statement];
    return statements.flatMap((s, i) => {
      if (typeof s !== 'object' || s === null || Array.isArray(s)) {
        throw new PolicyError(`${where}.Statement[${i}] must be an object`);
      }
      return fromObject(s as Record<string, unknown>, `${where}.Statement[${i}]`);
    });
  }
  const effect = value.Effect;
  if (effect !== 'Allow' && effect !== 'Deny') throw new PolicyError(`${where}.Effect must be Allow or Deny`);
  if ('NotAction' in value || 'NotResource' in value || 'Condition' in value || 'Principal' in value) {
    throw new PolicyError(`${where}: NotAction, NotResource, Principal and Condition are not supported`);
  }
  return [
    statement(
      effect,
      list(value.Action, `${where}.Action`),
      list(value.Resource ?? '*', `${where}.Resource`),
    ),
  ];
}

/** Compiles a user's policies; throws PolicyError naming the first form it does not accept. */
export function compilePolicies(policies: unknown): Statement[] {
  if (!Array.isArray(policies)) throw new PolicyError('policies must be a list');
  return policies.flatMap((policy, i): Statement[] => {
    if (typeof policy === 'string') return [canned(policy.trim())];
    if (typeof policy === 'object' && policy !== null && !Array.isArray(policy)) {
      return fromObject(policy as Record<string, unknown>, `policies[${i}]`);
    }
    throw new PolicyError(`policies[${i}] must be a canned name or an S3 policy statement`);
  });
}

export interface AccessRequest {
  action: string;
  bucket?: string;
  key?: string;
  /** ListBucket: the prefix asked for; a grant on `bucket/<p>*` allows listing under `<p>`. */
  listPrefix?: string;
}

function literalPrefix(pattern: string): string {
  const i = pattern.search(/[*?]/);
  return i < 0 ? pattern : pattern.slice(0, i);
}

function applies(s: Statement, request: AccessRequest): boolean {
  if (!s.actions.some((a) => a.test(request.action))) return false;
  // Listing all buckets has no resource of its own; the action alone decides.
  if (request.action === 's3:ListAllMyBuckets' || request.bucket === undefined) return true;
  const bucketArn = `${ARN}${request.bucket}`;
  if (request.key !== undefined) {
    const arn = `${bucketArn}/${request.key}`;
    return s.resources.some((r) => r.regex.test(arn));
  }
  return s.resources.some((r) => {
    if (r.regex.test(bucketArn)) return true;
    if (request.listPrefix === undefined || !r.pattern.includes('/')) return false;
    const literal = literalPrefix(r.pattern);
    return literal !== r.pattern && `${bucketArn}/${request.listPrefix}`.startsWith(literal);
  });
}

export function isAllowed(statements: readonly Statement[], request: AccessRequest): boolean {
  return decide(statements, request) === 'Allow';
}

function principalMatches(s: Statement, context: RequestContext | undefined): boolean {
  const { principal } = s;
  if (principal === undefined) return true;
  // A Deny for `*` binds every caller but the storage's own users, whom their user policies govern:
  // a bucket policy takes from them only what it names them for, so it cannot lock the owner out.
  if (principal.anyone) return !(s.effect === 'Deny' && context?.accessKeyId !== undefined);
  if (principal.everyUser && context?.accessKeyId !== undefined) return true;
  return (
    (context?.accessKeyId !== undefined && principal.keys.has(context.accessKeyId)) ||
    (context?.username !== undefined && principal.users.has(context.username))
  );
}

function conditionHolds(condition: Condition, request: AccessRequest, context: RequestContext | undefined) {
  if ('ips' in condition) {
    const ip = context?.sourceIp;
    const family = ip !== undefined && isIPv4(ip) ? 'ipv4' : 'ipv6';
    const inside = ip !== undefined && condition.ips.check(ip, family);
    return condition.operator === 'IpAddress' ? inside : !inside;
  }
  // s3:prefix exists on listings only; a condition on a key that is absent does not hold (as on S3).
  const prefix = request.listPrefix;
  return prefix !== undefined && condition.prefixes.some((p) => p.test(prefix));
}

/**
 * What the statements say of the request: Deny when one denies it (an explicit Deny wins), Allow when
 * one allows it, undefined when none speaks of it. `context` is a bucket policy's principal and
 * conditions input; a user's statements have neither.
 */
export function decide(
  statements: readonly Statement[],
  request: AccessRequest,
  context?: RequestContext,
): 'Allow' | 'Deny' | undefined {
  let allowed = false;
  for (const s of statements) {
    if (!applies(s, request)) continue;
    if (!principalMatches(s, context)) continue;
    if (s.conditions && !s.conditions.every((c) => conditionHolds(c, request, context))) continue;
    if (s.effect === 'Deny') return 'Deny';
    allowed = true;
  }
  return allowed ? 'Allow' : undefined;
}

// ---- bucket policies ----

/** The actions a bucket policy may name: the data a bucket holds, never its configuration. */
export const BUCKET_POLICY_ACTIONS = ['s3:GetObject', 's3:ListBucket', 's3:PutObject', 's3:DeleteObject'];

/** A bucket policy Berth cannot enforce as written: S3's 400 MalformedPolicy, naming the element. */
export class MalformedPolicy extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedPolicy';
  }
}

const STATEMENT_KEYS = new Set(['Sid', 'Effect', 'Principal', 'Action', 'Resource', 'Condition']);

function policyList(value: unknown, where: string): string[] {
  try {
    return list(value, where);
  } catch (error) {
    throw new MalformedPolicy((error as Error).message);
  }
}

function principalOf(value: unknown, where: string, account: string): Principal {
  if (value === '*') return { anyone: true };
  const aws =
    typeof value === 'object' && value !== null && !Array.isArray(value) && Object.keys(value).length === 1
      ? (value as Record<string, unknown>).AWS
      : undefined;
  if (aws === undefined)
    throw new MalformedPolicy(`${where}.Principal must be "*" or {"AWS": [...]} (no other principal type)`);
  const names = policyList(aws, `${where}.Principal.AWS`);
  if (names.includes('*')) {
    if (names.length > 1) throw new MalformedPolicy(`${where}.Principal.AWS: "*" stands alone`);
    return { anyone: true };
  }
  const keys = new Set<string>();
  const users = new Set<string>();
  let everyUser = false;
  const arn = `arn:aws:iam::${account}:`;
  for (const name of names) {
    const user = name.startsWith(`${arn}user/`) ? name.slice(arn.length + 5) : undefined;
    if (user !== undefined && /^[A-Za-z0-9._@+=,-]{1,64}$/.test(user)) users.add(user);
    else if (name === `${arn}root` || name === account) everyUser = true;
    else if (/^[A-Z0-9]{16,128}$/.test(name)) keys.add(name);
    else
      throw new MalformedPolicy(
        `${where}.Principal.AWS: '${name}' is not a principal of this storage (accepted: "*", an access key id, ${arn}user/<username>, ${arn}root)`,
      );
  }
  return { anyone: false, keys, users, everyUser };
}

function cidrs(values: string[], where: string): BlockList {
  const ips = new BlockList();
  for (const value of values) {
    const [address, bits, extra] = value.split('/');
    const family = isIPv4(address ?? '') ? 'ipv4' : isIPv6(address ?? '') ? 'ipv6' : undefined;
    const max = family === 'ipv4' ? 32 : 128;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === undefined || extra !== undefined || !(prefix >= 0 && prefix <= max))
      throw new MalformedPolicy(`${where}: '${value}' is not an IP address or CIDR`);
    ips.addSubnet(address!, prefix, family);
  }
  return ips;
}

function conditionsOf(value: unknown, where: string): Condition[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new MalformedPolicy(`${where}.Condition must be an object`);
  return Object.entries(value as Record<string, unknown>).map(([operator, block]): Condition => {
    const at = `${where}.Condition.${operator}`;
    if (typeof block !== 'object' || block === null || Array.isArray(block))
      throw new MalformedPolicy(`${at} must be an object`);
    const entries = Object.entries(block as Record<string, unknown>);
    const expected =
      operator === 'IpAddress' || operator === 'NotIpAddress'
        ? 'aws:SourceIp'
        : operator === 'StringEquals' || operator === 'StringLike'
          ? 's3:prefix'
          : undefined;
    if (expected === undefined)
      throw new MalformedPolicy(
        `${at}: unsupported condition operator (use IpAddress, NotIpAddress, StringEquals or StringLike)`,
      );
    const [key, values] = entries[0] ?? [];
    if (entries.length !== 1 || key?.toLowerCase() !== expected.toLowerCase())
      throw new MalformedPolicy(`${at}: the only condition key accepted here is ${expected}`);
    const items = policyList(values, `${at}.${key}`);
    if (operator === 'IpAddress' || operator === 'NotIpAddress')
      return { operator, ips: cidrs(items, `${at}.${key}`) };
    return {
      operator: operator as 'StringEquals' | 'StringLike',
      prefixes: items.map((v) =>
        operator === 'StringLike' ? wildcard(v) : new RegExp(`^${v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`),
      ),
    };
  });
}

/**
 * Compiles a bucket policy document (JSON text) for `bucket` of the storage whose account id (the
 * Owner ID of its ACLs) is `account`; throws MalformedPolicy naming the first element it does not
 * accept. Actions: BUCKET_POLICY_ACTIONS, or `s3:*`/`*` for all four.
 */
export function compileBucketPolicy(text: string, bucket: string, account: string): Statement[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new MalformedPolicy('Policies must be valid JSON');
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new MalformedPolicy('The policy must be a JSON object');
  for (const key of Object.keys(doc)) {
    if (key !== 'Version' && key !== 'Id' && key !== 'Statement')
      throw new MalformedPolicy(`Unknown element '${key}' (accepted: Version, Id, Statement)`);
  }
  const { Version, Statement: raw } = doc as Record<string, unknown>;
  if (Version !== undefined && Version !== '2012-10-17' && Version !== '2008-10-17')
    throw new MalformedPolicy(`Version must be 2012-10-17`);
  const statements = Array.isArray(raw) ? (raw as unknown[]) : raw === undefined ? [] : [raw];
  if (statements.length === 0) throw new MalformedPolicy('Statement must hold at least one statement');
  return statements.map((s, i) => {
    const where = `Statement[${i}]`;
    if (typeof s !== 'object' || s === null || Array.isArray(s))
      throw new MalformedPolicy(`${where} must be an object`);
    const value = s as Record<string, unknown>;
    for (const key of Object.keys(value)) {
      if (!STATEMENT_KEYS.has(key))
        throw new MalformedPolicy(
          `${where}.${key} is not supported (accepted: ${[...STATEMENT_KEYS].join(', ')})`,
        );
    }
    const effect = value.Effect;
    if (effect !== 'Allow' && effect !== 'Deny')
      throw new MalformedPolicy(`${where}.Effect must be Allow or Deny`);
    if (value.Principal === undefined) throw new MalformedPolicy(`${where}.Principal is required`);
    const principal = principalOf(value.Principal, where, account);
    const actions = policyList(value.Action, `${where}.Action`);
    for (const action of actions) {
      if (action !== '*' && action !== 's3:*' && !BUCKET_POLICY_ACTIONS.includes(action))
        throw new MalformedPolicy(
          `${where}.Action '${action}' is not supported (accepted: ${BUCKET_POLICY_ACTIONS.join(', ')}, s3:*)`,
        );
    }
    const resources = policyList(value.Resource, `${where}.Resource`);
    for (const resource of resources) {
      if (resource !== `${ARN}${bucket}` && !resource.startsWith(`${ARN}${bucket}/`))
        throw new MalformedPolicy(`${where}.Resource '${resource}' is not this bucket or its objects`);
    }
    const compiled = statement(
      effect,
      actions.flatMap((a) => (a === '*' || a === 's3:*' ? BUCKET_POLICY_ACTIONS : [a])),
      resources,
    );
    return {
      ...compiled,
      principal,
      ...(value.Condition !== undefined ? { conditions: conditionsOf(value.Condition, where) } : {}),
    };
  });
}

/**
 * Whether a policy grants anyone outside the storage: an Allow for `*` that no aws:SourceIp
 * (IpAddress) condition narrows to given addresses.
 */
export function isPublicPolicy(statements: readonly Statement[]): boolean {
  return statements.some(
    (s) =>
      s.effect === 'Allow' &&
      s.principal?.anyone === true &&
      !(s.conditions ?? []).some((c) => c.operator === 'IpAddress'),
  );
}

/** The Sid of the statement Berth keeps in a bucket's policy for a document's `acl: public-read`. */
export const DOCUMENT_PUBLIC_READ_SID = 'BerthDocumentPublicRead';

/**
 * A bucket policy (JSON text, or null for none) with the document's public-read statement put in
 * (`publicRead`) or taken out, every other statement as it was; null when no statement is left.
 */
export function withDocumentPublicRead(
  policy: string | null,
  bucket: string,
  publicRead: boolean,
): string | null {
  let doc: { Version?: string; Statement?: unknown[] } = {};
  if (policy !== null) {
    try {
      doc = JSON.parse(policy) as typeof doc;
    } catch {
      doc = {};
    }
  }
  const others = (Array.isArray(doc.Statement) ? doc.Statement : []).filter(
    (s) => (s as { Sid?: unknown }).Sid !== DOCUMENT_PUBLIC_READ_SID,
  );
  const statements = publicRead
    ? [
        ...others,
        {
          Sid: DOCUMENT_PUBLIC_READ_SID,
          Effect: 'Allow',
          Principal: '*',
          Action: 's3:GetObject',
          Resource: `arn:aws:s3:::${bucket}/*`,
        },
      ]
    : others;
  if (statements.length === 0) return null;
  return JSON.stringify({ ...doc, Version: doc.Version ?? '2012-10-17', Statement: statements });
}
