// `valkey` instances: valkey-server when installed, else redis-server (the same protocol and ACLs).
// Users live in an ACL file written before every start: the default user is off, the admin may do
// everything, and each declared user is confined to keys and channels under `<username>:` without
// the dangerous commands (FLUSHALL, CONFIG, KEYS, DEBUG…).
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { PermanentDriverError, type InstanceSpec } from '../types.js';
import { MAINTENANCE_USER, instanceAccount, maintenancePassword } from './accounts.js';
import type { LocalEngine } from './engine.js';
import { respCommands, type RespValue } from './resp.js';
import {
  SAFE_NAME,
  serverVersion,
  chownTree,
  commandLineMentions,
  isAlive,
  readPidFile,
  runAs,
  waitUntil,
} from './process.js';

function which(name: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

function userExists(name: string): boolean {
  try {
    execFileSync('id', ['-u', name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

let resolved: { server: string; osUser: string } | undefined;
/** Valkey when the host has it, Redis otherwise; found once per process. */
export function valkeyBinary(): { server: string; osUser: string } {
  resolved ??= (() => {
    const valkey = which('valkey-server');
    if (valkey) return { server: valkey, osUser: userExists('valkey') ? 'valkey' : 'redis' };
    const redis = which('redis-server');
    if (!redis) throw new Error('neither valkey-server nor redis-server is installed');
    return { server: redis, osUser: 'redis' };
  })();
  return resolved;
}

const accountOf = (root: string): string | undefined => instanceAccount(root, valkeyBinary().osUser);
const confOf = (root: string) => path.join(root, 'valkey.conf');
const aclOf = (root: string) => path.join(root, 'users.acl');
const pidFileOf = (root: string) => path.join(root, 'run', 'valkey.pid');
const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

/**
 * The admin a team receives: every key and channel and every data command, but none of the server's
 * administration (@admin: CONFIG, DEBUG, MODULE, SHUTDOWN, REPLICAOF/SLAVEOF, ACL changes, SAVE…), so
 * the plan's maxmemory stays; MIGRATE would make the server connect to any address.
 */
const ADMIN_RULES = '~* &* +@all -@admin -migrate +client|list +slowlog|get +slowlog|len +role';

function aclFile(spec: InstanceSpec, maintenance: string): string {
  const lines = [
    'user default off resetkeys resetchannels -@all',
    // Passwords are stored as SHA-256 (`#`), never in clear on disk.
    `user ${MAINTENANCE_USER} on #${sha256(maintenance)} ~* &* +@all`,
    `user ${spec.adminUser} on #${sha256(spec.adminPassword)} ${ADMIN_RULES}`,
  ];
  for (const user of spec.users) {
    if (
      !SAFE_NAME.test(user.username) ||
      user.username === spec.adminUser ||
      user.username === 'default' ||
      user.username === MAINTENANCE_USER
    ) {
      throw new PermanentDriverError(
        `invalid user name '${user.username}' (the admin, default and ${MAINTENANCE_USER} are reserved)`,
      );
    }
    const prefix = `${user.username}:`;
    lines.push(
      `user ${user.username} on #${sha256(user.password)} ~${prefix}* &${prefix}* +@all -@dangerous`,
    );
  }
  return lines.join('\n') + '\n';
}

function expectOk(replies: RespValue[]): RespValue[] {
  for (const reply of replies) if (reply instanceof Error) throw reply;
  return replies;
}

/** The file a snapshot is kept as in a backup (the server's RDB format). */
export const VALKEY_SNAPSHOT = 'valkey.rdb';

const persistenceField = (info: string, name: string): string | undefined =>
  new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];

/**
 * A backup's snapshot of a running instance (issue 31): BGSAVE over the maintenance account (its
 * password in the protocol, never on a command line), waited for until the server has written it, then
 * its RDB copied into `dir`. The server keeps serving meanwhile (the save is a forked child's).
 */
export async function snapshotValkey(root: string, port: number, dir: string): Promise<string> {
  const auth = ['AUTH', MAINTENANCE_USER, maintenancePassword(root)];
  const persistence = async (): Promise<string> =>
    String(expectOk(await respCommands(port, [auth, ['INFO', 'persistence']]))[1]);
  const saves = (info: string) => Number(persistenceField(info, 'rdb_saves') ?? NaN);
  const before = saves(await persistence());
  if (Number.isNaN(before)) {
    // A server without the counter (before Redis 7): a synchronous SAVE, done when it answers.
    expectOk(await respCommands(port, [auth, ['SAVE']], 30 * 60_000));
  } else {
    // SCHEDULE: an AOF rewrite under way delays the save instead of refusing it.
    expectOk(await respCommands(port, [auth, ['BGSAVE', 'SCHEDULE']]));
    let info = '';
    await waitUntil(
      async () => {
        info = await persistence();
        return saves(info) > before && persistenceField(info, 'rdb_bgsave_in_progress') === '0';
      },
      30 * 60_000,
      'the key-value server to write its snapshot',
      100,
    );
    if (persistenceField(info, 'rdb_last_bgsave_status') !== 'ok')
      throw new Error(
        `the key-value server could not write its snapshot (see ${valkeyEngine.logFile(root)})`,
      );
  }
  const rdb = path.join(root, 'data', 'dump.rdb');
  const file = path.join(dir, VALKEY_SNAPSHOT);
  fs.copyFileSync(rdb, file, fs.constants.COPYFILE_EXCL);
  fs.chmodSync(file, 0o600);
  // The append-only file stays the instance's durable copy: the snapshot is not kept beside it.
  fs.rmSync(rdb, { force: true });
  return file;
}

/**
 * A restore's load into a stopped instance: the snapshot becomes its single-file append-only file.
 * With `appendonly yes` a server ignores dump.rdb, but loads an `appendonly.aof` that starts with an
 * RDB preamble (and, Redis 7 on, makes it the base of its multi-part AOF); the AOF it had goes.
 */
export async function placeValkeySnapshot(root: string, dir: string): Promise<boolean> {
  const snapshot = path.join(dir, VALKEY_SNAPSHOT);
  if (!fs.existsSync(snapshot)) return false;
  const data = path.join(root, 'data');
  fs.rmSync(path.join(data, 'appendonlydir'), { recursive: true, force: true });
  fs.rmSync(path.join(data, 'dump.rdb'), { force: true });
  const aof = path.join(data, 'appendonly.aof');
  fs.copyFileSync(snapshot, aof);
  fs.chmodSync(aof, 0o600);
  await chownTree(aof, accountOf(root));
  return true;
}

let valkeyVersions: string[] | undefined;

export const valkeyEngine: LocalEngine = {
  get osUser() {
    return valkeyBinary().osUser;
  },
  logFile: (root) => path.join(root, 'log', 'valkey.log'),
  // `redis-server --version`: `… v=7.0.15 …` offers 7 and 7.0.
  versions() {
    valkeyVersions ??= (() => {
      const match = /v=(\d+)\.(\d+)/.exec(serverVersion(valkeyBinary().server));
      return match ? [`${match[1]}`, `${match[1]}.${match[2]}`] : [];
    })();
    return valkeyVersions;
  },
  stopSignal: 'SIGTERM',

  isInitialised(root) {
    return fs.existsSync(path.join(root, 'data'));
  },

  templated: false,
  validate(spec) {
    aclFile(spec, '');
  },

  async init(root) {
    for (const dir of ['run', 'log', 'data']) {
      fs.mkdirSync(path.join(root, dir), { recursive: true, mode: 0o700 });
    }
    await chownTree(root, accountOf(root));
  },

  async configure(root, spec, port, limits) {
    const lines = [
      'bind 127.0.0.1',
      `port ${port}`,
      'protected-mode yes',
      'daemonize yes',
      `pidfile ${pidFileOf(root)}`,
      `logfile ${path.join(root, 'log', 'valkey.log')}`,
      `dir ${path.join(root, 'data')}`,
      // The append-only file is the durable copy; no fork for RDB snapshots.
      'appendonly yes',
      'appendfsync everysec',
      'save ""',
      `aclfile ${aclOf(root)}`,
      ...Object.entries(limits.settings).map(([name, value]) => `${name} ${value}`),
      '',
    ];
    fs.writeFileSync(confOf(root), lines.join('\n'), { mode: 0o600 });
    fs.writeFileSync(aclOf(root), aclFile(spec, maintenancePassword(root)), { mode: 0o600 });
    await chownTree(root, accountOf(root));
  },

  async start(root, spec, port) {
    fs.rmSync(pidFileOf(root), { force: true });
    await runAs(accountOf(root), valkeyBinary().server, [confOf(root)]); // daemonizes; returns once forked
    const maintenance = maintenancePassword(root);
    await waitUntil(
      async () => {
        if (valkeyEngine.pidOf(root) === null) return false;
        try {
          const [auth, pong] = await respCommands(port, [['AUTH', MAINTENANCE_USER, maintenance], ['PING']]);
          return auth === 'OK' && pong === 'PONG';
        } catch {
          return false;
        }
      },
      15_000,
      'the key-value server to answer',
    );
  },

  pidOf(root) {
    const pid = readPidFile(pidFileOf(root));
    // The server sets its process title to `<binary> 127.0.0.1:<port>`: check that it is this port.
    let port: string | undefined;
    try {
      port = /^port (\d+)$/m.exec(fs.readFileSync(confOf(root), 'utf8'))?.[1];
    } catch {
      return null;
    }
    return isAlive(pid) && commandLineMentions(pid, `127.0.0.1:${port}`) ? pid : null;
  },

  async ensureAccess(root, spec, port, _bootstrapPassword) {
    // A later apply may have added users since the server started: reload the ACL file if it changed.
    const maintenance = maintenancePassword(root);
    const wanted = aclFile(spec, maintenance);
    if (fs.readFileSync(aclOf(root), 'utf8') !== wanted) {
      fs.writeFileSync(aclOf(root), wanted, { mode: 0o600 });
      await chownTree(aclOf(root), accountOf(root));
      // ACL LOAD may drop this very connection once it has replied; the reply is all that matters.
      let [, loaded] = await respCommands(port, [
        ['AUTH', MAINTENANCE_USER, maintenance],
        ['ACL', 'LOAD'],
      ]);
      // A server started before it had a maintenance user: its admin could still load ACLs then.
      if (loaded instanceof Error) {
        [, loaded] = await respCommands(port, [
          ['AUTH', spec.adminUser, spec.adminPassword],
          ['ACL', 'LOAD'],
        ]);
      }
      if (loaded instanceof Error) throw loaded;
    }
    const replies = expectOk(
      await respCommands(port, [
        ['AUTH', MAINTENANCE_USER, maintenance],
        ['INFO', 'server'],
      ]),
    );
    const info = String(replies[1]);
    const version = /valkey_version:(\S+)/.exec(info)?.[1] ?? /redis_version:(\S+)/.exec(info)?.[1] ?? '';
    return {
      version,
      credentials: {
        admin: { username: spec.adminUser, password: spec.adminPassword },
        users: spec.users.map((u) => ({ username: u.username, password: u.password, authentication: null })),
      },
    };
  },
};
