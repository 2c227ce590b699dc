// Sorts a run of Ceph's s3-tests into areas and says how Berth does in the areas it documents
// (docs/drivers-objectstorage.md); see docs/benchmarks/s3-compatibility.md.
// Usage: npx tsx scripts/s3-compat-report.ts <s3-tests checkout> <pytest output of a run with -rA>
//
// A test is outside the documented areas when it exercises something Berth documents as not
// implemented (and refuses before touching data): versioning, object lock, server-side encryption,
// lifecycle, logging, website, IAM/STS, S3 Select, storage classes, AppendObject, signature V2, and of
// ACLs and bucket policies the parts beyond canned ACLs and the policy subset (grants to accounts,
// other policy actions and conditions, a second account naming a bucket). That is read from the test
// itself — its pytest markers, its name, and the calls in its body — never from how it ended, so a
// failure cannot move a test out.
import fs from 'node:fs';
import path from 'node:path';

const [suite, logFile] = process.argv.slice(2);
if (!suite || !logFile) throw new Error('usage: s3-compat-report.ts <s3-tests checkout> <pytest -rA output>');

const OUT_MARKERS = new Set([
  'abac_test',
  'appendobject',
  'auth_aws2',
  'bucket_encryption',
  'bucket_logging',
  'bucket_logging_cleanup',
  'cloud_restore',
  'cloud_transition',
  'delete_marker',
  'encryption',
  'group',
  'group_policy',
  'iam_account',
  'iam_cross_account',
  'iam_role',
  'iam_tenant',
  'iam_user',
  'lifecycle',
  'lifecycle_expiration',
  'lifecycle_transition',
  'object_lock',
  'object_ownership',
  'role_policy',
  's3select',
  's3website',
  's3website_redirect_location',
  's3website_routing_rules',
  'session_policy',
  'sns',
  'sse_s3',
  'storage_class',
  'test_of_sts',
  'user_policy',
  'versioning',
  'webidentity_test',
]);
/** Name fragments of tests about features Berth does not implement, with the feature's name. */
const OUT_NAMES: Array<[RegExp, string]> = [
  [/owner_?ship/, 'object ownership'],
  [/version/, 'versioning'],
  [/lock|legal_hold|retention/, 'object lock'],
  [/encrypt|sse|_kms|_enc\b|_enc_|crypt/, 'server-side encryption'],
  [/lifecycle|expiration|transition/, 'lifecycle'],
  [/logging/, 'logging'],
  [/website/, 'website'],
  [/storage_class|restore/, 'storage classes'],
  [/append/, 'AppendObject'],
  [/_v2_|auth_v2|aws2|signature_v2|_v2$/, 'signature V2'],
  [/select/, 'S3 Select'],
  [/torrent|accelerate|request_payment|notification/, 'other bucket configuration'],
];
/** Calls in a test's body that use such a feature (often in set-up: a bucket made public-read). */
const OUT_CALLS: Array<[RegExp, string]> = [
  [/AWSAccessKeyId|hashlib\.sha1/, 'signature V2'],
  [/put_bucket_versioning|check_configure_versioning|VersionId\s*=|_versioned_|Versioning/, 'versioning'],
  [/ObjectLock|LegalHold|Retention/, 'object lock'],
  [/SSECustomer|ServerSideEncryption|SSEKMS|sse_kms|_encryption|encryption_sse/, 'server-side encryption'],
  [/put_bucket_lifecycle|LifecycleConfiguration/, 'lifecycle'],
  [/get_v2_client|get_new_v2|_v2_client|aws2/, 'signature V2'],
  [/get_tenant_client|get_iam_|get_sts_|iam_client|sts_client/, 'IAM / STS'],
  [/StorageClass\s*=\s*['"](?!STANDARD)/, 'storage classes'],
];

interface TestInfo {
  name: string;
  markers: string[];
  body: string;
}

/** The suite's tests, and the bodies of its helper functions (`_setup_access`…) by name. */
const helpers = new Map<string, string>();

function parseSuite(file: string): Map<string, TestInfo> {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const tests = new Map<string, TestInfo>();
  let markers: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const marker = /^@pytest\.mark\.(\w+)/.exec(line);
    if (marker) {
      markers.push(marker[1]!);
      continue;
    }
    const def = /^def (\w+)\(/.exec(line);
    if (def) {
      let end = i + 1;
      while (end < lines.length && !/^(def |@|class )/.test(lines[end]!)) end++;
      const body = lines.slice(i, end).join('\n');
      if (def[1]!.startsWith('test_')) tests.set(def[1]!, { name: def[1]!, markers, body });
      else helpers.set(def[1]!, body);
      i = end - 1;
    }
    if (!/^\s*$|^#/.test(line) && !marker) markers = [];
  }
  return tests;
}

/**
 * ACLs, public access and bucket policies: in the documented areas as far as Berth implements them
 * (canned ACLs, anonymous access, the policy subset, PublicAccessBlock; docs/drivers-objectstorage.md).
 */
const ACL_POLICY_NAME = /acl|grant|public|anon|unauthenticated|polic(y|ies)/;
const ACL_POLICY_CALLS =
  /acl|Grants|AccessControlPolicy|get_anon_client|get_unauthenticated_client|_get_anon|public-read|authenticated-read|Policy\s*=|put_bucket_policy|public_access_block/;
/** What of ACLs and policies Berth refuses, with the reason a test that uses it is outside. */
const ACL_POLICY_OUT: Array<[RegExp, string]> = [
  [
    /Grant(Read|Write|FullControl)[A-Za-z]*\s*=|x-amz-grant|EmailAddress|add_obj_user_grant|add_bucket_user_grant|'Grantee'\s*:\s*\{[^}]*'ID'/,
    'ACLs: grants to accounts',
  ],
  [
    /get_alt_client|alt_client|get_tenant_client|tenant_client/,
    'ACLs and policies: a second account names the bucket (decision 0008)',
  ],
  [
    /"s3:(?!GetObject"|ListBucket"|PutObject"|DeleteObject"|\*"|prefix")[A-Za-z*]+"/,
    'bucket policies: other actions',
  ],
  [/NotPrincipal|arn:aws:iam::|"Service"/, 'bucket policies: other principals'],
  [
    /"(Null|StringNotEquals|ArnLike|StringLikeIfExists|StringEqualsIfExists|NumericLessThan|Bool)"|s3:x-amz|s3:ExistingObjectTag|s3:RequestObjectTag/,
    'bucket policies: other conditions',
  ],
];
/** The same, read from a test's name. */
const ACL_POLICY_OUT_NAMES: Array<[RegExp, string]> = [
  [/recreate_.*acl/, 'ACLs: re-creating a bucket (us-east-1 answers 200, decision 0008)'],
  [/acl_revoke_all/, "ACLs: an ACL without the owner's grant (the owner keeps FULL_CONTROL)"],
];

/** A body with the bodies of the suite's helpers it calls, two calls deep (set-up hides in helpers). */
function withHelpers(body: string, depth = 2): string {
  if (depth === 0) return body;
  const called = new Set([...body.matchAll(/\b(_\w+)\(/g)].map((m) => m[1]!));
  return [body, ...[...called].map((name) => withHelpers(helpers.get(name) ?? '', depth - 1))].join('\n');
}

/** Why a test is outside the documented areas, or undefined when it is inside. */
function outsideReason(test: TestInfo): string | undefined {
  const marker = test.markers.find((m) => OUT_MARKERS.has(m));
  if (marker) return `marked ${marker}`;
  // RGW's own extensions (?usage, allow-unordered, x-rgw-* headers), which S3 itself fails.
  if (test.markers.includes('fails_on_aws')) return 'RGW extensions (marked fails_on_aws)';
  for (const [pattern, feature] of OUT_NAMES) if (pattern.test(test.name)) return feature;
  const body = withHelpers(test.body);
  for (const [pattern, feature] of OUT_CALLS) if (pattern.test(body)) return feature;
  if (isAclOrPolicy(test)) {
    for (const [pattern, feature] of ACL_POLICY_OUT_NAMES) if (pattern.test(test.name)) return feature;
    for (const [pattern, feature] of ACL_POLICY_OUT) if (pattern.test(body)) return feature;
  }
  return undefined;
}

const isAclOrPolicy = (test: TestInfo) =>
  ACL_POLICY_NAME.test(test.name) ||
  test.markers.includes('bucket_policy') ||
  ACL_POLICY_CALLS.test(withHelpers(test.body));

const AREAS: Array<[RegExp, string]> = [
  [/list|prefix|delimiter|marker|maxkeys|max_keys|continuation|startafter|encoding/, 'listing'],
  [/multipart|upload_part|part_/, 'multipart'],
  [/copy/, 'copy'],
  [/presign|expires/, 'presigned URLs'],
  [/cors/, 'CORS'],
  [/tag/, 'tagging'],
  [/post_object/, 'POST form uploads'],
  [/checksum|cksum|crc|sha256|md5/, 'checksums'],
  [
    /if_match|ifmatch|if_none|ifnonematch|modified|conditional|precondition|put_object_if/,
    'conditional requests',
  ],
  [/bucket/, 'buckets'],
  [/./, 'objects, metadata, ranges, auth'],
];
const areaOf = (test: TestInfo) =>
  isAclOrPolicy(test) ? 'ACLs and policies' : AREAS.find(([pattern]) => pattern.test(test.name))![1];

const tests = parseSuite(path.join(suite, 's3tests/functional/test_s3.py'));
const outcomes = new Map<string, { status: string; message: string }>();
for (const line of fs.readFileSync(logFile, 'utf8').split('\n')) {
  const m = /^(PASSED|FAILED|SKIPPED|ERROR) [^\s:]+::(test_\w+)(\[[^\]]*\])?(?: - (.*))?$/.exec(line);
  if (m) outcomes.set(`${m[2]}${m[3] ?? ''}`, { status: m[1]!, message: (m[4] ?? '').slice(0, 160) });
}

const rows = new Map<string, { passed: number; failed: number; skipped: number }>();
const outside = new Map<string, { passed: number; failed: number; skipped: number }>();
const failures: string[] = [];
/** Failures raised by botocore before any request was sent: the installed botocore lacks a parameter. */
let clientSide = 0;
const count = (table: typeof rows, key: string, status: string) => {
  const row = table.get(key) ?? { passed: 0, failed: 0, skipped: 0 };
  if (status === 'PASSED') row.passed++;
  else if (status === 'SKIPPED') row.skipped++;
  else row.failed++;
  table.set(key, row);
};
for (const [id, outcome] of [...outcomes].sort(([a], [b]) => a.localeCompare(b))) {
  const base = id.replace(/\[.*$/, '');
  const test = tests.get(base);
  if (!test) continue;
  const reason = outsideReason(test);
  if (reason) count(outside, reason, outcome.status);
  else {
    count(rows, areaOf(test), outcome.status);
    if (outcome.status === 'FAILED' || outcome.status === 'ERROR') {
      failures.push(`- \`${id}\`: ${outcome.message}`);
      if (outcome.message.includes('ParamValidationError')) clientSide++;
    }
  }
}

const table = (title: string, data: typeof rows) => {
  const out = [`| ${title} | passed | failed | skipped |`, '|---|---|---|---|'];
  const total = { passed: 0, failed: 0, skipped: 0 };
  for (const [key, row] of [...data].sort(([a], [b]) => a.localeCompare(b))) {
    out.push(`| ${key} | ${row.passed} | ${row.failed} | ${row.skipped} |`);
    total.passed += row.passed;
    total.failed += row.failed;
    total.skipped += row.skipped;
  }
  out.push(`| **total** | ${total.passed} | ${total.failed} | ${total.skipped} |`);
  return { text: out.join('\n'), total };
};
const inside = table('documented area', rows);
const ran = inside.total.passed + inside.total.failed;
const percent = (n: number, of: number) => ((100 * n) / Math.max(of, 1)).toFixed(1);
console.log(inside.text);
console.log(
  `\nDocumented areas: ${inside.total.passed} of ${ran} run pass (${percent(inside.total.passed, ran)} %); ` +
    `${clientSide} failed in botocore before sending anything (ParamValidationError: the installed botocore ` +
    `does not know a parameter the test uses), so ${inside.total.passed} of ${ran - clientSide} that reached ` +
    `the server pass (${percent(inside.total.passed, ran - clientSide)} %).\n`,
);
console.log(table('outside, by feature', outside).text);
console.log(`\nFailures in the documented areas:\n${failures.join('\n') || '- none'}`);
