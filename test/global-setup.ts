// One PostgreSQL for the whole run (unless BERTH_TEST_DATABASE_URL names one); each test file makes
// its own database in it, so files stay isolated and run in parallel.
import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from './helpers/postgres-server.js';

let server: PostgresServer | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.BERTH_TEST_DATABASE_URL;
  if (!url) {
    server = await startPostgres();
    url = server.url;
  }
  project.provide('postgresUrl', url);
}

export async function teardown(): Promise<void> {
  await server?.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
  }
}
