// Berth's OS accounts: ids from Berth's own range (the distribution's system range, 100-999, ran out
// after a few hundred databases), and removed without a trace.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ACCOUNT_ID_RANGE,
  accountsCreatedHere,
  ensureSystemAccount,
  findAccount,
  isRoot,
  removeSystemAccount,
} from '../../../src/drivers/os/users.js';

const entryOf = (file: string, name: string) =>
  fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .find((line) => line.startsWith(`${name}:`));

describe.runIf(isRoot())('system accounts', () => {
  it('takes its uid and gid from its own range, and removes the user and its group', () => {
    const name = `berth-t-${randomBytes(4).toString('hex')}`;
    const account = ensureSystemAccount(name);
    for (const id of [account.uid, account.gid]) {
      expect(id).toBeGreaterThanOrEqual(ACCOUNT_ID_RANGE.min);
      expect(id).toBeLessThanOrEqual(ACCOUNT_ID_RANGE.max);
    }
    expect(entryOf('/etc/passwd', name)).toMatch(/:\/nonexistent:\/usr\/sbin\/nologin$/);
    expect(accountsCreatedHere()).toContain(name);

    removeSystemAccount(name);
    expect(findAccount(name)).toBeUndefined();
    expect(entryOf('/etc/group', name)).toBeUndefined();
    expect(accountsCreatedHere()).not.toContain(name);
  });

  it("refuses a name that is not one of Berth's", () => {
    expect(() => ensureSystemAccount('root')).toThrow(/invalid system account name/);
    expect(() => ensureSystemAccount('berth-a; rm -rf /')).toThrow(/invalid system account name/);
    expect(() => removeSystemAccount('postgres')).toThrow(/not an account name of Berth's/);
  });
});
