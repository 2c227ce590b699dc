// A throwaway MariaDB server (mariadb-install-db + mariadbd) on a free loopback port, for these tests.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileAsync, freePort, isRoot, waitFor } from '../helpers/processes.js';

export interface MariaDbServer {
  /** Admin URI (all privileges) for user `admin`. */
  url: string;
  port: number;
  /** Runs SQL through the mariadb client as root over the socket. */
  sql(statement: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startMariaDb(
  options: {
    password?: string;
    /** Runs it in this network namespace (test/helpers/outside-network.ts), listening on `address`. */
    network?: { namespacePath: string; address: string };
  } = {},
): Promise<MariaDbServer> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-mariadb-'));
  fs.chmodSync(root, 0o755);
  const dataDir = path.join(root, 'data');
  const socket = path.join(root, 'mysqld.sock');
  const password = options.password ?? 'test';
  // A private tmpdir: concurrent bootstraps sharing /tmp collide on their temporary table files.
  const tmpDir = path.join(root, 'tmp');
  fs.mkdirSync(tmpDir);
  if (isRoot()) await execFileAsync('chown', ['-R', 'mysql:mysql', root]);
  await execFileAsync('mariadb-install-db', [
    '--no-defaults',
    `--datadir=${dataDir}`,
    ...(isRoot() ? ['--user=mysql'] : []),
    `--tmpdir=${tmpDir}`,
    '--auth-root-authentication-method=normal',
    '--skip-test-db',
    '--innodb-log-file-size=8M',
    '--innodb-buffer-pool-size=16M',
  ]).catch((error: Error & { stderr?: string; stdout?: string }) => {
    // The default message is just the command line; the reason is in the output.
    throw new Error(`${error.message}\n${error.stdout ?? ''}\n${error.stderr ?? ''}`.slice(0, 4000));
  });
  const port = await freePort();
  const address = options.network?.address ?? '127.0.0.1';
  const command = options.network
    ? ['nsenter', `--net=${options.network.namespacePath}`, '--', 'mariadbd']
    : ['mariadbd'];
  const child = spawn(
    command[0]!,
    [
      ...command.slice(1),
      '--no-defaults',
      `--datadir=${dataDir}`,
      ...(isRoot() ? ['--user=mysql'] : []),
      `--port=${port}`,
      `--bind-address=${address}`,
      `--tmpdir=${tmpDir}`,
      `--socket=${socket}`,
      `--pid-file=${path.join(root, 'mariadb.pid')}`,
      `--log-error=${path.join(root, 'error.log')}`,
      '--innodb-buffer-pool-size=16M',
      '--innodb-log-file-size=8M',
      '--performance-schema=OFF',
      '--skip-name-resolve',
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const sql = async (statement: string): Promise<string> => {
    const { stdout } = await execFileAsync('mariadb', [
      '--no-defaults',
      `--socket=${socket}`,
      '-uroot',
      '-N',
      '-B',
      '-e',
      statement,
    ]);
    return stdout;
  };
  await waitFor(async () => ((await sql('SELECT 1')).trim() === '1' ? true : undefined), 20_000, 50);
  await sql(
    `CREATE USER 'admin'@'%' IDENTIFIED BY '${password}'; GRANT ALL PRIVILEGES ON *.* TO 'admin'@'%' WITH GRANT OPTION;`,
  );
  return {
    url: `mysql://admin:${encodeURIComponent(password)}@${address}:${port}/`,
    port,
    sql,
    async stop() {
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
