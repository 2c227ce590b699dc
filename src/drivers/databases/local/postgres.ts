// PostgreSQL instances: initdb + pg_ctl as the postgres user, continuous WAL archiving from the
// first start, base backups, users and databases through node-postgres. New instances are made on 15;
// every later start uses the binaries of the major in the data directory's PG_VERSION, so an instance
// upgraded to 16 keeps running on 16 after restarts of Berth.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { EngineLimits } from '../plan-limits.js';
import { PermanentDriverError, type BaseBackup, type InstanceSpec } from '../types.js';
import type { LocalEngine } from './engine.js';
import { pgBinDirFor, pgBinaryMajor, pgToolDir } from '../operations/common.js';
import { upgradePostgres } from '../operations/upgrade.js';
import { RECOVERY_SETTINGS } from '../operations/clone.js';
import { dropAutoConf } from '../operations/cluster.js';
import {
  MAINTENANCE_USER,
  existingMaintenancePassword,
  instanceAccount,
  maintenancePassword,
} from './accounts.js';
import {
  SAFE_NAME,
  SAFE_SETTING,
  chownTree,
  commandLineMentions,
  freePort,
  isAlive,
  readPidFile,
  run,
  runAs,
  sleep,
  terminate,
} from './process.js';
import { treeBytes } from '../../os/disk-usage.js';

/** The major of new instances (Debian's server binaries). */
export const NEW_INSTANCE_MAJOR = 15;
/** The account of templates; every instance runs as its own (accounts.ts). */
const OS_USER = 'postgres';
const accountOf = (root: string): string | undefined => instanceAccount(root, OS_USER);

/**
 * What the admin a team receives may do: UpCloud's `upadmin` creates databases and roles, owns and
 * grants, reads and writes every table and sees activity; it runs no programs and reads no server
 * files (not a superuser, not in pg_execute_server_program / pg_read_server_files / pg_write_server_files).
 * Before 16, CREATEROLE could grant any of those roles to oneself, so there the admin has none and
 * roles are declared in the document (docs/security.md).
 */
const adminAttributes = (major: number): string =>
  `LOGIN NOSUPERUSER CREATEDB ${major >= 16 ? 'CREATEROLE' : 'NOCREATEROLE'} NOREPLICATION NOBYPASSRLS`;
const ADMIN_ROLES = ['pg_read_all_data', 'pg_write_all_data', 'pg_monitor', 'pg_signal_backend'];
const SERVER_ACCESS_ROLES = ['pg_execute_server_program', 'pg_read_server_files', 'pg_write_server_files'];
const isBootstrapRefusal = (error: unknown): boolean =>
  /bootstrap user must have the SUPERUSER/.test(String((error as { detail?: unknown }).detail));

/** Names a declared user may not take: the admin's, Berth's, and the server's own. */
const isReservedRole = (name: string, admin: string): boolean =>
  name === admin ||
  name === MAINTENANCE_USER ||
  name === 'postgres' ||
  name === 'public' ||
  /^pg_/i.test(name);
const AUTH_METHODS = new Set(['scram-sha-256', 'md5']);

const dataOf = (root: string) => path.join(root, 'data');
const socketDirOf = (root: string) => path.join(root, 'run');
export const walArchiveOf = (root: string): string => path.join(root, 'wal-archive');
export const baseBackupsOf = (root: string): string => path.join(root, 'base-backups');

/** The major the data directory was made by (its PG_VERSION file), or undefined before initdb. */
export function dataMajorOf(root: string): number | undefined {
  try {
    const major = Number.parseInt(fs.readFileSync(path.join(dataOf(root), 'PG_VERSION'), 'utf8'), 10);
    return Number.isFinite(major) ? major : undefined;
  } catch {
    return undefined;
  }
}

/** The server binaries for the instance's own major. */
const binDirOf = (root: string): string => pgBinDirFor(dataMajorOf(root) ?? NEW_INSTANCE_MAJOR);

/** Berth's part of a data directory: postgresql.conf includes berth.conf; md5 on TCP also accepts SCRAM hashes. */
function writeBerthFiles(data: string): void {
  fs.appendFileSync(
    path.join(data, 'postgresql.conf'),
    "\n# Written by Berth: instance settings (port, limits, archiving)\ninclude_if_exists = 'berth.conf'\n",
  );
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
}

/** A value for postgresql.conf: single-quoted, quotes doubled. */
const confString = (value: string): string => `'${value.replace(/'/g, "''")}'`;

async function connectAs(
  user: string,
  password: string,
  port: number,
  database = 'postgres',
): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port,
    user,
    password,
    database,
    connectionTimeoutMillis: 10_000,
  });
  await client.connect();
  return client;
}

/** Berth's own superuser connection to the instance (its maintenance account). */
const maintenanceClient = (root: string, port: number, database = 'template1'): Promise<pg.Client> =>
  connectAs(MAINTENANCE_USER, maintenancePassword(root), port, database);

/**
 * A superuser session, and the maintenance account made to match its password file. Tried in turn:
 * the maintenance account (as it is, or with the template's or a copied source's password), then the
 * admin, which was the superuser of instances made before the maintenance account existed.
 */
async function superuserSession(
  root: string,
  spec: InstanceSpec,
  port: number,
  bootstrapPassword: string | undefined,
): Promise<pg.Client> {
  const known = existingMaintenancePassword(root);
  const password = maintenancePassword(root);
  const attempts: Array<[string, string | undefined]> = [
    [MAINTENANCE_USER, known],
    [MAINTENANCE_USER, bootstrapPassword],
    [MAINTENANCE_USER, spec.adminPassword],
    [spec.adminUser, spec.adminPassword],
    [spec.adminUser, bootstrapPassword],
  ];
  let lastError: unknown;
  for (const [user, secret] of attempts) {
    if (secret === undefined) continue;
    let client: pg.Client;
    try {
      // template1: the admin owns (and may drop) postgres and defaultdb.
      client = await connectAs(user, secret, port, 'template1');
    } catch (error) {
      if (!/password authentication failed|does not exist/.test(String(error))) throw error;
      lastError = error;
      continue;
    }
    const superuser = await client.query<{ s: boolean }>(
      'SELECT rolsuper AS s FROM pg_roles WHERE rolname = current_user',
    );
    if (!superuser.rows[0]?.s) {
      await client.end();
      continue;
    }
    if (user !== MAINTENANCE_USER || secret !== password) {
      const exists = await client.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [MAINTENANCE_USER]);
      await client.query(
        `${exists.rowCount ? 'ALTER' : 'CREATE'} ROLE ${MAINTENANCE_USER} SUPERUSER LOGIN PASSWORD ${client.escapeLiteral(password)}`,
      );
      // On as the maintenance account: the admin's own session would lose its rights midway.
      await client.end();
      return connectAs(MAINTENANCE_USER, password, port, 'template1');
    }
    return client;
  }
  throw lastError instanceof Error ? lastError : new Error('no superuser session could be opened');
}

/**
 * Extensions that exist to reach the server's own files or repair its storage: never made for a
 * tenant, even by Berth's superuser (adminpack writes server files, file_fdw reads them, pg_surgery
 * edits heap tuples by hand).
 */
const WITHHELD_EXTENSIONS = new Set(['adminpack', 'file_fdw', 'pg_surgery']);

let extensionList: string[] | undefined;
/** Extensions a database can be given: the installed ones of the new-instance major, less the withheld. */
export function availablePgExtensions(): string[] {
  if (extensionList) return extensionList;
  const bin = pgBinDirFor(NEW_INSTANCE_MAJOR);
  const candidates = [
    `/usr/share/postgresql/${NEW_INSTANCE_MAJOR}/extension`,
    path.join(bin, '..', 'share', 'postgresql', 'extension'),
  ];
  const dir = candidates.find((candidate) => fs.existsSync(candidate));
  const names = dir
    ? fs
        .readdirSync(dir)
        .filter((name) => name.endsWith('.control'))
        .map((name) => name.slice(0, -'.control'.length))
    : [];
  extensionList = names.filter((name) => !WITHHELD_EXTENSIONS.has(name)).sort();
  return extensionList;
}

function checkSpec(spec: InstanceSpec): void {
  for (const db of spec.databases) {
    const missing = (db.extensions ?? []).filter((name) => !availablePgExtensions().includes(name));
    if (missing.length > 0) {
      throw new PermanentDriverError(
        `database '${db.name}': extension${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not available here; available: ${availablePgExtensions().join(', ')}`,
      );
    }
  }
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
  logFile: (root) => path.join(root, 'log', 'postgres.log'),
  versions: () => [String(NEW_INSTANCE_MAJOR)],
  stopSignal: 'SIGINT', // fast shutdown: roll back open transactions, checkpoint, exit

  isInitialised(root) {
    return fs.existsSync(path.join(dataOf(root), 'berth.conf'));
  },

  templated: true,
  validate: checkSpec,

  async init(root, _adminUser, adminPassword) {
    for (const dir of [socketDirOf(root), walArchiveOf(root), baseBackupsOf(root), path.join(root, 'log')]) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    // initdb reads the password from a file; process substitution fails under runuser.
    const pwfile = path.join(root, 'run', 'initdb.pw');
    fs.writeFileSync(pwfile, adminPassword, { mode: 0o600 });
    await chownTree(root, accountOf(root));
    try {
      // The bootstrap superuser is Berth's maintenance account: the admin a team gets is made by
      // ensureAccess, without superuser (PostgreSQL 16 cannot take it from the bootstrap superuser).
      await runAs(accountOf(root), path.join(pgBinDirFor(NEW_INSTANCE_MAJOR), 'initdb'), [
        '-D',
        dataOf(root),
        '-U',
        MAINTENANCE_USER,
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
    await runAs(
      accountOf(root),
      path.join(binDirOf(root), 'postgres'),
      ['--single', '-D', data, 'postgres'],
      {
        input: 'CREATE DATABASE defaultdb TEMPLATE template0\n',
      },
    );
    writeBerthFiles(data);
  },

  async configure(root, spec, port, limits: EngineLimits) {
    const archive = walArchiveOf(root);
    // An application's service (sized by its own limits) has no point-in-time recovery and no base
    // backups that would prune the archive: archiving would fill its volume, 16 MB a segment.
    const archiving = spec.limits === undefined;
    if (!archiving && fs.existsSync(archive)) {
      for (const name of fs.readdirSync(archive)) fs.rmSync(path.join(archive, name), { recursive: true });
    }
    if (/["'\n]/.test(archive)) throw new PermanentDriverError(`unusable data directory path ${archive}`);
    const lines = [
      "listen_addresses = '127.0.0.1'",
      `port = ${port}`,
      `unix_socket_directories = ${confString(socketDirOf(root))}`,
      'password_encryption = scram-sha-256',
      ...Object.entries(limits.settings).map(([name, value]) => `${name} = ${confString(value)}`),
      // Continuous archiving from the first start: every segment is kept for point-in-time recovery.
      'wal_level = replica',
      ...(archiving
        ? [
            'archive_mode = on',
            `archive_command = ${confString(`test ! -f "${archive}/%f" && cp "%p" "${archive}/%f"`)}`,
            'archive_timeout = 60',
          ]
        : ['archive_mode = off']),
      'min_wal_size = 16MB',
      'max_wal_size = 256MB',
      "log_line_prefix = '%m [%p] '",
      // Crash recovery first syncs the data directory; one syncfs() beats an fsync() per file.
      'recovery_init_sync_method = syncfs',
      '',
    ];
    fs.writeFileSync(path.join(dataOf(root), 'berth.conf'), lines.join('\n'), { mode: 0o600 });
    await chownTree(dataOf(root), accountOf(root));
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
        await runAs(accountOf(root), path.join(binDirOf(root), 'pg_ctl'), [
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

  async ensureAccess(root, declared, port, bootstrapPassword) {
    // A user named like the admin, Berth's account or the server's own is never made (apply refuses
    // such names; a document stored before that rule is served without them).
    const spec = {
      ...declared,
      users: declared.users.filter((u) => !isReservedRole(u.username, declared.adminUser)),
    };
    checkSpec(spec);
    const maint = await superuserSession(root, spec, port, bootstrapPassword);
    const role = (name: string) => maint.escapeIdentifier(name);
    try {
      const version = String(
        (await maint.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version,
      ).split(' ')[0] as string;
      const admin = role(spec.adminUser);
      const adminExists = await maint.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [spec.adminUser]);
      const setAdmin = (attributes: string) =>
        maint.query(
          `${adminExists.rowCount ? 'ALTER' : 'CREATE'} ROLE ${admin} ${attributes} PASSWORD ${maint.escapeLiteral(spec.adminPassword)}`,
        );
      await setAdmin(adminAttributes(Number.parseInt(version, 10))).catch(async (error: unknown) => {
        // An instance upgraded to 16 before the maintenance account existed has the admin as its
        // bootstrap superuser, which 16 cannot demote (docs/security.md); the rest still applies.
        if (!isBootstrapRefusal(error)) throw error;
        await setAdmin('LOGIN');
      });
      await maint.query(`GRANT ${ADMIN_ROLES.join(', ')} TO ${admin}`);
      // Whatever made a role a superuser or gave it server access (an instance from before, a grant
      // by an earlier admin), only Berth's maintenance account keeps it.
      const elevated = await maint.query<{ rolname: string }>(
        `SELECT rolname FROM pg_roles WHERE rolsuper AND rolname <> $1`,
        [MAINTENANCE_USER],
      );
      for (const { rolname } of elevated.rows) {
        await maint.query(`ALTER ROLE ${role(rolname)} NOSUPERUSER`).catch((error: unknown) => {
          if (!isBootstrapRefusal(error)) throw error;
        });
      }
      const members = await maint.query<{ member: string; granted: string }>(
        `SELECT m.rolname AS member, g.rolname AS granted FROM pg_auth_members a
           JOIN pg_roles m ON m.oid = a.member JOIN pg_roles g ON g.oid = a.roleid
          WHERE g.rolname = ANY($1) AND m.rolname <> $2`,
        [SERVER_ACCESS_ROLES, MAINTENANCE_USER],
      );
      for (const { member, granted } of members.rows) {
        await maint.query(`REVOKE ${role(granted)} FROM ${role(member)}`);
      }
      for (const user of spec.users) {
        const method = user.authentication ?? 'scram-sha-256';
        // password_encryption decides how the password is stored, hence how the user authenticates.
        await maint.query(`SET password_encryption = ${maint.escapeLiteral(method)}`);
        const exists = await maint.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [user.username]);
        const verb = exists.rowCount ? 'ALTER' : 'CREATE';
        await maint.query(
          `${verb} ROLE ${role(user.username)} LOGIN NOSUPERUSER PASSWORD ${maint.escapeLiteral(user.password)}`,
        );
      }
      await maint.query('RESET password_encryption');
      // defaultdb and postgres are the admin's, as the databases it declares (a dropped one comes back).
      const databases = [
        { name: 'defaultdb' },
        { name: 'postgres' },
        ...spec.databases.filter((d) => d.name !== 'defaultdb' && d.name !== 'postgres'),
      ];
      for (const db of databases) {
        const exists = await maint.query('SELECT 1 FROM pg_database WHERE datname = $1', [db.name]);
        if (!exists.rowCount) {
          const options = ['TEMPLATE template0', `OWNER ${admin}`];
          if ('characterSet' in db && db.characterSet) {
            options.push(`ENCODING ${maint.escapeLiteral(db.characterSet)}`);
          }
          if ('collation' in db && db.collation) {
            options.push(`LC_COLLATE ${maint.escapeLiteral(db.collation)}`);
            options.push(`LC_CTYPE ${maint.escapeLiteral(db.collation)}`);
          }
          await maint.query(`CREATE DATABASE ${role(db.name)} ${options.join(' ')}`);
        } else {
          // Made by the bootstrap superuser (a template's defaultdb): the admin owns it.
          const owner = await maint.query<{ owner: string }>(
            'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
            [db.name],
          );
          if (owner.rows[0]?.owner === MAINTENANCE_USER) {
            await maint.query(`ALTER DATABASE ${role(db.name)} OWNER TO ${admin}`);
          }
        }
        for (const user of spec.users) {
          await maint.query(`GRANT ALL PRIVILEGES ON DATABASE ${role(db.name)} TO ${role(user.username)}`);
        }
        if ('extensions' in db && db.extensions && db.extensions.length > 0) {
          // Made by Berth's superuser: most extensions are not `trusted`, so the owner could not.
          const inner = await maintenanceClient(root, port, db.name);
          try {
            for (const name of db.extensions) {
              await inner.query(`CREATE EXTENSION IF NOT EXISTS ${inner.escapeIdentifier(name)}`);
            }
          } finally {
            await inner.end();
          }
        }
        if (spec.users.length > 0) {
          // Since PostgreSQL 15 only the owner may create in `public`; declared users share it.
          const inner = await maintenanceClient(root, port, db.name);
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
      await maint.end();
    }
  },

  async baseBackup(root, _spec, port, retain) {
    // A retry after an interrupted backup: its directory (no manifest yet) is not a backup.
    dropIncompleteBackups(root);
    const major = dataMajorOf(root) ?? NEW_INSTANCE_MAJOR;
    const backups = baseBackupsOf(root);
    const at = new Date();
    const name = at.toISOString().replace(/[:.]/g, '-');
    const target = path.join(backups, name);
    // pg_basebackup refuses servers newer than itself: a major without its own uses the low-level API.
    const startWal = fs.existsSync(path.join(pgBinDirFor(major), 'pg_basebackup'))
      ? await streamedBackup(root, port, target, pgBinDirFor(major))
      : await lowLevelBackup(root, port, target);
    const backup: BaseBackup = {
      backup_name: name,
      backup_time: at.toISOString(),
      data_size: await treeBytes(target),
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
      await run(path.join(pgToolDir(major, 'pg_archivecleanup'), 'pg_archivecleanup'), [
        walArchiveOf(root),
        oldest.start_wal,
      ]);
    }
    return remaining;
  },

  recover(root) {
    undoInterruptedSwitch(root);
    dropIncompleteBackups(root);
  },

  async adoptCopy(root, copyDataDir) {
    undoInterruptedSwitch(root);
    // Both data directories: an earlier switch-over finished but was not tidied; it is done.
    dropSwitchedOut(root);
    // The copy's recovery settings would keep archiving off; berth.conf's apply once they are gone.
    dropAutoConf(copyDataDir, RECOVERY_SETTINGS);
    fs.rmSync(path.join(copyDataDir, 'recovery.signal'), { force: true });
    await chownTree(copyDataDir, accountOf(root));
    await switchIn(root, copyDataDir);
  },

  settleAdoption(root, keep) {
    if (!keep) undoSwitch(root);
    dropSwitchedOut(root);
  },

  async upgrade(root, spec, port, limits, targetMajor) {
    undoInterruptedSwitch(root);
    const data = dataOf(root);
    const stopServer = async (): Promise<void> => {
      const pid = postgresEngine.pidOf(root);
      if (pid !== null) await terminate(pid, postgresEngine.stopSignal);
    };
    const serveOn = async (at: number): Promise<void> => {
      await stopServer();
      await postgresEngine.configure(root, spec, at, limits);
      await postgresEngine.start(root, spec, at);
    };
    // A resumed upgrade whose switch-over was done already goes straight to starting the new major.
    if (dataMajorOf(root) !== targetMajor) {
      // Refused before the server is touched: the binaries found must be the major asked for.
      if ((await pgBinaryMajor(pgBinDirFor(targetMajor))) !== targetMajor) {
        throw new PermanentDriverError(`PostgreSQL ${targetMajor} is not installed`);
      }
      const sourceMajor = dataMajorOf(root) ?? NEW_INSTANCE_MAJOR;
      const next = `${data}.next`;
      fs.rmSync(next, { recursive: true, force: true }); // an interrupted attempt's
      // Off the public port while the data is copied: nothing a client writes meanwhile can be lost.
      const privatePort = await freePort();
      await serveOn(privatePort);
      try {
        const auth = `${MAINTENANCE_USER}:${encodeURIComponent(maintenancePassword(root))}`;
        await upgradePostgres({
          sourceUri: `postgres://${auth}@127.0.0.1:${privatePort}/postgres?sslmode=disable`,
          clientBinDir: pgToolDir(sourceMajor, 'pg_dump'),
          sourceBinDir: pgBinDirFor(sourceMajor),
          sourceDataDir: data,
          targetBinDir: pgBinDirFor(targetMajor),
          targetDataDir: next,
          targetPort: await freePort(),
          // berth.conf's min_wal_size needs small segments, as initdb gave the old cluster.
          initdbArgs: ['--wal-segsize=1'],
          ...(accountOf(root) ? { runAs: accountOf(root) } : {}),
        });
        writeBerthFiles(next);
        await chownTree(next, accountOf(root));
        await stopServer();
        // The old major's WAL and base backups cannot be replayed on the new one; the new WAL's
        // segment names would also collide with the archived ones.
        await switchIn(root, next);
      } catch (error) {
        await stopServer();
        fs.rmSync(next, { recursive: true, force: true });
        undoSwitch(root);
        await serveOn(port);
        throw error;
      }
    }
    try {
      await serveOn(port);
    } catch (error) {
      await stopServer();
      undoSwitch(root);
      await serveOn(port);
      throw error;
    }
    dropSwitchedOut(root);
  },
};

/** What a major upgrade replaces; the old major's copies wait under `<dir>.pre-upgrade` until the new one runs. */
const PRE_UPGRADE = '.pre-upgrade';
const switchedDirs = (root: string): string[] => [walArchiveOf(root), baseBackupsOf(root), dataOf(root)];

/**
 * Moves new data (stopped, owned by the server user) into place: the old data, WAL archive and base
 * backups wait under `*.pre-upgrade`, and the archive and backups start empty (the old ones belong to
 * other data: an older major, or the data a clone replaces).
 */
async function switchIn(root: string, newData: string): Promise<void> {
  for (const dir of switchedDirs(root)) fs.renameSync(dir, `${dir}${PRE_UPGRADE}`);
  fs.renameSync(newData, dataOf(root));
  for (const dir of [walArchiveOf(root), baseBackupsOf(root)]) {
    fs.mkdirSync(dir, { mode: 0o700 });
    await chownTree(dir, accountOf(root));
  }
}

/** Removes the files a finished switch-over kept for undoing it. */
function dropSwitchedOut(root: string): void {
  for (const dir of switchedDirs(root)) fs.rmSync(`${dir}${PRE_UPGRADE}`, { recursive: true, force: true });
}

/** Puts the old major's files back after a failed switch-over. */
function undoSwitch(root: string): void {
  for (const dir of switchedDirs(root)) {
    if (!fs.existsSync(`${dir}${PRE_UPGRADE}`)) continue;
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(`${dir}${PRE_UPGRADE}`, dir);
  }
}

/**
 * A switch-over that a crash cut short before the new data directory was in place: the old major's
 * files are complete, so they are put back. Once both data directories exist the switch was done, and
 * the resumed upgrade decides (start the new major, or undo if it does not start).
 */
function undoInterruptedSwitch(root: string): void {
  const data = dataOf(root);
  if (!fs.existsSync(data) || !fs.existsSync(`${data}${PRE_UPGRADE}`)) undoSwitch(root);
}

/** pg_basebackup (tar, lz4, no WAL: the archive holds it); returns the first WAL segment it needs. */
async function streamedBackup(root: string, port: number, target: string, binDir: string): Promise<string> {
  const admin = await maintenanceClient(root, port);
  let startWal: string;
  try {
    // Every segment before the one current now is older than this backup's start.
    const row = await admin.query<{ wal: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS wal');
    startWal = String(row.rows[0]?.wal);
  } finally {
    await admin.end();
  }
  await runAs(
    accountOf(root),
    path.join(binDir, 'pg_basebackup'),
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
      MAINTENANCE_USER,
      '-w',
    ],
    { env: { PGPASSWORD: maintenancePassword(root) } },
  );
  return startWal;
}

/**
 * The same backup through pg_backup_start/pg_backup_stop and tar: the layout pg_basebackup -Ft writes
 * (base.tar.lz4 with backup_label inside), so restores do not tell them apart.
 */
async function lowLevelBackup(root: string, port: number, target: string): Promise<string> {
  fs.mkdirSync(target, { recursive: true, mode: 0o700 });
  const tar = path.join(target, 'base.tar');
  const admin = await maintenanceClient(root, port);
  try {
    const started = await admin.query<{ wal: string }>(
      'SELECT pg_walfile_name(pg_backup_start($1, true)) AS wal',
      [`berth ${path.basename(target)}`],
    );
    // GNU tar exits 1 when a file changed while it was read: expected here, the WAL replay repairs it.
    await run('sh', [
      '-c',
      'tar -cf "$1" -C "$2" --exclude=./postmaster.pid --exclude=./postmaster.opts --exclude="./pg_wal/*" --exclude="./pg_replslot/*" --exclude="./pg_stat_tmp/*" . ; [ $? -le 1 ]',
      'sh',
      tar,
      dataOf(root),
    ]);
    const stopped = await admin.query<{ labelfile: string }>('SELECT labelfile FROM pg_backup_stop(false)');
    fs.writeFileSync(path.join(target, 'backup_label'), stopped.rows[0]?.labelfile ?? '');
    await run('tar', ['-rf', tar, '-C', target, 'backup_label']);
    fs.rmSync(path.join(target, 'backup_label'));
    await run('lz4', ['-q', '--rm', tar, `${tar}.lz4`]);
    return String(started.rows[0]?.wal);
  } catch (error) {
    fs.rmSync(target, { recursive: true, force: true });
    throw error;
  } finally {
    await admin.end();
  }
}

/** Removes what an interrupted base backup left: a directory without its manifest (written last). */
function dropIncompleteBackups(root: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(baseBackupsOf(root));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(baseBackupsOf(root), name);
    if (!fs.existsSync(path.join(dir, 'berth-backup.json'))) fs.rmSync(dir, { recursive: true, force: true });
  }
}

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
