// `mysql` instances run MariaDB (the MySQL the host's packages provide): mariadb-install-db, then
// mariadbd, which drops to the mysql user itself. Administration goes through the `mariadb` client
// on the instance's socket, so Berth needs no MySQL driver at run time.
import fs from 'node:fs';
import path from 'node:path';
import type { EngineLimits } from '../plan-limits.js';
import { PermanentDriverError, type InstanceSpec } from '../types.js';
import type { LocalEngine } from './engine.js';
import { MAINTENANCE_USER, instanceAccount, maintenancePassword } from './accounts.js';
import {
  SAFE_NAME,
  SAFE_SETTING,
  serverVersion,
  canConnect,
  chownTree,
  commandLineMentions,
  isAlive,
  isRoot,
  readPidFile,
  run,
  spawnDetached,
  waitUntil,
} from './process.js';

/** The account of templates; every instance runs as its own (accounts.ts). */
const OS_USER = 'mysql';
const accountOf = (root: string): string | undefined => instanceAccount(root, OS_USER);

/**
 * Global privileges the admin a team receives does not get: reading and writing server files,
 * stopping or reconfiguring the server, seeing other sessions. It keeps everything else, with GRANT.
 */
const WITHHELD_FROM_ADMIN = [
  'FILE',
  'SUPER',
  'SHUTDOWN',
  'PROCESS',
  'RELOAD',
  'BINLOG ADMIN',
  'BINLOG REPLAY',
  'CONNECTION ADMIN',
  'FEDERATED ADMIN',
  'READ_ONLY ADMIN',
  'REPLICATION MASTER ADMIN',
  'REPLICATION SLAVE ADMIN',
  'SET USER',
];
/** The server's own accounts and Berth's; a declared user may not take these names. */
const SERVER_ACCOUNTS = new Set(['root', 'mariadb.sys', 'mysql', 'PUBLIC', MAINTENANCE_USER]);
const MARIADBD = '/usr/sbin/mariadbd';
// MariaDB 10.11 has no caching_sha2_password; such users get mysql_native_password (docs/drivers.md).
const AUTH_METHODS = new Set(['mysql_native_password', 'caching_sha2_password']);

const dataOf = (root: string) => path.join(root, 'data');
const socketOf = (root: string) => path.join(root, 'run', 'mysqld.sock');
/**
 * Its temporary files: the instance's own run directory (the account's, 0700, made at init: instances
 * made before this have it too), not the host's /tmp, shared with every process and cleaned by others.
 */
const tmpOf = (root: string) => path.join(root, 'run');
const pidFileOf = (root: string) => path.join(root, 'run', 'mysqld.pid');
const argsFileOf = (root: string) => path.join(root, 'berth-mariadbd.json');

const literal = (value: string): string => `'${value.replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
const ident = (value: string): string => `\`${value.replace(/`/g, '``')}\``;

function checkSpec(spec: InstanceSpec): void {
  for (const user of spec.users) {
    if (!SAFE_NAME.test(user.username))
      throw new PermanentDriverError(`invalid user name '${user.username}'`);

    if (user.authentication !== undefined && !AUTH_METHODS.has(user.authentication)) {
      throw new PermanentDriverError(
        `user '${user.username}': authentication '${user.authentication}' is not supported by mysql (use mysql_native_password or caching_sha2_password)`,
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

/**
 * Runs SQL as root over the socket; the password travels in MYSQL_PWD, not on the command line.
 * Root's password is tried in turn: the maintenance password, the admin's (which root had before
 * instances had a maintenance password), none (a fresh install, or a copy of the template).
 */
async function sql(
  root: string,
  statements: string,
  passwords: ReadonlyArray<string | undefined>,
): Promise<string> {
  let denied: unknown;
  for (const password of [...passwords, undefined]) {
    try {
      const { stdout } = await run(
        'mariadb',
        ['--no-defaults', `--socket=${socketOf(root)}`, '-u', 'root', '--batch', '--skip-column-names'],
        { input: statements, env: password === undefined ? {} : { MYSQL_PWD: password } },
      );
      return stdout;
    } catch (error) {
      if (!/Access denied/i.test((error as Error).message)) throw error;
      denied = error;
    }
  }
  throw denied;
}

let mariadbVersions: string[] | undefined;

export const mariadbEngine: LocalEngine = {
  osUser: OS_USER,
  logFile: (root) => path.join(root, 'log', 'error.log'),
  // `mariadbd --version`: `Ver 10.11.19-MariaDB…` offers 10.11 (the MySQL this host has).
  versions() {
    mariadbVersions ??= (() => {
      const match = /Ver (\d+)\.(\d+)/.exec(serverVersion(MARIADBD));
      return match ? [`${match[1]}.${match[2]}`] : [];
    })();
    return mariadbVersions;
  },
  stopSignal: 'SIGTERM',

  isInitialised(root) {
    return fs.existsSync(path.join(root, '.initialised'));
  },

  templated: true,
  validate: checkSpec,

  // mariadb-install-db leaves root without a password; the first ensureAccess sets the admin's.
  async init(root) {
    for (const dir of [path.join(root, 'run'), path.join(root, 'log')]) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    }
    await chownTree(root, accountOf(root));
    await run('mariadb-install-db', [
      '--no-defaults',
      `--datadir=${dataOf(root)}`,
      ...(isRoot() ? [`--user=${accountOf(root)}`] : []),
      `--tmpdir=${tmpOf(root)}`,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      '--skip-name-resolve',
      '--innodb-log-file-size=8M',
      '--innodb-buffer-pool-size=16M',
    ]);
    fs.writeFileSync(path.join(root, '.initialised'), '');
  },

  configure(root, _spec, port, limits: EngineLimits) {
    const args = [
      '--no-defaults',
      `--datadir=${dataOf(root)}`,
      ...(isRoot() ? [`--user=${accountOf(root)}`] : []),
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${socketOf(root)}`,
      `--pid-file=${pidFileOf(root)}`,
      `--tmpdir=${tmpOf(root)}`,
      `--log-error=${path.join(root, 'log', 'error.log')}`,
      '--skip-name-resolve',
      '--performance-schema=OFF',
      '--innodb-log-file-size=8M',
      '--character-set-server=utf8mb4',
      '--collation-server=utf8mb4_unicode_ci',
      ...Object.entries(limits.settings).map(([name, value]) => `--${name}=${value}`),
    ];
    fs.writeFileSync(argsFileOf(root), JSON.stringify(args), { mode: 0o600 });
    return Promise.resolve();
  },

  async start(root, _spec, port) {
    const args = JSON.parse(fs.readFileSync(argsFileOf(root), 'utf8')) as string[];
    fs.rmSync(pidFileOf(root), { force: true });
    const pid = spawnDetached(undefined, MARIADBD, args);
    try {
      await waitUntil(
        async () => {
          if (!isAlive(pid)) throw new Error(`mariadbd exited: ${lastLogLines(root)}`);
          return mariadbEngine.pidOf(root) !== null && (await canConnect(port));
        },
        30_000,
        'mariadbd to accept connections',
      );
    } catch (error) {
      if (isAlive(pid)) process.kill(pid, 'SIGKILL');
      throw error;
    }
  },

  pidOf(root) {
    const pid = readPidFile(pidFileOf(root));
    return isAlive(pid) && commandLineMentions(pid, dataOf(root)) ? pid : null;
  },

  async ensureAccess(root, declared, _port, _bootstrapPassword) {
    // A user named like the admin, Berth's account or the server's own is never made (apply refuses
    // such names; a document stored before that rule is served without them).
    const spec = {
      ...declared,
      users: declared.users.filter(
        (u) => !SERVER_ACCOUNTS.has(u.username) && u.username !== declared.adminUser,
      ),
    };
    checkSpec(spec);
    // root@localhost (the socket, which only Berth reaches) and berth_maint@127.0.0.1 (for dumps and
    // clones over TCP) are Berth's, with the maintenance password; the admin is the team's.
    const maintenance = maintenancePassword(root);
    const admin = `${literal(spec.adminUser)}@'%'`;
    const statements = [
      `ALTER USER 'root'@'localhost' IDENTIFIED BY ${literal(maintenance)};`,
      `CREATE USER IF NOT EXISTS ${literal(MAINTENANCE_USER)}@'127.0.0.1' IDENTIFIED BY ${literal(maintenance)};`,
      `ALTER USER ${literal(MAINTENANCE_USER)}@'127.0.0.1' IDENTIFIED BY ${literal(maintenance)};`,
      `GRANT ALL PRIVILEGES ON *.* TO ${literal(MAINTENANCE_USER)}@'127.0.0.1' WITH GRANT OPTION;`,
      `CREATE USER IF NOT EXISTS ${admin} IDENTIFIED BY ${literal(spec.adminPassword)};`,
      `ALTER USER ${admin} IDENTIFIED BY ${literal(spec.adminPassword)};`,
      `GRANT ALL PRIVILEGES ON *.* TO ${admin} WITH GRANT OPTION;`,
      `REVOKE ${WITHHELD_FROM_ADMIN.join(', ')} ON *.* FROM ${admin};`,
      'CREATE DATABASE IF NOT EXISTS `defaultdb`;',
    ];
    // Any other account that holds server-level rights (given by an earlier admin with GRANT OPTION,
    // or by hand) loses them: only Berth's accounts keep them.
    const elevated = await sql(
      root,
      `SELECT CONCAT(QUOTE(User), '@', QUOTE(Host)) FROM mysql.user
        WHERE (File_priv = 'Y' OR Super_priv = 'Y' OR Shutdown_priv = 'Y' OR Process_priv = 'Y' OR Reload_priv = 'Y')
          AND User NOT IN ('root', 'mariadb.sys', ${literal(MAINTENANCE_USER)}, ${literal(spec.adminUser)});`,
      [maintenance, spec.adminPassword],
    );
    for (const account of elevated.split('\n').filter(Boolean)) {
      statements.push(`REVOKE FILE, SUPER, SHUTDOWN, PROCESS, RELOAD ON *.* FROM ${account};`);
    }
    for (const db of spec.databases) {
      const options = [
        db.characterSet ? `CHARACTER SET ${db.characterSet}` : '',
        db.collation ? `COLLATE ${db.collation}` : '',
      ].join(' ');
      statements.push(`CREATE DATABASE IF NOT EXISTS ${ident(db.name)} ${options};`);
      if (options.trim()) statements.push(`ALTER DATABASE ${ident(db.name)} ${options};`);
    }
    const databases = ['defaultdb', ...spec.databases.map((d) => d.name).filter((n) => n !== 'defaultdb')];
    for (const user of spec.users) {
      const who = `${literal(user.username)}@'%'`;
      statements.push(`CREATE USER IF NOT EXISTS ${who} IDENTIFIED BY ${literal(user.password)};`);
      statements.push(
        `ALTER USER ${who} IDENTIFIED VIA mysql_native_password USING PASSWORD(${literal(user.password)});`,
      );
      for (const db of databases) statements.push(`GRANT ALL PRIVILEGES ON ${ident(db)}.* TO ${who};`);
    }
    statements.push('FLUSH PRIVILEGES;', 'SELECT VERSION();');
    const output = await sql(root, statements.join('\n'), [maintenance, spec.adminPassword]);
    const version = output.trim().split('\n').pop() ?? '';
    return {
      version,
      credentials: {
        admin: { username: spec.adminUser, password: spec.adminPassword },
        users: spec.users.map((u) => ({
          username: u.username,
          password: u.password,
          authentication: 'mysql_native_password',
        })),
      },
    };
  },
};

function lastLogLines(root: string): string {
  try {
    return fs
      .readFileSync(path.join(root, 'log', 'error.log'), 'utf8')
      .trim()
      .split('\n')
      .slice(-3)
      .join(' | ');
  } catch {
    return 'no log';
  }
}
