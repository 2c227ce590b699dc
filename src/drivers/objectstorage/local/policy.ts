// Access policies of an object-storage user. Accepted forms (each element of a user's `policies`):
//   - a canned name: `read`, `write`, `readwrite`, `admin`, optionally scoped as `read:<bucket>` or
//     `readwrite:<bucket>/<prefix>`;
//   - an S3-style statement `{Effect, Action, Resource}` (Action/Resource a string or a list, `*` and
//     `?` wildcards, resources as `arn:aws:s3:::bucket` and `arn:aws:s3:::bucket/key-pattern`);
//   - a policy document `{Version?, Statement: [statement, …]}`.
// An explicit Deny wins over any Allow; nothing allowed means denied, so an empty list grants nothing.
// Whatever a policy says, only the buckets of the user's own object storage are reachable: the server
// checks ownership before it asks the policy.

export interface Statement {
  effect: 'Allow' | 'Deny';
  actions: RegExp[];
  /** Resource patterns as written, and compiled. */
  resources: Array<{ pattern: string; regex: RegExp }>;
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
  let allowed = false;
  for (const s of statements) {
    if (!applies(s, request)) continue;
    if (s.effect === 'Deny') return false;
    allowed = true;
  }
  return allowed;
}
