// The `local` managed-database driver: one real server process per instance on a free loopback port,
// files under `<dataDir>/databases/<uuid>`. Everything it needs to know about a running instance is
// on disk (the engine's own pid file, `berth-instance.json`), so a restarted Berth finds its
// instances again without trusting its store about pids.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { charsetProblems } from '../charsets.js';
import {
  baseBackupRetention,
  limitsFor,
  limitsForMemory,
  parsePlan,
  type EngineLimits,
} from '../plan-limits.js';
import {
  PermanentDriverError,
  type DatabaseEngine,
  type InstanceRef,
  type InstanceRuntime,
  type InstanceSpec,
  type InstanceStatus,
  type ManagedDatabaseDriver,
  type RecoveredCopy,
} from '../types.js';
import type { LocalEngine } from './engine.js';
import { mariadbEngine } from './mariadb.js';
import { availablePgExtensions, dataMajorOf, postgresEngine } from './postgres.js';
import { exportInstance, importInstance } from './dumps.js';
import {
  MAINTENANCE_USER,
  instanceAccount,
  maintenanceFile,
  ownInstance,
  removeInstanceAccount,
} from './accounts.js';
import {
  chownTree,
  ensureTraversable,
  isRoot,
  freePort,
  portIsFree,
  run,
  tailLines,
  terminate,
} from './process.js';
import { maintenanceUri, recoverCopy, restorableBackups } from './recovery.js';
import { createMemoryGroup, detectCgroups, removeTree, type CgroupSupport } from '../../os/cgroups.js';
import { imageSize, mountImage, placeOnVolume, shrinkRefusal, unmountImage } from '../../os/disk-images.js';
import { createRecentTreeBytes, treeBytes } from '../../os/disk-usage.js';
import { establishedConnections } from '../../os/sockets.js';
import { placeValkeySnapshot, snapshotValkey, valkeyEngine } from './valkey.js';
import { createKeyedLock } from '../../../domain/keyed-lock.js';

const ENGINES: Record<DatabaseEngine, LocalEngine> = {
  pg: postgresEngine,
  mysql: mariadbEngine,
  valkey: valkeyEngine,
};

/** Where a copy for an instance to adopt is recovered: beside its files, so that it is moved, not copied. */
const CLONE_WORK = 'clone-work';

/** The template's admin password, in a copied instance until its first ensureAccess (root-only, 0600). */
const BOOTSTRAP_FILE = 'bootstrap.password';

interface InstanceFile {
  engine: DatabaseEngine;
  port: number;
  /** The plan whose limits the configuration holds (with a service's own memory: `plan+<MiB>MiB`). */
  plan: string;
  /**
   * The engine settings the running server was started with (limitsOf(spec).settings as JSON).
   * Absent in the files of earlier Berths: such a server is restarted with this Berth's settings.
   */
  settings?: string;
}

/** What a spec's limits are called in the state file: a change restarts the server with new limits. */
const appliedSizing = (spec: InstanceSpec): string => {
  if (!spec.limits) return spec.plan;
  const disk = spec.limits.diskMiB ? `+${Math.floor(spec.limits.diskMiB)}MiB-disk` : '';
  return `${spec.plan}+${Math.floor(spec.limits.memoryMiB)}MiB${disk}`;
};

/**
 * The smallest memory cap a server of each engine starts and serves a few connections under (measured
 * with its configuration for that memory, docs/services.md): a smaller `memory` sizes the engine's
 * caches but caps the processes at this.
 */
const MEMORY_CAP_FLOOR_MIB: Record<DatabaseEngine, number> = { pg: 64, mysql: 160, valkey: 32 };
const MIB = 1024 * 1024;

/** The plan's limits, or a service's own memory (docs/services.md). */
const limitsOf = (spec: InstanceSpec): EngineLimits =>
  spec.limits ? limitsForMemory(spec.engine, spec.limits.memoryMiB) : limitsFor(spec.engine, spec.plan);

export interface LocalDriverOptions {
  dataDir: string;
  /** Where engine templates are kept; default `<dataDir>/databases/.templates`. */
  templateDir?: string;
  /** false: every instance gets its own initdb / mariadb-install-db (slower; distinct system ids). */
  useTemplates?: boolean;
  /** Where memory caps are set; default: detected (none when Berth is not root); null: no caps. */
  cgroups?: CgroupSupport | null;
}

export interface LocalDatabaseDriver extends ManagedDatabaseDriver {
  /** `<dataDir>/databases/<uuid>`: where an instance's files are. */
  instanceDir(id: string): string;
  /**
   * Berth's own superuser connection URI of a running instance (PostgreSQL, MariaDB): a maintenance
   * account, never the admin a team receives. For the local operations driver (./operations.ts).
   */
  maintenanceUri(ref: InstanceRef, port: number): string;
  /** Builds the engine templates now, so that the first provisioning is as fast as the later ones. */
  warmUp(): Promise<void>;
}

/** Whether a managed-database driver is this one (the local operations work on its instances only). */
export function isLocalDatabaseDriver(driver: ManagedDatabaseDriver): driver is LocalDatabaseDriver {
  const local = driver as Partial<LocalDatabaseDriver>;
  return (
    driver.name === 'local' &&
    typeof local.instanceDir === 'function' &&
    typeof local.maintenanceUri === 'function'
  );
}

/** Health (every supervisor pass) reports bytes up to this old; `status` always walks the files. */
const STORAGE_AGE_MS = 30_000;

export function createLocalDatabaseDriver(options: LocalDriverOptions): LocalDatabaseDriver {
  const base = path.join(options.dataDir, 'databases');
  const locks = createKeyedLock();
  const cgroups = options.cgroups === undefined ? detectCgroups() : (options.cgroups ?? undefined);
  /** The image of an instance's volume (docs/services.md): beside the instances, root's only. */
  const imageOf = (id: string): string => path.join(base, '.volumes', `${path.basename(dirOf(id))}.ext4`);
  const groupOf = (id: string): string[] => ['databases', id.toLowerCase()];

  const dirOf = (id: string): string => {
    if (!/^[A-Za-z0-9-]{1,64}$/.test(id)) throw new Error(`invalid instance id '${id}'`);
    return path.join(base, id);
  };
  /** `<base>/<uuid>/clone-work`: where recoverCopy puts a copy. */
  const isCloneWork = (dir: string): boolean =>
    path.basename(dir) === CLONE_WORK && path.dirname(path.dirname(path.resolve(dir))) === path.resolve(base);
  const stateFile = (root: string) => path.join(root, 'berth-instance.json');

  function readState(root: string): InstanceFile | undefined {
    try {
      return JSON.parse(fs.readFileSync(stateFile(root), 'utf8')) as InstanceFile;
    } catch {
      return undefined;
    }
  }

  const recentStorage = createRecentTreeBytes(STORAGE_AGE_MS);
  /** One operation per instance at a time: a supervisor restart must not race a plan change. */
  function serialized<T>(id: string, work: () => Promise<T>): Promise<T> {
    return locks.run(id, work);
  }

  async function choosePort(preferred: number | undefined): Promise<number> {
    if (preferred && (await portIsFree(preferred))) return preferred;
    return freePort();
  }

  const templates = new Map<string, Promise<{ dir: string; password: string }>>();

  /**
   * A pristine instance made once per engine, copied for each new instance: managed databases and
   * applications' services alike (no engine's init depends on the admin's name, which ensureAccess
   * makes on the copy).
   */
  function template(engine: DatabaseEngine): Promise<{ dir: string; password: string }> {
    const key = engine;
    let made = templates.get(key);
    if (!made) {
      made = (async () => {
        const dir = path.join(options.templateDir ?? path.join(base, '.templates'), key);
        const passwordFile = `${dir}.password`;
        // The password file is written just before the finished template is renamed into place.
        if (fs.existsSync(dir) && fs.existsSync(passwordFile)) {
          return { dir, password: fs.readFileSync(passwordFile, 'utf8') };
        }
        ensureTraversable(base, options.dataDir);
        fs.mkdirSync(path.dirname(dir), { recursive: true, mode: 0o711 }); // searchable by service users
        fs.chmodSync(path.dirname(dir), 0o711);
        const building = `${dir}.building-${process.pid}`;
        fs.rmSync(building, { recursive: true, force: true });
        fs.mkdirSync(building, { mode: 0o700 });
        await chownTree(building, ENGINES[engine].osUser);
        const password = randomBytes(18).toString('base64url');
        // No engine makes the admin in init (ensureAccess does, on each copy): the name is nominal.
        await ENGINES[engine].init(building, MAINTENANCE_USER, password);
        fs.writeFileSync(passwordFile, password, { mode: 0o600 });
        fs.rmSync(dir, { recursive: true, force: true });
        fs.renameSync(building, dir);
        return { dir, password };
      })();
      templates.set(key, made);
      made.catch(() => templates.delete(key));
    }
    return made;
  }

  /** New instance files: a copy of the engine's template, or a fresh init for engines without one. */
  async function materialise(spec: InstanceSpec, root: string): Promise<void> {
    const engine = ENGINES[spec.engine];
    ensureTraversable(base, options.dataDir);
    // A half-made instance (init failed or was interrupted) is started over from nothing.
    await unmountImage(root);
    fs.rmSync(imageOf(spec.id), { force: true });
    fs.rmSync(root, { recursive: true, force: true });
    fs.mkdirSync(root, { mode: 0o700 });
    if (spec.limits?.diskMiB && isRoot())
      await placeOnVolume(imageOf(spec.id), root, spec.limits.diskMiB * MIB);
    const account = instanceAccount(root, engine.osUser);
    await chownTree(root, account);
    if (!engine.templated || options.useTemplates === false) {
      await engine.init(root, spec.adminUser, spec.adminPassword);
      return;
    }
    const { dir, password } = await template(spec.engine);
    await run('cp', ['-a', `${dir}/.`, root]);
    // The copy is the template account's until it is this instance's own.
    await chownTree(root, account);
    fs.writeFileSync(path.join(root, BOOTSTRAP_FILE), password, { mode: 0o600 });
  }

  async function bootAndConverge(spec: InstanceSpec, mayInit: boolean): Promise<InstanceRuntime> {
    const engine = ENGINES[spec.engine];
    const root = dirOf(spec.id);
    engine.validate(spec);
    // Its files are on its volume: mounted before anything looks at them (after a reboot it is not).
    const image = imageOf(spec.id);
    const imageBytes = imageSize(image);
    // Loop mounts need root; without it the instance uses the host's disk (docs/services.md).
    const diskBytes = spec.limits?.diskMiB && isRoot() ? spec.limits.diskMiB * MIB : undefined;
    // Refused before the server is touched: it keeps running on the volume it has.
    const refusal = diskBytes === undefined ? undefined : shrinkRefusal(image, diskBytes);
    if (refusal) throw new PermanentDriverError(refusal);
    if (imageBytes !== undefined) await mountImage(image, root, imageBytes);
    engine.recover?.(root);
    if (!engine.isInitialised(root)) {
      if (!mayInit) throw new Error(`instance ${spec.id} has no data; provision it first`);
      await materialise(spec, root);
    }
    // Instances made before each had an OS account of its own are handed to theirs here, at start.
    await ownInstance(root, instanceAccount(root, engine.osUser));
    let state = readState(root);
    let pid = engine.pidOf(root);
    const sizing = appliedSizing(spec);
    const limits = limitsOf(spec);
    const settings = JSON.stringify(limits.settings);
    // A new plan, or settings this Berth sets differently (connection limits and timeouts added
    // since the server was started): the server restarts with the configuration written below.
    if (pid !== null && state && (state.plan !== sizing || state.settings !== settings)) {
      await terminate(pid, engine.stopSignal);
      pid = null;
    }
    if (pid === null) {
      if (diskBytes !== undefined) await placeOnVolume(image, root, diskBytes);
      const port = await choosePort(spec.port ?? state?.port);
      await engine.configure(root, spec, port, limits);
      state = { engine: spec.engine, port, plan: sizing, settings };
      fs.writeFileSync(stateFile(root), JSON.stringify(state), { mode: 0o600 });
      // Whatever a previous server left in its memory group goes first.
      if (cgroups) await removeTree(cgroups, groupOf(spec.id));
      await engine.start(root, spec, port);
      pid = engine.pidOf(root);
      if (pid !== null && cgroups && spec.limits) {
        const capMiB = Math.max(MEMORY_CAP_FLOOR_MIB[spec.engine], Math.floor(spec.limits.memoryMiB));
        const group = await createMemoryGroup(cgroups, groupOf(spec.id), capMiB * MIB);
        await group.adopt(pid);
      }
    }
    if (!state) throw new Error(`instance ${spec.id} runs without its state file`);
    const bootstrapFile = path.join(root, BOOTSTRAP_FILE);
    const bootstrap = fs.existsSync(bootstrapFile) ? fs.readFileSync(bootstrapFile, 'utf8') : undefined;
    const access = await engine.ensureAccess(root, spec, state.port, bootstrap);
    // From here on the admin has the spec's password; the template's is no longer needed.
    if (bootstrap !== undefined) fs.rmSync(bootstrapFile, { force: true });
    return {
      host: '127.0.0.1',
      port: state.port,
      pid,
      version: access.version,
      plan: state.plan,
      location: root,
      credentials: access.credentials,
    };
  }

  async function stopInstance(ref: InstanceRef): Promise<void> {
    const engine = ENGINES[ref.engine];
    const pid = engine.pidOf(dirOf(ref.id));
    if (pid !== null) await terminate(pid, engine.stopSignal);
    if (cgroups) await removeTree(cgroups, groupOf(ref.id));
  }

  return {
    name: 'local',
    charsetProblems,
    capabilities: () => ({
      versions: {
        pg: postgresEngine.versions(),
        mysql: mariadbEngine.versions(),
        valkey: valkeyEngine.versions(),
      },
      pgExtensions: availablePgExtensions(),
    }),
    planLimits(engine, plan) {
      const limits = limitsFor(engine, plan);
      return {
        nodes: parsePlan(plan).nodes,
        memoryMiB: limits.budgetMiB,
        storageMiB: limits.storageMiB,
        maxConnections: limits.maxConnections,
        baseBackupRetention: baseBackupRetention(plan),
      };
    },
    // Every instance listens on loopback only (docs/security.md): this host's clients alone reach it.
    endpoint: () => ({ host: '127.0.0.1', ipFilter: ['127.0.0.1/32'] }),
    connections: (ports) => establishedConnections(ports),
    async health(ref, record) {
      // Files under another data dir are another Berth's instance (two Berths on one store).
      if (record.location !== null && !isUnder(record.location, options.dataDir)) {
        return { state: 'elsewhere' as const };
      }
      const root = dirOf(ref.id);
      const pid = ENGINES[ref.engine].pidOf(root);
      if (pid !== null) return { state: 'running', pid, storageBytes: await recentStorage.bytes(root) };
      // A pid recorded and no server: it died (Berth clears the pid when it stops one on purpose).
      return record.pid !== null
        ? { state: 'crashed' as const, reason: `process ${record.pid} exited` }
        : { state: 'stopped' as const };
    },
    logs: (ref, tail) => Promise.resolve(tailLines(ENGINES[ref.engine].logFile(dirOf(ref.id)), tail)),
    instanceDir: dirOf,
    maintenanceUri: (ref, port) => maintenanceUri(dirOf(ref.id), ref.engine, port),
    outdatedSettings(spec) {
      const root = dirOf(spec.id);
      const state = readState(root);
      if (!state || ENGINES[spec.engine].pidOf(root) === null) return false;
      return state.settings !== JSON.stringify(limitsOf(spec).settings);
    },
    restorableBackups: (ref) => Promise.resolve(restorableBackups(dirOf(ref.id))),
    async recoverCopy(ref, options): Promise<RecoveredCopy> {
      // Beside the adopting instance's files, on their file system: the copy is moved into place.
      const work = path.join(dirOf(options.for.id), CLONE_WORK);
      fs.rmSync(work, { recursive: true, force: true });
      fs.mkdirSync(work, { mode: 0o711 });
      try {
        const copy = await recoverCopy(dirOf(ref.id), { ...options, work, keepRunning: false });
        return { handle: work, adminPassword: copy.adminPassword };
      } catch (error) {
        fs.rmSync(work, { recursive: true, force: true });
        throw error;
      }
    },
    discardCopy(copy) {
      // Only a copy this driver made (a handle is a path here: nothing else is removed).
      if (isCloneWork(copy.handle)) fs.rmSync(copy.handle, { recursive: true, force: true });
      return Promise.resolve();
    },
    async warmUp() {
      if (options.useTemplates === false) return;
      for (const engine of Object.keys(ENGINES) as DatabaseEngine[]) {
        if (ENGINES[engine].templated) await template(engine);
      }
    },
    provision: (spec) => serialized(spec.id, () => bootAndConverge(spec, true)),
    start: (spec) => serialized(spec.id, () => bootAndConverge(spec, false)),
    setPlan: (spec) => serialized(spec.id, () => bootAndConverge(spec, false)),
    restart: (spec) =>
      serialized(spec.id, async () => {
        if (!ENGINES[spec.engine].isInitialised(dirOf(spec.id))) {
          throw new Error(`instance ${spec.id} has no data; provision it first`);
        }
        await stopInstance(spec);
        return bootAndConverge(spec, false);
      }),
    upgrade: (spec, targetMajor) =>
      serialized(spec.id, async () => {
        const engine = ENGINES[spec.engine];
        const root = dirOf(spec.id);
        const state = readState(root);
        if (!engine.upgrade) throw new PermanentDriverError(`${spec.engine} has no major upgrades`);
        engine.validate(spec);
        engine.recover?.(root);
        // Not necessarily running: a resumed upgrade finds it stopped by a restart of Berth.
        if (!state || !engine.isInitialised(root)) throw new Error(`instance ${spec.id} has no data`);
        await engine.upgrade(root, spec, state.port, limitsOf(spec), targetMajor);
        return bootAndConverge(spec, false);
      }),
    adoptCopy: (spec, copy) =>
      serialized(spec.id, async () => {
        const engine = ENGINES[spec.engine];
        const root = dirOf(spec.id);
        if (!engine.adoptCopy || !engine.settleAdoption) {
          throw new PermanentDriverError(`${spec.engine} cannot adopt a copy of another instance`);
        }
        engine.validate(spec);
        if (copy.handle !== path.join(root, CLONE_WORK)) {
          throw new Error(`instance ${spec.id} adopts only a copy recovered for it`);
        }
        if (!engine.isInitialised(root)) throw new Error(`instance ${spec.id} has no data`);
        await stopInstance(spec);
        try {
          await engine.adoptCopy(root, path.join(copy.handle, 'data'));
          // The copy's admin has the source's password: ensureAccess opens it with that once.
          fs.writeFileSync(path.join(root, BOOTSTRAP_FILE), copy.adminPassword, { mode: 0o600 });
          const runtime = await bootAndConverge(spec, false);
          engine.settleAdoption(root, true);
          return runtime;
        } catch (error) {
          await stopInstance(spec);
          fs.rmSync(path.join(root, BOOTSTRAP_FILE), { force: true });
          engine.settleAdoption(root, false);
          await bootAndConverge(spec, false);
          throw error;
        }
      }),
    // A stopped instance's volume is unmounted (its files stay in the image; the next start mounts it).
    stop: (ref) =>
      serialized(ref.id, async () => {
        await stopInstance(ref);
        await unmountImage(dirOf(ref.id));
      }),
    delete: (ref) =>
      serialized(ref.id, async () => {
        await stopInstance(ref);
        await unmountImage(dirOf(ref.id), { detach: true });
        fs.rmSync(imageOf(ref.id), { force: true });
        fs.rmSync(dirOf(ref.id), { recursive: true, force: true });
        fs.rmSync(maintenanceFile(dirOf(ref.id)), { force: true });
        recentStorage.forget(dirOf(ref.id));
        removeInstanceAccount(ref.id);
      }),
    status: async (ref): Promise<InstanceStatus> => {
      const root = dirOf(ref.id);
      const pid = ENGINES[ref.engine].pidOf(root);
      return { running: pid !== null, pid, storageBytes: await treeBytes(root) };
    },
    exportData: (spec, dir) =>
      serialized(spec.id, async () => {
        const root = dirOf(spec.id);
        // A stopped instance (powered off, or Berth not serving) is started for its dump and stopped
        // again: a logical dump restores on any version of the engine, its files at rest need not.
        const wasRunning = readState(root) !== undefined && ENGINES[spec.engine].pidOf(root) !== null;
        if (!wasRunning) await bootAndConverge(spec, false);
        try {
          const state = readState(root);
          if (!state) throw new Error(`instance ${spec.id} runs without its state file`);
          if (spec.engine === 'valkey') return [await snapshotValkey(root, state.port, dir)];
          const uri = maintenanceUri(root, spec.engine, state.port);
          return await exportInstance(spec, uri, spec.engine === 'pg' ? dataMajorOf(root) : undefined, dir);
        } finally {
          if (!wasRunning) {
            await stopInstance(spec);
            await unmountImage(root);
          }
        }
      }),
    importData: (spec, dir) =>
      serialized(spec.id, async () => {
        const root = dirOf(spec.id);
        const state = readState(root);
        if (!state || ENGINES[spec.engine].pidOf(root) === null)
          throw new Error(`instance ${spec.id} is not running`);
        if (spec.engine === 'valkey') {
          // Its snapshot is read by the server as it starts: stopped, placed, started again.
          await stopInstance(spec);
          await placeValkeySnapshot(root, dir);
          await bootAndConverge(spec, false);
          return;
        }
        const uri = maintenanceUri(root, spec.engine, state.port);
        await importInstance(spec, uri, spec.engine === 'pg' ? dataMajorOf(root) : undefined, dir);
      }),
    baseBackup: (spec, retain) =>
      serialized(spec.id, async () => {
        const engine = ENGINES[spec.engine];
        const root = dirOf(spec.id);
        const state = readState(root);
        if (!engine.baseBackup) return [];
        if (!state || engine.pidOf(root) === null) throw new Error(`instance ${spec.id} is not running`);
        return engine.baseBackup(root, spec, state.port, retain);
      }),
  };
}

function isUnder(child: string, parent: string): boolean {
  const relative = path.relative(path.resolve(parent), path.resolve(child));
  return relative !== '' && !relative.startsWith('..') && !path.isAbsolute(relative);
}
