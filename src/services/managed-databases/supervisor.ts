// The supervisor: restarts dead server processes with backoff (and, on its first pass, brings every
// instance back after a restart of Berth), and keeps each instance's storage use current.
import path from 'node:path';
import type { Logger } from 'pino';
import type { InstanceSpec, ManagedDatabaseDriver } from '../../drivers/databases/types.js';
import { engineOf } from './declared.js';
import type {
  ManagedDatabaseRepository,
  ManagedDatabaseRow,
  ManagedInstanceRow,
} from '../../db/repositories/managed-databases.js';

const STORAGE_CHECK_MS = 60_000;

export interface Supervisor {
  /** Resolves after one full pass (reconcile); used by tests and at start. */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/** What a supervisor shares with its managed-database service (service.ts). */
export interface SupervisorCore {
  driver: ManagedDatabaseDriver;
  repo: ManagedDatabaseRepository;
  log: Logger;
  now: () => string;
  closing: () => boolean;
  /** Builds the driver's templates once, in the background (the first supervisor asks). */
  warmUp: () => void;
  locked: <T>(uuid: string, work: () => Promise<T>) => Promise<T>;
  specOf: (row: ManagedDatabaseRow, instance: ManagedInstanceRow, plan?: string) => InstanceSpec;
  recordRunning: (
    row: ManagedDatabaseRow,
    runtime: Awaited<ReturnType<ManagedDatabaseDriver['provision']>>,
    extra?: Partial<ManagedInstanceRow>,
  ) => Promise<void>;
  auditRestart: (row: ManagedDatabaseRow, reason: string) => Promise<void>;
  supervisors: Set<Supervisor>;
}

export function startSupervisor(
  core: SupervisorCore,
  options: { intervalMs?: number; warmUp?: boolean } = {},
): Supervisor {
  const { driver, repo, log, locked, specOf, recordRunning, auditRestart, now, supervisors } = core;
  if (options.warmUp) core.warmUp();
  const intervalMs = options.intervalMs ?? 1000;
  const backoff = new Map<string, { until: number; delay: number }>();
  const storageCheckedAt = new Map<string, number>();
  /** The states in which an instance is the supervisor's to keep running; in the others an operation has it. */
  const SUPERVISED_STATES = ['running', 'error', 'setup-service'];
  /** Running instances whose settings this supervisor has compared with its Berth's (once each). */
  const settingsChecked = new Set<string>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let passing: Promise<void> | undefined;

  async function superviseOne(instance: ManagedInstanceRow & { uuid: string; state: string }): Promise<void> {
    const wait = backoff.get(instance.uuid);
    if (wait && wait.until > Date.now()) return;
    if (instance.powered === 0 || !SUPERVISED_STATES.includes(instance.state)) return;
    await locked(instance.uuid, async () => {
      if (stopped || core.closing()) return;
      const row = await repo.findDatabase(instance.uuid);
      const fresh = row && (await repo.findInstance(row.id));
      if (!row || !fresh || fresh.powered === 0 || fresh.applied_plan === null) return;
      // Asked again under the lock: an operation requested since the pass read its list (an upgrade's
      // `rebalancing`) owns the instance now, and a restart here would undo its state.
      if (!SUPERVISED_STATES.includes(row.state)) return;
      const ref = { id: row.uuid, engine: engineOf(row.type) };
      // The pid and data_dir columns are the driver's state: it tells what they mean now.
      const health = await driver.health(ref, { pid: fresh.pid, location: fresh.data_dir });
      if (health.state === 'elsewhere') return; // another Berth's
      if (health.state === 'running' && !settingsChecked.has(row.uuid)) {
        settingsChecked.add(row.uuid);
        const spec = specOf(row, fresh, fresh.applied_plan);
        // Left running by an earlier Berth that was killed: restarted with this Berth's settings
        // (connection limits and timeouts, docs/security.md), like a plan change.
        if (driver.outdatedSettings?.(spec)) {
          log.info({ uuid: row.uuid }, 'managed database restarted with the current engine settings');
          await recordRunning(row, await driver.start(spec));
          return;
        }
      }
      if (health.state === 'running') {
        const checked = storageCheckedAt.get(row.uuid) ?? 0;
        if (Date.now() - checked > STORAGE_CHECK_MS || fresh.pid !== health.pid) {
          storageCheckedAt.set(row.uuid, Date.now());
          await repo.updateInstance(row.id, { storage_bytes: health.storageBytes, pid: health.pid });
        }
        return;
      }
      // Stopped on purpose (Berth's last shutdown): starting it again is no incident.
      const died = health.state === 'crashed';
      const reason = died ? health.reason : 'started after Berth restarted';
      if (died) await repo.setState(row.id, 'setup-service', `${reason}; restarting`, now());
      try {
        const runtime = await driver.start(specOf(row, fresh, fresh.applied_plan));
        await recordRunning(
          row,
          runtime,
          died ? { restarts: fresh.restarts + 1, last_restart_at: now(), last_restart_reason: reason } : {},
        );
        backoff.delete(row.uuid);
        if (died) {
          await auditRestart(row, reason);
          log.warn({ uuid: row.uuid, reason, pid: runtime.pid }, 'managed database process restarted');
        }
      } catch (error) {
        const delay = Math.min(60_000, (wait?.delay ?? intervalMs) * 2);
        backoff.set(row.uuid, { until: Date.now() + delay, delay });
        const message = error instanceof Error ? error.message : String(error);
        await repo.setState(row.id, 'error', `restart failed: ${message}`.slice(0, 1000), now());
        log.error({ uuid: row.uuid, err: error }, 'managed database restart failed');
      }
    });
  }

  async function pass(): Promise<void> {
    const instances = await repo.provisionedInstances();
    // Instances start in parallel: a restart of Berth should not take the sum of every start.
    await Promise.all(
      instances.map((instance) =>
        superviseOne(instance).catch((error: unknown) =>
          log.error({ uuid: instance.uuid, err: error }, 'supervising failed'),
        ),
      ),
    );
  }

  function tick(): Promise<void> {
    passing ??= pass().finally(() => {
      passing = undefined;
    });
    return passing;
  }

  function schedule(): void {
    if (stopped) return;
    timer = setTimeout(() => {
      void tick().finally(schedule);
    }, intervalMs);
    timer.unref?.();
  }

  const supervisor: Supervisor = {
    tick,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await passing;
      supervisors.delete(supervisor);
    },
  };
  supervisors.add(supervisor);
  void tick().finally(schedule);
  return supervisor;
}

/** Whether `child` is inside `parent`: applications' services still tell another Berth's instances by it. */
export function isUnder(child: string, parent: string): boolean {
  const relative = path.relative(path.resolve(parent), path.resolve(child));
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}
