// SigV4 verification against AWS's own published examples (independent of any SDK), the aws-chunked
// decoder against the documented streaming example, and the policy forms.
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { AwsChunkedDecoder } from '../../src/drivers/objectstorage/local/chunked.js';
import { compilePolicies, isAllowed, PolicyError } from '../../src/drivers/objectstorage/local/policy.js';
import { localStorageProblems } from '../../src/drivers/objectstorage/local/index.js';
import {
  parseSignature,
  presignUrl,
  signingKey,
  verifySignature,
  type SignedRequest,
} from '../../src/drivers/objectstorage/local/sigv4.js';

const SECRET = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY';
const AT = new Date('2013-05-24T00:00:00Z');
const CREDENTIAL = 'AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request';

function check(request: SignedRequest, secret = SECRET, now = AT) {
  const parsed = parseSignature(request, now);
  if (!parsed) throw new Error('no signature');
  verifySignature(request, parsed, secret);
  return parsed;
}

describe('SigV4 (AWS documentation examples)', () => {
  const getObject: SignedRequest = {
    method: 'GET',
    url: '/test.txt',
    headers: {
      host: 'examplebucket.s3.amazonaws.com',
      range: 'bytes=0-9',
      'x-amz-content-sha256': 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
      'x-amz-date': '20130524T000000Z',
      authorization: `AWS4-HMAC-SHA256 Credential=${CREDENTIAL},SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41`,
    },
  };

  it('accepts the header-signed GET example and refuses a wrong secret, a changed header or a skewed clock', () => {
    expect(check(getObject).accessKeyId).toBe('AKIAIOSFODNN7EXAMPLE');
    expect(() => check(getObject, SECRET.replace('w', 'W'))).toThrow(/signature we calculated/);
    expect(() => check({ ...getObject, headers: { ...getObject.headers, range: 'bytes=0-10' } })).toThrow(
      /signature we calculated/,
    );
    expect(() => check(getObject, SECRET, new Date(AT.getTime() + 16 * 60_000))).toThrow(/current time/);
  });

  it('accepts the presigned URL example until it expires', () => {
    const presigned: SignedRequest = {
      method: 'GET',
      url:
        '/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request' +
        '&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host' +
        '&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404',
      headers: { host: 'examplebucket.s3.amazonaws.com' },
    };
    expect(check(presigned).presigned).toBe(true);
    expect(() => check({ ...presigned, url: presigned.url.replace('test.txt', 'test.txu') })).toThrow(
      /signature we calculated/,
    );
    expect(() => check(presigned, SECRET, new Date(AT.getTime() + 86_401_000))).toThrow(/expired/);
  });

  it('makes the presigned URL example, byte for byte (the s3 artifact store signs its URLs so)', () => {
    expect(
      presignUrl({
        method: 'GET',
        endpoint: 'https://examplebucket.s3.amazonaws.com',
        path: '/test.txt',
        region: 'us-east-1',
        accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
        secretAccessKey: SECRET,
        now: AT,
        expiresSeconds: 86400,
      }),
    ).toBe(
      'https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request' +
        '&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host' +
        '&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404',
    );
  });

  it('verifies the streaming (aws-chunked) example: seed, every chunk signature, and tampering', async () => {
    const headers = {
      host: 's3.amazonaws.com',
      'x-amz-date': '20130524T000000Z',
      'x-amz-storage-class': 'REDUCED_REDUNDANCY',
      'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
      'content-encoding': 'aws-chunked',
      'x-amz-decoded-content-length': '66560',
      'content-length': '66824',
      authorization: `AWS4-HMAC-SHA256 Credential=${CREDENTIAL},SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9`,
    };
    const parsed = check({ method: 'PUT', url: '/examplebucket/chunkObject.txt', headers });
    expect(parsed.payload).toEqual({ kind: 'chunked', signed: true, trailer: false });

    const chunks: Array<[number, string]> = [
      [65536, 'ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648'],
      [1024, '0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497'],
      [0, 'b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9'],
    ];
    const body = Buffer.concat(
      chunks.flatMap(([size, sig]) => [
        Buffer.from(`${size.toString(16)};chunk-signature=${sig}\r\n`),
        Buffer.alloc(size, 'a'),
        Buffer.from('\r\n'),
      ]),
    );
    expect(body.length).toBe(66824);

    const decode = async (bytes: Buffer) => {
      const decoder = new AwsChunkedDecoder(
        {
          key: signingKey(SECRET, parsed.date, parsed.region, parsed.service),
          parsed,
          seed: parsed.signature,
        },
        false,
      );
      let size = 0;
      let onlyA = true;
      const sink = new Writable({
        write(chunk: Buffer, _e, cb) {
          size += chunk.length;
          onlyA &&= chunk.every((b) => b === 0x61);
          cb();
        },
      });
      // Small slices: framing must survive arbitrary split points.
      const slices = Array.from({ length: Math.ceil(bytes.length / 1000) }, (_, i) =>
        bytes.subarray(i * 1000, (i + 1) * 1000),
      );
      await pipeline(Readable.from(slices), decoder, sink);
      return { size, onlyA };
    };
    expect(await decode(body)).toEqual({ size: 66560, onlyA: true });

    const tampered = Buffer.from(body);
    tampered[66_000] = 0x62; // one byte of the second chunk's data
    await expect(decode(tampered)).rejects.toThrow(/signature we calculated/);
    await expect(decode(body.subarray(0, body.length - 90))).rejects.toThrow(/number of bytes/);
  });

  it('verifies the signed-trailer streaming example, including the trailer signature', async () => {
    const parsed = {
      amzDate: '20130524T000000Z',
      date: '20130524',
      region: 'us-east-1',
      service: 's3',
    };
    const body = (trailer: string) =>
      Buffer.concat([
        Buffer.from(
          '10000;chunk-signature=b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2\r\n',
        ),
        Buffer.alloc(65536, 'a'),
        Buffer.from(
          '\r\n400;chunk-signature=1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7\r\n',
        ),
        Buffer.alloc(1024, 'a'),
        Buffer.from(
          '\r\n0;chunk-signature=2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992\r\n',
        ),
        Buffer.from(trailer),
      ]);
    const decode = async (bytes: Buffer) => {
      const decoder = new AwsChunkedDecoder(
        {
          key: signingKey(SECRET, '20130524', 'us-east-1', 's3'),
          parsed,
          seed: '106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e',
        },
        true,
      );
      await pipeline(Readable.from([bytes]), decoder, new Writable({ write: (_c, _e, cb) => cb() }));
      return { size: decoder.decodedLength, trailers: Object.fromEntries(decoder.trailers) };
    };
    const signature =
      'x-amz-trailer-signature:d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n';
    expect(await decode(body(`x-amz-checksum-crc32c:sOO8/Q==\r\n${signature}`))).toMatchObject({
      size: 66560,
      trailers: { 'x-amz-checksum-crc32c': 'sOO8/Q==' },
    });
    await expect(decode(body(`x-amz-checksum-crc32c:AAAAAA==\r\n${signature}`))).rejects.toThrow(
      /signature we calculated/,
    );
    await expect(decode(body('x-amz-checksum-crc32c:sOO8/Q==\r\n\r\n'))).rejects.toThrow(
      /signature we calculated/,
    );
  });
});

describe('policies', () => {
  const allowed = (policies: unknown[], action: string, bucket?: string, key?: string, listPrefix?: string) =>
    isAllowed(compilePolicies(policies), {
      action,
      ...(bucket ? { bucket } : {}),
      ...(key !== undefined ? { key } : {}),
      ...(listPrefix !== undefined ? { listPrefix } : {}),
    });

  it('grants what the canned and statement forms say, and nothing for an empty list', () => {
    expect(allowed([], 's3:GetObject', 'b', 'k')).toBe(false);
    expect(allowed(['read'], 's3:GetObject', 'b', 'k')).toBe(true);
    expect(allowed(['read'], 's3:PutObject', 'b', 'k')).toBe(false);
    expect(allowed(['write'], 's3:PutObject', 'b', 'k')).toBe(true);
    expect(allowed(['write'], 's3:GetObject', 'b', 'k')).toBe(false);
    expect(allowed(['readwrite'], 's3:DeleteObject', 'b', 'k')).toBe(true);
    expect(allowed(['readwrite'], 's3:CreateBucket', 'b')).toBe(false);
    expect(allowed(['admin'], 's3:CreateBucket', 'b')).toBe(true);
    expect(allowed(['read:logs'], 's3:GetObject', 'logs', 'x')).toBe(true);
    expect(allowed(['read:logs'], 's3:GetObject', 'other', 'x')).toBe(false);
    expect(allowed(['readwrite:logs/app/'], 's3:PutObject', 'logs', 'app/1')).toBe(true);
    expect(allowed(['readwrite:logs/app/'], 's3:PutObject', 'logs', 'db/1')).toBe(false);
    expect(allowed(['readwrite:logs/app/'], 's3:ListBucket', 'logs', undefined, 'app/')).toBe(true);
    expect(allowed(['readwrite:logs/app/'], 's3:ListBucket', 'logs', undefined, '')).toBe(false);

    const doc = {
      Version: '2012-10-17',
      Statement: [
        { Effect: 'Allow', Action: 's3:*', Resource: ['arn:aws:s3:::data', 'arn:aws:s3:::data/*'] },
        { Effect: 'Deny', Action: ['s3:Delete*'], Resource: 'arn:aws:s3:::data/keep/*' },
      ],
    };
    expect(allowed([doc], 's3:DeleteObject', 'data', 'tmp/x')).toBe(true);
    expect(allowed([doc], 's3:DeleteObject', 'data', 'keep/x')).toBe(false);
    expect(allowed([doc], 's3:getobject', 'data', 'keep/x')).toBe(true);
    expect(allowed([doc], 's3:GetObject', 'elsewhere', 'x')).toBe(false);
  });

  it('refuses forms it does not understand', () => {
    expect(() => compilePolicies(['superuser'])).toThrow(PolicyError);
    expect(() => compilePolicies([{ Effect: 'Maybe', Action: 's3:*' }])).toThrow(/Effect/);
    expect(() => compilePolicies([{ Effect: 'Allow', Action: 'ec2:*' }])).toThrow(/s3:/);
    expect(() => compilePolicies([{ Effect: 'Allow', Action: 's3:*', Resource: 'bucket' }])).toThrow(
      /arn:aws:s3/,
    );
    expect(() =>
      compilePolicies([{ Effect: 'Allow', Action: 's3:*', Condition: { StringLike: {} } }]),
    ).toThrow(/Condition/);
    expect(
      localStorageProblems({
        buckets: ['ok-bucket', 'Bad_Bucket'],
        users: [{ policies: ['read'] }, { username: 'x', policies: ['root'] }],
      }),
    ).toEqual([
      { path: 'buckets[1]', message: expect.stringContaining("'Bad_Bucket'") as unknown },
      { path: 'users[1].policies', message: expect.stringContaining("unknown policy 'root'") as unknown },
    ]);
  });
});
