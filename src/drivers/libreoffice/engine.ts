// Office → PDF with warm LibreOffice listeners (Debian's -nogui packages).
// Each listener is a persistent /usr/bin/python3 UNO worker, driven over JSON lines, that starts its own
// `soffice --accept=pipe…` with its own profile; both run in one bubblewrap jail (./sandbox.ts) without
// network and with a file system limited to their profile and the listener's job directory. A listener
// serves one job at a time, is recycled after N jobs (its memory grows) and restarted after a crash. Each
// job works in its own temp directory (LibreOffice writes a lock file beside its input). If no listener can
// be used, a cold `soffice --convert-to pdf` runs, jailed the same way.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { processTree } from '../os/processes.js';
import type { SystemAccount } from '../os/users.js';
import { BWRAP_PATH, handOver, officeAccount, prepareProfile, sandboxArgs } from './sandbox.js';
import { UNO_WORKER_PY } from './worker-script.js';

export const SOFFICE_PATH = '/usr/lib/libreoffice/program/soffice';
export const PYTHON_PATH = '/usr/bin/python3';

/** LibreOffice could not read the file (not a document of its type). Mapped to 422. */
export class UnreadableDocumentError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnreadableDocumentError';
  }
}

export class OfficeEngineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OfficeEngineError';
  }
}

export interface OfficeOptions {
  listeners: number;
  jobTimeoutMs: number;
  maxJobsPerListener: number;
  startTimeoutMs: number;
  /** Where profiles and job directories live. */
  workDir?: string;
}

/** What a conversion may ask beyond the format (the warm listeners honour it; the cold fallback does not). */
export interface OfficeConvertOptions {
  /** Every page style turned to landscape (its width and height swapped). */
  landscape?: boolean;
  /** LibreOffice's page range (`1-3,5`). */
  pageRanges?: string;
}

export interface OfficeStatus {
  status: 'idle' | 'starting' | 'ready' | 'failed';
  listeners: number;
  jobs: number;
  coldConversions: number;
  failures: number;
  restarts: number;
  lastError: string | null;
}

/** Import options for formats whose defaults are ambiguous. */
const IMPORT_FILTERS: Record<string, { filter: string; filterOptions: string }> = {
  // comma separator, double quotes, UTF-8, from line 1
  csv: { filter: 'Text - txt - csv (StarCalc)', filterOptions: '44,34,76,1' },
};

/**
 * Kills a jailed process. The namespace's init goes first: the kernel kills everything in its namespace
 * and bwrap exits only once they are all gone, so its 'exit' means nothing writes to the profile any
 * more (killing bwrap first left soffice writing while its profile was removed). bwrap's group goes
 * when there is no init yet (bwrap still setting up).
 */
function killGroup(child: ChildProcess | undefined): void {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const inits = processTree().get(child.pid) ?? [];
  for (const init of inits) {
    try {
      process.kill(init, 'SIGKILL');
    } catch {
      // It ended meanwhile.
    }
  }
  if (inits.length > 0) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

function runAs(account: SystemAccount | undefined): { uid?: number; gid?: number } {
  return account ? { uid: account.uid, gid: account.gid } : {};
}

interface Pending {
  resolve: (answer: { ok: boolean; unreadable?: boolean; error?: string }) => void;
  reject: (error: Error) => void;
}

class Listener {
  jobs = 0;
  dead = false;
  private worker: ChildProcess | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;

  constructor(
    readonly profileDir: string,
    /** The only place this listener's jobs live; bound read-write into its jail. */
    readonly jobsDir: string,
    private readonly startTimeoutMs: number,
    private readonly account: SystemAccount | undefined,
  ) {}

  async start(): Promise<void> {
    await prepareProfile(this.profileDir, this.account);
    await fs.mkdir(this.jobsDir, { recursive: true, mode: 0o700 });
    await handOver(this.account, this.jobsDir);
    this.worker = spawn(
      BWRAP_PATH,
      sandboxArgs(
        [this.profileDir, this.jobsDir],
        [PYTHON_PATH, '-c', UNO_WORKER_PY, SOFFICE_PATH, `file://${this.profileDir}`],
      ),
      { stdio: ['pipe', 'pipe', 'ignore'], detached: true, ...runAs(this.account) },
    );
    this.worker.on('exit', () => this.die(new OfficeEngineError('the UNO worker exited')));
    const lines = readline.createInterface({ input: this.worker.stdout! });
    const ready = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new OfficeEngineError('LibreOffice did not start in time')),
        this.startTimeoutMs,
      );
      lines.on('line', (line) => {
        let message: { ready?: boolean; id?: number; ok?: boolean; unreadable?: boolean; error?: string };
        try {
          message = JSON.parse(line) as typeof message;
        } catch {
          return;
        }
        if (message.ready !== undefined) {
          clearTimeout(timer);
          if (message.ready) resolve();
          else reject(new OfficeEngineError(`LibreOffice did not start: ${message.error ?? ''}`));
          return;
        }
        const waiting = message.id === undefined ? undefined : this.pending.get(message.id);
        if (!waiting || message.id === undefined) return;
        this.pending.delete(message.id);
        waiting.resolve({
          ok: message.ok === true,
          ...(message.unreadable ? { unreadable: true } : {}),
          ...(message.error ? { error: message.error } : {}),
        });
      });
      this.worker!.on('exit', () => {
        clearTimeout(timer);
        reject(new OfficeEngineError('LibreOffice did not start'));
      });
    });
    try {
      await ready;
    } catch (error) {
      this.stop();
      throw error;
    }
  }

  convert(
    input: string,
    output: string,
    extension: string,
    options: OfficeConvertOptions = {},
  ): Promise<{ ok: boolean; unreadable?: boolean; error?: string }> {
    if (this.dead || !this.worker?.stdin) return Promise.reject(new OfficeEngineError('listener is down'));
    const id = this.nextId++;
    this.jobs += 1;
    const extra = IMPORT_FILTERS[extension] ?? {};
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker!.stdin!.write(
        `${JSON.stringify({
          id,
          input,
          output,
          ...extra,
          ...(options.landscape ? { landscape: true } : {}),
          ...(options.pageRanges ? { pageRanges: options.pageRanges } : {}),
        })}\n`,
      );
    });
  }

  private die(error: Error): void {
    if (this.dead) return;
    this.dead = true;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
    killGroup(this.worker);
  }

  stop(): void {
    this.die(new OfficeEngineError('LibreOffice was stopped'));
  }

  /** Stops the listener and removes its profile and job directories once its processes are gone. */
  async dispose(): Promise<void> {
    const worker = this.worker;
    this.stop();
    if (worker && worker.exitCode === null && worker.signalCode === null) {
      await Promise.race([
        once(worker, 'exit'),
        new Promise((resolve) => setTimeout(resolve, 5_000).unref()),
      ]);
    }
    for (const dir of [this.profileDir, this.jobsDir])
      await fs.rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

export class OfficeEngine {
  private readonly free: Listener[] = [];
  private readonly waiters: Array<(listener: Listener | undefined) => void> = [];
  private count = 0;
  private closed = false;
  private readonly workDir: Promise<string>;
  private account: SystemAccount | undefined;
  private coldChain: Promise<unknown> = Promise.resolve();
  private listenerSeq = 0;
  private readonly stats: OfficeStatus = {
    status: 'idle',
    listeners: 0,
    jobs: 0,
    coldConversions: 0,
    failures: 0,
    restarts: 0,
    lastError: null,
  };
  private readonly live = new Set<Listener>();

  constructor(private readonly options: OfficeOptions) {
    this.workDir = (async () => {
      const root = await fs.mkdtemp(path.join(options.workDir ?? os.tmpdir(), 'berth-office-'));
      // The office account must reach its profiles and job directories under this 0700 directory.
      this.account = officeAccount();
      await handOver(this.account, root);
      return root;
    })();
    // A rejected mkdtemp is reported by convert(); do not crash the process meanwhile.
    this.workDir.catch(() => undefined);
  }

  status(): OfficeStatus {
    return { ...this.stats, listeners: this.live.size };
  }

  /** Converts one document to PDF. `extension` is lower case, without the dot. */
  async convert(bytes: Buffer, extension: string, options: OfficeConvertOptions = {}): Promise<Buffer> {
    if (this.closed) throw new OfficeEngineError('the office engine is stopped');
    this.stats.jobs += 1;
    const root = await this.workDir;
    const listener = await this.acquire();
    // The job's directory sits in the jailed listener's own job directory (it sees no other job's files).
    const jobDir = await fs.mkdtemp(path.join(listener?.jobsDir ?? root, 'job-'));
    const input = path.join(jobDir, `document.${extension}`);
    const output = path.join(jobDir, 'document.pdf');
    try {
      await fs.writeFile(input, bytes, { mode: 0o600 });
      await handOver(this.account, jobDir, input);
      if (listener) {
        let timer: NodeJS.Timeout | undefined;
        try {
          const answer = await Promise.race([
            listener.convert(input, output, extension, options),
            new Promise<never>((_resolve, reject) => {
              timer = setTimeout(
                () =>
                  reject(
                    new OfficeEngineError(
                      `the conversion did not finish within ${this.options.jobTimeoutMs} ms`,
                    ),
                  ),
                this.options.jobTimeoutMs,
              );
            }),
          ]);
          if (answer.unreadable)
            throw new UnreadableDocumentError(`the file could not be read as .${extension}`);
          if (!answer.ok) throw new OfficeEngineError(answer.error ?? 'the conversion failed');
          return await fs.readFile(output);
        } catch (error) {
          if (!(error instanceof UnreadableDocumentError)) {
            // A listener that failed a job is not trusted with the next one.
            listener.stop();
            this.note(error);
            if (error instanceof OfficeEngineError && /did not finish/.test(error.message)) throw error;
            // Crashed under this job: try once the cold way, which has its own process and profile.
            return await this.convertCold(input, jobDir);
          }
          throw error;
        } finally {
          clearTimeout(timer);
          this.release(listener);
        }
      }
      return await this.convertCold(input, jobDir);
    } finally {
      await fs.rm(jobDir, { recursive: true, force: true }).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const listener of this.live) listener.stop();
    this.live.clear();
    for (const waiter of this.waiters.splice(0)) waiter(undefined);
    await this.coldChain.catch(() => undefined);
    const root = await this.workDir.catch(() => undefined);
    if (root) await fs.rm(root, { recursive: true, force: true }).catch(() => undefined);
    this.stats.status = 'idle';
  }

  /** Kills every listener (tests check that the engine recovers). */
  crashForTest(): void {
    for (const listener of this.live) listener.stop();
  }

  private note(error: unknown): void {
    this.stats.failures += 1;
    this.stats.lastError = error instanceof Error ? error.message.slice(0, 300) : String(error);
  }

  /** A warm listener, or undefined when none can be started (the caller falls back to cold). */
  private async acquire(): Promise<Listener | undefined> {
    // No listeners configured: every job runs the cold way.
    if (this.options.listeners <= 0) return undefined;
    while (this.free.length > 0) {
      const listener = this.free.pop()!;
      if (!listener.dead) return listener;
      // It crashed while idle: replaced below.
      this.forget(listener);
      void listener.dispose();
      this.stats.restarts += 1;
    }
    if (this.count < this.options.listeners) {
      this.count += 1;
      const listener = await this.startListener();
      if (!listener) this.count -= 1;
      return listener;
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private release(listener: Listener): void {
    const worn = listener.dead || listener.jobs >= this.options.maxJobsPerListener || this.closed;
    if (!worn) {
      this.handOut(listener);
      return;
    }
    this.forget(listener);
    // A worn listener's profile would pile up under the work directory for as long as Berth runs.
    void listener.dispose();
    if (this.closed) return;
    this.stats.restarts += 1;
    // Its replacement starts now rather than when the next job arrives, so that job finds it warm.
    this.count += 1;
    void this.startListener().then((next) => {
      if (next) {
        this.handOut(next);
        return;
      }
      this.count -= 1;
      // No listener could start: whoever waits converts the cold way instead of waiting for ever.
      for (const waiter of this.waiters.splice(0)) waiter(undefined);
    });
  }

  private handOut(listener: Listener): void {
    const waiter = this.waiters.shift();
    if (waiter) waiter(listener);
    else this.free.push(listener);
  }

  private forget(listener: Listener): void {
    if (this.live.delete(listener)) this.count -= 1;
  }

  private async startListener(): Promise<Listener | undefined> {
    const root = await this.workDir;
    this.listenerSeq += 1;
    // A fresh profile per listener start: a crashed office can leave its profile locked or damaged.
    const listener = new Listener(
      path.join(root, `profile-${this.listenerSeq}`),
      path.join(root, `jobs-${this.listenerSeq}`),
      this.options.startTimeoutMs,
      this.account,
    );
    if (this.stats.status !== 'ready') this.stats.status = 'starting';
    try {
      await listener.start();
      if (this.closed) {
        void listener.dispose();
        return undefined;
      }
      // count already includes this listener; live tracks it for forget().
      this.live.add(listener);
      this.stats.status = 'ready';
      return listener;
    } catch (error) {
      void listener.dispose();
      this.note(error);
      this.stats.status = this.live.size > 0 ? 'ready' : 'failed';
      return undefined;
    }
  }

  /** `soffice --convert-to pdf` in its own jailed process and profile, one at a time. */
  private convertCold(input: string, jobDir: string): Promise<Buffer> {
    const run = this.coldChain.then(async () => {
      this.stats.coldConversions += 1;
      const root = await this.workDir;
      const profile = path.join(root, 'profile-cold');
      await prepareProfile(profile, this.account);
      const child = spawn(
        BWRAP_PATH,
        sandboxArgs(
          [profile, jobDir],
          [
            SOFFICE_PATH,
            `-env:UserInstallation=file://${profile}`,
            '--headless',
            '--norestore',
            '--convert-to',
            'pdf',
            '--outdir',
            path.join(jobDir, 'cold'),
            // soffice knows no `--`; the input is Berth's own absolute path (`/…/document.ext`).
            input,
          ],
        ),
        { stdio: 'ignore', detached: true, ...runAs(this.account) },
      );
      const timer = setTimeout(() => killGroup(child), this.options.jobTimeoutMs);
      try {
        const [code] = (await once(child, 'exit')) as [number | null];
        const out = path.join(jobDir, 'cold', `${path.parse(input).name}.pdf`);
        const pdf = await fs.readFile(out).catch(() => undefined);
        if (code !== 0 || !pdf) throw new OfficeEngineError('LibreOffice could not convert the document');
        return pdf;
      } finally {
        clearTimeout(timer);
      }
    });
    this.coldChain = run.catch(() => undefined);
    return run;
  }
}
