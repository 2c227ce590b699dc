// The SQL of the operator's metrics (src/services/metrics/): what the store says of every
// application, managed database, service and queued job, read on each scrape. Reads only.
import { sql, type Kysely } from 'kysely';
import type { Database } from '../schema/index.js';

export interface ApplicationGauge {
  id: number;
  name: string;
  team: string;
  /** The document's replicas; null: the default, 1. */
  replicas: number | null;
  suspended: number;
}

export interface ManagedDatabaseGauge {
  uuid: string;
  name: string;
  team: string;
  type: string;
  state: string;
  /** The instance's port and storage use as last recorded; null without an instance. */
  port: number | null;
  storageBytes: number | null;
}

export interface ServiceGauge {
  uuid: string;
  applicationId: number;
  /** The service's name in the document (null when its row has just gone). */
  name: string | null;
  engine: string;
  state: string;
  port: number | null;
  restarts: number;
}

export interface JobQueueGauge {
  type: string;
  /** Queued jobs due now. */
  due: number;
  /** run_at of the oldest of them (ISO), null when none is due. */
  oldestDueAt: string | null;
}

export function createMetricsRepository(db: Kysely<Database>) {
  return {
    applications(): Promise<ApplicationGauge[]> {
      return db
        .selectFrom('applications')
        .innerJoin('teams', 'teams.id', 'applications.team_id')
        .select([
          'applications.id',
          'applications.name',
          'teams.name as team',
          'applications.replicas',
          'applications.suspended',
        ])
        .orderBy('applications.id')
        .execute();
    },

    async managedDatabases(): Promise<ManagedDatabaseGauge[]> {
      const rows = await db
        .selectFrom('managed_databases')
        .innerJoin('teams', 'teams.id', 'managed_databases.team_id')
        .leftJoin('managed_instances', 'managed_instances.managed_database_id', 'managed_databases.id')
        .select([
          'managed_databases.uuid',
          'managed_databases.name',
          'teams.name as team',
          'managed_databases.type',
          'managed_databases.state',
          'managed_instances.port',
          'managed_instances.storage_bytes',
        ])
        .orderBy('managed_databases.id')
        .execute();
      return rows.map(({ storage_bytes, ...row }) => ({ ...row, storageBytes: storage_bytes }));
    },

    async services(): Promise<ServiceGauge[]> {
      const rows = await db
        .selectFrom('app_service_instances as i')
        .leftJoin('services', (join) =>
          join.onRef('services.id', '=', 'i.service_id').on('i.source', '=', 'service'),
        )
        .leftJoin('container_services', (join) =>
          join.onRef('container_services.id', '=', 'i.service_id').on('i.source', '=', 'container'),
        )
        .select([
          'i.uuid',
          'i.application_id',
          'services.name as serviceName',
          'container_services.name as containerName',
          'i.engine',
          'i.state',
          'i.port',
          'i.restarts',
        ])
        .orderBy('i.id')
        .execute();
      return rows.map((row) => ({
        uuid: row.uuid,
        applicationId: row.application_id,
        name: row.serviceName ?? row.containerName,
        engine: row.engine,
        state: row.state,
        port: row.port,
        restarts: row.restarts,
      }));
    },

    async jobQueue(now: string): Promise<JobQueueGauge[]> {
      const rows = await db
        .selectFrom('jobs')
        .select(['type', sql<number>`count(*)`.as('due'), sql<string | null>`min(run_at)`.as('oldest')])
        .where('state', '=', 'queued')
        .where('run_at', '<=', now)
        .groupBy('type')
        .execute();
      return rows.map((row) => ({ type: row.type, due: Number(row.due), oldestDueAt: row.oldest }));
    },

    /** Credits used in `period` (`YYYY-MM`) by every user together. */
    async creditsUsed(period: string): Promise<number> {
      const row = await db
        .selectFrom('tools_credit_usage')
        .select(sql<number | null>`sum(used)`.as('used'))
        .where('period', '=', period)
        .executeTakeFirst();
      return Number(row?.used ?? 0);
    },
  };
}

export type MetricsRepository = ReturnType<typeof createMetricsRepository>;
