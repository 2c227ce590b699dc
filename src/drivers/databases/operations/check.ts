// migration_check: connects to the external source and reports what a migration would find and whether
// the chosen method can work. Returns plain data; only a malformed URI or an engine mismatch throws.
import type pg from 'pg';
import {
  DEFAULT_PG_BIN_DIR,
  MYSQL_SYSTEM_DATABASES,
  PG_SYSTEM_DATABASES,
  errorMessage,
  parseIgnoreDbs,
  pgBinaryMajor,
  pgMajorOf,
  validateSourceUri,
  type MigrationMethod,
  type ResultCode,
} from './common.js';
import type { AddressGuard } from '../../net/guard.js';
import { connectPg, pinSource, withMysql, withPg } from './connect.js';
import { isOperationError } from './errors.js';
import type { ConnectionSpec, Engine } from './source-uri.js';

export interface MigrationCheckInput {
  sourceUri: string;
  /** Requested method; without it the preferred one (replication when possible, else dump) is reported. */
  method?: MigrationMethod;
  ignoreDbs?: string | readonly string[];
  /** Engine of the managed (target) database; a source of another engine is refused. */
  engine?: Engine;
  ssl?: boolean;
  /** Server major of the target: a PostgreSQL dump cannot be restored into an older major. */
  targetMajor?: number;
  /** Where pg_dump lives; its major bounds the source versions a dump can read. */
  pgBinDir?: string;
  /** The address rule for a tenant's source; without it any address is connected to. */
  guard?: AddressGuard;
}

export interface SourceDatabase {
  name: string;
  sizeBytes: number;
  ignored: boolean;
}

export interface MethodVerdict {
  possible: boolean;
  reasons: string[];
}

export interface MigrationCheckResult {
  success: boolean;
  engine: Engine;
  /** Method the result is about: the requested one, else the preferred one. */
  method: MigrationMethod;
  preferredMethod: MigrationMethod | null;
  serverVersion: string;
  serverMajor: number;
  databases: SourceDatabase[];
  dump: MethodVerdict;
  replication: MethodVerdict;
  resultCodes: ResultCode[];
  /** One human-readable sentence, as UpCloud's task `result`. */
  result: string;
}

const MIN_PG_MAJOR = 9.2;
const MIN_PG_REPLICATION_MAJOR = 10;

function failed(engine: Engine, method: MigrationMethod, code: ResultCode): MigrationCheckResult {
  return {
    success: false,
    engine,
    method,
    preferredMethod: null,
    serverVersion: '',
    serverMajor: 0,
    databases: [],
    dump: { possible: false, reasons: [code.message] },
    replication: { possible: false, reasons: [code.message] },
    resultCodes: [code],
    result: code.message,
  };
}

export async function checkMigrationSource(input: MigrationCheckInput): Promise<MigrationCheckResult> {
  const given = validateSourceUri(input.sourceUri, input.engine, input.ssl);
  const method = input.method ?? 'dump';
  let spec = given;
  try {
    spec = await pinSource(given, input.guard);
    const partial = spec.engine === 'pg' ? await checkPostgres(spec, input) : await checkMysql(spec, input);
    const result = conclude(partial, input.method, spec.sslMode);
    // Without `ssl`, a migration requires TLS (its default): say so now if the source has none.
    if (result.success && input.ssl === undefined && spec.sslMode === 'prefer' && !(await acceptsTls(spec))) {
      const message =
        'The source does not accept TLS: start the migration with "ssl": false (its default, true, requires TLS)';
      result.resultCodes.push({ code: 'SSL_NOT_SUPPORTED', message });
      result.result = `${result.result} ${message}.`;
    }
    return result;
  } catch (error) {
    if (isOperationError(error))
      return failed(spec.engine, method, { code: error.code, message: error.message });
    return failed(spec.engine, method, { code: 'SOURCE_UNREACHABLE', message: errorMessage(error) });
  }
}

type Facts = Omit<MigrationCheckResult, 'success' | 'method' | 'preferredMethod' | 'result'>;

/** Whether the source takes a connection that requires TLS. */
async function acceptsTls(spec: ConnectionSpec): Promise<boolean> {
  const tls = { ...spec, sslMode: 'require' as const };
  try {
    if (spec.engine === 'pg') await withPg(tls, 'source', (c) => c.query('SELECT 1'));
    else await withMysql(tls, 'source', (c) => c.query('SELECT 1'));
    return true;
  } catch {
    return false;
  }
}

function conclude(
  partial: Facts,
  requested: MigrationMethod | undefined,
  sslMode: ConnectionSpec['sslMode'],
): MigrationCheckResult {
  const preferred: MigrationMethod | null = partial.replication.possible
    ? 'replication'
    : partial.dump.possible
      ? 'dump'
      : null;
  const method = requested ?? preferred ?? 'dump';
  const verdict = method === 'replication' ? partial.replication : partial.dump;
  const code = method === 'replication' ? 'REPLICATION_NOT_POSSIBLE' : 'DUMP_NOT_POSSIBLE';
  const resultCodes = [...partial.resultCodes];
  if (
    !verdict.possible &&
    !resultCodes.some((c) => c.code === code || c.code === 'SOURCE_VERSION_UNSUPPORTED')
  ) {
    resultCodes.unshift({ code, message: verdict.reasons.join('; ') });
  }
  const tls = { require: ' with TLS', disable: ' without TLS', prefer: '' }[sslMode];
  const result = verdict.possible
    ? `All pre-checks passed successfully${tls}, migration method will be '${method}'.`
    : `Migration method '${method}' is not possible: ${verdict.reasons.join('; ')}`;
  return { ...partial, success: verdict.possible, method, preferredMethod: preferred, resultCodes, result };
}

async function checkPostgres(spec: ConnectionSpec, input: MigrationCheckInput): Promise<Facts> {
  const ignore = parseIgnoreDbs(input.ignoreDbs);
  const dumpMajor = await pgBinaryMajor(input.pgBinDir ?? DEFAULT_PG_BIN_DIR, 'pg_dump');
  return withPg(spec, 'source', async (client) => {
    const info = await client.query<{
      version: string;
      num: string;
      wal_level: string;
      max_slots: string;
      used_slots: string;
      max_senders: string;
      rolsuper: boolean;
      rolreplication: boolean;
    }>(`SELECT current_setting('server_version') AS version,
              current_setting('server_version_num') AS num,
              current_setting('wal_level') AS wal_level,
              current_setting('max_replication_slots') AS max_slots,
              (SELECT count(*) FROM pg_replication_slots)::text AS used_slots,
              current_setting('max_wal_senders') AS max_senders,
              r.rolsuper, r.rolreplication
         FROM pg_roles r WHERE r.rolname = current_user`);
    const row = info.rows[0];
    if (!row) throw new Error('current_user has no pg_roles row');
    const serverMajor = pgMajorOf(Number(row.num));
    const dbs = await client.query<{ name: string; size: string | null; can_connect: boolean }>(
      `SELECT datname AS name, has_database_privilege(oid, 'CONNECT') AS can_connect,
              CASE WHEN has_database_privilege(oid, 'CONNECT') THEN pg_database_size(oid)::text END AS size
         FROM pg_database WHERE datallowconn AND NOT datistemplate ORDER BY datname`,
    );
    const databases: SourceDatabase[] = dbs.rows
      .filter((d) => !PG_SYSTEM_DATABASES.has(d.name))
      .map((d) => ({ name: d.name, sizeBytes: Number(d.size ?? 0), ignored: ignore.has(d.name) }));
    const selected = databases.filter((d) => !d.ignored);

    const resultCodes: ResultCode[] = [];
    const dumpReasons: string[] = [];
    const replicationReasons: string[] = [];
    const versionProblem = (message: string): void => {
      resultCodes.push({ code: 'SOURCE_VERSION_UNSUPPORTED', message });
      dumpReasons.push(message);
      replicationReasons.push(message);
    };
    if (serverMajor < MIN_PG_MAJOR) versionProblem(`PostgreSQL ${row.version} is older than ${MIN_PG_MAJOR}`);
    if (serverMajor > dumpMajor) {
      versionProblem(`PostgreSQL ${row.version} is newer than the installed pg_dump (${dumpMajor})`);
    }
    if (input.targetMajor !== undefined && serverMajor > input.targetMajor) {
      versionProblem(
        `PostgreSQL ${row.version} cannot be moved into the older PostgreSQL ${input.targetMajor}`,
      );
    }
    for (const d of dbs.rows) {
      if (!d.can_connect && selected.some((s) => s.name === d.name)) {
        dumpReasons.push(`no CONNECT privilege on database ${d.name}`);
        resultCodes.push({
          code: 'DUMP_NOT_POSSIBLE',
          dbname: d.name,
          message: `no CONNECT privilege on ${d.name}`,
        });
      }
    }

    if (serverMajor < MIN_PG_REPLICATION_MAJOR)
      replicationReasons.push('logical replication needs PostgreSQL 10+');
    if (row.wal_level !== 'logical')
      replicationReasons.push(`wal_level is '${row.wal_level}', not 'logical'`);
    if (!row.rolsuper && !row.rolreplication) {
      replicationReasons.push(`user ${spec.user} has neither the REPLICATION attribute nor superuser`);
    }
    const freeSlots = Number(row.max_slots) - Number(row.used_slots);
    if (freeSlots < selected.length) {
      replicationReasons.push(
        `max_replication_slots leaves ${freeSlots} free slot(s) for ${selected.length} database(s)`,
      );
    }
    if (Number(row.max_senders) < selected.length) {
      replicationReasons.push(`max_wal_senders (${row.max_senders}) is below ${selected.length} database(s)`);
    }

    // Per database: unreadable tables break a dump; for a non-superuser, tables it does not own cannot be
    // published; tables without a key cannot replicate UPDATE/DELETE (reported, not fatal).
    for (const db of selected) {
      if (!dbs.rows.find((d) => d.name === db.name)?.can_connect) continue;
      const perDb = await perDatabaseFacts({ ...spec, database: db.name }, client, db.name);
      if (perDb.unreadable > 0) {
        const message = `${perDb.unreadable} table(s) in ${db.name} are not readable by ${spec.user}`;
        dumpReasons.push(message);
        resultCodes.push({ code: 'DUMP_NOT_POSSIBLE', dbname: db.name, message });
      }
      if (!row.rolsuper && perDb.notOwned > 0) {
        replicationReasons.push(`${perDb.notOwned} table(s) in ${db.name} are not owned by ${spec.user}`);
      }
      if (perDb.withoutKey.length > 0) {
        resultCodes.push({
          code: 'TABLE_WITHOUT_PRIMARY_KEY',
          dbname: db.name,
          message: `UPDATE and DELETE on ${perDb.withoutKey.join(', ')} will not replicate (no primary key)`,
        });
      }
    }
    if (replicationReasons.length > 0 && input.method === 'replication') {
      resultCodes.unshift({ code: 'REPLICATION_NOT_POSSIBLE', message: replicationReasons.join('; ') });
    }
    return {
      engine: 'pg' as const,
      serverVersion: row.version,
      serverMajor,
      databases,
      dump: { possible: dumpReasons.length === 0, reasons: dumpReasons },
      replication: { possible: replicationReasons.length === 0, reasons: replicationReasons },
      resultCodes,
    };
  });
}

async function perDatabaseFacts(
  spec: ConnectionSpec,
  current: pg.Client,
  dbname: string,
): Promise<{ unreadable: number; notOwned: number; withoutKey: string[] }> {
  const query = `SELECT count(*) FILTER (WHERE NOT has_table_privilege(c.oid, 'SELECT'))::int AS unreadable,
                        count(*) FILTER (WHERE NOT pg_has_role(c.relowner, 'USAGE'))::int AS not_owned,
                        coalesce(array_agg(quote_ident(n.nspname) || '.' || quote_ident(c.relname))
                          FILTER (WHERE c.relkind = 'r' AND c.relreplident = 'd' AND NOT EXISTS
                            (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)), '{}') AS without_key
                   FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                    AND n.nspname NOT LIKE 'pg_toast%' AND n.nspname NOT LIKE 'pg_temp%'`;
  const run = async (client: pg.Client) => {
    const r = await client.query<{ unreadable: number; not_owned: number; without_key: string[] }>(query);
    const row = r.rows[0];
    return {
      unreadable: row?.unreadable ?? 0,
      notOwned: row?.not_owned ?? 0,
      withoutKey: row?.without_key ?? [],
    };
  };
  if (current.database === dbname) return run(current);
  const client = await connectPg(spec, 'source');
  try {
    return await run(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function checkMysql(spec: ConnectionSpec, input: MigrationCheckInput): Promise<Facts> {
  const ignore = parseIgnoreDbs(input.ignoreDbs);
  return withMysql(spec, 'source', async (connection) => {
    const [versionRows] = await connection.query('SELECT VERSION() AS version');
    const version = String((versionRows as Array<{ version: string }>)[0]?.version ?? '');
    const serverMajor = Number(/^(\d+)/.exec(version)?.[1] ?? 0);
    const [rows] = await connection.query(
      `SELECT s.SCHEMA_NAME AS name, COALESCE(SUM(t.DATA_LENGTH + t.INDEX_LENGTH), 0) AS size
         FROM information_schema.SCHEMATA s LEFT JOIN information_schema.TABLES t ON t.TABLE_SCHEMA = s.SCHEMA_NAME
        GROUP BY s.SCHEMA_NAME ORDER BY s.SCHEMA_NAME`,
    );
    const databases = (rows as Array<{ name: string; size: string | number }>)
      .filter((r) => !MYSQL_SYSTEM_DATABASES.has(r.name))
      .map((r) => ({ name: r.name, sizeBytes: Number(r.size), ignored: ignore.has(r.name) }));
    const resultCodes: ResultCode[] = [];
    const dumpReasons: string[] = [];
    if (serverMajor < 5) {
      const message = `MySQL/MariaDB ${version} is too old (5.0 or newer needed)`;
      dumpReasons.push(message);
      resultCodes.push({ code: 'SOURCE_VERSION_UNSUPPORTED', message });
    }
    const replicationReasons = ['replication migration is supported for PostgreSQL sources only; use dump'];
    if (input.method === 'replication') {
      resultCodes.unshift({ code: 'REPLICATION_NOT_POSSIBLE', message: replicationReasons[0] ?? '' });
    }
    return {
      engine: 'mysql' as const,
      serverVersion: version,
      serverMajor,
      databases,
      dump: { possible: dumpReasons.length === 0, reasons: dumpReasons },
      replication: { possible: false, reasons: replicationReasons },
      resultCodes,
    };
  });
}
