// One replica of an application: a sandboxed process serving HTTP on its own loopback port, checked
// for health, restarted when it crashes (with backoff), when the kernel kills it for memory, or when
// its health check fails `failureThreshold` times in a row. With health checks disabled it is only
// restarted when it exits. Every restart is reported with its reason.
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { AppSpec, InstanceState, InstanceStatus, RuntimeEvent } from '../driver.js';
import { freePort } from '../../net/ports.js';
import { AppLogs } from './logs.js';
import { exitReason, launch, RUN_MOUNT, type LaunchContext, type Launched } from './processes.js';

const BACKOFF_START_MS = 1000;
const BACKOFF_CAP_MS = 30_000;
/** A replica that ran this long without trouble starts its backoff over. */
const STABLE_MS = 60_000;
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
  /** The replica's serving state changed: the routes are worked out again. */
  onChange(): void;
}

/** One health check: 200 on the path within the timeout (Ploi: anything else is a failure). */
export function checkHealth(port: number, path: string, host: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const request = http.get(
      { host: '127.0.0.1', port, path, headers: { host, 'user-agent': 'Berth-HealthCheck' }, agent: false },
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
function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port }, () => {
      socket.destroy();
      resolve(true);
    });
    socket.on('error', () => resolve(false));
  });
}

export class Replica {
  state: InstanceState = 'starting';
  port: number | null = null;
  restarts = 0;
  lastRestartReason: string | null = null;
  healthy: boolean | null = null;
  startedAt: Date | null = null;
  private launched: Launched | undefined;
  private generation = 0;
  private stopping = false;
  private failures = 0;
  private backoffMs = BACKOFF_START_MS;
  private liveness: NodeJS.Timeout | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** Why the process last ended by itself. */
  private exitReason: string | undefined;

  constructor(
    readonly name: string,
    readonly release: string,
    private app: AppSpec,
    private readonly deps: ReplicaDeps,
  ) {}

  get pid(): number | null {
    return this.launched?.process.pid ?? null;
  }

  /** Whether the edge may send it requests. */
  get serving(): boolean {
    return this.state === 'running' && this.port !== null;
  }

  /** The replica keeps the spec it started with; a new spec (secrets, settings) comes with a rollout. */
  async start(): Promise<void> {
    this.stopping = false;
    this.exitReason = undefined;
    this.generation += 1;
    const port = await freePort();
    const { command, env, files } = this.deps.command(this.app, port);
    const runDir = this.deps.context.layout.run(this.name);
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
    const launched = await launch(this.app, this.deps.context, {
      instance: `${this.name}-${this.generation}`,
      release: this.release,
      command,
      env,
      memoryBytes: this.app.memoryBytes,
      withVolumes: true,
      runDir,
    });
    this.launched = launched;
    this.port = port;
    this.state = 'starting';
    this.healthy = null;
    this.failures = 0;
    this.startedAt = new Date();
    const { logs } = this.deps;
    const out = AppLogs.splitter((line) => logs.add(this.name, 'stdout', line));
    const err = AppLogs.splitter((line) => logs.add(this.name, 'stderr', line));
    launched.process.stdout.on('data', (chunk: Buffer) => out.write(chunk));
    launched.process.stderr.on('data', (chunk: Buffer) => err.write(chunk));
    const generation = this.generation;
    this.exited = launched.process.exited.then(async (exit) => {
      out.end();
      err.end();
      // Read before the group goes: its OOM counter says whether the kernel killed it.
      const ended = await exitReason(launched, exit, this.app.memoryBytes).catch(() => undefined);
      await launched.group?.remove().catch(() => undefined);
      if (this.stopping || generation !== this.generation) return;
      this.onExit(ended?.reason ?? `exited with ${exit.code ?? exit.signal}`, ended?.oom ?? false);
    });
  }

  private onExit(reason: string, oom: boolean): void {
    this.exitReason = reason;
    this.stopLiveness();
    this.state = 'crashed';
    this.port = null;
    this.deps.onChange();
    const ranMs = this.startedAt ? Date.now() - this.startedAt.getTime() : 0;
    if (ranMs >= STABLE_MS) this.backoffMs = BACKOFF_START_MS;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(BACKOFF_CAP_MS, this.backoffMs * 2);
    this.deps.logs.add(this.name, 'system', `${reason}; restarting in ${delay / 1000} s`);
    this.deps.onEvent({
      appId: this.app.id,
      kind: oom ? 'oom_killed' : 'crashed',
      instance: this.name,
      message: reason,
    });
    this.restartTimer = setTimeout(() => void this.restart(reason), delay);
    this.restartTimer.unref();
  }

  /** Starts it again after a crash or failed checks, and serves once it is ready. */
  private async restart(reason: string): Promise<void> {
    if (this.stopping) return;
    this.restarts += 1;
    this.lastRestartReason = reason;
    this.state = 'restarting';
    try {
      await this.start();
      await this.waitReady(AbortSignal.timeout(10 * 60_000));
      this.deps.onEvent({ appId: this.app.id, kind: 'restarted', instance: this.name, message: reason });
      this.watch();
    } catch (error) {
      // It did not come up: its exit handler (or the next check) schedules the next attempt.
      if (!this.stopping && this.port !== null)
        this.deps.logs.add(this.name, 'system', `did not become ready: ${(error as Error).message}`);
    }
  }

  /** Resolves when the replica passes its readiness check; rejects when it exits or `signal` aborts. */
  async waitReady(signal: AbortSignal, log?: (line: string) => void): Promise<void> {
    const { health } = this.app;
    const host = this.app.hostnames[0] ?? 'localhost';
    let said = false;
    for (;;) {
      if (signal.aborted) throw signal.reason;
      if (this.state === 'crashed' || this.stopping || this.port === null)
        throw new Error(`${this.name} ${this.exitReason ?? 'stopped'} before it became ready`);
      const ok = health.enabled
        ? await checkHealth(this.port, health.path, host, health.timeoutMs)
        : await portOpen(this.port);
      if (ok && this.state === 'starting') {
        this.state = 'running';
        this.healthy = health.enabled ? true : null;
        log?.(`${this.name} is ready on port ${this.port}`);
        this.deps.onChange();
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
      void checkHealth(port, health.path, host, health.timeoutMs).then((ok) => {
        if (this.stopping || this.port !== port) return;
        if (ok) {
          this.failures = 0;
          this.healthy = true;
          if (this.state === 'unhealthy') {
            this.state = 'running';
            this.deps.onChange();
          }
          return;
        }
        this.failures += 1;
        this.healthy = false;
        if (this.state === 'running') {
          this.state = 'unhealthy';
          this.deps.onChange();
        }
        if (this.failures >= health.failureThreshold) {
          const reason = `health check on ${health.path} failed ${this.failures} times in a row`;
          this.deps.logs.add(this.name, 'system', `${reason}; restarting`);
          this.deps.onEvent({ appId: this.app.id, kind: 'unhealthy', instance: this.name, message: reason });
          this.stopLiveness();
          void this.kill().then(() => this.restart(reason));
        }
      });
    }, health.intervalMs);
    this.liveness.unref();
  }

  private stopLiveness(): void {
    if (this.liveness) clearInterval(this.liveness);
    this.liveness = undefined;
  }

  /** Kills the current process (for a restart), without reporting it as a crash. */
  private async kill(): Promise<void> {
    this.generation += 1;
    const launched = this.launched;
    this.port = null;
    this.state = 'restarting';
    this.deps.onChange();
    if (!launched) return;
    launched.process.kill('SIGKILL');
    await launched.process.exited.catch(() => undefined);
    await launched.group?.remove().catch(() => undefined);
  }

  /** SIGTERM, then SIGKILL after `drainMs`; resolves when the process and its group are gone. */
  async stop(drainMs: number): Promise<void> {
    this.stopping = true;
    this.state = 'stopping';
    this.stopLiveness();
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const launched = this.launched;
    this.port = null;
    if (!launched) return;
    launched.process.kill('SIGTERM');
    const killed = setTimeout(() => launched.process.kill('SIGKILL'), drainMs);
    await launched.process.exited.catch(() => undefined);
    clearTimeout(killed);
    await this.exited;
    await launched.group?.remove().catch(() => undefined);
    await fs.rm(this.deps.context.layout.run(this.name), { recursive: true, force: true });
  }

  status(): InstanceStatus {
    return {
      name: this.name,
      release: this.release,
      state: this.state,
      pid: this.pid,
      port: this.port,
      startedAt: this.startedAt?.toISOString() ?? null,
      restarts: this.restarts,
      lastRestartReason: this.lastRestartReason,
      healthy: this.app.health.enabled ? this.healthy : null,
      memoryLimitBytes: this.app.memoryBytes,
    };
  }
}

export { RUN_MOUNT };
