// A document's `acl: public-read` is one statement Berth keeps in the bucket's policy: put in and taken
// out without touching the tenant's own statements.
import { describe, expect, it } from 'vitest';
import {
  compileBucketPolicy,
  DOCUMENT_PUBLIC_READ_SID,
  isPublicPolicy,
  withDocumentPublicRead,
} from '../../src/drivers/objectstorage/local/policy.js';

const tenant = {
  Sid: 'Partner',
  Effect: 'Allow',
  Principal: { AWS: ['arn:aws:iam::1:user/partner'] },
  Action: 's3:PutObject',
  Resource: 'arn:aws:s3:::assets/uploads/*',
};

describe('the document’s public-read statement', () => {
  it('is added beside the tenant’s statements and removed leaving them as they were', () => {
    const own = JSON.stringify({ Version: '2012-10-17', Statement: [tenant] });
    const opened = withDocumentPublicRead(own, 'assets', true)!;
    const statements = (JSON.parse(opened) as { Statement: Array<{ Sid: string }> }).Statement;
    expect(statements.map((s) => s.Sid)).toEqual(['Partner', DOCUMENT_PUBLIC_READ_SID]);
    expect(isPublicPolicy(compileBucketPolicy(opened, 'assets', '1'))).toBe(true);
    // Applied twice: still one statement of Berth's.
    expect(withDocumentPublicRead(opened, 'assets', true)).toBe(opened);
    expect(JSON.parse(withDocumentPublicRead(opened, 'assets', false)!)).toEqual(JSON.parse(own));
  });

  it('leaves no policy when it was the only statement', () => {
    const opened = withDocumentPublicRead(null, 'assets', true);
    expect(opened).not.toBeNull();
    expect(withDocumentPublicRead(opened, 'assets', false)).toBeNull();
    expect(withDocumentPublicRead(null, 'assets', false)).toBeNull();
  });
});
