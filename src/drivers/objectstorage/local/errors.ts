// S3's error model: a code, an HTTP status and a message, rendered as an <Error> XML document.

export class S3Error extends Error {
  constructor(
    readonly code: string,
    readonly status: number,
    message: string,
    /** Extra elements of the <Error> document (e.g. BucketName, Key). */
    readonly details: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'S3Error';
  }
}

export const errors = {
  accessDenied: (message = 'Access Denied') => new S3Error('AccessDenied', 403, message),
  invalidAccessKeyId: () =>
    new S3Error(
      'InvalidAccessKeyId',
      403,
      'The AWS Access Key Id you provided does not exist in our records.',
    ),
  signatureDoesNotMatch: () =>
    new S3Error(
      'SignatureDoesNotMatch',
      403,
      'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
    ),
  noSuchBucket: (bucket: string) =>
    new S3Error('NoSuchBucket', 404, 'The specified bucket does not exist', { BucketName: bucket }),
  noSuchKey: (key: string) =>
    new S3Error('NoSuchKey', 404, 'The specified key does not exist.', { Key: key }),
  noSuchUpload: (uploadId: string) =>
    new S3Error(
      'NoSuchUpload',
      404,
      'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.',
      { UploadId: uploadId },
    ),
  bucketNotEmpty: (bucket: string) =>
    new S3Error('BucketNotEmpty', 409, 'The bucket you tried to delete is not empty', { BucketName: bucket }),
  bucketAlreadyOwnedByYou: (bucket: string) =>
    new S3Error(
      'BucketAlreadyOwnedByYou',
      409,
      'Your previous request to create the named bucket succeeded and you already own it.',
      { BucketName: bucket },
    ),
  invalidBucketName: (bucket: string) =>
    new S3Error('InvalidBucketName', 400, 'The specified bucket is not valid.', { BucketName: bucket }),
  invalidArgument: (message: string) => new S3Error('InvalidArgument', 400, message),
  invalidRequest: (message: string) => new S3Error('InvalidRequest', 400, message),
  invalidUri: () => new S3Error('InvalidURI', 400, "Couldn't parse the specified URI."),
  invalidRange: () => new S3Error('InvalidRange', 416, 'The requested range is not satisfiable'),
  malformedXml: () =>
    new S3Error(
      'MalformedXML',
      400,
      'The XML you provided was not well-formed or did not validate against our published schema.',
    ),
  badDigest: (message = 'The Content-MD5 or checksum you specified did not match what we received.') =>
    new S3Error('BadDigest', 400, message),
  sha256Mismatch: () =>
    new S3Error(
      'XAmzContentSHA256Mismatch',
      400,
      "The provided 'x-amz-content-sha256' header does not match what was computed.",
    ),
  incompleteBody: () =>
    new S3Error('IncompleteBody', 400, 'You did not provide the number of bytes specified by the header.'),
  entityTooLarge: () =>
    new S3Error('EntityTooLarge', 400, 'Your proposed upload exceeds the maximum allowed size.'),
  entityTooSmall: () =>
    new S3Error(
      'EntityTooSmall',
      400,
      'Your proposed upload is smaller than the minimum allowed object size.',
    ),
  invalidPart: () =>
    new S3Error(
      'InvalidPart',
      400,
      "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
    ),
  invalidPartOrder: () =>
    new S3Error('InvalidPartOrder', 400, 'The list of parts was not in ascending order.'),
  keyTooLong: () => new S3Error('KeyTooLongError', 400, 'Your key is too long.'),
  preconditionFailed: () =>
    new S3Error('PreconditionFailed', 412, 'At least one of the pre-conditions you specified did not hold'),
  requestTimeTooSkewed: () =>
    new S3Error(
      'RequestTimeTooSkewed',
      403,
      'The difference between the request time and the current time is too large.',
    ),
  notImplemented: (
    message = 'A header or query you provided implies functionality that is not implemented.',
  ) => new S3Error('NotImplemented', 501, message),
  methodNotAllowed: () =>
    new S3Error('MethodNotAllowed', 405, 'The specified method is not allowed against this resource.'),
  internal: () => new S3Error('InternalError', 500, 'We encountered an internal error. Please try again.'),
};
