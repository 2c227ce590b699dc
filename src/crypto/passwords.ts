// Password hashes for people signing in: scrypt (memory-hard; in Node's crypto, no native addon).
// The stored form names its parameters, so they can be raised later without invalidating old hashes:
//   scrypt$<log2 N>$<r>$<p>$<salt base64url>$<hash base64url>
import crypto from 'node:crypto';

/** scrypt's cost parameters: N = 2^logN, block size r, parallelism p. */
export interface PasswordCost {
  logN: number;
  r: number;
  p: number;
}

/**
 * N = 2^15, r = 8, p = 3: one of OWASP's equivalent scrypt settings (32 MiB per hash). New hashes get
 * it unless a test composes Berth with a cheaper one (ServiceOverrides.passwordCost): no setting or
 * environment variable lowers it.
 */
export const PASSWORD_COST: Readonly<PasswordCost> = { logN: 15, r: 8, p: 3 };
const KEY_BYTES = 32;
const SALT_BYTES = 16;

export const PASSWORD_MIN_LENGTH = 10;
export const PASSWORD_MAX_LENGTH = 200;

function derive(password: string, salt: Buffer, logN: number, r: number, p: number): Promise<Buffer> {
  const N = 2 ** logN;
  return new Promise((resolve, reject) =>
    crypto.scrypt(
      password.normalize('NFKC'),
      salt,
      KEY_BYTES,
      { N, r, p, maxmem: 256 * N * r + 1024 * 1024 },
      (error, key) => (error ? reject(error) : resolve(key)),
    ),
  );
}

/** Why a new password is refused, or undefined. */
export function passwordProblem(password: string): string | undefined {
  if (password.length < PASSWORD_MIN_LENGTH)
    return `A password has at least ${PASSWORD_MIN_LENGTH} characters`;
  if (password.length > PASSWORD_MAX_LENGTH)
    return `A password has at most ${PASSWORD_MAX_LENGTH} characters`;
  return undefined;
}

export async function hashPassword(password: string, cost: PasswordCost = PASSWORD_COST): Promise<string> {
  const salt = crypto.randomBytes(SALT_BYTES);
  const hash = await derive(password, salt, cost.logN, cost.r, cost.p);
  return ['scrypt', cost.logN, cost.r, cost.p, salt.toString('base64url'), hash.toString('base64url')].join(
    '$',
  );
}

/** Whether `password` matches `stored`; false for a malformed or unknown stored form. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, logN, r, p, salt, hash] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const params = [Number(logN), Number(r), Number(p)];
  if (!params.every((n) => Number.isInteger(n) && n > 0 && n < 64)) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), params[0]!, params[1]!, params[2]!);
  return expected.length === actual.length && crypto.timingSafeEqual(expected, actual);
}

/**
 * Spends the time of one verification at `cost` (the cost new hashes get), so an unknown e-mail
 * answers as slowly as a wrong password.
 */
const dummyHashes = new Map<string, Promise<string>>();
export async function verifyNothing(password: string, cost: PasswordCost = PASSWORD_COST): Promise<void> {
  const key = `${cost.logN}$${cost.r}$${cost.p}`;
  let dummyHash = dummyHashes.get(key);
  if (!dummyHash) {
    dummyHash = hashPassword('berth-dummy-password', cost);
    dummyHashes.set(key, dummyHash);
  }
  await verifyPassword(password, await dummyHash);
}
