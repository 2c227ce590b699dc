// kill -9 of Berth in the middle of a dump migration: its pg_dump/pg_restore children must die with
// it (parent-death signal), and a retried copy must start from a clean target (no duplicate rows).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dumpMigrate } from '../../src/drivers/databases/operations/index.js';
import { isAlive, waitFor } from '../helpers/processes.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { pgQuery, withDb } from './fixtures.js';

/** Children of `pid` by command name, from /proc; zombies count as dead. */
function liveChildren(pid: number): Map<number, string> {
  const found = new Map<number, string>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const match = /^\d+ \((.*)\) (\S) (\d+)/.exec(stat);
      if (match && match[2] !== 'Z' && Number(match[3]) === pid) found.set(Number(entry), match[1] ?? '');
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

describe('a migration whose Berth is killed', () => {
  let source: PostgresServer;
  let target: PostgresServer;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-crash-'));

  beforeAll(async () => {
    [source, target] = await Promise.all([startPostgres(), startPostgres()]);
    await pgQuery(source.url, 'CREATE DATABASE big');
    await pgQuery(
      withDb(source.url, 'big'),
      'CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t SELECT generate_series(1, 1000)',
    );
  });
  afterAll(async () => {
    await Promise.all([source?.stop(), target?.stop()]);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('takes its dump children down with it, and a retry copies exactly the source rows', async () => {
    // The table is locked, so the child's pg_dump waits inside the dump until we kill its parent.
    const locker = new pg.Client({ connectionString: withDb(source.url, 'big') });
    await locker.connect();
    await locker.query('BEGIN; LOCK TABLE t IN ACCESS EXCLUSIVE MODE');
    const script = path.join(dir, 'migrate.mts');
    const operations = path.resolve('src/drivers/databases/operations/index.ts');
    fs.writeFileSync(
      script,
      `const { dumpMigrate } = await import(${JSON.stringify(operations)});
       await dumpMigrate({ sourceUri: process.env.SRC, targetUri: process.env.DST, databases: ['big'] });`,
    );
    const berth = spawn(process.execPath, ['--import', 'tsx', script], {
      env: { ...process.env, SRC: source.url, DST: target.url },
      stdio: 'ignore',
    });
    try {
      const pid = berth.pid as number;
      const tools = await waitFor(() => {
        const children = liveChildren(pid);
        const names = [...children.values()];
        return Promise.resolve(
          names.includes('pg_dump') && names.includes('pg_restore') ? [...children.keys()] : undefined,
        );
      }, 60_000);
      berth.kill('SIGKILL');
      await waitFor(() => Promise.resolve(tools.some(isAlive) ? undefined : true), 10_000);
      expect(tools.filter(isAlive)).toEqual([]);
    } finally {
      berth.kill('SIGKILL');
      await locker.query('ROLLBACK');
      await locker.end();
    }
    // The retry, twice: each starts from an empty target database, so rows are never duplicated.
    for (let attempt = 0; attempt < 2; attempt++) {
      const status = await dumpMigrate({ sourceUri: source.url, targetUri: target.url, databases: ['big'] });
      expect(status.status).toBe('done');
      expect(await pgQuery(withDb(target.url, 'big'), 'SELECT count(*)::int AS n FROM t')).toEqual([
        { n: 1000 },
      ]);
    }
  });
});
