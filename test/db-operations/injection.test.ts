// A source server the tenant controls names its databases as it likes: a name shaped like an option
// (`--file=…`, `--result-file=…`) must never become one. Dump and restore tools run as an unprivileged
// account, and die with the process that started them.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpMigrate } from '../../src/drivers/databases/operations/index.js';
import { runCommand, TOOL_ACCOUNT } from '../../src/drivers/databases/operations/exec.js';
import { isAlive } from '../../src/drivers/databases/local/process.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { waitFor } from '../helpers/processes.js';
import { myQuery, pgQuery, withDb } from './fixtures.js';
import { startMariaDb, type MariaDbServer } from './mariadb-server.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-injection-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('database names from a source never become tool options', () => {
  let pgSource: PostgresServer;
  let pgTarget: PostgresServer;
  let mySource: MariaDbServer;
  let myTarget: MariaDbServer;

  beforeAll(async () => {
    [pgSource, pgTarget, mySource, myTarget] = await Promise.all([
      startPostgres(),
      startPostgres(),
      startMariaDb(),
      startMariaDb(),
    ]);
  });
  afterAll(async () => {
    await Promise.all([pgSource?.stop(), pgTarget?.stop(), mySource?.stop(), myTarget?.stop()]);
  });

  it('PostgreSQL: a database named --file=… writes no file; the other databases are copied', async () => {
    const evil = path.join(dir, 'pg-pwned');
    await pgQuery(pgSource.url, `CREATE DATABASE "--file=${evil}"`);
    await pgQuery(pgSource.url, 'CREATE DATABASE shop');
    await pgQuery(withDb(pgSource.url, 'shop'), 'CREATE TABLE t AS SELECT 7 AS n');
    const status = await dumpMigrate({ sourceUri: pgSource.url, targetUri: pgTarget.url, ssl: false });
    expect(fs.existsSync(evil)).toBe(false);
    const refused = status.databases.find((d) => d.dbname.startsWith('--file='));
    expect(refused).toMatchObject({ status: 'failed' });
    expect(refused?.error).toContain("may not start with '-'");
    expect(status.databases.find((d) => d.dbname === 'shop')?.status).toBe('done');
    expect(await pgQuery(withDb(pgTarget.url, 'shop'), 'SELECT n FROM t')).toEqual([{ n: 7 }]);
  });

  it('MariaDB: a database named --result-file=… creates no file; the other databases are copied', async () => {
    const evil = path.join(dir, 'my-pwned');
    await myQuery(
      mySource.url,
      `CREATE DATABASE \`--result-file=${evil}\`; CREATE DATABASE shop; CREATE TABLE shop.t (n int);
       INSERT INTO shop.t VALUES (7);`,
    );
    const status = await dumpMigrate({ sourceUri: mySource.url, targetUri: myTarget.url, ssl: false });
    expect(fs.existsSync(evil)).toBe(false);
    expect(status.databases.find((d) => d.dbname.startsWith('--result-file='))).toMatchObject({
      status: 'failed',
    });
    expect(status.databases.find((d) => d.dbname === 'shop')?.status).toBe('done');
    expect(await myQuery(myTarget.url, 'SELECT n FROM shop.t')).toEqual([{ n: 7 }]);
  });
});

describe('engine tools as processes', () => {
  it('run as the unprivileged tool account, not as root', async () => {
    const { stdout } = await runCommand({ command: 'id', args: ['-un'], runAs: TOOL_ACCOUNT });
    expect(stdout.trim()).toBe(process.getuid?.() === 0 ? TOOL_ACCOUNT : os.userInfo().username);
  });

  it("get none of Berth's own environment", async () => {
    process.env.BERTH_SECRET_KEY_PROBE = 'must-not-leak';
    try {
      const { stdout } = await runCommand({ command: 'env', args: [] });
      expect(stdout).not.toContain('must-not-leak');
      expect(stdout).toContain('PATH=');
    } finally {
      delete process.env.BERTH_SECRET_KEY_PROBE;
    }
  });

  it('die with the process that started them when it is killed with SIGKILL', async () => {
    // A stand-in for Berth: runs a long dump-like pipeline and prints the pids of its children.
    const script = `
      import { runPipeline } from './src/drivers/databases/operations/exec.ts';
      void runPipeline(
        { command: 'sh', args: ['-c', 'echo $$ >&2; exec sleep 300'] },
        { command: 'sh', args: ['-c', 'echo $$ >&2; exec sleep 300'] },
      ).catch(() => undefined);
      setInterval(() => {}, 1000);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    try {
      const tools = await waitFor(async () => {
        const found = await findChildren(child.pid as number);
        return found.length >= 2 ? Promise.resolve(found) : undefined;
      }, 20_000);
      expect(tools.every((pid) => isAlive(pid))).toBe(true);
      child.kill('SIGKILL');
      await waitFor(() => Promise.resolve(tools.every((pid) => !isAlive(pid)) ? true : undefined), 5000);
    } finally {
      child.kill('SIGKILL');
    }
  });
});

/** The `sleep` processes whose parent is `pid` (setpriv execs the tool, so the parent is Berth). */
function findChildren(pid: number): Promise<number[]> {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (Number(fields[1]) === pid && comm === 'sleep') found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return Promise.resolve(found);
}
