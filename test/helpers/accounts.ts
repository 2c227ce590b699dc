// The OS accounts this process made Berth create (database instances, applications, services), removed
// once what ran as them has stopped, so that test runs do not pile accounts up on the machine.
import { accountsCreatedHere, removeSystemAccount } from '../../src/drivers/os/users.js';

export function removeAccountsCreatedHere(): void {
  for (const name of accountsCreatedHere()) {
    try {
      removeSystemAccount(name);
    } catch {
      // Something still runs as it (a process outlived its test): left alone.
    }
  }
}
