// Applications, what hangs off them, and a team's managed databases and object storage: the only SQL
// about infrastructure. Rows are turned into the domain's state shapes here (JSON columns parsed,
// 0/1 as booleans), so nothing above this file knows how they are stored.
import {
  CompiledQuery,
  sql,
  type Compilable,
  type Kysely,
  type Selectable,
  type Transaction,
  type Updateable,
} from 'kysely';
import { jsonArrayFrom as pgJsonArrayFrom } from 'kysely/helpers/postgres';
import { jsonArrayFrom as sqliteJsonArrayFrom } from 'kysely/helpers/sqlite';
import type {
  ApplicationState,
  ContainerServiceState,
  ManagedDatabaseState,
  ObjectStorageState,
  ServiceState,
  VolumeState,
} from '../../domain/infrastructure/plan.js';
import type { Dialect } from '../dialect.js';
import type { Database } from '../schema/index.js';
import type {
  ApplicationsTable,
  DeploymentsTable,
  ManagedDatabasesTable,
  ObjectStoragesTable,
} from '../schema/infrastructure.js';

type Db = Kysely<Database> | Transaction<Database>;

export type ApplicationRow = Selectable<ApplicationsTable>;
export type DeploymentRow = Selectable<DeploymentsTable>;
export type ManagedDatabaseRow = Selectable<ManagedDatabasesTable>;
export type ObjectStorageRow = Selectable<ObjectStoragesTable>;

const json = <T>(text: string | null, fallback: T): T => (text === null ? fallback : (JSON.parse(text) as T));
const bool = (value: number | null): boolean | null => (value === null ? null : value !== 0);
const int = (value: boolean | null): number | null => (value === null ? null : value ? 1 : 0);

export function applicationState(row: ApplicationRow): ApplicationState & { id: number; team_id: number } {
  return {
    id: row.id,
    team_id: row.team_id,
    name: row.name,
    type: row.type,
    version: row.version,
    label: row.label,
    tags: json(row.tags, []),
    repository: json(row.repository, {}),
    runtime: json(row.runtime, {}),
    commands: json(row.commands, {}),
    health_check_enabled: row.health_check_enabled !== 0,
    health_check_path: row.health_check_path,
    scheduler_enabled: bool(row.scheduler_enabled),
    replicas: row.replicas,
    memory: row.memory,
    php: json(row.php, {}),
    scheduled_deletion_at: row.scheduled_deletion_at,
  };
}

function applicationColumns(values: Partial<ApplicationState>): Updateable<ApplicationsTable> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values) as Array<[keyof ApplicationState, unknown]>) {
    switch (key) {
      case 'tags':
      case 'repository':
      case 'runtime':
      case 'commands':
      case 'php':
        out[key] = JSON.stringify(value);
        break;
      case 'health_check_enabled':
        out[key] = value ? 1 : 0;
        break;
      case 'scheduler_enabled':
        out[key] = int(value as boolean | null);
        break;
      case 'name':
      case 'type':
      case 'version':
      case 'label':
      case 'health_check_path':
      case 'replicas':
      case 'memory':
      case 'scheduled_deletion_at':
        out[key] = value;
        break;
    }
  }
  return out;
}

export function managedDatabaseState(
  row: ManagedDatabaseRow,
): ManagedDatabaseState & { id: number; uuid: string } {
  return {
    id: row.id,
    uuid: row.uuid,
    name: row.name,
    type: row.type,
    plan: row.plan,
    zone: row.zone,
    users: json(row.users, []),
    logical_databases: json(row.logical_databases, []),
    pending_plan: row.pending_plan,
    pending_zone: row.pending_zone,
  };
}

export function objectStorageState(row: ObjectStorageRow): ObjectStorageState & { id: number; uuid: string } {
  return {
    id: row.id,
    uuid: row.uuid,
    name: row.name,
    zone: row.zone,
    plan: row.plan,
    buckets: json(row.buckets, []),
    bucket_acls: json(row.bucket_acls, {}),
    users: json(row.users, []),
    pending_zone: row.pending_zone,
  };
}

function jsonColumns<T extends object>(values: T, keys: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(values))
    out[key] = keys.includes(key) ? JSON.stringify(value) : value;
  return out;
}

export interface ApplicationChildren {
  domains: string[];
  secrets: Array<{ id: number; key: string; value_hash: string }>;
  volumes: Array<VolumeState & { id: number }>;
  services: Array<ServiceState & { id: number; secret_settings_hash: string | null }>;
  containerServices: Array<ContainerServiceState & { id: number }>;
}

/** A subquery as a JSON array column, in the dialect's own JSON functions. */
function jsonArray<O>(dialect: Dialect, expr: Parameters<typeof sqliteJsonArrayFrom<O>>[0]) {
  return dialect === 'postgres' ? pgJsonArrayFrom(expr) : sqliteJsonArrayFrom(expr);
}

/** PostgreSQL's driver hands JSON over parsed; SQLite gives its text. */
function jsonRows<T>(value: unknown): T[] {
  return (typeof value === 'string' ? JSON.parse(value) : (value ?? [])) as T[];
}

interface ServiceJson {
  id: number;
  name: string;
  type: string;
  version: string | null;
  memory: string | null;
  volume_size: string | null;
  settings: string;
  command: string | null;
  secret_settings_hash: string | null;
}

type ContainerServiceJson = Omit<ServiceJson, 'command' | 'secret_settings_hash'>;

/** The application named `name` in the team with everything attached, as JSON arrays. */
function applicationWithChildren(db: Db, dialect: Dialect, teamId: number, name: string) {
  return db
    .selectFrom('applications')
    .selectAll('applications')
    .select((eb) => [
      jsonArray(
        dialect,
        eb
          .selectFrom('domains')
          .select('domains.domain')
          .whereRef('domains.application_id', '=', 'applications.id')
          .orderBy('domains.id'),
      ).as('child_domains'),
      jsonArray(
        dialect,
        eb
          .selectFrom('secrets')
          .select(['secrets.id', 'secrets.key', 'secrets.value_hash'])
          .whereRef('secrets.application_id', '=', 'applications.id')
          .orderBy('secrets.id'),
      ).as('child_secrets'),
      jsonArray(
        dialect,
        eb
          .selectFrom('volumes')
          .select(['volumes.id', 'volumes.name', 'volumes.mount_path', 'volumes.volume_size'])
          .whereRef('volumes.application_id', '=', 'applications.id')
          .orderBy('volumes.id'),
      ).as('child_volumes'),
      jsonArray(
        dialect,
        eb
          .selectFrom('services')
          .select([
            'services.id',
            'services.name',
            'services.type',
            'services.version',
            'services.memory',
            'services.volume_size',
            'services.settings',
            'services.command',
            'services.secret_settings_hash',
          ])
          .whereRef('services.application_id', '=', 'applications.id')
          .orderBy('services.id'),
      ).as('child_services'),
      jsonArray(
        dialect,
        eb
          .selectFrom('container_services')
          .select([
            'container_services.id',
            'container_services.name',
            'container_services.type',
            'container_services.version',
            'container_services.memory',
            'container_services.volume_size',
            'container_services.settings',
          ])
          .whereRef('container_services.application_id', '=', 'applications.id')
          .orderBy('container_services.id'),
      ).as('child_container_services'),
    ])
    .where('applications.team_id', '=', teamId)
    .where('applications.name', '=', name);
}

// Building and compiling a statement with Kysely cost more than running it on SQLite, for the reads
// every apply makes: their SQL is compiled once per dialect and shape, and kept (bounded).
const COMPILED_SQL = new Map<string, string>();
const COMPILED_SQL_LIMIT = 256;

/**
 * Runs `build()`'s statement, compiling it only the first time for `key`. The key must name
 * everything the SQL text depends on (dialect, list lengths); the statement's parameters must be
 * exactly `parameters`, in order: checked on that first compile, and the text is kept only then.
 */
async function runCompiled<R>(
  db: Db,
  key: string,
  parameters: readonly unknown[],
  build: () => Compilable<R>,
): Promise<R[]> {
  const cached = COMPILED_SQL.get(key);
  if (cached !== undefined)
    return (await db.executeQuery<R>(CompiledQuery.raw(cached, [...parameters]))).rows;
  const compiled = build().compile();
  if (
    COMPILED_SQL.size < COMPILED_SQL_LIMIT &&
    compiled.parameters.length === parameters.length &&
    compiled.parameters.every((value, i) => value === parameters[i])
  )
    COMPILED_SQL.set(key, compiled.sql);
  return (await db.executeQuery(compiled)).rows;
}

/** The items of an application removed one at a time: a domain, a secret, a volume. */
export type ApplicationItemKind = 'domain' | 'secret' | 'volume';

const ITEM_TABLES = {
  domain: { table: 'domains', column: 'domain' },
  secret: { table: 'secrets', column: 'key' },
  volume: { table: 'volumes', column: 'name' },
} as const;

export function createInfrastructureRepository(db: Db) {
  return {
    /**
     * The application named `name` in the team and everything attached to it, in one statement
     * (one round trip on PostgreSQL): apply reads this on every call.
     */
    async findApplicationWithChildren(
      dialect: Dialect,
      teamId: number,
      name: string,
    ): Promise<{ row: ApplicationRow; children: ApplicationChildren } | undefined> {
      const [found] = await runCompiled(db, `application-with-children:${dialect}`, [teamId, name], () =>
        applicationWithChildren(db, dialect, teamId, name),
      );
      if (!found) return undefined;
      const {
        child_domains,
        child_secrets,
        child_volumes,
        child_services,
        child_container_services,
        ...row
      } = found;
      return {
        row: row,
        children: {
          domains: jsonRows<{ domain: string }>(child_domains).map((d) => d.domain),
          secrets: jsonRows<{ id: number; key: string; value_hash: string }>(child_secrets),
          volumes: jsonRows<VolumeState & { id: number }>(child_volumes),
          services: jsonRows<ServiceJson>(child_services).map((s) => ({
            ...s,
            settings: json(s.settings, {}),
          })),
          containerServices: jsonRows<ContainerServiceJson>(child_container_services).map((s) => ({
            ...s,
            settings: json(s.settings, {}),
          })),
        },
      };
    },

    /** The team's revision (migration 009), undefined if it has none. */
    async teamRevision(teamId: number): Promise<number | undefined> {
      const row = await db
        .selectFrom('team_revisions')
        .select('revision')
        .where('team_id', '=', teamId)
        .executeTakeFirst();
      return row?.revision;
    },

    /** Serialises applies of one team across replicas (PostgreSQL); SQLite transactions are already serial. */
    async lockTeam(dialect: Dialect, teamId: number): Promise<void> {
      if (dialect === 'postgres') {
        await sql`SELECT pg_advisory_xact_lock(${0x62657274}, ${teamId})`.execute(db);
      }
    },

    findApplication: (id: number) =>
      db.selectFrom('applications').selectAll().where('id', '=', id).executeTakeFirst(),
    listApplications: (teamIds: number[]) =>
      teamIds.length === 0
        ? Promise.resolve([] as ApplicationRow[])
        : db.selectFrom('applications').selectAll().where('team_id', 'in', teamIds).orderBy('id').execute(),

    async applicationChildren(applicationId: number): Promise<ApplicationChildren> {
      const [domains, secrets, volumes, services, containerServices] = await Promise.all([
        db
          .selectFrom('domains')
          .select('domain')
          .where('application_id', '=', applicationId)
          .orderBy('id')
          .execute(),
        db
          .selectFrom('secrets')
          .select(['id', 'key', 'value_hash'])
          .where('application_id', '=', applicationId)
          .orderBy('id')
          .execute(),
        db
          .selectFrom('volumes')
          .select(['id', 'name', 'mount_path', 'volume_size'])
          .where('application_id', '=', applicationId)
          .orderBy('id')
          .execute(),
        db
          .selectFrom('services')
          .selectAll()
          .where('application_id', '=', applicationId)
          .orderBy('id')
          .execute(),
        db
          .selectFrom('container_services')
          .selectAll()
          .where('application_id', '=', applicationId)
          .orderBy('id')
          .execute(),
      ]);
      return {
        domains: domains.map((d) => d.domain),
        secrets,
        volumes,
        services: services.map((s) => ({
          id: s.id,
          name: s.name,
          type: s.type,
          version: s.version,
          memory: s.memory,
          volume_size: s.volume_size,
          settings: json(s.settings, {}),
          command: s.command,
          secret_settings_hash: s.secret_settings_hash,
        })),
        containerServices: containerServices.map((s) => ({
          id: s.id,
          name: s.name,
          type: s.type,
          version: s.version,
          memory: s.memory,
          volume_size: s.volume_size,
          settings: json(s.settings, {}),
        })),
      };
    },

    /** Which of `domains` an application other than `applicationId` holds. */
    /** What every application of the team asks of memory (the memory quota of apply, domain/memory.ts). */
    async teamMemory(teamId: number): Promise<
      Array<{
        id: number;
        memory: string | null;
        replicas: number | null;
        services: Array<{ type: string; memory: string | null }>;
        containerServices: Array<{ memory: string | null }>;
      }>
    > {
      const [apps, services, containers] = await Promise.all([
        db
          .selectFrom('applications')
          .select(['id', 'memory', 'replicas'])
          .where('team_id', '=', teamId)
          .execute(),
        db
          .selectFrom('services')
          .innerJoin('applications', 'applications.id', 'services.application_id')
          .select(['services.application_id', 'services.type', 'services.memory'])
          .where('applications.team_id', '=', teamId)
          .execute(),
        db
          .selectFrom('container_services')
          .innerJoin('applications', 'applications.id', 'container_services.application_id')
          .select(['container_services.application_id', 'container_services.memory'])
          .where('applications.team_id', '=', teamId)
          .execute(),
      ]);
      return apps.map((app) => ({
        ...app,
        services: services.filter((s) => s.application_id === app.id),
        containerServices: containers.filter((s) => s.application_id === app.id),
      }));
    },

    /** How many of a kind the team holds (the quotas of apply). */
    async teamCount(
      teamId: number,
      kind: 'applications' | 'managed_databases' | 'object_storages' | 'domains',
    ): Promise<number> {
      const row =
        kind === 'domains'
          ? await db
              .selectFrom('domains')
              .innerJoin('applications', 'applications.id', 'domains.application_id')
              .select((eb) => eb.fn.countAll().as('n'))
              .where('applications.team_id', '=', teamId)
              .executeTakeFirst()
          : kind === 'object_storages'
            ? await db
                .selectFrom('object_storages')
                .select((eb) => eb.fn.countAll().as('n'))
                .where('team_id', '=', teamId)
                // An application's private storage (its minio service) is not one of the team's.
                .where('application_id', 'is', null)
                .executeTakeFirst()
            : await db
                .selectFrom(kind)
                .select((eb) => eb.fn.countAll().as('n'))
                .where('team_id', '=', teamId)
                .executeTakeFirst();
      return Number(row?.n ?? 0);
    },

    /** Which of these bucket names exist on the endpoint, with the team and storage that hold each. */
    /** The buckets that exist on the endpoint for each of these object storages. */
    async createdBuckets(storageIds: number[]): Promise<Map<number, string[]>> {
      const found = new Map<number, string[]>(storageIds.map((id) => [id, []]));
      if (storageIds.length === 0) return found;
      const rows = await db
        .selectFrom('s3_buckets')
        .select(['object_storage_id', 'name'])
        .where('object_storage_id', 'in', storageIds)
        .execute();
      for (const row of rows) found.get(row.object_storage_id)?.push(row.name);
      return found;
    },

    async domainsHeldElsewhere(domains: string[], applicationId: number | undefined): Promise<Set<string>> {
      if (domains.length === 0) return new Set();
      let query = db.selectFrom('domains').select('domain').where('domain', 'in', domains);
      if (applicationId !== undefined) query = query.where('application_id', '<>', applicationId);
      return new Set((await query.execute()).map((r) => r.domain));
    },

    /** `dialect` given: the statement is compiled once per dialect and number of names. */
    managedDatabases: (
      teamId: number,
      names?: string[],
      dialect?: Dialect,
    ): Promise<ManagedDatabaseRow[]> => {
      if (names?.length === 0) return Promise.resolve([]);
      const build = () => {
        let query = db.selectFrom('managed_databases').selectAll().where('team_id', '=', teamId);
        if (names) query = query.where('name', 'in', names);
        return query.orderBy('id');
      };
      if (!names || !dialect) return build().execute();
      return runCompiled(db, `managed-databases:${dialect}:${names.length}`, [teamId, ...names], build);
    },
    /** `dialect` given: the statement is compiled once per dialect and number of names. */
    objectStorages: (teamId: number, names?: string[], dialect?: Dialect): Promise<ObjectStorageRow[]> => {
      if (names?.length === 0) return Promise.resolve([]);
      const build = () => {
        let query = db
          .selectFrom('object_storages')
          .selectAll()
          .where('team_id', '=', teamId)
          // Applications' private storages (minio services) are theirs, not the team's.
          .where('application_id', 'is', null);
        if (names) query = query.where('name', 'in', names);
        return query.orderBy('id');
      };
      if (!names || !dialect) return build().execute();
      return runCompiled(db, `object-storages:${dialect}:${names.length}`, [teamId, ...names], build);
    },

    async insertApplication(teamId: number, values: ApplicationState, at: string): Promise<number> {
      const row = await db
        .insertInto('applications')
        .values({
          ...(applicationColumns(values) as Omit<
            ApplicationsTable,
            'id' | 'team_id' | 'created_at' | 'updated_at' | 'status' | 'suspended'
          >),
          team_id: teamId,
          created_at: at,
          updated_at: at,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },
    async updateApplication(id: number, values: Partial<ApplicationState>, at: string): Promise<void> {
      await db
        .updateTable('applications')
        .set({ ...applicationColumns(values), updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    async insertDomain(applicationId: number, domain: string, at: string): Promise<void> {
      await db
        .insertInto('domains')
        .values({ application_id: applicationId, domain, created_at: at })
        .execute();
    },

    async insertSecret(applicationId: number, key: string, sealed: string, hash: string, at: string) {
      await db
        .insertInto('secrets')
        .values({
          application_id: applicationId,
          key,
          value_encrypted: sealed,
          value_hash: hash,
          created_at: at,
          updated_at: at,
        })
        .execute();
    },
    async updateSecret(id: number, sealed: string, hash: string, at: string) {
      await db
        .updateTable('secrets')
        .set({ value_encrypted: sealed, value_hash: hash, updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    async insertVolume(applicationId: number, values: VolumeState, at: string) {
      await db
        .insertInto('volumes')
        .values({ application_id: applicationId, ...values, created_at: at, updated_at: at })
        .execute();
    },
    async updateVolume(id: number, values: Partial<VolumeState>, at: string) {
      await db
        .updateTable('volumes')
        .set({ ...values, updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    async insertService(
      applicationId: number,
      values: ServiceState,
      secret: { sealed: string; hash: string } | null,
      at: string,
    ) {
      await db
        .insertInto('services')
        .values({
          application_id: applicationId,
          name: values.name,
          type: values.type,
          version: values.version,
          memory: values.memory,
          volume_size: values.volume_size,
          settings: JSON.stringify(values.settings),
          command: values.command,
          secret_settings: secret?.sealed ?? null,
          secret_settings_hash: secret?.hash ?? null,
          created_at: at,
          updated_at: at,
        })
        .execute();
    },
    async updateService(
      id: number,
      values: Partial<ServiceState>,
      secret: { sealed: string; hash: string } | undefined,
      at: string,
    ) {
      await db
        .updateTable('services')
        .set({
          ...jsonColumns(values, ['settings']),
          ...(secret ? { secret_settings: secret.sealed, secret_settings_hash: secret.hash } : {}),
          updated_at: at,
        })
        .where('id', '=', id)
        .execute();
    },

    async insertContainerService(applicationId: number, values: ContainerServiceState, at: string) {
      await db
        .insertInto('container_services')
        .values({
          application_id: applicationId,
          ...values,
          settings: JSON.stringify(values.settings),
          created_at: at,
          updated_at: at,
        })
        .execute();
    },
    async updateContainerService(id: number, values: Partial<ContainerServiceState>, at: string) {
      await db
        .updateTable('container_services')
        .set({ ...jsonColumns(values, ['settings']), updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    async insertManagedDatabase(teamId: number, uuid: string, values: ManagedDatabaseState, at: string) {
      await db
        .insertInto('managed_databases')
        .values({
          uuid,
          team_id: teamId,
          name: values.name,
          title: values.name,
          type: values.type,
          plan: values.plan,
          zone: values.zone,
          users: JSON.stringify(values.users),
          logical_databases: JSON.stringify(values.logical_databases),
          state: 'pending',
          state_reason: null,
          pending_plan: null,
          pending_zone: null,
          created_at: at,
          updated_at: at,
        })
        .execute();
    },
    async updateManagedDatabase(id: number, values: Partial<ManagedDatabaseState>, at: string) {
      await db
        .updateTable('managed_databases')
        .set({ ...jsonColumns(values, ['users', 'logical_databases']), updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    async insertObjectStorage(teamId: number, uuid: string, values: ObjectStorageState, at: string) {
      await db
        .insertInto('object_storages')
        .values({
          uuid,
          team_id: teamId,
          name: values.name,
          zone: values.zone,
          plan: values.plan,
          buckets: JSON.stringify(values.buckets),
          bucket_acls: JSON.stringify(values.bucket_acls),
          users: JSON.stringify(values.users),
          state: 'pending',
          state_reason: null,
          pending_zone: null,
          created_at: at,
          updated_at: at,
        })
        .execute();
    },
    async updateObjectStorage(id: number, values: Partial<ObjectStorageState>, at: string) {
      await db
        .updateTable('object_storages')
        .set({ ...jsonColumns(values, ['buckets', 'bucket_acls', 'users']), updated_at: at })
        .where('id', '=', id)
        .execute();
    },

    /**
     * The application's domain, secret or volume named `ref` (a domain also by its id), with its name;
     * undefined when it has none such.
     */
    findApplicationItem: (kind: ApplicationItemKind, applicationId: number, ref: string) => {
      const { table, column } = ITEM_TABLES[kind];
      const byId = kind === 'domain' && /^\d{1,15}$/.test(ref) ? Number(ref) : undefined;
      return db
        .selectFrom(table)
        .select(['id', `${column} as name`])
        .where('application_id', '=', applicationId)
        .where((eb) =>
          byId === undefined ? eb(column, '=', ref) : eb.or([eb(column, '=', ref), eb('id', '=', byId)]),
        )
        .executeTakeFirst();
    },

    deleteApplicationItem: (kind: ApplicationItemKind, id: number) =>
      db.deleteFrom(ITEM_TABLES[kind].table).where('id', '=', id).execute(),

    listDeployments: (applicationId: number, limit: number) =>
      db
        .selectFrom('deployments')
        .selectAll()
        .where('application_id', '=', applicationId)
        .orderBy('id', 'desc')
        .limit(limit)
        .execute(),
  };
}

export type InfrastructureRepository = ReturnType<typeof createInfrastructureRepository>;
