// The local runtime: applications as sandboxed processes on this machine (bubblewrap, a memory cgroup,
// one OS user per application), served by Berth's edge proxy by Host. See docs/runtime.md.
// State of what runs is in memory: Berth supervises its processes itself (no systemd here). What
// serves outlives Berth (docs/runtime.md, "Restarts of Berth"): replicas and the HAProxy edge keep
// running while Berth is down, each application's `processes.json` records them, and at the next
// start ensureRunning adopts them as they run; builds and commands die with Berth. As root each
// application has a network namespace of its own (src/drivers/os/netns.ts), which outlives Berth and
// is found again.
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  PermanentDriverError,
  type AppRuntimeDriver,
  type AppUsage,
  type AppSpec,
  type ExecResult,
  type LogLine,
  type RuntimeCapabilities,
  type RuntimeEvent,
  type RuntimeStatus,
  type SourceSpec,
  type StepContext,
} from '../driver.js';
import type { AddressGuard } from '../../net/guard.js';
import type { ArtifactStore } from '../../artifacts/types.js';
import { ArchiveError, checkArchive } from './archive.js';
import { ARCHIVE_MAX_BYTES, ARCHIVE_MAX_ENTRIES, buildRelease } from './build.js';
import { prepareBuildNetwork, readHostPackageConfig, type BuildNetwork } from './build-env.js';
import { childGroups, detectCgroups, removeEmptyGroups, removeTree, subtreeUsage } from '../../os/cgroups.js';
import {
  admitServices,
  ensureAppNetwork,
  ensureNetworkTable,
  networksAvailable,
  pruneAppNetworks,
  removeAppNetwork,
  type AppNetwork,
} from '../../os/netns.js';
import { startEdgeProxy, type EdgeProxy, type Upstream } from './edge.js';
import { appLayout, runtimeTag, type AppLayout } from './layout.js';
import { checkPause } from './pause.js';
import { AppLogs } from './logs.js';
import { ensureNodeRuntime, NODE_MAJORS_OFFERED, parseNodeVersion } from './node-runtime.js';
import { availablePhpExtensions, checkPhpSettings, PHP_VERSIONS_OFFERED, renderPhpReplica } from './php.js';
import {
  APP_CPU_SHARES,
  baseEnv,
  ensureVolume,
  launch,
  RUN_MOUNT,
  removeOtherVolumes,
  removeOutput,
  unmountVolumes,
  type LaunchContext,
} from './processes.js';
import { Replica, type ReplicaCommand, type ReplicaRecord } from './replicas.js';
import { adoptSandboxed, ensureAppAccount, removeAppAccount } from './sandbox.js';
import { isRoot, type SystemAccount } from '../../os/users.js';
import { Scheduler } from './scheduler.js';
import { Worker, type WorkerRecord } from './worker.js';
import { workerInstanceName } from '../../../domain/app-services.js';

export interface LocalRuntimeOptions {
  dataDir: string;
  /** Where uploaded sources are: a build and the upload check read the archive as a file of this host. */
  artifacts: Pick<ArtifactStore, 'localFile'>;
  /** Node.js runtimes, downloaded once (config.runtime.runtimesDir). */
  runtimesDir: string;
  /** `proxy`: the edge's data plane (config.runtime.edgeProxy; docs/decisions/0005-edge-data-plane.md). */
  edge: { host: string; port: number; tlsPort: number | undefined; proxy?: 'node' | 'haproxy' };
  guard: AddressGuard;
  allowFileUrls: boolean;
  /** Bounds a fetch and every build command together with the deployment's own deadline. */
  deploymentTimeoutMs: number;
  drainMs: number;
  /** What all of one application's processes share (config.runtime.appPidsMax, appCpuCores). */
  appLimits: { pidsMax: number; cpuCores: number | undefined };
  /** `namespace` (default): a network namespace per application when Berth is root; `host`: none. */
  network?: 'namespace' | 'host';
  /**
   * Host ports every application may reach on the host's addresses besides the edge's (Berth's API,
   * the S3 endpoint); everything else of the host is closed to applications that have a network.
   */
  publicPorts?: number[];
  /** BERTH_BUILD_REGISTRY (undefined: the host npm's) and BERTH_BUILD_ENV. */
  build?: { registry: string | undefined; env: Readonly<Record<string, string>> };
  onEvent(event: RuntimeEvent): void;
  log: { warn(obj: object, msg: string): void };
}

/** Largest output a one-off command returns (and keeps in the command history). */
const EXEC_OUTPUT_BYTES = 256 * 1024;
const EXEC_TIMEOUT_MS = 10 * 60_000;
/**
 * The memory groups of what dies with Berth and is named once per run: builds (`build-<release>`), init
 * and one-off commands (`…-<release>-<time>`). Not the scheduler's (`scheduler-<n>` counts from 1 in
 * every Berth: this one's first run may be in a group an earlier Berth made).
 */
const DIES_WITH_BERTH = /^(build|init|exec)-/;

interface RunningApp {
  spec: AppSpec;
  release: string | null;
  replicas: Replica[];
  /** Replicas of an older release still finishing their requests. */
  draining: Set<Replica>;
  routed: Set<string>;
  scheduler: Scheduler | undefined;
  /** The live release's worker services, and those of a release being replaced (until they stop). */
  workers: Worker[];
  drainingWorkers: Set<Worker>;
  logs: AppLogs;
}

/** What `processes.json` holds: the serving replicas of the live release, for the next Berth. */
interface ProcessesFile {
  release: string | null;
  replicas: ReplicaRecord[];
  workers: WorkerRecord[];
}

export { runtimeTag };

export function createLocalRuntimeDriver(options: LocalRuntimeOptions): AppRuntimeDriver {
  const support = detectCgroups();
  // Several Berth processes may share this machine (a server and the test suite): each names its
  // groups after its data dir.
  const cgroupTag = runtimeTag(options.dataDir);
  // Every application weighs the same when the CPU is contended; all of them together weigh as one
  // busy process of the host (the `berth` group's default), so Berth and its databases keep theirs.
  const limits = { ...options.appLimits, cpuShares: APP_CPU_SHARES };
  const apps = new Map<number, RunningApp>();
  /**
   * Numbers each rollout's replicas (their names, groups and run directories), from the start time so
   * that no number repeats one of an earlier Berth's replicas still running.
   */
  let rollouts = Math.floor(Date.now() / 1000) % 1_000_000_000;
  /** Each application's OS account, made (or found) once: looking one up spawns `id`, synchronously. */
  const accounts = new Map<number, ReturnType<typeof ensureAppAccount>>();
  /** Applications whose directories this process has checked (secureAppDirs), once each. */
  const secured = new Set<number>();
  let edge: EdgeProxy | undefined;
  /** As root: each application's network namespace, made or found once by this process. */
  const withNetworks = options.network !== 'host' && networksAvailable();
  const networks = new Map<number, Promise<AppNetwork>>();
  /** The service ports each application's chain admits, as this process last wrote them. */
  const admitted = new Map<number, string>();
  let edgeStartedOnce = false;
  const publicPorts = () =>
    [
      edge?.port ?? options.edge.port,
      edge?.tlsPort ?? options.edge.tlsPort,
      ...(options.publicPorts ?? []),
    ].filter((port): port is number => port !== undefined && port > 0);
  function appNetwork(appId: number): Promise<AppNetwork> | undefined {
    if (!withNetworks) return undefined;
    let made = networks.get(appId);
    if (!made) {
      made = ensureNetworkTable(cgroupTag, publicPorts()).then(() => ensureAppNetwork(cgroupTag, appId));
      // A failure is tried again at the next use.
      made.catch(() => networks.delete(appId));
      networks.set(appId, made);
    }
    return made;
  }
  let capabilities: RuntimeCapabilities | undefined;
  /** What an earlier Berth left serving, by application, until ensureRunning claims it. */
  const adoptable = new Map<number, ProcessesFile>();
  let closed = false;
  /** Each application's processes.json being written (saveProcesses). */
  const saving = new Map<number, Promise<void>>();
  /** Groups made before this are an earlier Berth's (releaseUnclaimed). */
  const startedAt = new Date();
  /** Read from the host once, at the first build (npm takes a moment to answer). */
  let buildNetwork: Promise<BuildNetwork> | undefined;
  const network = () => {
    buildNetwork ??= readHostPackageConfig().then((host) =>
      prepareBuildNetwork(host, {
        registry: options.build?.registry,
        extra: options.build?.env ?? {},
        caDir: `${options.dataDir}/build-ca`,
      }),
    );
    // A failure (the data dir unwritable) is tried again at the next build.
    buildNetwork.catch(() => (buildNetwork = undefined));
    return buildNetwork;
  };

  /** The uploaded archive under artifact `key`, as a file of this host; `release` when done. */
  async function archiveFile(key: string) {
    const file = await options.artifacts.localFile(key);
    if (!file)
      throw new PermanentDriverError('the uploaded source archive is no longer kept; upload it again');
    return file;
  }

  /** The application's directory and OS account, made when missing. */
  async function appFiles(appId: number) {
    const layout = appLayout(options.dataDir, appId);
    let account = accounts.get(appId);
    if (!accounts.has(appId)) {
      account = ensureAppAccount(appId, cgroupTag);
      accounts.set(appId, account);
    }
    await fs.mkdir(layout.root, { recursive: true, mode: 0o700 });
    await fs.chmod(`${options.dataDir}/apps`, 0o711).catch(() => undefined);
    if (!secured.has(appId)) {
      await secureAppDirs(layout, account);
      secured.add(appId);
    }
    return { layout, account };
  }

  async function launchContext(app: AppSpec): Promise<LaunchContext> {
    const { layout, account } = await appFiles(app.id);
    const network = await appNetwork(app.id);
    // Serving replicas hold the volumes until a start from stopped: a growth would wait in vain.
    const volumesInUse = (apps.get(app.id)?.replicas.length ?? 0) > 0;
    return {
      support,
      cgroupTag,
      limits,
      account,
      layout,
      nodeDir: await nodeDir(app),
      volumesInUse,
      ...(network ? { network: { namespacePath: network.namespacePath, address: network.address } } : {}),
    };
  }

  /** The Node.js runtime of a nodejs application (laravel builds may use it too when named). */
  async function nodeDir(app: AppSpec, log: (line: string) => void = () => undefined) {
    const named = app.runtime.nodejsVersion === 'none' ? undefined : app.runtime.nodejsVersion;
    // `none` (or nothing) leaves PHP applications without Node.js; a nodejs one gets the default.
    if (app.type !== 'nodejs' && named === undefined) return undefined;
    const parsed = parseNodeVersion(named);
    if ('error' in parsed) throw new Error(parsed.error);
    const runtime = await ensureNodeRuntime(parsed.major, options.runtimesDir, log);
    return runtime.dir;
  }

  function running(app: AppSpec): RunningApp {
    let entry = apps.get(app.id);
    if (!entry) {
      entry = {
        spec: app,
        release: null,
        replicas: [],
        draining: new Set(),
        routed: new Set(),
        scheduler: undefined,
        workers: [],
        drainingWorkers: new Set(),
        logs: new AppLogs(appLayout(options.dataDir, app.id).logs),
      };
      apps.set(app.id, entry);
    }
    return entry;
  }

  function replicaCommand(app: AppSpec, port: number): ReplicaCommand {
    const env = { ...baseEnv(app), ...app.env, PORT: String(port) };
    if (app.type === 'nodejs') {
      return {
        command: ['/bin/sh', '-c', app.commands.start ?? 'npm start'],
        env: { NODE_ENV: 'production', ...env, PORT: String(port) },
        files: {},
      };
    }
    const php = renderPhpReplica({
      port,
      documentRoot: app.type === 'laravel' ? '/app/public' : '/app',
      runDir: RUN_MOUNT,
      settings: app.php.settings,
      env,
    });
    return { command: php.command, env: php.env, files: php.files };
  }

  /**
   * Points the application's host names at its serving replicas (none: 503), and drops old names.
   * Resolves once the edge applies it (at once for the Node edge; after HAProxy's runtime API calls);
   * a failure is logged by the edge and never rejects.
   */
  function route(entry: RunningApp): Promise<void> {
    if (!edge) return Promise.resolve();
    const upstreams: Upstream[] = entry.replicas
      .filter((r) => r.serving)
      .map((r) => ({ host: r.address, port: r.port as number }));
    const hostnames = entry.spec.hostnames.map((h) => h.toLowerCase());
    const gone = [...entry.routed].filter((h) => !hostnames.includes(h));
    // Applied in this order by either edge; `drained` waits for changes made before it (edge.ts).
    const removed = gone.length > 0 ? edge.removeRoute(gone).catch(() => undefined) : undefined;
    const set = edge.setRoute(hostnames, upstreams).catch(() => undefined);
    entry.routed = new Set(hostnames);
    // Every change of what serves passes here: the record for the next Berth follows it.
    return Promise.all([removed, set, saveQuietly(entry)]).then(() => undefined);
  }

  function saveQuietly(entry: RunningApp): Promise<void> {
    return saveProcesses(entry).catch((error: unknown) =>
      options.log.warn(
        { appId: entry.spec.id, error: (error as Error).message },
        'processes.json not written',
      ),
    );
  }

  /** Writes the application's processes.json (atomically: a Berth killed meanwhile reads the old one). */
  function saveProcesses(entry: RunningApp): Promise<void> {
    // One write at a time per application (they share the temporary file), each of the state then.
    const appId = entry.spec.id;
    const next = (saving.get(appId) ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => writeProcesses(entry));
    saving.set(appId, next);
    void next
      .finally(() => {
        if (saving.get(appId) === next) saving.delete(appId);
      })
      .catch(() => undefined);
    return next;
  }

  async function writeProcesses(entry: RunningApp): Promise<void> {
    const layout = appLayout(options.dataDir, entry.spec.id);
    // Deleted meanwhile: nothing runs of it to record.
    if (
      !(await fs.stat(layout.root).then(
        () => true,
        () => false,
      ))
    )
      return;
    const replicas = entry.replicas.map((r) => r.record()).filter((r): r is ReplicaRecord => r !== undefined);
    const workers = entry.workers.map((w) => w.record()).filter((w): w is WorkerRecord => w !== undefined);
    const file: ProcessesFile = { release: entry.release, replicas, workers };
    const temporary = `${layout.processes}.${process.pid}.tmp`;
    await fs.writeFile(temporary, JSON.stringify(file), { mode: 0o600 });
    await fs.rename(temporary, layout.processes);
  }

  /**
   * The replicas and workers an earlier Berth left running `release`, adopted as they run; what it
   * left of another release, or of a worker the document no longer has, is stopped.
   */
  async function adoptLeft(
    entry: RunningApp,
    release: string,
    context: LaunchContext,
  ): Promise<{ replicas: Replica[]; workers: Worker[] }> {
    const appId = entry.spec.id;
    const left = adoptable.get(appId);
    adoptable.delete(appId);
    if (!left || left.release !== release) {
      if (left) await stopRecorded(appId, left);
      return { replicas: [], workers: [] };
    }
    const replicas: Replica[] = [];
    for (const record of left.replicas) {
      const replica = await Replica.adopt(record, entry.spec, replicaDeps(entry, context));
      if (replica) replicas.push(replica);
    }
    const workers: Worker[] = [];
    const unclaimed: WorkerRecord[] = [];
    for (const record of left.workers) {
      const wanted = entry.spec.workers.find((w) => workerInstanceName(w.name) === record.name);
      const worker =
        wanted && record.release === release
          ? await Worker.adopt(record, entry.spec, wanted.command, workerDeps(entry, context))
          : undefined;
      if (worker) workers.push(worker);
      else unclaimed.push(record);
    }
    await stopRecorded(appId, { release, replicas: [], workers: unclaimed });
    return { replicas, workers };
  }

  /** Stops processes an earlier Berth recorded that nothing claims, and removes their files. */
  async function stopRecorded(appId: number, left: ProcessesFile): Promise<void> {
    const layout = appLayout(options.dataDir, appId);
    await Promise.all(
      [...left.replicas, ...left.workers].map(async (record) => {
        const orphan = adoptSandboxed(record.sandbox);
        if (orphan) {
          orphan.kill('SIGTERM');
          const killed = setTimeout(() => orphan.kill('SIGKILL'), Math.min(options.drainMs, 5000));
          await orphan.exited;
          clearTimeout(killed);
        }
        const runDir = (record as Partial<ReplicaRecord>).runDir;
        if (runDir) await fs.rm(runDir, { recursive: true, force: true });
        await removeOutput(layout, record.instance);
      }),
    );
  }

  function newReplica(
    entry: RunningApp,
    context: LaunchContext,
    release: string,
    index: number,
    rollout: number,
  ): Replica {
    // Unique per rollout: a redeploy of the live release (skip_build, a restart of Berth's replicas)
    // must not share the memory group or run directory of the replicas it replaces, which go when
    // those stop. The rollout's number is the time: a Berth started later must not reuse the names of
    // the replicas an earlier one left serving.
    return new Replica(
      `web-${release}-${rollout}-${index}`,
      release,
      entry.spec,
      replicaDeps(entry, context),
    );
  }

  function replicaDeps(entry: RunningApp, context: LaunchContext) {
    return {
      context,
      logs: entry.logs,
      command: replicaCommand,
      onEvent: (event: RuntimeEvent) => options.onEvent(event),
      onChange: () => route(entry),
    };
  }

  /** Starts the replicas of `release` and resolves once all are ready; on failure none is left. */
  async function startReplicas(
    entry: RunningApp,
    release: string,
    signal: AbortSignal,
    log?: (line: string) => void,
  ): Promise<Replica[]> {
    const context = await launchContext(entry.spec);
    rollouts += 1;
    const rollout = rollouts;
    const fresh = Array.from({ length: Math.max(1, entry.spec.replicas) }, (_, i) =>
      newReplica(entry, context, release, i, rollout),
    );
    try {
      await Promise.all(fresh.map((replica) => replica.start()));
      log?.(`Started ${fresh.length} replica${fresh.length > 1 ? 's' : ''} of ${release}`);
      await Promise.all(fresh.map((replica) => replica.waitReady(signal, log)));
      return fresh;
    } catch (error) {
      await Promise.all(fresh.map((replica) => replica.stop(0)));
      throw error;
    }
  }

  /** The switch: new replicas serve, the old ones drain and stop. Resolves once the edge switched. */
  async function cutOver(
    entry: RunningApp,
    release: string,
    fresh: Replica[],
    context: LaunchContext,
  ): Promise<void> {
    const old = entry.replicas;
    entry.replicas = fresh;
    entry.release = release;
    const switched = route(entry);
    for (const replica of fresh) replica.watch();
    for (const replica of old) {
      entry.draining.add(replica);
      void drain(replica).finally(() => entry.draining.delete(replica));
    }
    startCompanions(entry, release, context);
    await switched;
  }

  /**
   * The scheduler and workers of `release`, in place of those of the release before; `adopted`
   * workers (left running by an earlier Berth) serve as they are.
   */
  function startCompanions(
    entry: RunningApp,
    release: string,
    context: LaunchContext,
    adopted: Worker[] = [],
  ): void {
    entry.scheduler?.stop();
    entry.scheduler =
      entry.spec.type === 'laravel' && entry.spec.schedulerEnabled
        ? new Scheduler(entry.spec, release, context, entry.logs)
        : undefined;
    entry.scheduler?.start();
    rollWorkers(entry, release, context, adopted);
  }

  function workerDeps(entry: RunningApp, context: LaunchContext) {
    return {
      context,
      logs: entry.logs,
      onEvent: (event: RuntimeEvent) => options.onEvent(event),
      onStarted: () => void saveQuietly(entry),
    };
  }

  /** The new release's workers start; the old ones end (SIGTERM, SIGKILL after the drain time). */
  function rollWorkers(
    entry: RunningApp,
    release: string,
    context: LaunchContext,
    adopted: Worker[] = [],
  ): void {
    const old = entry.workers;
    const fresh: Worker[] = [];
    entry.workers = entry.spec.workers.map((w) => {
      const name = workerInstanceName(w.name);
      const running = adopted.find((worker) => worker.name === name);
      if (running) return running;
      const worker = new Worker(name, release, entry.spec, w.command, workerDeps(entry, context));
      fresh.push(worker);
      return worker;
    });
    for (const worker of old) {
      entry.drainingWorkers.add(worker);
      void worker.stop(options.drainMs).finally(() => entry.drainingWorkers.delete(worker));
    }
    for (const worker of fresh) worker.run();
    void saveQuietly(entry);
  }

  /** Lets requests the edge already sent finish, then stops the replica (SIGTERM, then SIGKILL). */
  async function drain(replica: Replica): Promise<void> {
    const port = replica.port;
    if (port !== null && edge) await edge.drained({ host: replica.address, port }, options.drainMs);
    await replica.stop(options.drainMs);
  }

  async function stopApp(entry: RunningApp): Promise<void> {
    const scheduler = entry.scheduler;
    entry.scheduler = undefined;
    const all = [...entry.replicas, ...entry.draining];
    const workers = [...entry.workers, ...entry.drainingWorkers];
    entry.replicas = [];
    entry.workers = [];
    entry.release = null;
    await route(entry);
    // A schedule:run in progress ends too: nothing of the application may outlive a stop or a delete.
    const drainMs = Math.min(options.drainMs, 5000);
    await Promise.all([
      scheduler?.terminate(drainMs),
      ...all.map((replica) => replica.stop(drainMs)),
      ...workers.map((worker) => worker.stop(drainMs)),
    ]);
  }

  /**
   * Berth stops and leaves the application serving: its replicas and workers run on unwatched
   * (recorded in processes.json with how far their output was read); its scheduler (driven by
   * Berth's timer) and the replicas and workers of an older release still draining end, as they
   * would at a stop.
   */
  async function leaveRunning(entry: RunningApp): Promise<void> {
    const scheduler = entry.scheduler;
    entry.scheduler = undefined;
    const drainMs = Math.min(options.drainMs, 5000);
    await Promise.all([
      scheduler?.terminate(drainMs),
      ...[...entry.draining].map((replica) => replica.stop(drainMs)),
      ...[...entry.drainingWorkers].map((worker) => worker.stop(drainMs)),
      ...entry.replicas.map((replica) => replica.detach()),
    ]);
    for (const worker of entry.workers) worker.detach();
    await saveProcesses(entry);
  }

  return {
    name: 'local',
    get endpoints() {
      return { http: edge?.port, https: edge?.tlsPort };
    },

    capabilities() {
      capabilities ??= {
        nodejsVersions: NODE_MAJORS_OFFERED.map(String),
        phpVersions: [...PHP_VERSIONS_OFFERED],
        phpExtensions: availablePhpExtensions(),
        checkPhpSettings,
      };
      return capabilities;
    },

    async start() {
      closed = false;
      if (!edge) {
        // What a Berth on this data dir left serving is adopted by ensureRunning (releaseUnclaimed
        // stops the rest); builds and commands died with it.
        for (const appId of await appIds(options.dataDir)) {
          const layout = appLayout(options.dataDir, appId);
          const left = await readProcesses(layout.processes);
          if (left) adoptable.set(appId, left);
          // A backup killed while it had the application paused left it frozen (pause.ts).
          await checkPause({ support, cgroupTag, layout }, appId);
        }
        // Nothing builds yet: a release dir still `.building` is what a crash cut short.
        await removeUnfinishedBuilds(options.dataDir);
        // Every application's files are its account's alone, also those of releases made before that.
        for (const appId of await appIds(options.dataDir)) await appFiles(appId);
      }
      if (options.edge.proxy === 'haproxy') {
        const { startHaproxyEdge } = await import('./edge-haproxy.js');
        edge ??= await startHaproxyEdge({
          host: options.edge.host,
          port: options.edge.port,
          dir: `${options.dataDir}/edge-haproxy`,
          logger: options.log,
          ...(options.edge.tlsPort !== undefined
            ? { tls: { port: options.edge.tlsPort, certificatesDir: `${options.dataDir}/certs` } }
            : {}),
        });
      }
      edge ??= await startEdgeProxy({
        host: options.edge.host,
        port: options.edge.port,
        logger: options.log,
        ...(options.edge.tlsPort !== undefined
          ? { tls: await edgeCertificates(options.dataDir, options.edge.tlsPort) }
          : {}),
      });
      if (!withNetworks && options.network !== 'host' && isRoot() && !edgeStartedOnce) {
        options.log.warn(
          {},
          'applications share the host network: nftables, iproute2 or nsenter is missing (scripts/install-system.sh)',
        );
      }
      edgeStartedOnce = true;
      if (withNetworks) {
        // The edge's ports are known now. Networks of applications this Berth no longer has (a kill
        // -9 during a delete, a data dir restored) go; the others are kept as they are.
        await ensureNetworkTable(cgroupTag, publicPorts());
        const kept = new Set(await appIds(options.dataDir));
        const pruned = await pruneAppNetworks(cgroupTag, kept);
        if (pruned.length > 0)
          options.log.warn({ apps: pruned }, 'removed the networks of applications Berth no longer has');
      }
    },

    async serviceAddress(appId, ports) {
      const made = appNetwork(appId);
      if (!made) return undefined;
      const network = await made;
      // The chain is this Berth's alone: rewritten only when the ports change (and once per start).
      const key = [...new Set(ports)].sort((a, b) => a - b).join(',');
      if (admitted.get(appId) !== key) {
        await admitServices(cgroupTag, appId, network, ports);
        admitted.set(appId, key);
      }
      return network.hostAddress;
    },

    async build(app, release, source: SourceSpec, step: StepContext) {
      // First, with the log: a runtime downloaded now says so in the deployment's log.
      await nodeDir(app, step.log);
      const context = await launchContext(app);
      // An uploaded archive is read where the store keeps it (a zip is read from its end).
      const archive = source.kind === 'archive' ? await archiveFile(source.key) : undefined;
      try {
        return await buildRelease(app, release, source, step, context, {
          guard: options.guard,
          allowFileUrls: options.allowFileUrls,
          timeoutMs: options.deploymentTimeoutMs,
          network: await network(),
          archiveFile: archive?.path,
        });
      } finally {
        await archive?.release();
      }
    },

    async hostFiles(appId, volumes) {
      const files = await appFiles(appId);
      return {
        volumes: await Promise.all(
          volumes.map(async (v) => ({ ...v, hostPath: (await ensureVolume(files, v)).source })),
        ),
        ...(files.account ? { appUser: { uid: files.account.uid, gid: files.account.gid } } : {}),
      };
    },

    async hasRelease(appId, release) {
      return fs.access(appLayout(options.dataDir, appId).release(release)).then(
        () => true,
        () => false,
      );
    },

    async release(app, release, step) {
      const context = await launchContext(app);
      // Made, moved onto their images or grown before anything of the release uses them.
      await prepareVolumes(app, context, step.log);
      if (app.commands.init.length === 0) return;
      for (const command of app.commands.init) {
        step.log(`$ ${command}`);
        const result = await runOnce(app, release, command, context, step.signal, step.log, 'init');
        if (result.exitCode !== 0)
          throw new Error(`init command '${command}' exited with ${result.exitCode}`);
      }
    },

    async rollout(app, release, step) {
      const entry = running(app);
      entry.spec = app;
      const context = await launchContext(app);
      const fresh = await startReplicas(entry, release, step.signal, step.log);
      if (step.signal.aborted) {
        await Promise.all(fresh.map((replica) => replica.stop(0)));
        throw step.signal.reason;
      }
      await cutOver(entry, release, fresh, context);
      step.log(`Routed ${app.hostnames.join(', ')} to ${release}`);
    },

    async ensureRunning(app, release) {
      const entry = running(app);
      if (entry.release === release && entry.replicas.length > 0) return;
      entry.spec = app;
      const context = await launchContext(app);
      const adopted = await adoptLeft(entry, release, context);
      if (adopted.replicas.length > 0) {
        // Serving as they were: the edge keeps its route (same upstreams), the checks resume.
        entry.replicas = adopted.replicas;
        entry.release = release;
        for (const replica of adopted.replicas) replica.watch();
        await route(entry);
        if (adopted.replicas.length === Math.max(1, app.replicas)) {
          startCompanions(entry, release, context, adopted.workers);
          return;
        }
      }
      // The rollout below replaces them (and starts the workers afresh).
      entry.workers = adopted.workers;
      // None left (or not as many as the document asks): a rollout beside what serves.
      const fresh = await startReplicas(entry, release, AbortSignal.timeout(options.deploymentTimeoutMs));
      await cutOver(entry, release, fresh, context);
    },

    async stopLeftovers() {
      for (const appId of await appIds(options.dataDir)) {
        const layout = appLayout(options.dataDir, appId);
        const left = await readProcesses(layout.processes);
        if (left) await stopRecorded(appId, left);
        await fs.rm(layout.processes, { force: true });
        await unmountVolumes(layout).catch(() => undefined);
      }
      if (support) await removeTree(support, [cgroupTag]).catch(() => undefined);
      const { stopLeftoverEdge } = await import('./edge-haproxy.js');
      await stopLeftoverEdge(`${options.dataDir}/edge-haproxy`);
    },

    async releaseUnclaimed() {
      for (const [appId, left] of adoptable) await stopRecorded(appId, left);
      adoptable.clear();
      for (const appId of await appIds(options.dataDir)) {
        if (!apps.has(appId)) await fs.rm(appLayout(options.dataDir, appId).processes, { force: true });
      }
      // The groups of builds and commands that died with the earlier Berth, and of applications that
      // run no more. A build the earlier Berth spawned as it was killed may have started its sandbox
      // after Berth's death (bwrap's parent-death signal is set too late to fire): it is ended here.
      if (support) {
        for (const appId of await appIds(options.dataDir)) {
          const application = [cgroupTag, `app-${appId}`];
          if (!apps.has(appId)) {
            await removeTree(support, application).catch(() => undefined);
            continue;
          }
          for (const group of await childGroups(support, application).catch(() => [])) {
            if (group.made < startedAt && DIES_WITH_BERTH.test(group.name))
              await removeTree(support, [...application, group.name]).catch(() => undefined);
          }
        }
        await removeEmptyGroups(support, [cgroupTag], startedAt).catch(() => undefined);
      }
    },

    async stop(appId) {
      const entry = apps.get(appId);
      if (entry) await stopApp(entry);
    },

    async remove(appId) {
      const entry = apps.get(appId);
      if (entry) {
        await stopApp(entry);
        if (edge && entry.routed.size > 0) await edge.removeRoute([...entry.routed]).catch(() => undefined);
        apps.delete(appId);
      }
      if (support) await removeTree(support, [cgroupTag, `app-${appId}`]).catch(() => undefined);
      const layout = appLayout(options.dataDir, appId);
      // Unmounted first: removing the files through a mount would leave its image behind.
      await unmountVolumes(layout);
      await fs.rm(layout.root, { recursive: true, force: true });
      accounts.delete(appId);
      removeAppAccount(appId, cgroupTag);
      // Its namespace, veth, addresses and rules (nothing of it runs any more).
      networks.delete(appId);
      admitted.delete(appId);
      if (withNetworks) await removeAppNetwork(cgroupTag, appId);
    },

    async pruneReleases(appId, keep) {
      const layout = appLayout(options.dataDir, appId);
      const live = apps.get(appId)?.release;
      const kept = new Set([...keep, ...(live ? [live] : [])]);
      for (const name of await fs.readdir(layout.releases).catch(() => [] as string[])) {
        if (kept.has(name) || name.endsWith('.building')) continue;
        await fs.rm(layout.release(name), { recursive: true, force: true });
        await fs.rm(layout.source(name), { force: true });
      }
    },

    async usage(appIds) {
      const traffic = edge ? await edge.traffic().catch(() => undefined) : undefined;
      const usages = new Map<number, AppUsage>();
      for (const appId of appIds) {
        const used = support
          ? await subtreeUsage(support, [cgroupTag, `app-${appId}`]).catch(() => undefined)
          : undefined;
        const entry = apps.get(appId);
        if (!used && !entry) continue;
        const counts = { requests: 0, errors: 0 };
        for (const hostname of entry?.spec.hostnames ?? []) {
          const seen = traffic?.get(hostname.toLowerCase());
          counts.requests += seen?.requests ?? 0;
          counts.errors += seen?.errors ?? 0;
        }
        usages.set(appId, {
          memoryBytes: used?.memoryBytes ?? 0,
          cpuSeconds: used?.cpuSeconds ?? 0,
          ...(traffic ? { edge: counts } : {}),
        });
      }
      return usages;
    },

    status(appId): Promise<RuntimeStatus> {
      const entry = apps.get(appId);
      if (!entry) return Promise.resolve({ release: null, instances: [] });
      const instances = [...entry.replicas, ...entry.draining].map((replica) => replica.status());
      if (entry.scheduler) instances.push(entry.scheduler.status());
      for (const worker of [...entry.workers, ...entry.drainingWorkers]) instances.push(worker.status());
      return Promise.resolve({ release: entry.release, instances });
    },

    logs(appId, { tail, since }): Promise<LogLine[]> {
      const entry = apps.get(appId);
      const logs = entry?.logs ?? new AppLogs(appLayout(options.dataDir, appId).logs);
      return Promise.resolve(logs.tail(tail, since));
    },

    followLogs(appId, listener) {
      const entry = apps.get(appId);
      if (!entry) return () => undefined;
      return entry.logs.follow(listener);
    },

    async exec(app, release, command, step): Promise<ExecResult> {
      const context = await launchContext(app);
      return runOnce(
        app,
        release,
        command,
        context,
        AbortSignal.any([step.signal, AbortSignal.timeout(EXEC_TIMEOUT_MS)]),
        step.log,
        'exec',
      );
    },

    async checkSourceArchive(key) {
      const archive = await archiveFile(key);
      try {
        await checkArchive({
          file: archive.path,
          maxBytes: ARCHIVE_MAX_BYTES,
          maxEntries: ARCHIVE_MAX_ENTRIES,
        });
        return undefined;
      } catch (error) {
        if (error instanceof ArchiveError) return error.message;
        throw error;
      } finally {
        await archive.release();
      }
    },

    async sourceArchive(appId, release) {
      const file = appLayout(options.dataDir, appId).source(release);
      // Opened before it is answered with: one removed meanwhile is no source, not a broken stream.
      const handle = await fs.open(file, 'r').catch(() => undefined);
      return handle?.createReadStream({ autoClose: true });
    },

    async close(closeOptions = {}) {
      // Closed twice (the lifecycle, then the context): the first said whether things keep running.
      if (closed) return;
      closed = true;
      if (closeOptions.keepRunning) {
        // What serves stays up, recorded for the next Berth: only what this Berth drives ends.
        for (const entry of apps.values()) await leaveRunning(entry);
        apps.clear();
        await edge?.close({ keepRunning: true });
        edge = undefined;
        return;
      }
      for (const entry of apps.values()) await stopApp(entry);
      apps.clear();
      // Every process is stopped: the groups of this Berth go too (they are made again at start).
      if (support) await removeTree(support, [cgroupTag]).catch(() => undefined);
      // Nothing of the applications runs: their volumes are mounted again when they start.
      for (const id of await fs.readdir(`${options.dataDir}/apps`).catch(() => [] as string[])) {
        if (/^\d+$/.test(id))
          await unmountVolumes(appLayout(options.dataDir, Number(id))).catch(() => undefined);
      }
      await edge?.close();
      edge = undefined;
    },
  };
}

/**
 * A command once, in a fresh sandbox of `release`, with the application's secrets and volumes (init
 * commands and one-off commands); output goes to `log` and is returned, capped.
 */
async function runOnce(
  app: AppSpec,
  release: string,
  command: string,
  context: LaunchContext,
  signal: AbortSignal,
  log: (line: string) => void,
  kind: 'init' | 'exec',
): Promise<ExecResult> {
  const launched = await launch(app, context, {
    instance: `${kind}-${release}-${Date.now().toString(36)}`,
    release,
    command: ['/bin/sh', '-c', command],
    env: { ...baseEnv(app), ...app.env },
    memoryBytes: app.memoryBytes,
    withVolumes: true,
  });
  const { process } = launched;
  let output = '';
  let truncated = false;
  const lines = AppLogs.splitter(log);
  const collect = (chunk: Buffer) => {
    lines.write(chunk);
    if (output.length < EXEC_OUTPUT_BYTES) output += chunk.toString();
    else truncated = true;
  };
  process.stdout.on('data', collect);
  process.stderr.on('data', collect);
  const onAbort = () => process.kill('SIGKILL');
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    const exit = await process.exited;
    lines.end();
    if (signal.aborted) throw signal.reason;
    return {
      exitCode: exit.code ?? (exit.signal ? 128 : null),
      output: output.slice(0, EXEC_OUTPUT_BYTES),
      truncated,
    };
  } finally {
    signal.removeEventListener('abort', onAbort);
    await launched.group?.remove().catch(() => undefined);
  }
}

/** An application's processes.json, or undefined when it has none (or it cannot be read). */
async function readProcesses(file: string): Promise<ProcessesFile | undefined> {
  try {
    const parsed = JSON.parse(await fs.readFile(file, 'utf8')) as Partial<ProcessesFile>;
    if (!Array.isArray(parsed.replicas)) return undefined;
    return {
      release: typeof parsed.release === 'string' ? parsed.release : null,
      replicas: parsed.replicas,
      workers: Array.isArray(parsed.workers) ? parsed.workers : [],
    };
  } catch {
    return undefined;
  }
}

/** The applications that have files in `dataDir`. */
async function appIds(dataDir: string): Promise<number[]> {
  const names = await fs.readdir(`${dataDir}/apps`).catch(() => [] as string[]);
  return names.filter((name) => /^[1-9]\d{0,15}$/.test(name)).map(Number);
}

/**
 * Only an application's account (and root) reaches its files (issue 24): its directory and its
 * releases directory are root's, in the account's group, 0710 (the account can pass through to bind
 * its release and volumes; no other account can list or enter them), and each release (or build in
 * progress) is the account's, 0700. Sources are root's alone (build.ts). Releases made before this
 * (0755) are repaired here: at Berth's start, and at the first deployment or start of the application.
 * Without root (no accounts) everything is Berth's own, 0700.
 */
async function secureAppDirs(layout: AppLayout, account: SystemAccount | undefined): Promise<void> {
  for (const dir of [layout.root, layout.releases]) {
    await fs.mkdir(dir, { recursive: true, mode: 0o700 });
    if (account) await fs.chown(dir, 0, account.gid);
    await fs.chmod(dir, account ? 0o710 : 0o700);
  }
  for (const name of await fs.readdir(layout.releases)) {
    // `.<release>.building.extract-…`: an archive being unpacked, root's until it is complete.
    if (name.startsWith('.')) continue;
    const release = path.join(layout.releases, name);
    const stat = await fs.lstat(release).catch(() => undefined);
    if (!stat?.isDirectory()) continue;
    if (account && (stat.uid !== account.uid || stat.gid !== account.gid))
      await fs.lchown(release, account.uid, account.gid);
    if ((stat.mode & 0o777) !== 0o700) await fs.chmod(release, 0o700);
  }
}

/**
 * Makes the application's volumes ready (ensureVolume), saying in the deployment's log when one waits,
 * and deletes those it no longer has.
 */
async function prepareVolumes(
  app: AppSpec,
  context: LaunchContext,
  log: (line: string) => void,
): Promise<void> {
  const removed = await removeOtherVolumes(
    context.layout,
    app.volumes.map((volume) => volume.name),
  );
  for (const name of removed) log(`Volume '${name}' was removed from the application: its files are deleted`);
  for (const volume of app.volumes) {
    const { note } = await ensureVolume(context, volume);
    if (note) log(note);
  }
}

/** Removes every `<release>.building` directory under the applications' release dirs. */
async function removeUnfinishedBuilds(dataDir: string): Promise<void> {
  for (const id of await appIds(dataDir)) {
    const { releases } = appLayout(dataDir, id);
    for (const name of await fs.readdir(releases).catch(() => [] as string[])) {
      if (name.endsWith('.building')) await fs.rm(`${releases}/${name}`, { recursive: true, force: true });
    }
  }
}

/** TLS for the edge: `<data dir>/certs/<host>.crt` and `.key`, chosen by SNI (docs/runtime.md). */
async function edgeCertificates(dataDir: string, port: number) {
  const { loadCertificateStore } = await import('./edge-tls.js');
  return { port, certificate: await loadCertificateStore(`${dataDir}/certs`) };
}
