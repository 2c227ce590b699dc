// Laravel's scheduler: `php artisan schedule:run` once a minute, at the start of each minute, in a
// fresh sandbox of the live release with the application's secrets — on this one timer only, so it
// runs once however many replicas there are, and never twice at once (a run still going when the next
// minute starts makes that minute skip, as `withoutOverlapping` would).
import type { AppSpec, InstanceStatus } from '../driver.js';
import { AppLogs } from './logs.js';
import { baseEnv, launch, type LaunchContext } from './processes.js';

const COMMAND = 'php artisan schedule:run --no-interaction';

export class Scheduler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
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
    const untilNext = this.periodMs - (Date.now() % this.periodMs);
    this.timer = setTimeout(() => {
      this.tick();
      this.timer = setInterval(() => this.tick(), this.periodMs);
      this.timer.unref();
    }, untilNext);
    this.timer.unref();
  }

  private tick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.logs.add('scheduler', 'system', 'previous schedule:run still running; this minute is skipped');
      return;
    }
    this.running = this.runOnce().finally(() => {
      this.running = undefined;
    });
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
      const out = AppLogs.splitter((line) => this.logs.add('scheduler', 'stdout', line));
      launched.process.stdout.on('data', (chunk: Buffer) => out.write(chunk));
      launched.process.stderr.on('data', (chunk: Buffer) => out.write(chunk));
      const exit = await launched.process.exited;
      out.end();
      await launched.group?.remove().catch(() => undefined);
      this.lastResult = exit.code === 0 ? 'ok' : `exited with ${exit.code ?? exit.signal}`;
    } catch (error) {
      this.lastResult = `did not start: ${(error as Error).message}`;
      this.logs.add('scheduler', 'system', this.lastResult);
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.timer) clearInterval(this.timer);
  }

  status(): InstanceStatus {
    return {
      name: 'scheduler',
      release: this.release,
      state: this.running ? 'running' : 'idle',
      pid: null,
      port: null,
      startedAt: this.lastRun,
      restarts: 0,
      lastRestartReason: this.lastResult,
      healthy: null,
      memoryLimitBytes: this.app.memoryBytes,
    };
  }
}
