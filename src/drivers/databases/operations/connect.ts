// Client connections to sources and targets, with driver errors turned into operation codes.
import mysql from 'mysql2/promise';
import pg from 'pg';
import { OperationError, type OperationErrorCode } from './errors.js';
import type { AddressGuard } from '../../net/guard.js';
import { parseConnectionUri, type ConnectionSpec } from './source-uri.js';

const CONNECT_TIMEOUT_MS = 5_000;

export type Side = 'source' | 'target';

interface DriverError {
  code?: string;
  errno?: number;
  message?: string;
}

const asDriverError = (error: unknown): DriverError =>
  typeof error === 'object' && error !== null ? error : { message: String(error) };

/** Maps a connect-time failure (network, auth, missing database, TLS) to a code. */
export function connectFailure(error: unknown, spec: ConnectionSpec, side: Side = 'source'): OperationError {
  if (error instanceof OperationError) return error;
  const e = asDriverError(error);
  const message = e.message ?? String(error);
  const where = `${side} ${spec.host}:${spec.port}`;
  let code: OperationErrorCode = side === 'source' ? 'SOURCE_UNREACHABLE' : 'TARGET_UNREACHABLE';
  if (side === 'source') {
    // PostgreSQL: 28P01 wrong password, 28000 no pg_hba entry/role; MySQL: 1045 access denied, 1044 db denied.
    if (e.code === '28P01' || e.code === '28000' || e.errno === 1045 || e.errno === 1044)
      code = 'SOURCE_AUTH_FAILED';
    else if (e.code === '3D000' || e.errno === 1049) code = 'SOURCE_DATABASE_NOT_FOUND';
    else if (/does not support SSL|secure connection|SSL/i.test(message) && spec.sslMode === 'require')
      code = 'SOURCE_SSL_UNAVAILABLE';
  }
  // One answer for every address that is refused, closed, filtered or silent: a tenant must not map
  // the network behind Berth by comparing them.
  if (code === 'SOURCE_UNREACHABLE') return sourceUnreachable();
  return new OperationError(code, `Cannot connect to ${where} as ${spec.user}: ${message}`, [spec.password]);
}

export const SOURCE_UNREACHABLE_MESSAGE = 'Cannot connect to the source server';
const sourceUnreachable = (): OperationError =>
  new OperationError('SOURCE_UNREACHABLE', SOURCE_UNREACHABLE_MESSAGE);

/**
 * Applies the address rule (src/drivers/net/guard.ts) to a tenant's source: its host is resolved once,
 * every address checked, and the spec returned points at the checked address, so a later resolution
 * cannot lead somewhere else (DNS rebinding). A refused address answers like an unreachable one.
 */
export async function pinSource(
  spec: ConnectionSpec,
  guard: AddressGuard | undefined,
): Promise<ConnectionSpec> {
  if (!guard) return spec;
  const url = new URL('http://placeholder/');
  try {
    url.hostname = spec.host.includes(':') ? `[${spec.host}]` : spec.host;
    url.port = String(spec.port);
    const { address } = await guard.resolve(url);
    return { ...spec, host: address };
  } catch {
    throw sourceUnreachable();
  }
}

/** A tenant's source URI, parsed and pinned to an address the rule allows. */
export const pinnedSource = (input: {
  sourceUri: string;
  ssl?: boolean | undefined;
  guard?: AddressGuard | undefined;
}): Promise<ConnectionSpec> =>
  pinSource(
    parseConnectionUri(input.sourceUri, input.ssl === undefined ? {} : { ssl: input.ssl }),
    input.guard,
  );

function pgConfig(spec: ConnectionSpec, ssl: boolean): pg.ClientConfig {
  return {
    host: spec.host,
    port: spec.port,
    user: spec.user,
    password: spec.password,
    database: spec.database,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    // Sources are other people's servers with certificates we cannot verify; TLS here means "encrypted".
    ssl: ssl ? { rejectUnauthorized: false } : false,
    application_name: 'berth-operations',
  };
}

/** A connected pg client; `prefer` tries TLS first and falls back to plain when the server has none. */
export async function connectPg(spec: ConnectionSpec, side: Side = 'source'): Promise<pg.Client> {
  const attempt = async (ssl: boolean): Promise<pg.Client> => {
    const client = new pg.Client(pgConfig(spec, ssl));
    // An idle client whose server goes away emits 'error'; without a listener that would crash the process.
    client.on('error', () => undefined);
    try {
      await client.connect();
      return client;
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
  };
  try {
    if (spec.sslMode === 'prefer') {
      try {
        return await attempt(true);
      } catch (error) {
        if (!/does not support SSL/i.test(asDriverError(error).message ?? '')) throw error;
        return await attempt(false);
      }
    }
    return await attempt(spec.sslMode === 'require');
  } catch (error) {
    throw connectFailure(error, spec, side);
  }
}

export async function withPg<T>(
  spec: ConnectionSpec,
  side: Side,
  fn: (client: pg.Client) => Promise<T>,
): Promise<T> {
  const client = await connectPg(spec, side);
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function connectMysql(spec: ConnectionSpec, side: Side = 'source'): Promise<mysql.Connection> {
  try {
    const connection = await mysql.createConnection({
      host: spec.host,
      port: spec.port,
      user: spec.user,
      password: spec.password,
      ...(spec.database ? { database: spec.database } : {}),
      connectTimeout: CONNECT_TIMEOUT_MS,
      ...(spec.sslMode === 'require' ? { ssl: { rejectUnauthorized: false } } : {}),
    });
    connection.on('error', () => undefined);
    return connection;
  } catch (error) {
    throw connectFailure(error, spec, side);
  }
}

export async function withMysql<T>(
  spec: ConnectionSpec,
  side: Side,
  fn: (connection: mysql.Connection) => Promise<T>,
): Promise<T> {
  const connection = await connectMysql(spec, side);
  try {
    return await fn(connection);
  } finally {
    await connection.end().catch(() => undefined);
  }
}

/** libpq environment for pg_dump/pg_restore/psql: the password never appears on a command line. */
export function pgEnv(spec: ConnectionSpec, database = spec.database): NodeJS.ProcessEnv {
  return {
    PGHOST: spec.host,
    PGPORT: String(spec.port),
    PGUSER: spec.user,
    PGPASSWORD: spec.password,
    PGDATABASE: database,
    PGSSLMODE: spec.sslMode,
    PGCONNECT_TIMEOUT: String(CONNECT_TIMEOUT_MS / 1000),
    PGAPPNAME: 'berth-operations',
  };
}

/** Connection flags and environment for mariadb/mariadb-dump; MYSQL_PWD keeps the password out of argv. */
export function mysqlArgs(spec: ConnectionSpec): { args: string[]; env: NodeJS.ProcessEnv } {
  const args = [
    '--no-defaults',
    `--host=${spec.host}`,
    `--port=${spec.port}`,
    `--user=${spec.user}`,
    '--protocol=TCP',
  ];
  if (spec.sslMode === 'require') args.push('--ssl');
  else if (spec.sslMode === 'disable') args.push('--skip-ssl');
  return { args, env: { MYSQL_PWD: spec.password } };
}

/**
 * A libpq connection string naming only the database (host, user, password come from pgEnv), for
 * `pg_restore --dbname=`: one argument, quoted, never read as an option or another parameter.
 */
export const pgDbnameConninfo = (dbname: string): string =>
  `dbname='${dbname.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

/** Quotes a PostgreSQL identifier. */
export const pgIdent = (name: string): string => `"${name.replace(/"/g, '""')}"`;
/** Quotes a PostgreSQL string literal. */
export const pgLiteral = (value: string): string => `'${value.replace(/'/g, "''")}'`;
/** Quotes a MySQL identifier. */
export const myIdent = (name: string): string => `\`${name.replace(/`/g, '``')}\``;
