// Public buckets (issue 30 items 1, 2 and 4): canned ACLs on buckets and objects set with the real AWS
// SDK, and what plain unsigned `fetch` requests (no Authorization, no presigned query) may then do:
// read and list what is public, write where a bucket is public-read-write, nothing elsewhere. A
// PublicAccessBlock, the bucket's or the operator's (BERTH_S3_BLOCK_PUBLIC_ACCESS), overrides them.
import {
  CreateBucketCommand,
  GetBucketAclCommand,
  GetObjectAclCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  PutBucketAclCommand,
  PutBucketCorsCommand,
  PutObjectAclCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import type { TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { anonymousTo, useAccessFixture, type AccessFixture } from './access-fixture.js';
import { refusal, s3Client } from './helpers.js';

const ALL_USERS = 'http://acs.amazonaws.com/groups/global/AllUsers';
const AUTHENTICATED_USERS = 'http://acs.amazonaws.com/groups/global/AuthenticatedUsers';

describe.each(DIALECTS)('canned ACLs and anonymous access on %s', (dialect) => {
  const fixture = useAccessFixture(dialect);
  let t: TestApp;
  let s3: S3Server;
  let admin: S3Client;
  let storages: AccessFixture['storages'];
  beforeAll(() => ({ t, s3, admin, storages } = fixture));
  const anonymous = anonymousTo(fixture);
  const codeOf = async (res: Response) => /<Code>([^<]+)<\/Code>/.exec(await res.text())?.[1];

  it('serves a public-read bucket and its public-read objects without credentials, and nothing private', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'public', ACL: 'public-read' }));
    await admin.send(new CreateBucketCommand({ Bucket: 'private' }));
    await admin.send(
      new PutObjectCommand({ Bucket: 'public', Key: 'logo.svg', Body: '<svg/>', ACL: 'public-read' }),
    );
    await admin.send(new PutObjectCommand({ Bucket: 'public', Key: 'draft.txt', Body: 'secret' }));
    await admin.send(
      new PutObjectCommand({ Bucket: 'private', Key: 'logo.svg', Body: '<svg/>', ACL: 'public-read' }),
    );

    const got = await anonymous('/public/logo.svg');
    expect(got.status).toBe(200);
    expect(await got.text()).toBe('<svg/>');
    expect((await anonymous('/public/logo.svg', { method: 'HEAD' })).status).toBe(200);
    const listed = await anonymous('/public?list-type=2');
    expect(listed.status).toBe(200);
    expect(await listed.text()).toContain('<Key>draft.txt</Key>');
    // The bucket's READ lets anyone list it, not read its private objects (as on S3).
    const draft = await anonymous('/public/draft.txt');
    expect([draft.status, await codeOf(draft)]).toEqual([403, 'AccessDenied']);
    // Listing may say what is missing: a 404 for a key that is not there.
    expect((await anonymous('/public/missing')).status).toBe(404);
    // A private bucket: not listed, and its objects are read only where their own ACL says so.
    const privateList = await anonymous('/private?list-type=2');
    expect([privateList.status, await codeOf(privateList)]).toEqual([403, 'AccessDenied']);
    expect((await anonymous('/private/logo.svg')).status).toBe(200);
    expect((await anonymous('/private/missing')).status).toBe(403);
    // A bucket that does not exist is a 404, as on S3 (bucket names are not secret there either).
    const gone = await anonymous('/no-such-bucket/x');
    expect([gone.status, await codeOf(gone)]).toEqual([404, 'NoSuchBucket']);
    // Unsigned requests never write to a public-read bucket, nor configure it.
    expect((await anonymous('/public/new.txt', { method: 'PUT', body: 'x' })).status).toBe(403);
    expect((await anonymous('/public/logo.svg', { method: 'DELETE' })).status).toBe(403);
    expect((await anonymous('/public?acl')).status).toBe(403);
    expect((await anonymous('/', {})).status).toBe(403);

    const acl = await admin.send(new GetBucketAclCommand({ Bucket: 'public' }));
    expect(acl.Owner?.ID).toBe(String(storages.main.id));
    expect(acl.Grants?.map((g) => [g.Grantee?.Type, g.Grantee?.ID ?? g.Grantee?.URI, g.Permission])).toEqual([
      ['Group', ALL_USERS, 'READ'],
      ['CanonicalUser', String(storages.main.id), 'FULL_CONTROL'],
    ]);
    const privateAcl = await admin.send(new GetObjectAclCommand({ Bucket: 'public', Key: 'draft.txt' }));
    expect(privateAcl.Grants?.map((g) => g.Permission)).toEqual(['FULL_CONTROL']);
  });

  it('lets anyone write to a public-read-write bucket, and an overwrite is private again', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'dropbox' }));
    expect((await anonymous('/dropbox/in.txt', { method: 'PUT', body: 'hello' })).status).toBe(403);
    const refusedForm = new FormData();
    refusedForm.append('key', 'form/x');
    refusedForm.append('file', new Blob(['x']), 'x');
    expect((await anonymous('/dropbox', { method: 'POST', body: refusedForm })).status).toBe(403);
    await admin.send(new PutBucketAclCommand({ Bucket: 'dropbox', ACL: 'public-read-write' }));
    expect((await anonymous('/dropbox/in.txt', { method: 'PUT', body: 'hello' })).status).toBe(200);
    const read = await admin.send(new GetObjectCommand({ Bucket: 'dropbox', Key: 'in.txt' }));
    expect(await read.Body!.transformToString()).toBe('hello');
    // An unsigned writer may give what it writes a canned ACL, as S3 lets the writer who owns it there.
    const publicPut = await anonymous('/dropbox/pub.txt', {
      method: 'PUT',
      body: 'x',
      headers: { 'x-amz-acl': 'public-read' },
    });
    expect(publicPut.status).toBe(200);
    expect(await (await anonymous('/dropbox/pub.txt')).text()).toBe('x');
    // So may an unsigned browser form (no signed policy).
    const form = new FormData();
    form.append('key', 'form/${filename}');
    form.append('acl', 'public-read');
    form.append('success_action_status', '201');
    form.append(
      'tagging',
      '<Tagging><TagSet><Tag><Key>from</Key><Value>form</Value></Tag></TagSet></Tagging>',
    );
    form.append('file', new Blob(['from a form']), 'f.txt');
    const posted = await anonymous('/dropbox', { method: 'POST', body: form });
    expect(posted.status).toBe(201);
    // S3 writes PostResponse without a namespace.
    expect(await posted.text()).toMatch(
      /<PostResponse><Location>[^<]*<\/Location><Bucket>dropbox<\/Bucket><Key>form\/f\.txt<\/Key>/,
    );
    const tagging = await admin.send(new GetObjectTaggingCommand({ Bucket: 'dropbox', Key: 'form/f.txt' }));
    expect(tagging.TagSet).toEqual([{ Key: 'from', Value: 'form' }]);
    expect(await (await anonymous('/dropbox/form/f.txt')).text()).toBe('from a form');
    expect((await anonymous('/dropbox/in.txt', { method: 'DELETE' })).status).toBe(204);
    expect(await refusal(admin.send(new GetObjectCommand({ Bucket: 'dropbox', Key: 'in.txt' })))).toEqual({
      code: 'NoSuchKey',
      status: 404,
    });
    // An object written public, then overwritten without an ACL, is private (as on S3).
    await admin.send(new PutObjectCommand({ Bucket: 'dropbox', Key: 'o', Body: '1', ACL: 'public-read' }));
    expect((await anonymous('/dropbox/o')).status).toBe(200);
    await admin.send(new PutObjectCommand({ Bucket: 'dropbox', Key: 'o', Body: '2' }));
    expect((await anonymous('/dropbox/o')).status).toBe(403);
  });

  it('lets authenticated-read objects be read by any storage key on the storage endpoint, not anonymously', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'members' }));
    await admin.send(
      new PutObjectCommand({ Bucket: 'members', Key: 'notes', Body: 'n', ACL: 'authenticated-read' }),
    );
    const own = `${s3.url}/${storages.main.uuid}`;
    expect((await fetch(`${own}/members/notes`)).status).toBe(403);
    // A key of another storage, on this storage's own endpoint: an authenticated user, no more.
    const stranger = s3Client(own, storages.other.admin.id, storages.other.admin.secret);
    try {
      const got = await stranger.send(new GetObjectCommand({ Bucket: 'members', Key: 'notes' }));
      expect(await got.Body!.transformToString()).toBe('n');
      expect(
        await refusal(stranger.send(new PutObjectCommand({ Bucket: 'members', Key: 'x', Body: 'x' }))),
      ).toEqual({
        code: 'AccessDenied',
        status: 403,
      });
      await admin.send(new PutObjectAclCommand({ Bucket: 'members', Key: 'notes', ACL: 'private' }));
      expect(await refusal(stranger.send(new GetObjectCommand({ Bucket: 'members', Key: 'notes' })))).toEqual(
        {
          code: 'AccessDenied',
          status: 403,
        },
      );
    } finally {
      stranger.destroy();
    }
    // A user of the storage with no policy of its own is one of the authenticated users too.
    const nobody = s3Client(s3.url, storages.main.nobody.id, storages.main.nobody.secret);
    try {
      await admin.send(
        new PutObjectAclCommand({ Bucket: 'members', Key: 'notes', ACL: 'authenticated-read' }),
      );
      expect(
        await (
          await nobody.send(new GetObjectCommand({ Bucket: 'members', Key: 'notes' }))
        ).Body!.transformToString(),
      ).toBe('n');
      expect(await refusal(nobody.send(new GetBucketAclCommand({ Bucket: 'members' })))).toEqual({
        code: 'AccessDenied',
        status: 403,
      });
    } finally {
      nobody.destroy();
    }
  });

  it('takes an AccessControlPolicy equal to a canned ACL, and refuses grants to other accounts with nothing changed', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'grants' }));
    const owner = { ID: String(storages.main.id) };
    await admin.send(
      new PutBucketAclCommand({
        Bucket: 'grants',
        AccessControlPolicy: {
          Owner: owner,
          Grants: [
            { Grantee: { Type: 'CanonicalUser', ID: owner.ID }, Permission: 'FULL_CONTROL' },
            { Grantee: { Type: 'Group', URI: AUTHENTICATED_USERS }, Permission: 'READ' },
          ],
        },
      }),
    );
    const grantsOf = async () =>
      (await admin.send(new GetBucketAclCommand({ Bucket: 'grants' }))).Grants?.map(
        (g) => `${g.Grantee?.URI ?? g.Grantee?.ID} ${g.Permission}`,
      );
    expect(await grantsOf()).toEqual([`${AUTHENTICATED_USERS} READ`, `${owner.ID} FULL_CONTROL`]);
    for (const grantee of [
      { Type: 'CanonicalUser' as const, ID: String(storages.other.id) },
      { Type: 'AmazonCustomerByEmail' as const, EmailAddress: 'someone@example.com' },
    ]) {
      const refused = await refusal(
        admin.send(
          new PutBucketAclCommand({
            Bucket: 'grants',
            AccessControlPolicy: { Owner: owner, Grants: [{ Grantee: grantee, Permission: 'READ' }] },
          }),
        ),
      );
      expect(refused).toEqual({ code: 'NotImplemented', status: 501 });
    }
    // Group grants that are no canned ACL (AllUsers WRITE alone) are refused alike.
    expect(
      await refusal(
        admin.send(
          new PutBucketAclCommand({
            Bucket: 'grants',
            AccessControlPolicy: {
              Owner: owner,
              Grants: [{ Grantee: { Type: 'Group', URI: ALL_USERS }, Permission: 'WRITE' }],
            },
          }),
        ),
      ),
    ).toEqual({ code: 'NotImplemented', status: 501 });
    expect(
      await refusal(
        admin.send(new PutBucketAclCommand({ Bucket: 'grants', GrantRead: `id=${storages.other.id}` })),
      ),
    ).toEqual({ code: 'NotImplemented', status: 501 });
    expect(await grantsOf()).toEqual([`${AUTHENTICATED_USERS} READ`, `${owner.ID} FULL_CONTROL`]);
  });

  it('takes x-amz-grant-* headers equal to a canned ACL on buckets and objects, and refuses the rest', async () => {
    const owner = String(storages.main.id);
    const publicRead = `uri="${ALL_USERS}"`;
    await admin.send(
      new CreateBucketCommand({
        Bucket: 'header-grants',
        GrantRead: publicRead,
        GrantFullControl: `id="${owner}"`,
      }),
    );
    const bucketGrants = (await admin.send(new GetBucketAclCommand({ Bucket: 'header-grants' }))).Grants;
    expect(bucketGrants?.map((g) => `${g.Grantee?.URI ?? g.Grantee?.ID} ${g.Permission}`)).toEqual([
      `${ALL_USERS} READ`,
      `${owner} FULL_CONTROL`,
    ]);
    // An object written with the grant is readable without credentials; one without it is not.
    await admin.send(
      new PutObjectCommand({ Bucket: 'header-grants', Key: 'open.txt', Body: 'open', GrantRead: publicRead }),
    );
    await admin.send(new PutObjectCommand({ Bucket: 'header-grants', Key: 'closed.txt', Body: 'closed' }));
    expect(await (await anonymous('/header-grants/open.txt')).text()).toBe('open');
    expect((await anonymous('/header-grants/closed.txt')).status).toBe(403);
    // PutObjectAcl with the owner's grant alone: private again.
    await admin.send(
      new PutObjectAclCommand({
        Bucket: 'header-grants',
        Key: 'open.txt',
        GrantFullControl: `id="${owner}"`,
      }),
    );
    expect((await anonymous('/header-grants/open.txt')).status).toBe(403);

    const put = (extra: Partial<ConstructorParameters<typeof PutObjectCommand>[0]>) =>
      refusal(
        admin.send(
          new PutObjectCommand({ Bucket: 'header-grants', Key: 'refused.txt', Body: 'x', ...extra }),
        ),
      );
    // Both ways at once, as S3 refuses it.
    expect(await put({ ACL: 'public-read', GrantRead: publicRead })).toEqual({
      code: 'InvalidRequest',
      status: 400,
    });
    // Grants to other accounts, or that no canned ACL is, are not implemented; a grantee that is no
    // grantee is a bad argument. None of them wrote anything.
    expect(await put({ GrantRead: 'emailAddress="someone@example.com"' })).toEqual({
      code: 'NotImplemented',
      status: 501,
    });
    expect(await put({ GrantReadACP: publicRead })).toEqual({ code: 'NotImplemented', status: 501 });
    expect(await put({ GrantRead: 'everyone' })).toEqual({ code: 'InvalidArgument', status: 400 });
    expect(
      await refusal(admin.send(new GetObjectCommand({ Bucket: 'header-grants', Key: 'refused.txt' }))),
    ).toEqual({ code: 'NoSuchKey', status: 404 });
  });

  it('answers browsers reading a public bucket with its CORS rule, and OPTIONS that asks nothing with 400', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'web', ACL: 'public-read' }));
    await admin.send(new PutObjectCommand({ Bucket: 'web', Key: 'app.js', Body: 'js', ACL: 'public-read' }));
    await admin.send(
      new PutBucketCorsCommand({
        Bucket: 'web',
        CORSConfiguration: {
          CORSRules: [{ AllowedMethods: ['GET'], AllowedOrigins: ['https://app.example'] }],
        },
      }),
    );
    const got = await anonymous('/web/app.js', { headers: { origin: 'https://app.example' } });
    expect(got.status).toBe(200);
    expect(got.headers.get('access-control-allow-origin')).toBe('https://app.example');
    expect(got.headers.get('access-control-allow-methods')).toBe('GET');
    const elsewhere = await anonymous('/web/app.js', { headers: { origin: 'https://other.example' } });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.headers.get('access-control-allow-origin')).toBeNull();
    expect((await anonymous('/web/app.js', { method: 'OPTIONS' })).status).toBe(400);
    const noMethod = await anonymous('/web/app.js', {
      method: 'OPTIONS',
      headers: { origin: 'https://app.example' },
    });
    expect(noMethod.status).toBe(400);
  });

  it('gives the driver a bucket ACL to read and set (the apply document uses it)', async () => {
    const driver = t.ctx.services.objectStorage.driver;
    await admin.send(new CreateBucketCommand({ Bucket: 'by-driver' }));
    await admin.send(new PutObjectCommand({ Bucket: 'by-driver', Key: 'k', Body: 'v' }));
    expect(await driver.bucketAcl(storages.main.id, 'by-driver')).toBe('private');
    expect(await driver.setBucketAcl(storages.main.id, 'by-driver', 'public-read')).toBe(true);
    expect(await driver.bucketAcl(storages.main.id, 'by-driver')).toBe('public-read');
    expect(await driver.bucketAcl(storages.main.id, 'absent')).toBeUndefined();
    expect(await driver.setBucketAcl(storages.main.id, 'absent', 'public-read')).toBe(false);
  });
});
