// Logical dumps of a local instance for a backup of the platform (issue 31): PostgreSQL `pg_dump -Fc`
// per logical database, MariaDB one `mariadb-dump --single-transaction` of them all (Valkey: an RDB
// snapshot, valkey.ts), taken over the maintenance account while the instance serves (each a
// consistent snapshot of its databases), and loaded into a freshly provisioned instance on restore.
// The password is in the environment, never on a command line; database names come from the spec,
// checked like every name the driver uses.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { pgBinDirFor } from '../operations/common.js';
import { parseConnectionUri } from '../operations/source-uri.js';
import { mysqlArgs, pgDbnameConninfo, pgEnv } from '../operations/connect.js';
import type { InstanceSpec } from '../types.js';

/** Runs a client tool with stdout to `out` or stdin from `input`; rejects with its stderr's tail. */
function tool(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  files: { out?: string; input?: string },
): Promise<void> {
  return new Promise((resolve, reject) => {
    const stdin = files.input ? fs.openSync(files.input, 'r') : 'ignore';
    const stdout = files.out ? fs.openSync(files.out, 'wx', 0o600) : 'ignore';
    const child = spawn(command, args, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: [stdin, stdout, 'pipe'],
    });
    if (typeof stdin === 'number') fs.closeSync(stdin);
    if (typeof stdout === 'number') fs.closeSync(stdout);
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve();
      else
        reject(
          new Error(
            `${path.basename(command)} failed (exit ${code}): ${stderr.trim().split('\n').slice(-5).join(' | ')}`,
          ),
        );
    });
  });
}

/** The dump file of a logical database (names are the spec's, validated by the engine). */
const pgFile = (name: string) => `pg-${Buffer.from(name).toString('hex')}.dump`;
const MYSQL_FILE = 'mysql.sql';

export async function exportInstance(
  spec: InstanceSpec,
  maintenanceUri: string,
  major: number | undefined,
  dir: string,
): Promise<string[]> {
  const connection = parseConnectionUri(maintenanceUri);
  if (spec.engine === 'pg') {
    const files: string[] = [];
    for (const database of spec.databases) {
      const file = path.join(dir, pgFile(database.name));
      await tool(
        path.join(pgBinDirFor(major ?? 15), 'pg_dump'),
        ['--format=custom', '--no-password'],
        pgEnv(connection, database.name),
        { out: file },
      );
      files.push(file);
    }
    return files;
  }
  if (spec.engine === 'mysql') {
    if (spec.databases.length === 0) return [];
    const { args, env } = mysqlArgs(connection);
    const file = path.join(dir, MYSQL_FILE);
    await tool(
      'mariadb-dump',
      [
        ...args,
        '--single-transaction',
        '--routines',
        '--events',
        '--triggers',
        '--databases',
        '--',
        ...spec.databases.map((d) => d.name),
      ],
      env,
      { out: file },
    );
    return [file];
  }
  return []; // valkey: an RDB snapshot instead (valkey.ts, snapshotValkey)
}

export async function importInstance(
  spec: InstanceSpec,
  maintenanceUri: string,
  major: number | undefined,
  dir: string,
): Promise<void> {
  const connection = parseConnectionUri(maintenanceUri);
  if (spec.engine === 'pg') {
    for (const database of spec.databases) {
      const file = path.join(dir, pgFile(database.name));
      if (!fs.existsSync(file)) continue;
      // Into the empty database provisioning made: its default objects (the public schema) replaced.
      await tool(
        path.join(pgBinDirFor(major ?? 15), 'pg_restore'),
        [
          '--clean',
          '--if-exists',
          '--exit-on-error',
          '--no-password',
          `--dbname=${pgDbnameConninfo(database.name)}`,
          file,
        ],
        pgEnv(connection, database.name),
        {},
      );
    }
    return;
  }
  if (spec.engine === 'mysql') {
    const file = path.join(dir, MYSQL_FILE);
    if (!fs.existsSync(file)) return;
    const { args, env } = mysqlArgs(connection);
    await tool('mariadb', args, env, { input: file });
  }
}
