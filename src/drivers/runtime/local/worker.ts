// A `worker` service (docs/services.md): `command` running for as long as the release is live, in a
// fresh sandbox of it with the application's secrets, services and volumes, like a replica but with
// no port and no health check. It is restarted whenever it exits (with backoff, as a replica), and
// rolled with deployments: the new release's workers start when its replicas take the traffic, and
// the old ones get SIGTERM then (a queue worker finishes its job), SIGKILL after the drain time. Like
// a replica it outlives Berth, and the next Berth adopts it (WorkerRecord).
import type { AppSpec, InstanceState, InstanceStatus, RuntimeEvent } from '../driver.js';
import type { AppLogs } from './logs.js';
import {
  adoptLaunch,
  baseEnv,
  launch,
  removeOutput,
  type LaunchContext,
  type Launched,
} from './processes.js';
import { followProcess, Restarts } from './restarts.js';
import type { SandboxRecord } from './sandbox.js';

export interface WorkerDeps {
  context: LaunchContext;
  logs: AppLogs;
  onEvent(event: RuntimeEvent): void;
  /** A process of the worker started (the record for the next Berth changes). */
  onStarted(): void;
}

/** What the next Berth needs to adopt a running worker (processes.json). */
export interface WorkerRecord {
  name: string;
  release: string;
  instance: string;
  restarts: number;
  startedAt: string | null;
  sandbox: SandboxRecord;
}

export class Worker {
  state: InstanceState = 'starting';
  private startedAt: Date | null = null;
  private current: (Launched & { instance: string }) | undefined;
  /** Resolves once the current process has ended and its exit was handled. */
  private ended: Promise<void> = Promise.resolve();
  private launches = 0;
  private stopping = false;
  private readonly restarts: Restarts;

  /** `name` is the instance's: `worker-<service>`. */
  constructor(
    readonly name: string,
    readonly release: string,
    private readonly app: AppSpec,
    private readonly command: string,
    private readonly deps: WorkerDeps,
  ) {
    this.restarts = new Restarts({
      appId: app.id,
      name,
      logs: deps.logs,
      onEvent: (event) => deps.onEvent(event),
    });
  }

  /** Starts it; a start that fails is tried again with backoff, as an exit is. */
  run(): void {
    this.start().catch((error: unknown) => this.onExit(`did not start: ${(error as Error).message}`, false));
  }

  private async start(): Promise<void> {
    if (this.stopping) return;
    this.launches += 1;
    const instance = `${this.name}-${this.release}-${this.launches}`;
    const launched = await launch(this.app, this.deps.context, {
      instance,
      release: this.release,
      command: ['/bin/sh', '-c', this.command],
      env: { ...baseEnv(this.app), ...this.app.env },
      memoryBytes: this.app.memoryBytes,
      withVolumes: true,
      outlivesBerth: true,
    });
    // stop() came while the sandbox was being set up.
    if (this.stopping) launched.process.kill('SIGKILL');
    this.follow({ ...launched, instance });
    this.startedAt = new Date();
    this.deps.onStarted();
  }

  /** Makes `launched` the worker's process: its output logged, its exit handled. */
  private follow(launched: Launched & { instance: string }): void {
    this.current = launched;
    this.state = 'running';
    const ended = followProcess(launched, this.deps.logs, this.name, this.app.memoryBytes);
    this.ended = ended.then(async ({ reason, oom }) => {
      await removeOutput(this.deps.context.layout, launched.instance).catch(() => undefined);
      if (this.current === launched) this.current = undefined;
      if (this.stopping) return;
      this.onExit(reason, oom);
    });
  }

  private onExit(reason: string, oom: boolean): void {
    if (this.stopping) return;
    this.state = 'crashed';
    this.restarts.crashed(reason, oom, this.startedAt, (why) => void this.restart(why));
  }

  private async restart(reason: string): Promise<void> {
    if (this.stopping) return;
    this.restarts.begin(reason);
    this.state = 'restarting';
    try {
      await this.start();
      this.restarts.done(reason);
    } catch (error) {
      // It could not even start (the release is gone, the sandbox failed): try again later.
      this.onExit(`did not start: ${(error as Error).message}`, false);
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process and its group are gone. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    this.state = 'stopping';
    this.restarts.cancel();
    const process = this.current?.process;
    if (process) {
      process.kill(graceMs > 0 ? 'SIGTERM' : 'SIGKILL');
      const killer = graceMs > 0 ? setTimeout(() => process.kill('SIGKILL'), graceMs) : undefined;
      await process.exited.catch(() => undefined);
      clearTimeout(killer);
    }
    await this.ended;
  }

  /** Berth stops and leaves the worker running for the next Berth: no more restarts from this one. */
  detach(): void {
    this.stopping = true;
    this.restarts.cancel();
  }

  /** What the next Berth needs to adopt this worker; undefined unless it runs. */
  record(): WorkerRecord | undefined {
    const sandbox = this.current?.process.record();
    if (!this.current || !sandbox || this.state !== 'running') return undefined;
    return {
      name: this.name,
      release: this.release,
      instance: this.current.instance,
      restarts: this.restarts.count,
      startedAt: this.startedAt?.toISOString() ?? null,
      sandbox,
    };
  }

  /** The worker an earlier Berth recorded, running on under this one; undefined when it has ended. */
  static async adopt(
    record: WorkerRecord,
    app: AppSpec,
    command: string,
    deps: WorkerDeps,
  ): Promise<Worker | undefined> {
    const launched = await adoptLaunch(app, deps.context, record.instance, record.sandbox);
    if (!launched) return undefined;
    const worker = new Worker(record.name, record.release, app, command, deps);
    worker.launches = Number(/-(\d+)$/.exec(record.instance)?.[1] ?? 0);
    worker.restarts.count = record.restarts;
    worker.startedAt = record.startedAt ? new Date(record.startedAt) : new Date();
    worker.follow({ ...launched, instance: record.instance });
    return worker;
  }

  status(): InstanceStatus {
    return {
      name: this.name,
      release: this.release,
      state: this.state,
      pid: this.current?.process.pid ?? null,
      port: null,
      startedAt: this.startedAt?.toISOString() ?? null,
      restarts: this.restarts.count,
      lastRestartReason: this.restarts.lastReason,
      healthy: null,
      memoryLimitBytes: this.app.memoryBytes,
    };
  }
}
