// Berth's secret key inside a backup: sealed under a key derived from the operator's passphrase
// (scrypt), with AES-256-GCM, so that a backup on another host's disk or in a bucket gives nothing
// without the passphrase, and a wrong passphrase or an altered file is told apart from a key.
import { createCipheriv, createDecipheriv, randomBytes, scrypt as scryptCallback } from 'node:crypto';

/** scrypt's cost: 2^15 × 8 × 128 bytes = 32 MiB and ~0.1 s per attempt. */
const PARAMS = { N: 1 << 15, r: 8, p: 1 };

export interface SealedSecret {
  kdf: 'scrypt';
  N: number;
  r: number;
  p: number;
  salt: string;
  iv: string;
  tag: string;
  data: string;
}

export class WrongPassphraseError extends Error {
  override readonly name = 'WrongPassphraseError';
}

function derive(
  passphrase: string,
  salt: Buffer,
  params: { N: number; r: number; p: number },
): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scryptCallback(passphrase, salt, 32, { ...params, maxmem: 256 * params.N * params.r }, (error, key) =>
      error ? reject(error) : resolve(key),
    ),
  );
}

export async function sealWithPassphrase(secret: Buffer, passphrase: string): Promise<SealedSecret> {
  if (passphrase === '') throw new Error('the backup passphrase is empty');
  const salt = randomBytes(16);
  const iv = randomBytes(12);
  const key = await derive(passphrase, salt, PARAMS);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const data = Buffer.concat([cipher.update(secret), cipher.final()]);
  return {
    kdf: 'scrypt',
    ...PARAMS,
    salt: salt.toString('base64'),
    iv: iv.toString('base64'),
    tag: cipher.getAuthTag().toString('base64'),
    data: data.toString('base64'),
  };
}

/** The secret, or WrongPassphraseError (GCM's tag does not match: another passphrase, or altered). */
export async function unsealWithPassphrase(sealed: SealedSecret, passphrase: string): Promise<Buffer> {
  if (sealed.kdf !== 'scrypt' || sealed.N > 1 << 20 || sealed.r > 32 || sealed.p > 16)
    throw new Error('the sealed key has an unknown format');
  const key = await derive(passphrase, Buffer.from(sealed.salt, 'base64'), sealed);
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(sealed.iv, 'base64'));
  decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
  try {
    return Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]);
  } catch {
    throw new WrongPassphraseError('wrong passphrase: the backup key does not open with it');
  }
}
