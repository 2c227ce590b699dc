// Laravel's scheduler: `php artisan schedule:run` once a minute, at the start of each minute, in a
// fresh sandbox of the live release with the application's secrets — on this one timer only, so it
// runs once however many replicas there are, and never twice at once (a run still going when the next
// minute starts makes that minute skip, as `withoutOverlapping` would), not even across a deployment:
// the new release's scheduler skips while the old one's last run finishes.
import { finished } from 'node:stream/promises';
import type { AppSpec, InstanceStatus } from '../driver.js';
import { AppLogs } from './logs.js';
import { baseEnv, exitReason, launch, type LaunchContext } from './processes.js';
import type { SandboxedProcess } from './sandbox.js';

const COMMAND = 'php artisan schedule:run --no-interaction';
/** How long a run gets after SIGTERM when the scheduler is terminated, before SIGKILL. */
const TERMINATE_GRACE_MS = 10_000;

/**
 * The run in progress of each application (by its directory, unique per data dir), whichever
 * scheduler started it: a deployment replaces the scheduler while a run may still be going.
 */
const inProgress = new Map<string, Promise<void>>();

export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  /** This scheduler's run in progress. */
  private running: Promise<void> | undefined;
  private process: SandboxedProcess | undefined;
  private stopped = false;
  private terminating = false;
  private runs = 0;
  private lastRun: string | null = null;
  private lastResult: string | null = null;

  constructor(
    private readonly app: AppSpec,
    private readonly release: string,
    private readonly context: LaunchContext,
    private readonly logs: AppLogs,
    private readonly periodMs = 60_000,
  ) {}

  start(): void {
    if (this.timer || this.stopped) return;
    this.schedule();
  }

  /**
   * The next tick at the next multiple of the period (the start of a minute), worked out again after
   * every tick: an interval timer drifts a little later each time, and one minute would be skipped.
   */
  private schedule(): void {
    const due = (Math.floor(Date.now() / this.periodMs) + 1) * this.periodMs;
    const wait = (): void => {
      const left = due - Date.now();
      // A timer may fire before the wall clock reaches the minute (the clocks differ): schedule:run
      // would see the minute before, and run its tasks twice.
      if (left > 0) {
        this.timer = setTimeout(wait, left);
        this.timer.unref();
        return;
      }
      this.tick();
      if (!this.stopped) this.schedule();
    };
    wait();
  }

  private tick(): void {
    if (this.stopped) return;
    const key = this.context.layout.root;
    if (inProgress.has(key)) {
      this.logs.add('scheduler', 'system', 'previous schedule:run still running; this minute is skipped');
      return;
    }
    const run: Promise<void> = this.runOnce().finally(() => {
      if (inProgress.get(key) === run) inProgress.delete(key);
      if (this.running === run) this.running = undefined;
    });
    inProgress.set(key, run);
    this.running = run;
  }

  private async runOnce(): Promise<void> {
    this.runs += 1;
    this.lastRun = new Date().toISOString();
    try {
      const launched = await launch(this.app, this.context, {
        instance: `scheduler-${this.runs}`,
        release: this.release,
        command: ['/bin/sh', '-c', COMMAND],
        env: { ...baseEnv(this.app), ...this.app.env },
        memoryBytes: this.app.memoryBytes,
        withVolumes: true,
      });
      const { process } = launched;
      this.process = process;
      // terminate() came while the sandbox was being set up.
      if (this.terminating) process.kill('SIGKILL');
      // One splitter per stream: chunks of both interleave, and one would glue their partial lines.
      const out = AppLogs.splitter((line) => this.logs.add('scheduler', 'stdout', line));
      const err = AppLogs.splitter((line) => this.logs.add('scheduler', 'stderr', line));
      process.stdout.on('data', (chunk: Buffer) => out.write(chunk));
      process.stderr.on('data', (chunk: Buffer) => err.write(chunk));
      // The exit may come before the last output: the run is over when both streams are.
      const drained = Promise.all([
        finished(process.stdout, { writable: false }).catch(() => undefined),
        finished(process.stderr, { writable: false }).catch(() => undefined),
      ]);
      const exit = await process.exited;
      await drained;
      out.end();
      err.end();
      // Read before the group goes: its OOM counter says whether the kernel killed the run.
      const ended = await exitReason(launched, exit, this.app.memoryBytes).catch(() => undefined);
      await launched.group?.remove().catch(() => undefined);
      this.lastResult = exit.code === 0 ? 'ok' : (ended?.reason ?? `exited with ${exit.code ?? exit.signal}`);
      if (exit.code !== 0) this.logs.add('scheduler', 'system', `schedule:run ${this.lastResult}`);
    } catch (error) {
      this.lastResult = `did not start: ${(error as Error).message}`;
      this.logs.add('scheduler', 'system', this.lastResult);
    } finally {
      this.process = undefined;
    }
  }

  /**
   * No run starts any more. A run in progress finishes: when a deployment replaces the scheduler, a
   * task is not cut off halfway (the new scheduler skips until it is over).
   */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * Stops the scheduler and ends its run in progress (SIGTERM, SIGKILL after `graceMs`), for a suspend
   * or a removal; resolves once the run and its memory group are gone.
   */
  async terminate(graceMs = TERMINATE_GRACE_MS): Promise<void> {
    this.stop();
    this.terminating = true;
    const running = this.running;
    if (!running) return;
    this.process?.kill('SIGTERM');
    const killer = setTimeout(() => this.process?.kill('SIGKILL'), graceMs);
    try {
      await running;
    } finally {
      clearTimeout(killer);
    }
  }

  status(): InstanceStatus {
    return {
      name: 'scheduler',
      release: this.release,
      state: this.running ? 'running' : 'idle',
      pid: this.process?.pid ?? null,
      port: null,
      startedAt: this.lastRun,
      restarts: 0,
      lastRestartReason: this.lastResult,
      healthy: null,
      memoryLimitBytes: this.app.memoryBytes,
    };
  }
}
