// Runs in every test file's process. Registered before the file's own hooks, so it runs after them
// (after-hooks run in reverse order), once the file's teardown has stopped its servers.
import { afterAll } from 'vitest';
import { removeAccountsCreatedHere } from './helpers/accounts.js';
import { networkTagsUsedHere, removeTagNetworks } from '../src/drivers/os/netns.js';

afterAll(removeAccountsCreatedHere);
// The applications' networks of every Berth this file ran (namespaces, veths, nftables tables): they
// outlive a Berth on purpose, and a test's Berth is gone for good.
afterAll(async () => {
  for (const tag of networkTagsUsedHere()) await removeTagNetworks(tag).catch(() => undefined);
});
