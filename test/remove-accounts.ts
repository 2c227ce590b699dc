// Runs in every test file's process. Registered before the file's own hooks, so it runs after them
// (after-hooks run in reverse order), once the file's teardown has stopped its servers.
import { afterAll } from 'vitest';
import { removeAccountsCreatedHere } from './helpers/accounts.js';

afterAll(removeAccountsCreatedHere);
