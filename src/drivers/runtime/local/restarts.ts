// What a replica and a worker share about a process that ends by itself: its output logged, why it
// ended (the kernel's OOM kill told apart), the crash reported, and the restart after a backoff,
// counted with its reason for the status. What each does around it (a replica's edge route and health
// checks, a worker's output files) stays with it.
import type { RuntimeEvent } from '../driver.js';
import { AppLogs } from './logs.js';
import { exitReason, type Launched } from './processes.js';

/**
 * How long a process that ended by itself waits before it is started again: 1 s, doubling up to 30 s
 * while it keeps failing; one that ran a minute without trouble starts over at 1 s.
 */
class RestartBackoff {
  private static readonly START_MS = 1000;
  private static readonly CAP_MS = 30_000;
  private static readonly STABLE_MS = 60_000;
  private nextMs = RestartBackoff.START_MS;

  /** The delay before the next start of a process that ran `ranMs`. */
  next(ranMs: number): number {
    if (ranMs >= RestartBackoff.STABLE_MS) this.nextMs = RestartBackoff.START_MS;
    const delay = this.nextMs;
    this.nextMs = Math.min(RestartBackoff.CAP_MS, this.nextMs * 2);
    return delay;
  }
}

/**
 * Logs the output of `launched` as `name`'s; resolves once it has exited, its memory group removed,
 * with why it ended in the words the status and events show.
 */
export function followProcess(
  launched: Launched,
  logs: AppLogs,
  name: string,
  memoryBytes: number,
): Promise<{ reason: string; oom: boolean }> {
  const out = AppLogs.splitter((line) => logs.add(name, 'stdout', line));
  const err = AppLogs.splitter((line) => logs.add(name, 'stderr', line));
  launched.process.stdout.on('data', (chunk: Buffer) => out.write(chunk));
  launched.process.stderr.on('data', (chunk: Buffer) => err.write(chunk));
  return launched.process.exited.then(async (exit) => {
    out.end();
    err.end();
    // Read before the group goes: its OOM counter says whether the kernel killed it.
    const ended = await exitReason(launched, exit, memoryBytes).catch(() => undefined);
    await launched.group?.remove().catch(() => undefined);
    return { reason: ended?.reason ?? `exited with ${exit.code ?? exit.signal}`, oom: ended?.oom ?? false };
  });
}

/** The restarts of one instance (a replica, a worker): the backoff, the pending restart, the count. */
export class Restarts {
  count = 0;
  lastReason: string | null = null;
  private readonly backoff = new RestartBackoff();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly instance: {
      appId: RuntimeEvent['appId'];
      name: string;
      logs: AppLogs;
      onEvent: (event: RuntimeEvent) => void;
    },
  ) {}

  /**
   * The process, started at `startedAt`, ended by itself for `reason`: logged and reported (`oom_killed`
   * when the kernel killed it for memory, else `crashed`), and `restart` called after the backoff.
   */
  crashed(reason: string, oom: boolean, startedAt: Date | null, restart: (reason: string) => void): void {
    const { appId, name, logs } = this.instance;
    const ranMs = startedAt ? Date.now() - startedAt.getTime() : 0;
    const delay = this.backoff.next(ranMs);
    logs.add(name, 'system', `${reason}; restarting in ${delay / 1000} s`);
    this.instance.onEvent({ appId, kind: oom ? 'oom_killed' : 'crashed', instance: name, message: reason });
    this.timer = setTimeout(() => restart(reason), delay);
    this.timer.unref();
  }

  /** A restart for `reason` begins: counted, and its reason kept for the status. */
  begin(reason: string): void {
    this.count += 1;
    this.lastReason = reason;
  }

  /** The restarted process runs (a replica: serves) again. */
  done(reason: string): void {
    const { appId, name } = this.instance;
    this.instance.onEvent({ appId, kind: 'restarted', instance: name, message: reason });
  }

  /** No restart from here on (the instance stops, or is left to the next Berth). */
  cancel(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
