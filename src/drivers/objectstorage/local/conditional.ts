// Conditional writes (If-None-Match: * and If-Match on PutObject and CompleteMultipartUpload): the
// condition is checked once before the body is received, so a doomed upload is refused early, and
// again inside the transaction that writes the row, so two writers cannot both pass it.
import type { IncomingHttpHeaders } from 'node:http';
import { errors, S3Error } from './errors.js';
import { headerValue } from './sigv4.js';

/** Checks the current object (undefined: none) against the request's condition; throws S3Error. */
export type WriteGuard = (current: { etag: string } | undefined) => void;

export interface ConditionalWrite {
  /** The check before the body is received (refuses early; the commit check is the one that counts). */
  before: WriteGuard;
  /** The check inside the writing transaction, on the locked row. */
  commit: WriteGuard;
}

const bare = (etag: string) => etag.trim().replace(/^W\//, '').replace(/^"|"$/g, '');

export const conditionalRequestConflict = () =>
  new S3Error(
    'ConditionalRequestConflict',
    409,
    'A conflicting operation occurred. If using PutObject you can retry the request. If using CompleteMultipartUpload you should retry the request.',
  );

/**
 * The request's write condition, or undefined when it sets none. If-None-Match takes `*` (no object
 * there) or ETags (not one of these versions), as RFC 9110 reads it and Ceph's s3-tests expect.
 */
export function conditionalWrite(headers: IncomingHttpHeaders, key: string): ConditionalWrite | undefined {
  const ifNoneMatch = headerValue(headers, 'if-none-match');
  const ifMatch = headerValue(headers, 'if-match');
  if (ifNoneMatch === undefined && ifMatch === undefined) return undefined;
  const unwanted = ifNoneMatch === undefined ? undefined : ifNoneMatch.split(',').map(bare);
  const wanted = ifMatch === undefined ? undefined : ifMatch.split(',').map(bare);
  // Whether the object If-Match names was there before the body arrived: if it is gone at commit,
  // a concurrent delete raced this write (409, retry), not a wrong guess by the client (404).
  let seen = false;
  const check =
    (atCommit: boolean): WriteGuard =>
    (current) => {
      if (
        unwanted !== undefined &&
        current !== undefined &&
        (unwanted.includes('*') || unwanted.includes(bare(current.etag)))
      )
        throw errors.preconditionFailed();
      if (wanted === undefined) return;
      if (current === undefined) {
        throw atCommit && seen ? conditionalRequestConflict() : errors.noSuchKey(key);
      }
      if (!wanted.includes('*') && !wanted.includes(bare(current.etag))) throw errors.preconditionFailed();
      if (!atCommit) seen = true;
    };
  return { before: check(false), commit: check(true) };
}
