// One PostgreSQL for the whole run (unless BERTH_TEST_DATABASE_URL names one); each test file makes
// its own database in it, so files stay isolated and run in parallel. One Node.js runtimes directory
// too, so the runtime tests download each Node.js major once per run, not once per test.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { startPostgres, type PostgresServer } from './helpers/postgres-server.js';

let server: PostgresServer | undefined;
let runtimesDir: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.BERTH_TEST_DATABASE_URL;
  if (!url) {
    server = await startPostgres();
    url = server.url;
  }
  project.provide('postgresUrl', url);
  runtimesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-test-runtimes-'));
  project.provide('runtimesDir', runtimesDir);
}

export async function teardown(): Promise<void> {
  await server?.stop();
  if (runtimesDir) fs.rmSync(runtimesDir, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string;
    runtimesDir: string;
  }
}
