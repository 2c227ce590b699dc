// The OS accounts this process made Berth create (database instances, applications, services), removed
// once what ran as them has stopped, so that test runs do not pile accounts up on the machine.
import { execFileSync } from 'node:child_process';
import { accountsCreatedHere, removeSystemAccount } from '../../src/drivers/os/users.js';

/** An application's account (`berth-<tag>-<id>`): its replicas and workers outlive a Berth on purpose. */
const APPLICATION_ACCOUNT = /^berth-b[0-9a-f]{10}-\d+$/;

export function removeAccountsCreatedHere(): void {
  for (const name of accountsCreatedHere()) {
    // A test's Berth is gone for good: what it left serving (a test that failed before its cleanup)
    // would otherwise run on, since applications outlive Berth (docs/runtime.md).
    if (APPLICATION_ACCOUNT.test(name)) {
      try {
        execFileSync('pkill', ['-KILL', '-u', name], { stdio: 'ignore' });
      } catch {
        // Nothing ran as it (pkill exits 1).
      }
    }
    // userdel refuses while the killed processes are still exiting: a few tries, 100 ms apart.
    const tries = APPLICATION_ACCOUNT.test(name) ? 10 : 1;
    for (let attempt = 0; attempt < tries; attempt += 1) {
      try {
        removeSystemAccount(name);
        break;
      } catch {
        // Something still runs as it (a process outlived its test): left alone after the last try.
        if (attempt + 1 < tries) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
      }
    }
  }
}
