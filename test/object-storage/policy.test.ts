// Bucket policies and PublicAccessBlock (issue 30 items 3 and 4), with the real AWS SDK for the owner
// and plain unsigned requests for the public: Allow and Deny for `*` or the storage's own users, the
// aws:SourceIp and s3:prefix conditions (the endpoint is reached from 127.0.0.1 and, bound as the
// source, 127.0.0.2), MalformedPolicy naming what it refuses, and PublicAccessBlock, the bucket's or
// the operator's, overriding public ACLs and policies.
import http from 'node:http';
import {
  CreateBucketCommand,
  DeleteBucketPolicyCommand,
  DeletePublicAccessBlockCommand,
  GetBucketPolicyCommand,
  GetBucketPolicyStatusCommand,
  GetObjectCommand,
  GetPublicAccessBlockCommand,
  PutBucketAclCommand,
  PutBucketPolicyCommand,
  PutObjectCommand,
  PutPublicAccessBlockCommand,
  S3Client,
  S3ServiceException,
} from '@aws-sdk/client-s3';
import { beforeAll, describe, expect, it } from 'vitest';
import type { S3Server } from '../../src/drivers/objectstorage/local/server.js';
import type { TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { anonymousTo, useAccessFixture, type AccessFixture } from './access-fixture.js';
import { refusal, s3Client } from './helpers.js';

/** An unsigned GET from a given loopback source address. */
function getFrom(url: string, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { localAddress }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
  });
}

const policy = (...statements: unknown[]) => JSON.stringify({ Version: '2012-10-17', Statement: statements });

/** The S3 error a request was refused with, and its message. */
async function refusedWith(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof S3ServiceException) return { code: error.name, message: error.message };
    throw error;
  }
  throw new Error('request was not refused');
}

describe.each(DIALECTS)('bucket policies and PublicAccessBlock on %s', (dialect) => {
  const fixture = useAccessFixture(dialect);
  let s3: S3Server;
  let admin: S3Client;
  let storages: AccessFixture['storages'];
  beforeAll(() => ({ s3, admin, storages } = fixture));
  const anonymous = anonymousTo(fixture);

  it('admits by aws:SourceIp one address and refuses another', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'office' }));
    await admin.send(new PutObjectCommand({ Bucket: 'office', Key: 'doc', Body: 'd' }));
    await admin.send(
      new PutBucketPolicyCommand({
        Bucket: 'office',
        Policy: policy({
          Effect: 'Allow',
          Principal: '*',
          Action: 's3:GetObject',
          Resource: 'arn:aws:s3:::office/*',
          Condition: { IpAddress: { 'aws:SourceIp': ['127.0.0.1/32', '10.0.0.0/8'] } },
        }),
      }),
    );
    const url = `${s3.url}/office/doc`;
    expect(await getFrom(url, '127.0.0.1')).toBe(200);
    expect(await getFrom(url, '127.0.0.2')).toBe(403);
    // A policy narrowed to given addresses is not public.
    const status = await admin.send(new GetBucketPolicyStatusCommand({ Bucket: 'office' }));
    expect(status.PolicyStatus?.IsPublic).toBe(false);
    // NotIpAddress: everyone but 127.0.0.1.
    await admin.send(
      new PutBucketPolicyCommand({
        Bucket: 'office',
        Policy: policy({
          Effect: 'Allow',
          Principal: { AWS: '*' },
          Action: ['s3:GetObject'],
          Resource: ['arn:aws:s3:::office/*'],
          Condition: { NotIpAddress: { 'aws:SourceIp': '127.0.0.1' } },
        }),
      }),
    );
    expect(await getFrom(url, '127.0.0.1')).toBe(403);
    expect(await getFrom(url, '127.0.0.2')).toBe(200);
    expect(
      (await admin.send(new GetBucketPolicyStatusCommand({ Bucket: 'office' }))).PolicyStatus?.IsPublic,
    ).toBe(true);
  });

  it('lets an explicit Deny win, narrows listings by s3:prefix, and names users by key or ARN', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'site' }));
    for (const key of ['public/a.css', 'private/b.txt'])
      await admin.send(new PutObjectCommand({ Bucket: 'site', Key: key, Body: key }));
    await admin.send(
      new PutBucketPolicyCommand({
        Bucket: 'site',
        Policy: policy(
          { Effect: 'Allow', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/*' },
          { Effect: 'Deny', Principal: '*', Action: 's3:GetObject', Resource: 'arn:aws:s3:::site/private/*' },
          {
            Effect: 'Allow',
            Principal: '*',
            Action: 's3:ListBucket',
            Resource: 'arn:aws:s3:::site',
            Condition: { StringLike: { 's3:prefix': 'public/*' } },
          },
          {
            Effect: 'Allow',
            Principal: { AWS: [storages.main.nobody.id] },
            Action: 's3:PutObject',
            Resource: 'arn:aws:s3:::site/uploads/*',
          },
        ),
      }),
    );
    expect((await anonymous('/site/public/a.css')).status).toBe(200);
    expect((await anonymous('/site/private/b.txt')).status).toBe(403);
    // A Deny naming the storage's users (its account's root: all of them) binds them, whatever their
    // own policies allow; an explicit Deny wins.
    const denyOwn = {
      Effect: 'Deny',
      Principal: { AWS: `arn:aws:iam::${storages.main.id}:root` },
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::site/private/*',
    };
    const current = JSON.parse(
      (await admin.send(new GetBucketPolicyCommand({ Bucket: 'site' }))).Policy!,
    ) as {
      Statement: unknown[];
    };
    await admin.send(
      new PutBucketPolicyCommand({ Bucket: 'site', Policy: policy(...current.Statement, denyOwn) }),
    );
    expect(await refusal(admin.send(new GetObjectCommand({ Bucket: 'site', Key: 'private/b.txt' })))).toEqual(
      {
        code: 'AccessDenied',
        status: 403,
      },
    );
    await admin.send(
      new PutBucketPolicyCommand({
        Bucket: 'site',
        Policy: policy(...current.Statement),
      }),
    );
    expect((await anonymous('/site/public/a.css')).status).toBe(200);
    expect((await anonymous('/site/private/b.txt')).status).toBe(403);
    // A Deny for `*` leaves the storage's own users to their user policies: the owner is not locked out.
    const own = await admin.send(new GetObjectCommand({ Bucket: 'site', Key: 'private/b.txt' }));
    expect(await own.Body!.transformToString()).toBe('private/b.txt');
    expect((await anonymous('/site?list-type=2&prefix=public/')).status).toBe(200);
    expect((await anonymous('/site?list-type=2&prefix=private/')).status).toBe(403);
    expect((await anonymous('/site?list-type=2')).status).toBe(403);
    // A missing key is a 404 where the caller may list under it, else 403.
    expect((await anonymous('/site/public/missing', { method: 'HEAD' })).status).toBe(404);
    expect((await anonymous('/site/other/missing', { method: 'HEAD' })).status).toBe(403);
    // A user with no policy of its own, named by its access key id: it may upload there, nowhere else.
    const nobody = s3Client(s3.url, storages.main.nobody.id, storages.main.nobody.secret);
    try {
      await nobody.send(new PutObjectCommand({ Bucket: 'site', Key: 'uploads/1', Body: 'u' }));
      expect(
        await refusal(nobody.send(new PutObjectCommand({ Bucket: 'site', Key: 'other', Body: 'u' }))),
      ).toEqual({ code: 'AccessDenied', status: 403 });
      // By ARN (arn:aws:iam::<storage>:user/<name>), and the policy reads back as put.
      const byArn = policy({
        Effect: 'Allow',
        Principal: { AWS: `arn:aws:iam::${storages.main.id}:user/nobody` },
        Action: 's3:GetObject',
        Resource: 'arn:aws:s3:::site/private/*',
      });
      await admin.send(new PutBucketPolicyCommand({ Bucket: 'site', Policy: byArn }));
      expect((await admin.send(new GetBucketPolicyCommand({ Bucket: 'site' }))).Policy).toBe(byArn);
      const got = await nobody.send(new GetObjectCommand({ Bucket: 'site', Key: 'private/b.txt' }));
      expect(await got.Body!.transformToString()).toBe('private/b.txt');
      expect((await anonymous('/site/private/b.txt')).status).toBe(403);
    } finally {
      nobody.destroy();
    }
    await admin.send(new DeleteBucketPolicyCommand({ Bucket: 'site' }));
    expect(await refusal(admin.send(new GetBucketPolicyCommand({ Bucket: 'site' })))).toEqual({
      code: 'NoSuchBucketPolicy',
      status: 404,
    });
  });

  it('refuses a policy it cannot enforce with MalformedPolicy naming the element, and keeps the old one', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'strict' }));
    const kept = policy({
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::strict/*',
    });
    await admin.send(new PutBucketPolicyCommand({ Bucket: 'strict', Policy: kept }));
    const base = {
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::strict/*',
    };
    const cases: Array<[unknown, string]> = [
      [{ ...base, Action: 's3:PutBucketAcl' }, "Statement[0].Action 's3:PutBucketAcl'"],
      [
        { ...base, Condition: { StringEqualsIfExists: { 's3:prefix': 'a' } } },
        'Statement[0].Condition.StringEqualsIfExists',
      ],
      [{ ...base, Condition: { IpAddress: { 'aws:UserAgent': 'x' } } }, 'Statement[0].Condition.IpAddress'],
      [{ ...base, Condition: { IpAddress: { 'aws:SourceIp': '300.1.1.1/8' } } }, "'300.1.1.1/8'"],
      [{ ...base, NotPrincipal: { AWS: '*' } }, 'Statement[0].NotPrincipal'],
      [{ ...base, Principal: { Service: 'logging.s3.amazonaws.com' } }, 'Statement[0].Principal'],
      [{ ...base, Principal: { AWS: 'arn:aws:iam::other:root' } }, 'Statement[0].Principal.AWS'],
      [{ ...base, Principal: { AWS: 'arn:aws:iam::999999:user/admin' } }, 'arn:aws:iam::999999:user/admin'],
      [{ ...base, Resource: 'arn:aws:s3:::another/*' }, "Statement[0].Resource 'arn:aws:s3:::another/*'"],
    ];
    for (const [statement, named] of cases) {
      const refused = await refusedWith(
        admin.send(new PutBucketPolicyCommand({ Bucket: 'strict', Policy: policy(statement) })),
      );
      expect(refused.code).toBe('MalformedPolicy');
      expect(refused.message).toContain(named);
    }
    expect((await admin.send(new GetBucketPolicyCommand({ Bucket: 'strict' }))).Policy).toBe(kept);
  });

  it('overrides a public ACL and a public policy with the bucket PublicAccessBlock', async () => {
    await admin.send(new CreateBucketCommand({ Bucket: 'guarded', ACL: 'public-read' }));
    await admin.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'o', Body: 'o', ACL: 'public-read' }));
    await admin.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'p', Body: 'p' }));
    const open = policy({
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::guarded/p',
    });
    await admin.send(new PutBucketPolicyCommand({ Bucket: 'guarded', Policy: open }));
    expect((await anonymous('/guarded?list-type=2')).status).toBe(200);
    expect((await anonymous('/guarded/o')).status).toBe(200);
    expect((await anonymous('/guarded/p')).status).toBe(200);
    expect(await refusal(admin.send(new GetPublicAccessBlockCommand({ Bucket: 'guarded' })))).toEqual({
      code: 'NoSuchPublicAccessBlockConfiguration',
      status: 404,
    });
    const block = (config: Record<string, boolean>) =>
      admin.send(
        new PutPublicAccessBlockCommand({ Bucket: 'guarded', PublicAccessBlockConfiguration: config }),
      );

    await block({ IgnorePublicAcls: true });
    expect((await anonymous('/guarded?list-type=2')).status).toBe(403);
    expect((await anonymous('/guarded/o')).status).toBe(403);
    expect((await anonymous('/guarded/p')).status).toBe(200); // the policy still grants

    await block({ RestrictPublicBuckets: true });
    expect((await anonymous('/guarded/p')).status).toBe(403);
    expect((await anonymous('/guarded/o')).status).toBe(200); // the ACL still grants
    // The storage's own users keep what the public policy gives them.
    const nobody = s3Client(s3.url, storages.main.nobody.id, storages.main.nobody.secret);
    try {
      expect(
        await (
          await nobody.send(new GetObjectCommand({ Bucket: 'guarded', Key: 'p' }))
        ).Body!.transformToString(),
      ).toBe('p');
    } finally {
      nobody.destroy();
    }

    await block({ BlockPublicAcls: true, BlockPublicPolicy: true });
    expect(
      await refusal(admin.send(new PutBucketAclCommand({ Bucket: 'guarded', ACL: 'public-read-write' }))),
    ).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    expect(
      await refusal(
        admin.send(new PutObjectCommand({ Bucket: 'guarded', Key: 'n', Body: 'n', ACL: 'public-read' })),
      ),
    ).toEqual({ code: 'AccessDenied', status: 403 });
    expect(
      await refusal(admin.send(new PutBucketPolicyCommand({ Bucket: 'guarded', Policy: open }))),
    ).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    // Blocking new public settings keeps those already there (IgnorePublicAcls is what hides them).
    expect((await anonymous('/guarded/o')).status).toBe(200);
    expect(
      (await admin.send(new GetPublicAccessBlockCommand({ Bucket: 'guarded' })))
        .PublicAccessBlockConfiguration,
    ).toEqual({
      BlockPublicAcls: true,
      IgnorePublicAcls: false,
      BlockPublicPolicy: true,
      RestrictPublicBuckets: false,
    });
    await admin.send(new DeletePublicAccessBlockCommand({ Bucket: 'guarded' }));
    await admin.send(new PutBucketAclCommand({ Bucket: 'guarded', ACL: 'public-read-write' }));
    expect((await anonymous('/guarded/w', { method: 'PUT', body: 'w' })).status).toBe(200);
  });
});

describe.each(DIALECTS)('BERTH_S3_BLOCK_PUBLIC_ACCESS on %s', (dialect) => {
  const fixture = useAccessFixture(dialect, { BERTH_S3_BLOCK_PUBLIC_ACCESS: 'true' });
  let t: TestApp;
  let s3: S3Server;
  let admin: S3Client;
  let storages: AccessFixture['storages'];
  beforeAll(() => ({ t, s3, admin, storages } = fixture));

  it('makes every bucket private whatever its ACL, policy or own PublicAccessBlock says', async () => {
    expect(
      await refusal(admin.send(new CreateBucketCommand({ Bucket: 'nope', ACL: 'public-read' }))),
    ).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    await admin.send(new CreateBucketCommand({ Bucket: 'assets' }));
    await admin.send(new PutObjectCommand({ Bucket: 'assets', Key: 'o', Body: 'o' }));
    expect(
      await refusal(admin.send(new PutBucketAclCommand({ Bucket: 'assets', ACL: 'public-read' }))),
    ).toEqual({
      code: 'AccessDenied',
      status: 403,
    });
    const open = policy({
      Effect: 'Allow',
      Principal: '*',
      Action: 's3:GetObject',
      Resource: 'arn:aws:s3:::assets/*',
    });
    expect(await refusal(admin.send(new PutBucketPolicyCommand({ Bucket: 'assets', Policy: open })))).toEqual(
      {
        code: 'AccessDenied',
        status: 403,
      },
    );
    await expect(
      t.ctx.services.objectStorage.driver.setBucketAcl(storages.main.id, 'assets', 'public-read'),
    ).rejects.toThrow(/public ACLs are blocked/);
    // Public settings made before the operator turned it on, and a bucket's own attempt to loosen it.
    await t.ctx.db
      .updateTable('s3_buckets')
      .set({ acl: 'public-read', policy: open })
      .where('name', '=', 'assets')
      .execute();
    await t.ctx.db.updateTable('s3_objects').set({ acl: 'public-read' }).execute();
    await admin.send(
      new PutPublicAccessBlockCommand({
        Bucket: 'assets',
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: false,
          IgnorePublicAcls: false,
          BlockPublicPolicy: false,
          RestrictPublicBuckets: false,
        },
      }),
    );
    expect((await fetch(`${s3.url}/assets/o`)).status).toBe(403);
    expect((await fetch(`${s3.url}/assets?list-type=2`)).status).toBe(403);
    // The owner still reads its own bucket.
    expect(
      await (
        await admin.send(new GetObjectCommand({ Bucket: 'assets', Key: 'o' }))
      ).Body!.transformToString(),
    ).toBe('o');
  });
});
