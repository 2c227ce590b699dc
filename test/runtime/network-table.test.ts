// The nftables table of a Berth (one per runtime tag): removing an application's network must not
// make the table when there is none. It did, and every deleted application of a Berth that never ran
// one left a table behind; hundreds of them made each nft command on the host take 0.2 s.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ensureNetworkTable,
  networksAvailable,
  removeAppNetwork,
  removeTagNetworks,
} from '../../src/drivers/os/netns.js';

const tableExists = (tag: string) => {
  try {
    execFileSync('nft', ['-t', 'list', 'table', 'inet', `berth_${tag}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(!networksAvailable())('a Berth’s nftables table', () => {
  const tag = `t${randomBytes(5).toString('hex')}`;
  afterEach(async () => {
    await removeTagNetworks(tag);
  });

  it('is not made by removing an application’s network', async () => {
    await removeAppNetwork(tag, 7);
    expect(tableExists(tag)).toBe(false);
  });

  it('keeps its base chains when an application without a network is removed', async () => {
    await ensureNetworkTable(tag, [8080]);
    await removeAppNetwork(tag, 7);
    expect(tableExists(tag)).toBe(true);
    const table = execFileSync('nft', ['list', 'table', 'inet', `berth_${tag}`], { encoding: 'utf8' });
    expect(table).toContain('chain prerouting');
    expect(table).not.toContain('app_7');
  });
});
