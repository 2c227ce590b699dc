// One replica of an application: a sandboxed process serving HTTP on its own port (in the
// application's network namespace when it has one, else on the host's loopback), checked
// for health, restarted when it crashes (with backoff), when the kernel kills it for memory, or when
// its health check fails `failureThreshold` times in a row. With health checks disabled it is only
// restarted when it exits. Every restart is reported with its reason.
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppSpec, InstanceState, InstanceStatus, RuntimeEvent } from '../driver.js';
import { freePort } from '../../net/ports.js';
import type { AppLogs } from './logs.js';
import {
  adoptLaunch,
  launch,
  removeOutput,
  RUN_MOUNT,
  type LaunchContext,
  type Launched,
} from './processes.js';
import { followProcess, Restarts } from './restarts.js';
import { checkPause } from './pause.js';
import type { SandboxRecord } from './sandbox.js';

/** How often readiness is polled while a replica starts. */
const READY_POLL_MS = 100;

export interface ReplicaCommand {
  command: string[];
  env: Record<string, string>;
  /** Files written into the replica's run directory (bound at RUN_MOUNT) before it starts. */
  files: Record<string, string>;
}

export interface ReplicaDeps {
  context: LaunchContext;
  logs: AppLogs;
  /** What a replica of `release` runs on `port`. */
  command(app: AppSpec, port: number): ReplicaCommand;
  onEvent(event: RuntimeEvent): void;
  /** The replica's serving state changed: the routes are worked out again; resolves once the edge has them. */
  onChange(): Promise<void>;
}

/** One health check: 200 on the path within the timeout (Ploi: anything else is a failure). */
export function checkHealth(
  address: string,
  port: number,
  path: string,
  host: string,
  timeoutMs: number,
): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get(
      { host: address, port, path, headers: { host, 'user-agent': 'Berth-HealthCheck' }, agent: false },
      (response) => {
        response.resume();
        resolve(response.statusCode === 200);
      },
    );
    request.setTimeout(timeoutMs, () => request.destroy());
    request.on('error', () => resolve(false));
  });
}

/** Whether something accepts connections on the port (readiness with health checks disabled). */
function portOpen(address: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: address, port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

/** What the next Berth needs to adopt a serving replica (processes.json). */
export interface ReplicaRecord {
  name: string;
  release: string;
  /** The launch's instance name (its memory group and output files). */
  instance: string;
  port: number;
  runDir: string;
  restarts: number;
  startedAt: string | null;
  sandbox: SandboxRecord;
}

/** One launched process of a replica, with the port and run directory it was given. */
interface Launch {
  launched: Launched;
  instance: string;
  port: number;
  runDir: string;
  /** Resolves once the process has ended and its exit was handled. */
  exited: Promise<void>;
  dead: boolean;
}

export class Replica {
  state: InstanceState = 'starting';
  port: number | null = null;
  healthy: boolean | null = null;
  startedAt: Date | null = null;
  /** The process the replica stands for (after a crash: the one that crashed, until the restart). */
  private current: Launch | undefined;
  /**
   * A process started beside this one at its first failed check, so that a replica restarted for its
   * health serves again when the threshold is reached rather than a start command later.
   */
  private successor: Promise<Launch | undefined> | undefined;
  private launches = 0;
  private stopping = false;
  private failures = 0;
  private readonly restarts: Restarts;
  private liveness: NodeJS.Timeout | undefined;
  /** Why the process last ended by itself. */
  private exitReason: string | undefined;

  constructor(
    readonly name: string,
    readonly release: string,
    private app: AppSpec,
    private readonly deps: ReplicaDeps,
  ) {
    this.restarts = new Restarts({
      appId: app.id,
      name,
      logs: deps.logs,
      onEvent: (event) => deps.onEvent(event),
    });
  }

  /** Where the replica's port is: its application's address in its namespace, or the host's loopback. */
  get address(): string {
    return this.deps.context.network?.address ?? '127.0.0.1';
  }

  get pid(): number | null {
    return this.current?.launched.process.pid ?? null;
  }

  /** Ready, and being added to the edge's route: `running` is said only once requests can reach it. */
  private admitting = false;

  /** Whether the edge may send it requests. */
  get serving(): boolean {
    return (this.state === 'running' || this.admitting) && this.port !== null;
  }

  /** The replica keeps the spec it started with; a new spec (secrets, settings) comes with a rollout. */
  async start(): Promise<void> {
    this.stopping = false;
    this.exitReason = undefined;
    // A restart reuses the run directory of the process it replaces, which has ended.
    this.become(await this.spawn(this.current?.runDir ?? this.deps.context.layout.run(this.name)));
    this.state = 'starting';
    this.healthy = null;
  }

  /** Makes `launch` the replica's process. */
  private become(launch: Launch): void {
    this.current = launch;
    this.port = launch.port;
    this.failures = 0;
    this.startedAt = new Date();
  }

  /** Starts a process of the replica on a free port, its files in `runDir`. */
  private async spawn(runDir: string): Promise<Launch> {
    // In a namespace the host's free port is merely a likely free one: a replica that finds it taken
    // exits, and its restart draws another.
    const port = await freePort();
    const { command, env, files } = this.deps.command(this.app, port);
    await fs.rm(runDir, { recursive: true, force: true });
    // The parent searchable by the application's account (a bind source must be reachable).
    await fs.mkdir(this.deps.context.layout.runs, { recursive: true, mode: 0o711 });
    await fs.mkdir(runDir, { mode: 0o700 });
    for (const [file, content] of Object.entries(files)) {
      await fs.writeFile(`${runDir}/${file}`, content, { mode: 0o600 });
    }
    const account = this.deps.context.account;
    if (account) {
      await fs.chown(runDir, account.uid, account.gid);
      for (const file of Object.keys(files)) await fs.chown(`${runDir}/${file}`, account.uid, account.gid);
    }
    this.launches += 1;
    const instance = `${this.name}-${this.launches}`;
    const launched = await launch(this.app, this.deps.context, {
      instance,
      release: this.release,
      command,
      env,
      memoryBytes: this.app.memoryBytes,
      withVolumes: true,
      runDir,
      outlivesBerth: true,
    });
    return this.follow(launched, instance, port, runDir);
  }

  /** Logs the output of `launched` and handles its exit. */
  private follow(launched: Launched, instance: string, port: number, runDir: string): Launch {
    const started: Launch = { launched, instance, port, runDir, exited: Promise.resolve(), dead: false };
    const ended = followProcess(launched, this.deps.logs, this.name, this.app.memoryBytes);
    started.exited = ended.then(({ reason, oom }) => {
      started.dead = true;
      // Ended on purpose (a stop, a kill for a restart), or a successor that was never adopted.
      if (this.stopping || started !== this.current) return;
      this.onExit(reason, oom);
    });
    return started;
  }

  private onExit(reason: string, oom: boolean): void {
    this.exitReason = reason;
    this.stopLiveness();
    void this.dropSuccessor();
    this.state = 'crashed';
    this.port = null;
    void this.deps.onChange();
    this.restarts.crashed(reason, oom, this.startedAt, (why) => void this.restart(why));
  }

  /** Starts it again after a crash or failed checks, and serves once it is ready. */
  private async restart(reason: string): Promise<void> {
    if (this.stopping) return;
    this.restarts.begin(reason);
    this.state = 'restarting';
    await this.start().then(
      () => this.serveAgain(reason),
      (error: unknown) => this.notReady(error),
    );
  }

  /** Waits for the restarted process's readiness, then serves and watches it. */
  private async serveAgain(reason: string): Promise<void> {
    try {
      await this.waitReady(AbortSignal.timeout(10 * 60_000));
      this.restarts.done(reason);
      this.watch();
    } catch (error) {
      this.notReady(error);
    }
  }

  private notReady(error: unknown): void {
    // It did not come up: its exit handler (or the next check) schedules the next attempt.
    if (!this.stopping && this.port !== null)
      this.deps.logs.add(this.name, 'system', `did not become ready: ${(error as Error).message}`);
  }

  /** Whether the process on `port` is ready: 200 on the health path, or listening with checks disabled. */
  private probe(port: number): Promise<boolean> {
    const { health } = this.app;
    const host = this.app.hostnames[0] ?? 'localhost';
    return health.enabled
      ? checkHealth(this.address, port, health.path, host, health.timeoutMs)
      : portOpen(this.address, port);
  }

  /** Resolves when the replica passes its readiness check; rejects when it exits or `signal` aborts. */
  async waitReady(signal: AbortSignal, log?: (line: string) => void): Promise<void> {
    const { health } = this.app;
    let said = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      if (this.state === 'crashed' || this.stopping || this.port === null)
        throw new Error(`${this.name} ${this.exitReason ?? 'stopped'} before it became ready`);
      const ok = await this.probe(this.port);
      if (ok && this.state === 'starting') {
        // The edge's route changes asynchronously (HAProxy's runtime API): the replica reads `running`
        // once it has, so that nobody sees `running` and then a 503 from the edge.
        this.admitting = true;
        try {
          await this.deps.onChange();
        } finally {
          this.admitting = false;
        }
        if (this.state !== 'starting') continue; // it ended meanwhile: the check at the top says how
        this.state = 'running';
        this.healthy = health.enabled ? true : null;
        log?.(`${this.name} is ready on port ${this.port}`);
        return;
      }
      if (!said && log) {
        log(
          health.enabled
            ? `waiting for ${this.name} to answer 200 on ${health.path}`
            : `waiting for ${this.name} to listen on $PORT (health checks disabled)`,
        );
        said = true;
      }
      await sleep(READY_POLL_MS, undefined, { signal }).catch(() => undefined);
    }
  }

  /** Live checks every interval; a replica failing the threshold in a row is restarted. */
  watch(): void {
    this.stopLiveness();
    const { health } = this.app;
    if (!health.enabled) return;
    const host = this.app.hostnames[0] ?? 'localhost';
    this.liveness = setInterval(() => {
      if (this.state !== 'running' && this.state !== 'unhealthy') return;
      const port = this.port;
      if (port === null) return;
      void this.pausedNow().then(async (paused) => {
        if (paused) return; // a frozen replica cannot answer: not a failure
        const ok = await checkHealth(this.address, port, health.path, host, health.timeoutMs);
        if (this.stopping || this.port !== port || this.liveness === undefined) return;
        if (ok) {
          this.failures = 0;
          this.healthy = true;
          void this.dropSuccessor();
          if (this.state === 'unhealthy') {
            this.state = 'running';
            void this.deps.onChange();
          }
          return;
        }
        void this.countFailure();
      });
    }, health.intervalMs);
    this.liveness.unref();
  }

  /** Whether a backup has the application paused now (pause.ts); one whose backup died is let go. */
  private async pausedNow(): Promise<boolean> {
    const pause = await checkPause(this.deps.context, this.app.id).catch(() => 'running' as const);
    if (pause === 'released')
      this.deps.logs.add(this.name, 'system', 'let go of a pause left by a backup that is gone');
    return pause === 'paused';
  }

  /** A failed live check, unless the application was paused meanwhile (checked before and after). */
  private async countFailure(): Promise<void> {
    if ((await this.pausedNow()) || this.stopping || this.liveness === undefined) return;
    const { health } = this.app;
    this.failures += 1;
    this.healthy = false;
    if (this.state === 'running') {
      this.state = 'unhealthy';
      void this.deps.onChange();
    }
    if (this.failures >= health.failureThreshold) {
      const reason = `health check on ${health.path} failed ${this.failures} times in a row`;
      this.deps.logs.add(this.name, 'system', `${reason}; restarting`);
      this.deps.onEvent({ appId: this.app.id, kind: 'unhealthy', instance: this.name, message: reason });
      this.stopLiveness();
      void this.replace(reason);
    } else if (this.failures === 1) {
      this.prepareSuccessor();
    }
  }

  private stopLiveness(): void {
    if (this.liveness) clearInterval(this.liveness);
    this.liveness = undefined;
  }

  /** Starts a replacement beside the current process, used if the failures reach the threshold. */
  private prepareSuccessor(): void {
    if (this.successor || this.stopping || !this.current) return;
    const layout = this.deps.context.layout;
    const primary = layout.run(this.name);
    // Two run directories per replica: the current process's and its successor's.
    const runDir = this.current.runDir === primary ? layout.run(`${this.name}.next`) : primary;
    this.deps.logs.add(this.name, 'system', 'health check failed; starting a replacement beside it');
    this.successor = this.spawn(runDir).catch((error: unknown) => {
      this.deps.logs.add(this.name, 'system', `replacement did not start: ${(error as Error).message}`);
      return undefined;
    });
  }

  /** Stops a successor that is not needed (the replica recovered, crashed or is stopping). */
  private async dropSuccessor(): Promise<void> {
    const successor = this.successor;
    this.successor = undefined;
    const launch = await successor;
    if (launch) await this.terminate(launch, 0);
  }

  /** Replaces the process that failed its checks by its successor (else by a fresh one) and waits until it serves. */
  private async replace(reason: string): Promise<void> {
    const successor = this.successor;
    this.successor = undefined;
    const next = await successor;
    const old = this.current;
    this.current = undefined;
    this.port = null;
    this.state = 'restarting';
    void this.deps.onChange();
    if (this.stopping) {
      if (next) await this.terminate(next, 0);
      return;
    }
    if (old) await this.terminate(old, 0);
    if (!next || next.dead) {
      if (next) await this.terminate(next, 0);
      await this.restart(reason);
      return;
    }
    this.restarts.begin(reason);
    this.become(next);
    this.state = 'starting';
    this.healthy = null;
    // Started at the first failed check: usually ready by now, so the first probe passes.
    await this.serveAgain(reason);
  }

  /** Ends a process that is not (or no longer) the replica's: SIGTERM, SIGKILL after `drainMs`. */
  private async terminate(launch: Launch, drainMs: number): Promise<void> {
    const { process } = launch.launched;
    process.kill(drainMs > 0 ? 'SIGTERM' : 'SIGKILL');
    const killed = drainMs > 0 ? setTimeout(() => process.kill('SIGKILL'), drainMs) : undefined;
    await process.exited.catch(() => undefined);
    clearTimeout(killed);
    await launch.exited;
    await fs.rm(launch.runDir, { recursive: true, force: true });
    await removeOutput(this.deps.context.layout, launch.instance);
  }

  /**
   * Berth is stopping and leaves the replica running for the next Berth to adopt: no more checks or
   * restarts from this one, and its exit is no longer handled. A successor being prepared is stopped.
   */
  async detach(): Promise<void> {
    this.stopping = true;
    this.stopLiveness();
    this.restarts.cancel();
    await this.dropSuccessor();
  }

  /** What the next Berth needs to adopt this replica; undefined unless it serves. */
  record(): ReplicaRecord | undefined {
    const current = this.current;
    const sandbox = current?.launched.process.record();
    if (!current || !sandbox || current.dead) return undefined;
    if (this.state !== 'running' && this.state !== 'unhealthy') return undefined;
    return {
      name: this.name,
      release: this.release,
      instance: current.instance,
      port: current.port,
      runDir: current.runDir,
      restarts: this.restarts.count,
      startedAt: this.startedAt?.toISOString() ?? null,
      sandbox,
    };
  }

  /**
   * The replica an earlier Berth recorded, serving again under this one without a restart: it is
   * `running` at once (it served until now; the health checks judge it from here on). Undefined when
   * its process has ended.
   */
  static async adopt(record: ReplicaRecord, app: AppSpec, deps: ReplicaDeps): Promise<Replica | undefined> {
    const launched = await adoptLaunch(app, deps.context, record.instance, record.sandbox);
    if (!launched) return undefined;
    const replica = new Replica(record.name, record.release, app, deps);
    replica.launches = Number(/-(\d+)$/.exec(record.instance)?.[1] ?? 0);
    replica.become(replica.follow(launched, record.instance, record.port, record.runDir));
    replica.restarts.count = record.restarts;
    if (record.startedAt) replica.startedAt = new Date(record.startedAt);
    replica.state = 'running';
    replica.healthy = app.health.enabled ? true : null;
    return replica;
  }

  /** SIGTERM, then SIGKILL after `drainMs`; resolves when the process and its group are gone. */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    this.state = 'stopping';
    this.stopLiveness();
    this.restarts.cancel();
    const current = this.current;
    this.port = null;
    await Promise.all([this.dropSuccessor(), current ? this.terminate(current, drainMs) : undefined]);
  }

  status(): InstanceStatus {
    return {
      name: this.name,
      release: this.release,
      state: this.state,
      pid: this.pid,
      port: this.port,
      startedAt: this.startedAt?.toISOString() ?? null,
      restarts: this.restarts.count,
      lastRestartReason: this.restarts.lastReason,
      healthy: this.app.health.enabled ? this.healthy : null,
      memoryLimitBytes: this.app.memoryBytes,
    };
  }
}

export { RUN_MOUNT };
