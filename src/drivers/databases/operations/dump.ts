// Dump migration: per database, `pg_dump -Fc | pg_restore` or `mariadb-dump --databases | mariadb`, streamed
// process-to-process. Progress is reported as UpCloud's migration-status so a route can serve it as is.
import path from 'node:path';
import {
  DEFAULT_PG_BIN_DIR,
  MYSQL_SYSTEM_DATABASES,
  PG_SYSTEM_DATABASES,
  errorMessage,
  parseIgnoreDbs,
  type DatabaseMigrationStatus,
  type MigrationStatus,
} from './common.js';
import { mysqlArgs, pgDbnameConninfo, pgEnv, pgIdent, pinSource, withMysql, withPg } from './connect.js';
import { OperationError } from './errors.js';
import type { AddressGuard } from '../../net/guard.js';
import { checkToolSafeName, runPipeline, TOOL_ACCOUNT } from './exec.js';
import { parseConnectionUri, type ConnectionSpec } from './source-uri.js';

export interface DumpMigrateInput {
  sourceUri: string;
  /** Admin (PostgreSQL superuser / MariaDB root-like) URI of the managed database. */
  targetUri: string;
  ignoreDbs?: string | readonly string[];
  /** Applies to the source connection: true → TLS required, false → plain. */
  ssl?: boolean;
  /** Explicit list of source databases; default: every non-system database not ignored. */
  databases?: readonly string[];
  pgBinDir?: string;
  /** Called with a fresh status object after every per-database step. */
  onProgress?: (status: MigrationStatus) => void;
  signal?: AbortSignal;
  /** The address rule for a tenant's source; without it (Berth's own instances) any address is used. */
  guard?: AddressGuard;
}

/** Lists the databases a migration would copy (system databases and the ignore list left out). */
export async function listSourceDatabases(
  spec: ConnectionSpec,
  ignoreDbs?: string | readonly string[],
): Promise<string[]> {
  const ignore = parseIgnoreDbs(ignoreDbs);
  const names =
    spec.engine === 'pg'
      ? await withPg(spec, 'source', async (c) =>
          (
            await c.query<{ datname: string }>(
              `SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate
                  AND has_database_privilege(oid, 'CONNECT') ORDER BY datname`,
            )
          ).rows.map((r) => r.datname),
        )
      : await withMysql(spec, 'source', async (c) => {
          const [rows] = await c.query(
            'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA ORDER BY 1',
          );
          return (rows as Array<{ name: string }>).map((r) => r.name);
        });
  const system = spec.engine === 'pg' ? PG_SYSTEM_DATABASES : MYSQL_SYSTEM_DATABASES;
  return names.filter((n) => !system.has(n) && !ignore.has(n));
}

export async function dumpMigrate(input: DumpMigrateInput): Promise<MigrationStatus> {
  const given = parseConnectionUri(input.sourceUri, input.ssl === undefined ? {} : { ssl: input.ssl });
  const target = parseConnectionUri(input.targetUri);
  if (given.engine !== target.engine) {
    throw new OperationError('ENGINE_MISMATCH', 'Source and target are different engines', [given.password]);
  }
  let source = given;
  const secrets = [source.password, target.password];
  const method = source.engine === 'pg' ? 'pg_dump' : 'mysqldump';
  const status: MigrationStatus = {
    status: 'running',
    method,
    seconds_behind_master: 0,
    source_active: true,
    databases: [],
  };
  const report = (): void => input.onProgress?.(structuredClone(status));
  let names: string[];
  try {
    source = await pinSource(given, input.guard);
    names = input.databases ? [...input.databases] : await listSourceDatabases(source, input.ignoreDbs);
  } catch (error) {
    status.status = 'failed';
    status.source_active = false;
    status.error = error instanceof OperationError ? error.message : errorMessage(error);
    report();
    return status;
  }
  status.databases = names.map((dbname): DatabaseMigrationStatus => ({ dbname, method, status: 'pending' }));
  report();
  for (const entry of status.databases) {
    if (input.signal?.aborted) {
      entry.status = 'failed';
      entry.error = 'Migration was stopped';
      continue;
    }
    entry.status = 'running';
    report();
    try {
      checkToolSafeName(entry.dbname);
      if (source.engine === 'pg') await copyPgDatabase(source, target, entry.dbname, input);
      else await copyMysqlDatabase(source, target, entry.dbname, input);
      entry.status = 'done';
    } catch (error) {
      entry.status = 'failed';
      entry.error = new OperationError('MIGRATION_FAILED', errorMessage(error), secrets).message;
    }
    report();
  }
  const failures = status.databases.filter((d) => d.status === 'failed');
  status.status = failures.length > 0 ? 'failed' : 'done';
  if (failures.length > 0) {
    status.error = `Migration of ${failures.map((f) => f.dbname).join(', ')} failed`;
  }
  report();
  return status;
}

/** Creates the database on a PostgreSQL target unless it exists. */
export async function ensurePgDatabase(target: ConnectionSpec, dbname: string): Promise<void> {
  await withPg({ ...target, database: target.database || 'postgres' }, 'target', async (c) => {
    const exists = await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbname]);
    if (exists.rowCount === 0) await c.query(`CREATE DATABASE ${pgIdent(dbname)}`);
  });
}

async function copyPgDatabase(
  source: ConnectionSpec,
  target: ConnectionSpec,
  dbname: string,
  input: DumpMigrateInput,
): Promise<void> {
  const bin = input.pgBinDir ?? DEFAULT_PG_BIN_DIR;
  await ensurePgDatabase(target, dbname);
  await runPipeline(
    // -Z0: the archive only crosses a pipe, so compressing it would cost CPU and save nothing.
    // The database is named by PGDATABASE (pgEnv), never in argv.
    {
      command: path.join(bin, 'pg_dump'),
      args: ['-Fc', '-Z0', '--no-sync'],
      env: pgEnv(source, dbname),
      runAs: TOOL_ACCOUNT,
    },
    // Roles of the source do not exist in the target: objects become the target admin's, grants are dropped.
    {
      command: path.join(bin, 'pg_restore'),
      // --clean --if-exists: a retry after a crash or failure drops what an earlier attempt restored
      // before restoring again, so rows are never duplicated.
      args: [
        '--no-owner',
        '--no-privileges',
        '--clean',
        '--if-exists',
        `--dbname=${pgDbnameConninfo(dbname)}`,
      ],
      env: pgEnv(target, dbname),
      runAs: TOOL_ACCOUNT,
    },
    { secrets: [source.password, target.password], failureCode: 'MIGRATION_FAILED', ...signalOf(input) },
  );
}

async function copyMysqlDatabase(
  source: ConnectionSpec,
  target: ConnectionSpec,
  dbname: string,
  input: DumpMigrateInput,
): Promise<void> {
  const src = mysqlArgs(source);
  const dst = mysqlArgs(target);
  await runPipeline(
    {
      command: 'mariadb-dump',
      // --single-transaction: a consistent InnoDB snapshot without locking the source's tables.
      args: [
        ...src.args,
        '--single-transaction',
        '--routines',
        '--triggers',
        '--events',
        '--hex-blob',
        // A retry restores over what an earlier attempt left: the database is dropped and made again.
        '--add-drop-database',
        '--databases',
        '--',
        dbname,
      ],
      env: src.env,
      runAs: TOOL_ACCOUNT,
    },
    { command: 'mariadb', args: [...dst.args, '--binary-mode'], env: dst.env, runAs: TOOL_ACCOUNT },
    { secrets: [source.password, target.password], failureCode: 'MIGRATION_FAILED', ...signalOf(input) },
  );
}

const signalOf = (input: { signal?: AbortSignal }): { signal?: AbortSignal } =>
  input.signal ? { signal: input.signal } : {};
