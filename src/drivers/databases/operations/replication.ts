// PostgreSQL migration by logical replication: per database a publication FOR ALL TABLES on the source,
// the schema copied with pg_dump --schema-only, and a subscription on the target that copies the existing
// rows and then keeps applying changes until stopReplication(). Schema changes are not replicated.
import crypto from 'node:crypto';
import path from 'node:path';
import type pg from 'pg';
import {
  DEFAULT_PG_BIN_DIR,
  errorMessage,
  type DatabaseMigrationStatus,
  type MigrationStatus,
} from './common.js';
import { connectPg, pgDbnameConninfo, pgEnv, pgIdent, pgLiteral, pinnedSource, withPg } from './connect.js';
import { ensurePgDatabase, listSourceDatabases } from './dump.js';
import { OperationError } from './errors.js';
import type { AddressGuard } from '../../net/guard.js';
import { checkToolSafeName, runPipeline, TOOL_ACCOUNT } from './exec.js';
import { parseConnectionUri, type ConnectionSpec } from './source-uri.js';

/** Publication and subscription name; one per database, so the name can be fixed. */
export const MIGRATION_PUBLICATION = 'berth_migration';
export const MIGRATION_SUBSCRIPTION = 'berth_migration';
const DOWN_MESSAGE =
  'Logical replication is currently down. Please make sure all schemas changes are also applied downstream';

export interface ReplicationInput {
  sourceUri: string;
  /** Superuser URI of the managed (target) PostgreSQL: CREATE SUBSCRIPTION needs it. */
  targetUri: string;
  ignoreDbs?: string | readonly string[];
  ssl?: boolean;
  databases?: readonly string[];
  pgBinDir?: string;
  signal?: AbortSignal;
  /** The address rule for a tenant's source. */
  guard?: AddressGuard;
}

/**
 * FOR ALL TABLES needs a superuser. A user with only the REPLICATION attribute publishes the tables it owns
 * (migration_check refuses it when it does not own them all); tables created later are then not included.
 */
async function publicationStatement(client: pg.Client): Promise<string> {
  const role = await client.query<{ rolsuper: boolean }>(
    'SELECT rolsuper FROM pg_roles WHERE rolname = current_user',
  );
  if (role.rows[0]?.rolsuper) return `CREATE PUBLICATION ${MIGRATION_PUBLICATION} FOR ALL TABLES`;
  const tables = await client.query<{ name: string }>(
    `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS name
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
        AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
        AND n.nspname NOT LIKE 'pg_temp%' AND pg_has_role(c.relowner, 'USAGE')
      ORDER BY 1`,
  );
  const list = tables.rows.map((t) => t.name).join(', ');
  return `CREATE PUBLICATION ${MIGRATION_PUBLICATION}${list ? ` FOR TABLE ${list}` : ''}`;
}

/** Slot names are cluster-wide on the source: derive them from the target's address and the database. */
export function slotName(target: ConnectionSpec, dbname: string): string {
  const hash = crypto.createHash('sha256').update(`${target.host}:${target.port}/${dbname}`).digest('hex');
  return `berth_mig_${hash.slice(0, 20)}`;
}

/** libpq conninfo the target server uses to reach the source (values quoted, password included). */
function conninfo(source: ConnectionSpec, dbname: string): string {
  const q = (v: string): string => `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  return [
    `host=${q(source.host)}`,
    `port=${source.port}`,
    `user=${q(source.user)}`,
    `password=${q(source.password)}`,
    `dbname=${q(dbname)}`,
    `sslmode=${source.sslMode}`,
    'application_name=berth_migration',
  ].join(' ');
}

/**
 * Starts continuous replication of every selected database. Returns the status right after the
 * subscriptions were created (tables may still be in their initial copy: status `running`).
 */
export async function startReplication(input: ReplicationInput): Promise<MigrationStatus> {
  const source = await pinnedSource(input);
  const target = parseConnectionUri(input.targetUri);
  if (source.engine !== 'pg' || target.engine !== 'pg') {
    throw new OperationError(
      'REPLICATION_NOT_POSSIBLE',
      'Replication migration is supported for PostgreSQL only',
    );
  }
  const secrets = [source.password, target.password];
  const names = input.databases ? [...input.databases] : await listSourceDatabases(source, input.ignoreDbs);
  const bin = input.pgBinDir ?? DEFAULT_PG_BIN_DIR;
  const databases: DatabaseMigrationStatus[] = [];
  for (const dbname of names) {
    try {
      checkToolSafeName(dbname);
      await withPg({ ...source, database: dbname }, 'source', async (c) => {
        const exists = await c.query('SELECT 1 FROM pg_publication WHERE pubname = $1', [
          MIGRATION_PUBLICATION,
        ]);
        if (exists.rowCount === 0) await c.query(await publicationStatement(c));
      });
      await ensurePgDatabase(target, dbname);
      await runPipeline(
        {
          command: path.join(bin, 'pg_dump'),
          args: ['-Fc', '--schema-only'],
          env: pgEnv(source, dbname),
          runAs: TOOL_ACCOUNT,
        },
        {
          command: path.join(bin, 'pg_restore'),
          args: ['--no-owner', '--no-privileges', `--dbname=${pgDbnameConninfo(dbname)}`],
          env: pgEnv(target, dbname),
          runAs: TOOL_ACCOUNT,
        },
        { secrets, failureCode: 'MIGRATION_FAILED', ...(input.signal ? { signal: input.signal } : {}) },
      );
      await withPg({ ...target, database: dbname }, 'target', async (c) => {
        const slot = slotName(target, dbname);
        await c.query(
          `CREATE SUBSCRIPTION ${MIGRATION_SUBSCRIPTION} CONNECTION ${pgLiteral(conninfo(source, dbname))}
             PUBLICATION ${MIGRATION_PUBLICATION} WITH (copy_data = true, slot_name = ${pgLiteral(slot)})`,
        );
      });
      databases.push({ dbname, method: 'replication', status: 'running' });
    } catch (error) {
      databases.push({
        dbname,
        method: 'replication',
        status: 'failed',
        error: new OperationError('MIGRATION_FAILED', errorMessage(error), secrets).message,
      });
    }
  }
  const failed = databases.filter((d) => d.status === 'failed');
  return {
    status: failed.length > 0 ? 'failed' : 'running',
    method: 'replication',
    ...(failed.length > 0
      ? { error: `Replication of ${failed.map((f) => f.dbname).join(', ')} failed` }
      : {}),
    seconds_behind_master: 0,
    source_active: true,
    databases,
  };
}

export interface ReplicationStatus extends MigrationStatus {
  /** Bytes of source WAL not yet confirmed by the subscriptions (sum over databases). */
  lag_bytes: number;
}

interface SubscriptionRow {
  datname: string;
  slot: string | null;
  enabled: boolean;
  pid: number | null;
  behind_seconds: number | null;
}

/**
 * Status of a running replication migration, UpCloud-shaped: per database `syncing` once every table has
 * finished its initial copy, `running` before, `failed` when the apply worker is not running.
 * seconds_behind_master: 0 when the slot has confirmed all source WAL, else the age of the last message
 * the subscription received from the source.
 */
export async function replicationStatus(
  input: Pick<ReplicationInput, 'sourceUri' | 'targetUri' | 'ssl' | 'guard'>,
): Promise<ReplicationStatus> {
  const source = await pinnedSource(input);
  const target = parseConnectionUri(input.targetUri);
  const subs = await withPg({ ...target, database: target.database || 'postgres' }, 'target', (c) =>
    c
      .query<SubscriptionRow>(
        `SELECT d.datname, s.subslotname AS slot, s.subenabled AS enabled, st.pid,
                extract(epoch FROM now() - st.last_msg_receipt_time)::float8 AS behind_seconds
           FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid
           LEFT JOIN pg_stat_subscription st ON st.subid = s.oid AND st.relid IS NULL
          WHERE s.subname = $1 ORDER BY d.datname`,
        [MIGRATION_SUBSCRIPTION],
      )
      .then((r) => r.rows),
  );
  const empty: ReplicationStatus = {
    status: 'done',
    method: '',
    seconds_behind_master: 0,
    source_active: false,
    databases: [],
    lag_bytes: 0,
  };
  if (subs.length === 0) return empty;

  let slots = new Map<string, { active: boolean; lag: number }>();
  let sourceActive = true;
  try {
    slots = await withPg(source, 'source', async (c) => {
      const r = await c.query<{ slot_name: string; active: boolean; lag: string | null }>(
        `SELECT slot_name, active, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::text AS lag
           FROM pg_replication_slots WHERE slot_name = ANY($1)`,
        [subs.map((s) => s.slot).filter((s): s is string => s !== null)],
      );
      return new Map(
        r.rows.map((row) => [row.slot_name, { active: row.active, lag: Math.max(0, Number(row.lag ?? 0)) }]),
      );
    });
  } catch {
    sourceActive = false;
  }

  const databases: DatabaseMigrationStatus[] = [];
  let lagBytes = 0;
  let seconds = 0;
  for (const sub of subs) {
    const slot = sub.slot ? slots.get(sub.slot) : undefined;
    const lag = slot?.lag ?? 0;
    lagBytes += lag;
    if (lag > 0 && sub.behind_seconds !== null) seconds = Math.max(seconds, sub.behind_seconds);
    if (!sub.enabled || !sourceActive) {
      databases.push({ dbname: sub.datname, method: 'replication', status: 'failed', error: DOWN_MESSAGE });
      continue;
    }
    // No apply worker yet: it starts a moment after the subscription is created (and again after a
    // restart of the target). That is a migration getting under way, not a failed one.
    if (sub.pid === null) {
      databases.push({ dbname: sub.datname, method: 'replication', status: 'running' });
      continue;
    }
    const copying = await withPg({ ...target, database: sub.datname }, 'target', (c) => tablesNotReady(c));
    databases.push({
      dbname: sub.datname,
      method: 'replication',
      status: copying > 0 ? 'running' : 'syncing',
    });
  }
  const failed = databases.some((d) => d.status === 'failed');
  return {
    // UpCloud reports the overall migration `done` while databases keep `syncing`.
    status: failed ? 'failed' : databases.some((d) => d.status === 'running') ? 'running' : 'done',
    method: 'replication',
    ...(failed ? { error: DOWN_MESSAGE } : {}),
    seconds_behind_master: Math.round(seconds),
    source_active: sourceActive,
    databases,
    lag_bytes: lagBytes,
  };
}

async function tablesNotReady(client: pg.Client): Promise<number> {
  const r = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_subscription_rel sr JOIN pg_subscription s ON s.oid = sr.srsubid
      WHERE s.subname = $1 AND sr.srsubstate <> 'r'`,
    [MIGRATION_SUBSCRIPTION],
  );
  return r.rows[0]?.n ?? 0;
}

/**
 * Ends the migration: drops the subscriptions on the target (which drops their slots on the source) and the
 * publications on the source. With the source gone, the subscription is detached from its slot first so
 * the target is freed anyway; the orphaned slot is then reported.
 */
export async function stopReplication(
  input: Pick<ReplicationInput, 'sourceUri' | 'targetUri' | 'ssl' | 'guard'>,
): Promise<{ databases: string[]; orphanedSlots: string[] }> {
  const source = await pinnedSource(input);
  const target = parseConnectionUri(input.targetUri);
  const subs = await withPg({ ...target, database: target.database || 'postgres' }, 'target', (c) =>
    c
      .query<{ datname: string; slot: string | null }>(
        `SELECT d.datname, s.subslotname AS slot FROM pg_subscription s JOIN pg_database d ON d.oid = s.subdbid
          WHERE s.subname = $1`,
        [MIGRATION_SUBSCRIPTION],
      )
      .then((r) => r.rows),
  );
  if (subs.length === 0) {
    throw new OperationError(
      'REPLICATION_NOT_RUNNING',
      'No replication migration is running on this database',
    );
  }
  const orphanedSlots: string[] = [];
  for (const sub of subs) {
    const client = await connectPg({ ...target, database: sub.datname }, 'target');
    try {
      try {
        await client.query(`DROP SUBSCRIPTION ${MIGRATION_SUBSCRIPTION}`);
      } catch {
        // The source is unreachable: disassociate the slot so the subscription can be dropped locally.
        await client.query(`ALTER SUBSCRIPTION ${MIGRATION_SUBSCRIPTION} DISABLE`);
        await client.query(`ALTER SUBSCRIPTION ${MIGRATION_SUBSCRIPTION} SET (slot_name = NONE)`);
        await client.query(`DROP SUBSCRIPTION ${MIGRATION_SUBSCRIPTION}`);
        if (sub.slot) orphanedSlots.push(sub.slot);
      }
    } finally {
      await client.end().catch(() => undefined);
    }
    await withPg({ ...source, database: sub.datname }, 'source', (c) =>
      c.query(`DROP PUBLICATION IF EXISTS ${pgIdent(MIGRATION_PUBLICATION)}`),
    ).catch(() => undefined);
  }
  return { databases: subs.map((s) => s.datname), orphanedSlots };
}
