// The managed-database service: the provisioning job, daily base backups, deletion and power jobs,
// the panel's "apply pending plan/zone change", and the stop of every instance at close. One service
// per context (src/composition.ts), shared by the job handlers, the supervisor and the routes.
import { createKeyedLock } from '../../domain/keyed-lock.js';
import {
  PermanentDriverError,
  type InstanceSpec,
  type ManagedDatabaseDriver,
  type RecoveredCopy,
} from '../../drivers/databases/types.js';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema/index.js';
import { redactPaths } from '../../domain/redact.js';
import { iso, type Clock, type IdGenerator } from '../../domain/clock.js';
import type { Logger } from 'pino';
import type { SecretBox } from '../../crypto/secret-box.js';
import type { IdentityService } from '../identity.js';
import { recordAudit } from '../../db/repositories/audit.js';
import { auditChange, auditUnchanged } from '../audit.js';
import { createDbOperationsRepository } from '../../db/repositories/db-operations.js';
import { AppError } from '../../domain/errors.js';
import { requireRole } from '../../domain/roles.js';
import { deleteJobs, enqueueJob, type NewJob } from '../../jobs/queue.js';
import { enqueue, handles, type JobPayloads } from '../jobs.js';
import type { JobHandler, JobResult } from '../../jobs/runner.js';
import { declaredDatabases, declaredUsers, engineOf } from './declared.js';
import {
  BASE_BACKUP_INTERVAL_MS,
  baseBackupJobKey,
  powerJobKey,
  provisionJobKey,
  type ProvisionPayload,
} from './jobs.js';
import {
  createManagedDatabaseRepository,
  type ManagedDatabaseRow,
  type ManagedInstanceRow,
} from '../../db/repositories/managed-databases.js';
import { startSupervisor, type Supervisor, type SupervisorCore } from './supervisor.js';
import { serviceObject, type Secrets } from './view.js';

export * from './declared.js';
export * from './jobs.js';
export type { Supervisor } from './supervisor.js';

const ADMIN_USER = 'upadmin';

export interface ManagedDatabaseService {
  readonly driver: ManagedDatabaseDriver;
  /**
   * The database as /1.3 answers it (view.ts), with its driver's host and plan limits; `secrets`
   * undefined for callers who may not see passwords.
   */
  serviceObject(
    row: ManagedDatabaseRow,
    instance: ManagedInstanceRow | undefined,
    secrets: Secrets | undefined,
  ): Record<string, unknown>;
  handlers(): Record<string, JobHandler>;
  /**
   * Starts the supervisor; its first pass starts every instance that should run. `warmUp` also
   * builds the local driver's engine templates in the background (a serving Berth does).
   */
  startSupervisor(options?: { intervalMs?: number; warmUp?: boolean }): Supervisor;
  /** The instance of a database (its port, version, sealed credentials); undefined before provisioning. */
  findInstance(databaseId: number): Promise<ManagedInstanceRow | undefined>;
  /** One page of the databases of `userId`'s teams, each with its instance and the caller's role. */
  databasesOfUser(
    userId: number,
    page: { offset: number; limit: number },
  ): Promise<Array<{ row: ManagedDatabaseRow; instance: ManagedInstanceRow | undefined; role: string }>>;
  /** Passwords of an instance, unsealed: admin and per user. */
  credentialsOf(instance: ManagedInstanceRow): { admin: string; users: Record<string, string> };
  /**
   * The database as `userId` may act on it: 404 unknown, 403 another team's, and 403 for a member
   * where `need` is `owner` (powering, deleting, a pending change). Codes as /1.3 answers them.
   */
  databaseFor(
    userId: number,
    uuid: string,
    need: 'member' | 'owner',
  ): Promise<{ row: ManagedDatabaseRow; role: string }>;
  /** Carries out a pending plan/zone change from apply; the database restarts with the new limits. */
  applyPendingChange(userId: number, uuid: string): Promise<ManagedDatabaseRow>;
  /** Restarts a provisioned instance through the driver (maintenance); resolves once it runs again. */
  restart(uuid: string): Promise<ManagedDatabaseRow>;
  /**
   * PostgreSQL major upgrade, in state `rebalancing`. Ends `running` either way: on the new major with
   * a fresh base backup queued (the old major's backups and WAL cannot be restored on it), or on the
   * old major with `upgrade to … failed: …` in state_reason and an audit_log row. Returns the failure.
   */
  upgradeMajor(uuid: string, targetMajor: number): Promise<{ error?: string }>;
  /**
   * A clone's data by physical copy (driver.adoptCopy of a copy driver.recoverCopy made for this
   * instance): the instance runs on the copy with its own
   * credentials, and its first base backup is queued. The state is left to the caller (the clone job).
   */
  adoptCopy(uuid: string, copy: RecoveredCopy): Promise<void>;
  powerOff(uuid: string): Promise<void>;
  powerOn(uuid: string): Promise<void>;
  /**
   * UpCloud's DELETE: the database turns `delete-service` at once and a durable job removes it (its
   * processes, files, backups, WAL archive, credentials, tasks and migration records); then it is 404.
   */
  requestDeletion(uuid: string, userId: number): Promise<void>;
  /** UpCloud's PATCH {powered}: `pending` at once, then `stopped` or `running` once the job is done. */
  requestPower(uuid: string, powered: boolean): Promise<void>;
  /** Removes the instance, its processes and files, and the database row. */
  remove(uuid: string): Promise<void>;
  /**
   * A backup's dumps: every provisioned instance's data, each into the directory `dirFor` gives it,
   * while the instances serve; a powered-off one is started for its dump and stopped again. One that
   * cannot be dumped fails the whole.
   */
  exportData(
    dirFor: (uuid: string) => string,
  ): Promise<{ exported: Array<{ uuid: string; files: string[] }> }>;
  /**
   * A restore's load: provisions the database as the restored store describes it (its credentials,
   * users, databases and port), then loads the dump in `dir` into it; one powered off is stopped
   * again and stays so. Closing the context stops the others; the next `berth serve` starts them.
   */
  importData(uuid: string, dir: string): Promise<void>;
  /**
   * Stops the supervisor and every instance this Berth runs (registered on the context's onClose; the
   * driver tells another Berth's apart); with `keepRunning` (a restart of Berth) the instances run on.
   */
  close(options?: { keepRunning?: boolean }): Promise<void>;
}

/** What the managed-database service uses; src/composition.ts builds it. */
export interface ManagedDatabaseDeps {
  db: Kysely<Database>;
  clock: Clock;
  ids: IdGenerator;
  logger: Logger;
  secretBox: SecretBox;
  identity: Pick<IdentityService, 'teamsOfUser'>;
  /** The driver BERTH_MANAGED_DATABASE_DRIVER names (or a test's). */
  driver: ManagedDatabaseDriver;
}

/** The managed-database service of a context; src/composition.ts makes the one each context has. */
export function createManagedDatabaseService(deps: ManagedDatabaseDeps): ManagedDatabaseService {
  const { driver } = deps;
  const repo = createManagedDatabaseRepository(deps.db);
  const now = () => iso(deps.clock.now());
  const log = deps.logger.child({ component: 'managed-databases' });
  const locks = createKeyedLock();
  const supervisors = new Set<Supervisor>();
  let closing = false;

  /** One operation per database at a time in this process (job, supervisor, panel action). */
  function locked<T>(uuid: string, work: () => Promise<T>): Promise<T> {
    return locks.run(uuid, work);
  }

  function credentialsOf(instance: ManagedInstanceRow) {
    return {
      admin: deps.secretBox.decrypt(instance.admin_password_encrypted),
      users: JSON.parse(deps.secretBox.decrypt(instance.user_passwords_encrypted)) as Record<string, string>,
    };
  }

  function specOf(row: ManagedDatabaseRow, instance: ManagedInstanceRow, plan = row.plan): InstanceSpec {
    const secrets = credentialsOf(instance);
    const engine = engineOf(row.type);
    return {
      id: row.uuid,
      teamId: row.team_id,
      engine,
      plan,
      ...(instance.port ? { port: instance.port } : {}),
      adminUser: instance.admin_username,
      adminPassword: secrets.admin,
      users: declaredUsers(row).map((u) => ({
        username: u.username,
        password: secrets.users[u.username] ?? '',
        ...(u.authentication ? { authentication: u.authentication } : {}),
      })),
      databases:
        engine === 'valkey'
          ? []
          : declaredDatabases(row).map((d) => ({
              name: d.name as string,
              ...(d.character_set ? { characterSet: d.character_set } : {}),
              ...(d.collation ? { collation: d.collation } : {}),
            })),
    };
  }

  /** The instance row with a sealed password for every declared user (new users get new ones). */
  async function instanceWithPasswords(row: ManagedDatabaseRow): Promise<ManagedInstanceRow> {
    const at = now();
    const existing = await repo.findInstance(row.id);
    const users = existing ? credentialsOf(existing).users : {};
    let changed = !existing;
    for (const user of declaredUsers(row)) {
      if (!users[user.username]) {
        users[user.username] = deps.ids.token(18);
        changed = true;
      }
    }
    if (!changed && existing) return existing;
    const sealedUsers = deps.secretBox.encrypt(JSON.stringify(users));
    if (existing) {
      await repo.updateInstance(row.id, { user_passwords_encrypted: sealedUsers, updated_at: at });
    } else {
      await repo.insertInstance({
        managed_database_id: row.id,
        driver: driver.name,
        port: null,
        pid: null,
        data_dir: null,
        version: null,
        applied_plan: null,
        admin_username: ADMIN_USER,
        admin_password_encrypted: deps.secretBox.encrypt(deps.ids.token(18)),
        user_passwords_encrypted: sealedUsers,
        powered: 1,
        storage_bytes: null,
        restarts: 0,
        last_restart_at: null,
        last_restart_reason: null,
        backups: '[]',
        last_backup_at: null,
        created_at: at,
        updated_at: at,
      });
    }
    return (await repo.findInstance(row.id)) as ManagedInstanceRow;
  }

  /** Runs the base-backup job now (it then repeats daily): a first backup, or the first of new data. */
  function queueBaseBackupNow(db: Kysely<Database> | Transaction<Database>, uuid: string): Promise<void> {
    const at = deps.clock.now();
    return enqueue(db, 'managed_database.base_backup', { uuid }, { now: at });
  }

  async function recordRunning(
    row: ManagedDatabaseRow,
    runtime: Awaited<ReturnType<ManagedDatabaseDriver['provision']>>,
    extra: Partial<ManagedInstanceRow> = {},
    followUp?: Omit<NewJob, 'runAt'>,
  ): Promise<void> {
    const at = now();
    await deps.db.transaction().execute(async (trx) => {
      const r = createManagedDatabaseRepository(trx);
      const instance = await r.findInstance(row.id);
      await r.updateInstance(row.id, {
        port: runtime.port,
        pid: runtime.pid,
        data_dir: runtime.location,
        version: runtime.version,
        applied_plan: runtime.plan,
        updated_at: at,
        ...extra,
      });
      if (followUp) {
        // The server is up but not ready for its owner: the follow-up (a clone's copy) sets `running`.
        await r.setState(row.id, 'setup-service', 'server started; copying data', at);
        await enqueueJob(trx, { ...followUp, runAt: deps.clock.now() }, deps.clock.now());
      } else {
        await r.setState(row.id, 'running', null, at);
      }
      // The first base backup follows provisioning at once; it then repeats daily.
      if (engineOf(row.type) === 'pg' && instance && instance.last_backup_at === null) {
        await queueBaseBackupNow(trx, row.uuid);
      }
    });
  }

  const powerOff = (uuid: string): Promise<void> =>
    locked(uuid, async () => {
      const { row } = await forDatabase(uuid);
      await driver.stop({ id: uuid, engine: engineOf(row.type) });
      await deps.db.transaction().execute(async (trx) => {
        const r = createManagedDatabaseRepository(trx);
        await r.updateInstance(row.id, { powered: 0, pid: null, updated_at: now() });
        await r.setState(row.id, 'stopped', null, now());
      });
    });

  const powerOn = (uuid: string): Promise<void> =>
    locked(uuid, async () => {
      const { row, instance } = await forDatabase(uuid);
      await repo.updateInstance(row.id, { powered: 1, updated_at: now() });
      const runtime = await driver.start(specOf(row, instance, instance.applied_plan ?? row.plan));
      await recordRunning(row, runtime);
    });

  const remove = (uuid: string): Promise<void> =>
    locked(uuid, async () => {
      const row = await repo.findDatabase(uuid);
      if (!row) return;
      await repo.setState(row.id, 'delete-service', null, now());
      await driver.delete({ id: uuid, engine: engineOf(row.type) });
      await deps.db.transaction().execute(async (trx) => {
        await deleteJobs(trx, [provisionJobKey(uuid), baseBackupJobKey(uuid), powerJobKey(uuid)]);
        await createManagedDatabaseRepository(trx).deleteDatabase(row.id);
      });
    });

  async function databaseFor(
    userId: number,
    uuid: string,
    need: 'member' | 'owner',
  ): Promise<{ row: ManagedDatabaseRow; role: string }> {
    const row = await repo.findDatabase(uuid);
    if (!row) {
      throw new AppError('not_found', `Managed database ${uuid} not found`, {
        apiCode: 'SERVICE_NOT_FOUND',
      });
    }
    const team = (await deps.identity.teamsOfUser(userId)).find((t) => t.id === row.team_id);
    if (team === undefined) {
      throw new AppError('forbidden', `Managed database ${uuid} belongs to another account`, {
        apiCode: 'ACCOUNT_FORBIDDEN',
      });
    }
    requireRole({ teamName: team.name, role: team.role }, need, `Changing managed database ${row.name}`, {
      apiCode: 'ACCOUNT_FORBIDDEN',
    });
    return { row, role: team.role };
  }

  /** Carries out a requested deletion; re-run after a crash, it finds what is left and removes that. */
  const deleteJob = async ({ uuid }: JobPayloads['managed_database.delete']): Promise<void> => {
    const row = await repo.findDatabase(uuid);
    if (!row || row.state !== 'delete-service') return;
    await remove(uuid);
    // The migration record holds the source's credentials, sealed: they go with the database.
    await deps.db.transaction().execute((trx) => createDbOperationsRepository(trx).deleteRecordsOf(uuid));
    log.info({ uuid }, 'managed database deleted');
  };

  /** Converges a database to its requested power state (the instance's `powered`), re-read here. */
  const powerJob = async ({ uuid }: JobPayloads['managed_database.power']): Promise<void> => {
    const row = await repo.findDatabase(uuid);
    const instance = row && (await repo.findInstance(row.id));
    if (!row || !instance || row.state === 'delete-service') return;
    if (instance.powered === 0) await powerOff(uuid);
    else await powerOn(uuid);
  };

  const provision = async ({ uuid, followUp }: ProvisionPayload): Promise<void> => {
    await locked(uuid, async () => {
      const row = await repo.findDatabase(uuid);
      if (!row) return; // deleted meanwhile
      const previous = await repo.findInstance(row.id);
      if (previous && previous.powered === 0) return; // powered off: nothing to converge now
      await repo.setState(row.id, 'setup-service', null, now());
      try {
        const instance = await instanceWithPasswords(row);
        const runtime = await driver.provision(specOf(row, instance));
        await recordRunning(row, runtime, {}, followUp);
        log.info({ uuid, port: runtime.port, pid: runtime.pid }, 'managed database running');
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        // Shown to the team (state_error): without the host's paths, as every answer.
        await repo.setState(row.id, 'error', redactPaths(reason).slice(0, 1000), now());
        log.warn({ uuid, err: error }, 'managed database provisioning failed');
        // A fault in the request itself will not go away by retrying.
        if (!(error instanceof PermanentDriverError)) throw error;
      }
    });
  };

  const baseBackup = async ({ uuid }: JobPayloads['managed_database.base_backup']): Promise<JobResult> => {
    return locked(uuid, async () => {
      const row = await repo.findDatabase(uuid);
      if (!row || engineOf(row.type) !== 'pg') return;
      const instance = await repo.findInstance(row.id);
      if (!instance || instance.applied_plan === null || row.state !== 'running') {
        // Not provisioned yet (or restarting): try again soon; powered off: tomorrow.
        const later = instance?.powered === 0 ? BASE_BACKUP_INTERVAL_MS : 60_000;
        return { runAgainAt: new Date(deps.clock.now().getTime() + later) };
      }
      const retain = driver.planLimits(engineOf(row.type), row.plan).baseBackupRetention;
      const backups = await driver.baseBackup(specOf(row, instance), retain);
      await repo.updateInstance(row.id, {
        backups: JSON.stringify(backups),
        last_backup_at: now(),
        updated_at: now(),
      });
      log.info({ uuid, kept: backups.length }, 'base backup taken');
      return { runAgainAt: new Date(deps.clock.now().getTime() + BASE_BACKUP_INTERVAL_MS) };
    });
  };

  const audit = (row: ManagedDatabaseRow, action: string, details: unknown): Promise<void> =>
    recordAudit(deps.db, { at: now(), userId: null, teamId: row.team_id, action, target: row.uuid, details });

  const auditRestart = (row: ManagedDatabaseRow, reason: string): Promise<void> =>
    audit(row, 'managed_database.process_restarted', { reason });

  let warming: Promise<void> | undefined;
  const core: SupervisorCore = {
    driver,
    repo,
    log,
    now,
    closing: () => closing,
    warmUp() {
      if (!driver.warmUp) return;
      warming ??= driver
        .warmUp()
        .catch((error: unknown) =>
          log.warn({ err: error }, 'building database templates failed; the first provisioning will retry'),
        );
    },
    locked,
    specOf,
    recordRunning: (row, runtime, extra) => recordRunning(row, runtime, extra),
    auditRestart,
    supervisors,
  };

  async function forDatabase(
    uuid: string,
  ): Promise<{ row: ManagedDatabaseRow; instance: ManagedInstanceRow }> {
    const row = await repo.findDatabase(uuid);
    const instance = row && (await repo.findInstance(row.id));
    if (!row || !instance) throw new AppError('not_found', `Managed database ${uuid} has no instance`);
    return { row, instance };
  }

  return {
    driver,
    serviceObject: (row, instance, secrets) => serviceObject(driver, row, instance, secrets),
    credentialsOf,
    findInstance: (databaseId) => repo.findInstance(databaseId),
    async databasesOfUser(userId, page) {
      const roles = new Map((await deps.identity.teamsOfUser(userId)).map((t) => [t.id, t.role]));
      const rows = (await repo.databasesOfTeams([...roles.keys()])).slice(
        page.offset,
        page.offset + page.limit,
      );
      const instances = new Map(
        (await repo.instancesOf(rows.map((r) => r.id))).map((i) => [i.managed_database_id, i]),
      );
      return rows.map((row) => ({
        row,
        instance: instances.get(row.id),
        role: roles.get(row.team_id) ?? '',
      }));
    },
    handlers: () => ({
      ...handles('managed_database.provision', provision),
      ...handles('managed_database.base_backup', baseBackup),
      ...handles('managed_database.delete', deleteJob),
      ...handles('managed_database.power', powerJob),
    }),

    async requestDeletion(uuid, userId) {
      const at = deps.clock.now();
      await deps.db.transaction().execute(async (trx) => {
        const r = createManagedDatabaseRepository(trx);
        const row = await r.findDatabase(uuid);
        if (!row || row.state === 'delete-service') return auditUnchanged();
        await r.setState(row.id, 'delete-service', null, iso(at));
        await auditChange(trx, {
          at,
          action: 'managed_database.delete',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          before: { name: row.name, type: row.type, plan: row.plan, state: row.state },
          userId,
        });
        await enqueue(trx, 'managed_database.delete', { uuid }, { now: at });
      });
    },

    async requestPower(uuid, powered) {
      const at = deps.clock.now();
      await deps.db.transaction().execute(async (trx) => {
        const r = createManagedDatabaseRepository(trx);
        const row = await r.findDatabase(uuid);
        const instance = row && (await r.findInstance(row.id));
        if (!row) return auditUnchanged();
        // Powering on or off needs a provisioned server and nothing else in progress on it.
        const settled = row.state === 'running' || row.state === 'stopped' || row.state === 'error';
        if (!instance || instance.applied_plan === null || !settled) {
          throw new AppError(
            'conflict',
            `Managed database ${uuid} is ${row.state}; try again once it is running`,
            {
              apiCode: 'SERVICE_NOT_RUNNING',
            },
          );
        }
        await r.updateInstance(row.id, { powered: powered ? 1 : 0, updated_at: iso(at) });
        await r.setState(row.id, 'pending', null, iso(at));
        await auditChange(trx, {
          at,
          action: 'managed_database.power',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          before: { powered: instance.powered === 1, state: row.state },
          after: { powered },
        });
        await enqueue(trx, 'managed_database.power', { uuid }, { now: at });
      });
    },
    startSupervisor: (options) => startSupervisor(core, options),

    databaseFor,

    async applyPendingChange(userId, uuid) {
      const { row } = await databaseFor(userId, uuid, 'owner');
      if (row.pending_plan === null && row.pending_zone === null) {
        throw new AppError('conflict', `Managed database '${row.name}' has no pending plan or zone change`);
      }
      const plan = row.pending_plan ?? row.plan;
      driver.planLimits(engineOf(row.type), plan); // rejects a plan name the driver cannot size
      const at = now();
      await deps.db.transaction().execute(async (trx) => {
        // On one host every zone is this host: a zone change is recorded, nothing moves.
        await createManagedDatabaseRepository(trx).updateDatabase(row.id, {
          plan,
          zone: row.pending_zone ?? row.zone,
          pending_plan: null,
          pending_zone: null,
          state: 'pending',
          state_reason: null,
          updated_at: at,
        });
        await auditChange(trx, {
          at,
          action: 'managed_database.apply_pending_change',
          teamId: row.team_id,
          target: { kind: 'managed_database', id: row.uuid },
          before: { plan: row.plan, zone: row.zone },
          after: { plan, zone: row.pending_zone ?? row.zone },
        });
        await enqueue(trx, 'managed_database.provision', { uuid }, { now: deps.clock.now() });
      });
      return (await repo.findDatabase(uuid)) as ManagedDatabaseRow;
    },

    restart: (uuid) =>
      locked(uuid, async () => {
        const { row, instance } = await forDatabase(uuid);
        const runtime = await driver.restart(specOf(row, instance, instance.applied_plan ?? row.plan));
        await recordRunning(row, runtime);
        return (await repo.findDatabase(uuid)) as ManagedDatabaseRow;
      }),

    upgradeMajor: (uuid, targetMajor) =>
      locked(uuid, async () => {
        const { row, instance } = await forDatabase(uuid);
        await repo.setState(row.id, 'rebalancing', `upgrading to PostgreSQL ${targetMajor}`, now());
        try {
          if (!driver.upgrade) throw new Error(`the ${driver.name} driver has no major upgrades`);
          const spec = specOf(row, instance, instance.applied_plan ?? row.plan);
          const runtime = await driver.upgrade(spec, targetMajor);
          await recordRunning(row, runtime, { backups: '[]' });
          // The new major's first base backup now; the job then repeats daily as before.
          await queueBaseBackupNow(deps.db, uuid);
          await audit(row, 'managed_database.upgraded', { from: instance.version, to: runtime.version });
          log.info({ uuid, from: instance.version, to: runtime.version }, 'managed database upgraded');
          return {};
        } catch (error) {
          const message = error instanceof Error ? error.message : String(error);
          const reason = `upgrade to PostgreSQL ${targetMajor} failed: ${message}`.slice(0, 1000);
          // The driver put the old major back; should that have failed too, the supervisor takes over.
          const status = await driver.status({ id: uuid, engine: engineOf(row.type) }).catch(() => undefined);
          if (status?.running) await repo.updateInstance(row.id, { pid: status.pid, updated_at: now() });
          await repo.setState(row.id, status?.running ? 'running' : 'error', reason, now());
          await audit(row, 'managed_database.upgrade_failed', { target: targetMajor, reason });
          log.warn({ uuid, err: error }, 'managed database upgrade failed');
          return { error: reason };
        }
      }),

    adoptCopy: (uuid, copy) =>
      locked(uuid, async () => {
        const { row, instance } = await forDatabase(uuid);
        if (!driver.adoptCopy) throw new Error(`the ${driver.name} driver cannot adopt copied data`);
        const runtime = await driver.adoptCopy(
          specOf(row, instance, instance.applied_plan ?? row.plan),
          copy,
        );
        await deps.db.transaction().execute(async (trx) => {
          await createManagedDatabaseRepository(trx).updateInstance(row.id, {
            port: runtime.port,
            pid: runtime.pid,
            version: runtime.version,
            backups: '[]',
            updated_at: now(),
          });
          // The copy's own first base backup: the old data's backups cannot be restored onto it.
          await queueBaseBackupNow(trx, uuid);
        });
      }),

    powerOff,
    powerOn,
    remove,

    async exportData(dirFor) {
      const exported: Array<{ uuid: string; files: string[] }> = [];
      if (!driver.exportData) return { exported };
      for (const instance of await repo.provisionedInstances()) {
        const row = await repo.findDatabase(instance.uuid);
        if (!row || row.state === 'delete-service') continue;
        // A powered-off one is started by the driver for its dump, with the plan it last ran with.
        const spec = specOf(row, instance, instance.applied_plan ?? row.plan);
        const files = await locked(row.uuid, () => driver.exportData!(spec, dirFor(row.uuid)));
        exported.push({ uuid: row.uuid, files });
      }
      return { exported };
    },

    importData: (uuid, dir) =>
      locked(uuid, async () => {
        const { row, instance } = await forDatabase(uuid);
        if (!driver.importData)
          throw new Error(`the ${driver.name} managed-database driver cannot load a backup`);
        const spec = specOf(row, instance);
        await driver.provision(spec);
        await driver.importData(spec, dir);
        // Loading may have restarted it (a Valkey snapshot is read at start): where it runs now.
        const runtime = await driver.start(spec);
        if (instance.powered === 1) return recordRunning(row, runtime);
        // Powered off when backed up: loaded, then stopped, as the restored store says.
        await driver.stop({ id: uuid, engine: spec.engine });
        await deps.db.transaction().execute(async (trx) => {
          const r = createManagedDatabaseRepository(trx);
          await r.updateInstance(row.id, {
            port: runtime.port,
            pid: null,
            data_dir: runtime.location,
            version: runtime.version,
            applied_plan: runtime.plan,
            updated_at: now(),
          });
          await r.setState(row.id, 'stopped', null, now());
        });
      }),

    async close(options: { keepRunning?: boolean } = {}) {
      if (closing) return;
      closing = true;
      await Promise.all([...supervisors].map((s) => s.stop()));
      await warming;
      // Wait for operations in flight, then stop every instance of this data dir.
      await locks.idle();
      // A provider's instances are not this process's to stop.
      if (options.keepRunning || driver.remote) return;
      const instances = await repo.provisionedInstances().catch(() => []);
      await Promise.all(
        instances.map(async (instance) => {
          const row = await repo.findDatabase(instance.uuid);
          if (!row) return;
          const ref = { id: instance.uuid, engine: engineOf(row.type) };
          const health = await driver.health(ref, { pid: instance.pid, location: instance.data_dir });
          if (health.state === 'elsewhere') return; // another Berth's
          await driver.stop(ref);
          // pid null marks a deliberate stop (InstanceRecord): the next start is no crash.
          await repo.updateInstance(row.id, { pid: null, updated_at: now() });
        }),
      );
    },
  };
}
