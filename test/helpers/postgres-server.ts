// A throwaway PostgreSQL 15 cluster (initdb + pg_ctl) on a free loopback port, for tests.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { asUser, execFileAsync, freePort, isRoot } from './processes.js';

export const PG15_BIN = '/usr/lib/postgresql/15/bin';

export interface PostgresServer {
  url: string;
  port: number;
  dataDir: string;
  stop(): Promise<void>;
}

export async function startPostgres(
  options: { binDir?: string; password?: string; conf?: string[] } = {},
): Promise<PostgresServer> {
  const binDir = options.binDir ?? PG15_BIN;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-pg-'));
  fs.chmodSync(root, 0o755);
  const dataDir = path.join(root, 'data');
  const password = options.password ?? 'test';
  const pwfile = path.join(root, 'pw');
  fs.writeFileSync(pwfile, password, { mode: 0o600 });
  if (isRoot()) await execFileAsync('chown', ['-R', 'postgres:postgres', root]);
  const port = await freePort();
  const [initCmd, initArgs] = asUser('postgres', path.join(binDir, 'initdb'), [
    '-D',
    dataDir,
    '-U',
    'postgres',
    '--auth=scram-sha-256',
    `--pwfile=${pwfile}`,
    '-E',
    'UTF8',
    '--locale=C.UTF-8',
    '-N',
  ]);
  await execFileAsync(initCmd, initArgs);
  const extra = (options.conf ?? []).map((c) => `-c ${c}`).join(' ');
  const [ctlCmd, ctlArgs] = asUser('postgres', path.join(binDir, 'pg_ctl'), [
    '-D',
    dataDir,
    '-l',
    path.join(root, 'log'),
    '-w',
    '-o',
    `-p ${port} -k ${root} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 ${extra}`,
    'start',
  ]);
  await execFileAsync(ctlCmd, ctlArgs);
  return {
    url: `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`,
    port,
    dataDir,
    async stop() {
      const [cmd, args] = asUser('postgres', path.join(binDir, 'pg_ctl'), [
        '-D',
        dataDir,
        '-m',
        'immediate',
        '-w',
        'stop',
      ]);
      await execFileAsync(cmd, args).catch(() => undefined);
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
}
