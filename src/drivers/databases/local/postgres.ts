// PostgreSQL 15 instances: initdb + pg_ctl as the postgres user, continuous WAL archiving from the
// first start, base backups with pg_basebackup, users and databases through node-postgres.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { EngineLimits } from '../plan-limits.js';
import { PermanentDriverError, type BaseBackup, type InstanceSpec } from '../types.js';
import type { LocalEngine } from './engine.js';
import {
  SAFE_NAME,
  SAFE_SETTING,
  chownTree,
  commandLineMentions,
  isAlive,
  readPidFile,
  run,
  runAs,
  sleep,
  treeSize,
} from './process.js';

export const PG_BIN = '/usr/lib/postgresql/15/bin';
const OS_USER = 'postgres';
const AUTH_METHODS = new Set(['scram-sha-256', 'md5']);

const dataOf = (root: string) => path.join(root, 'data');
const socketDirOf = (root: string) => path.join(root, 'run');
export const walArchiveOf = (root: string): string => path.join(root, 'wal-archive');
export const baseBackupsOf = (root: string): string => path.join(root, 'base-backups');

/** A value for postgresql.conf: single-quoted, quotes doubled. */
const confString = (value: string): string => `'${value.replace(/'/g, "''")}'`;

async function adminClient(spec: InstanceSpec, port: number, database = 'postgres'): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user: spec.adminUser,
    password: spec.adminPassword,
    database,
    connectionTimeoutMillis: 10_000,
  });
  await client.connect();
  return client;
}

function checkSpec(spec: InstanceSpec): void {
  for (const user of spec.users) {
    if (!SAFE_NAME.test(user.username))
      throw new PermanentDriverError(`invalid user name '${user.username}'`);
    if (user.authentication !== undefined && !AUTH_METHODS.has(user.authentication)) {
      throw new PermanentDriverError(
        `user '${user.username}': authentication '${user.authentication}' is not supported by pg (use scram-sha-256 or md5)`,
      );
    }
  }
  for (const db of spec.databases) {
    if (!SAFE_NAME.test(db.name)) throw new PermanentDriverError(`invalid database name '${db.name}'`);
    for (const value of [db.characterSet, db.collation]) {
      if (value !== undefined && !SAFE_SETTING.test(value)) {
        throw new PermanentDriverError(`database '${db.name}': invalid setting '${value}'`);
      }
    }
  }
}

export const postgresEngine: LocalEngine = {
  osUser: OS_USER,
  stopSignal: 'SIGINT', // fast shutdown: roll back open transactions, checkpoint, exit

  isInitialised(root) {
    return fs.existsSync(path.join(dataOf(root), 'berth.conf'));
  },

  templated: true,
  validate: checkSpec,

  async init(root, adminUser, adminPassword) {
    for (const dir of [socketDirOf(root), walArchiveOf(root), baseBackupsOf(root), path.join(root, 'log')]) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    // initdb reads the password from a file; process substitution fails under runuser.
    const pwfile = path.join(root, 'run', 'initdb.pw');
    fs.writeFileSync(pwfile, adminPassword, { mode: 0o600 });
    await chownTree(root, OS_USER);
    try {
      await runAs(OS_USER, path.join(PG_BIN, 'initdb'), [
        '-D',
        dataOf(root),
        '-U',
        adminUser,
        '--auth-local=scram-sha-256',
        '--auth-host=scram-sha-256',
        `--pwfile=${pwfile}`,
        '-E',
        'UTF8',
        '--locale=C.UTF-8',
        // 1 MiB segments: archive_timeout switches segments often, and each switch archives a whole one.
        '--wal-segsize=1',
        // No fsync of the fresh files: the first checkpoint (at the latest, a clean stop) writes them.
        '-N',
      ]);
    } finally {
      fs.rmSync(pwfile, { force: true });
    }
    const data = dataOf(root);
    // UpCloud's services always have `defaultdb`; made here, every copy of the template has it.
    await runAs(OS_USER, path.join(PG_BIN, 'postgres'), ['--single', '-D', data, 'postgres'], {
      input: 'CREATE DATABASE defaultdb TEMPLATE template0\n',
    });
    fs.appendFileSync(
      path.join(data, 'postgresql.conf'),
      "\n# Written by Berth: instance settings (port, limits, archiving)\ninclude_if_exists = 'berth.conf'\n",
    );
    // md5 on TCP also accepts SCRAM-stored passwords, so users of both methods log in.
    fs.writeFileSync(
      path.join(data, 'pg_hba.conf'),
      [
        'local all all scram-sha-256',
        'local replication all scram-sha-256',
        'host all all 127.0.0.1/32 md5',
        'host replication all 127.0.0.1/32 md5',
        '',
      ].join('\n'),
    );
  },

  async configure(root, _spec, port, limits: EngineLimits) {
    const archive = walArchiveOf(root);
    if (/["'\n]/.test(archive)) throw new PermanentDriverError(`unusable data directory path ${archive}`);
    const lines = [
      "listen_addresses = '127.0.0.1'",
      `port = ${port}`,
      `unix_socket_directories = ${confString(socketDirOf(root))}`,
      'password_encryption = scram-sha-256',
      ...Object.entries(limits.settings).map(([name, value]) => `${name} = ${confString(value)}`),
      // Continuous archiving from the first start: every segment is kept for point-in-time recovery.
      'wal_level = replica',
      'archive_mode = on',
      `archive_command = ${confString(`test ! -f "${archive}/%f" && cp "%p" "${archive}/%f"`)}`,
      'archive_timeout = 60',
      'min_wal_size = 16MB',
      'max_wal_size = 256MB',
      "log_line_prefix = '%m [%p] '",
      // Crash recovery first syncs the data directory; one syncfs() beats an fsync() per file.
      'recovery_init_sync_method = syncfs',
      '',
    ];
    fs.writeFileSync(path.join(dataOf(root), 'berth.conf'), lines.join('\n'), { mode: 0o600 });
    await chownTree(dataOf(root), OS_USER);
  },

  async start(root) {
    const data = dataOf(root);
    // Lock files of a killed postmaster block a start while its pid lingers (as a zombie, or reused).
    if (postgresEngine.pidOf(root) === null) {
      fs.rmSync(path.join(data, 'postmaster.pid'), { force: true });
      for (const name of fs.readdirSync(socketDirOf(root))) {
        if (name.startsWith('.s.PGSQL.')) fs.rmSync(path.join(socketDirOf(root), name), { force: true });
      }
    }
    // After a kill, orphaned backends hold the old shared memory for a moment: retry briefly.
    for (let attempt = 1; ; attempt += 1) {
      try {
        await runAs(OS_USER, path.join(PG_BIN, 'pg_ctl'), [
          '-D',
          data,
          '-l',
          path.join(root, 'log', 'postgres.log'),
          '-w',
          '-t',
          '60',
          'start',
        ]);
        return;
      } catch (error) {
        if (attempt >= 20) throw error;
        await sleep(250);
      }
    }
  },

  pidOf(root) {
    const data = dataOf(root);
    const pid = readPidFile(path.join(data, 'postmaster.pid'));
    return isAlive(pid) && commandLineMentions(pid, data) ? pid : null;
  },

  async ensureAccess(_root, spec, port, bootstrapPassword) {
    checkSpec(spec);
    let admin: pg.Client;
    try {
      admin = await adminClient(spec, port);
    } catch (error) {
      if (bootstrapPassword === undefined || !/password authentication failed/.test(String(error)))
        throw error;
      // First start of a copy of the template: give the admin its own password.
      admin = await adminClient({ ...spec, adminPassword: bootstrapPassword }, port);
      await admin.query(
        `ALTER ROLE ${admin.escapeIdentifier(spec.adminUser)} PASSWORD ${admin.escapeLiteral(spec.adminPassword)}`,
      );
    }
    try {
      const version = String(
        (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version,
      ).split(' ')[0] as string;
      for (const user of spec.users) {
        const method = user.authentication ?? 'scram-sha-256';
        // password_encryption decides how the password is stored, hence how the user authenticates.
        await admin.query(`SET password_encryption = ${admin.escapeLiteral(method)}`);
        const exists = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [user.username]);
        const verb = exists.rowCount ? 'ALTER' : 'CREATE';
        await admin.query(
          `${verb} ROLE ${admin.escapeIdentifier(user.username)} LOGIN PASSWORD ${admin.escapeLiteral(user.password)}`,
        );
      }
      await admin.query('RESET password_encryption');
      const databases = [{ name: 'defaultdb' }, ...spec.databases.filter((d) => d.name !== 'defaultdb')];
      for (const db of databases) {
        const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
        if (!exists.rowCount) {
          const options = ['TEMPLATE template0'];
          if ('characterSet' in db && db.characterSet) {
            options.push(`ENCODING ${admin.escapeLiteral(db.characterSet)}`);
          }
          if ('collation' in db && db.collation) {
            options.push(`LC_COLLATE ${admin.escapeLiteral(db.collation)}`);
            options.push(`LC_CTYPE ${admin.escapeLiteral(db.collation)}`);
          }
          await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(db.name)} ${options.join(' ')}`);
        }
        for (const user of spec.users) {
          await admin.query(
            `GRANT ALL PRIVILEGES ON DATABASE ${admin.escapeIdentifier(db.name)} TO ${admin.escapeIdentifier(user.username)}`,
          );
        }
        if (spec.users.length > 0) {
          // Since PostgreSQL 15 only the owner may create in `public`; declared users share it.
          const inner = await adminClient(spec, port, db.name);
          try {
            const names = spec.users.map((u) => inner.escapeIdentifier(u.username)).join(', ');
            await inner.query(`GRANT ALL ON SCHEMA public TO ${names}`);
          } finally {
            await inner.end();
          }
        }
      }
      return {
        version,
        credentials: {
          admin: { username: spec.adminUser, password: spec.adminPassword },
          users: spec.users.map((u) => ({
            username: u.username,
            password: u.password,
            authentication: u.authentication ?? 'scram-sha-256',
          })),
        },
      };
    } finally {
      await admin.end();
    }
  },

  async baseBackup(root, spec, port, retain) {
    const admin = await adminClient(spec, port);
    let startWal: string;
    try {
      // Every segment before the one current now is older than this backup's start.
      const row = await admin.query<{ wal: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS wal');
      startWal = String(row.rows[0]?.wal);
    } finally {
      await admin.end();
    }
    const backups = baseBackupsOf(root);
    const at = new Date();
    const name = at.toISOString().replace(/[:.]/g, '-');
    const target = path.join(backups, name);
    await runAs(
      OS_USER,
      path.join(PG_BIN, 'pg_basebackup'),
      [
        '-D',
        target,
        '-Ft',
        // lz4 compresses nearly as well as gzip here at a fraction of the CPU.
        '--compress=lz4',
        '-Xnone', // the WAL archive holds the WAL; a restore replays from it
        '-c',
        'fast',
        '-h',
        socketDirOf(root),
        '-p',
        String(port),
        '-U',
        spec.adminUser,
        '-w',
      ],
      { env: { PGPASSWORD: spec.adminPassword } },
    );
    const backup: BaseBackup = {
      backup_name: name,
      backup_time: at.toISOString(),
      data_size: treeSize(target),
      start_wal: startWal,
    };
    fs.writeFileSync(path.join(target, 'berth-backup.json'), JSON.stringify(backup));
    const kept = listBaseBackups(root);
    for (const old of kept.slice(0, Math.max(0, kept.length - retain))) {
      fs.rmSync(path.join(backups, old.backup_name), { recursive: true, force: true });
    }
    const remaining = kept.slice(Math.max(0, kept.length - retain));
    const oldest = remaining[0];
    if (oldest) {
      // WAL older than the oldest kept backup can no longer be replayed onto anything.
      await run(path.join(PG_BIN, 'pg_archivecleanup'), [walArchiveOf(root), oldest.start_wal]);
    }
    return remaining;
  },
};

/** The base backups on disk, oldest first. */
export function listBaseBackups(root: string): BaseBackup[] {
  const dir = baseBackupsOf(root);
  let names: string[];
  try {
    names = fs.readdirSync(dir).sort();
  } catch {
    return [];
  }
  const result: BaseBackup[] = [];
  for (const name of names) {
    try {
      result.push(
        JSON.parse(fs.readFileSync(path.join(dir, name, 'berth-backup.json'), 'utf8')) as BaseBackup,
      );
    } catch {
      // an interrupted backup: no manifest, not usable
    }
  }
  return result;
}
