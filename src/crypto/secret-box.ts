// Secrets at rest: AES-256-GCM with a key from config or generated once into the data dir.
// Change detection uses a keyed hash so the old plaintext never has to be decrypted to compare.
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { decodeKey } from '../config/index.js';

export interface SecretBox {
  encrypt(plaintext: string): string;
  decrypt(sealed: string): string;
  /** HMAC-SHA256 under a key derived from the master key: equal inputs give equal hashes. */
  keyedHash(value: string): string;
}

const VERSION = 'v1';

export function createSecretBox(masterKey: Buffer): SecretBox {
  if (masterKey.length !== 32) throw new Error('secret key must be 32 bytes');
  const encKey = createHmac('sha256', masterKey).update('berth:encrypt').digest();
  const macKey = createHmac('sha256', masterKey).update('berth:keyed-hash').digest();
  return {
    encrypt(plaintext) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', encKey, iv);
      const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
      return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64')}`;
    },
    decrypt(sealed) {
      const [version, data] = sealed.split(':');
      if (version !== VERSION || data === undefined) throw new Error('unknown secret format');
      const raw = Buffer.from(data, 'base64');
      const decipher = createDecipheriv('aes-256-gcm', encKey, raw.subarray(0, 12));
      decipher.setAuthTag(raw.subarray(12, 28));
      return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
    },
    keyedHash(value) {
      return createHmac('sha256', macKey).update(value).digest('hex');
    },
  };
}

/** The configured key, or the one in `<dataDir>/secret.key`, created (mode 0600) on first use. */
export function loadOrCreateMasterKey(dataDir: string, configured: string | undefined): Buffer {
  if (configured !== undefined) {
    const key = decodeKey(configured);
    if (!key) throw new Error('BERTH_SECRET_KEY must be 32 bytes');
    return key;
  }
  const file = path.join(dataDir, 'secret.key');
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    const key = decodeKey(fs.readFileSync(file, 'utf8'));
    if (!key) throw new Error(`${file} does not hold a 32-byte key`);
    return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const key = randomBytes(32);
  // 'wx' fails if another process won the race; then use its key.
  try {
    fs.writeFileSync(file, key.toString('hex') + '\n', { mode: 0o600, flag: 'wx' });
    return key;
  } catch {
    return loadOrCreateMasterKey(dataDir, undefined);
  }
}

export const sha256 = (value: string): string => createHash('sha256').update(value).digest('hex');

export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
