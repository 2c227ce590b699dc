// An application's process output: the newest lines in memory for `logs` and `follow`, and every
// line appended to a size-capped file (one rotation kept), so the tail survives a restart of Berth.
// Lines are cut at 4 KiB; a replica that prints without newlines is cut into lines of that size.
import fs from 'node:fs';
import path from 'node:path';
import type { LogLine } from '../driver.js';

const MEMORY_LINES = 5000;
const FILE_BYTES = 5 * 1024 * 1024;
const LINE_BYTES = 4096;

export class AppLogs {
  private readonly lines: LogLine[] = [];
  private readonly listeners = new Set<(line: LogLine) => void>();
  private fileBytes: number | undefined;
  private loaded = false;

  constructor(
    private readonly dir: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  private get file(): string {
    return path.join(this.dir, 'app.log');
  }

  /** Splits a chunk of a process's output into lines (the caller keeps the partial last line). */
  static splitter(onLine: (line: string) => void): { write(chunk: Buffer | string): void; end(): void } {
    let partial = '';
    return {
      write(chunk) {
        partial += chunk.toString();
        let newline: number;
        while ((newline = partial.indexOf('\n')) >= 0) {
          onLine(partial.slice(0, newline).replace(/\r$/, '').slice(0, LINE_BYTES));
          partial = partial.slice(newline + 1);
        }
        while (partial.length > LINE_BYTES) {
          onLine(partial.slice(0, LINE_BYTES));
          partial = partial.slice(LINE_BYTES);
        }
      },
      end() {
        if (partial !== '') onLine(partial);
        partial = '';
      },
    };
  }

  add(source: string, stream: LogLine['stream'], text: string): void {
    const line: LogLine = { at: this.now().toISOString(), source, stream, line: text };
    this.lines.push(line);
    if (this.lines.length > MEMORY_LINES) this.lines.splice(0, this.lines.length - MEMORY_LINES);
    this.append(line);
    for (const listener of this.listeners) listener(line);
  }

  private append(line: LogLine): void {
    const text = `${JSON.stringify(line)}\n`;
    try {
      if (this.fileBytes === undefined) {
        fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        this.fileBytes = fs.existsSync(this.file) ? fs.statSync(this.file).size : 0;
      }
      if (this.fileBytes + text.length > FILE_BYTES) {
        fs.renameSync(this.file, `${this.file}.1`);
        this.fileBytes = 0;
      }
      fs.appendFileSync(this.file, text, { mode: 0o600 });
      this.fileBytes += Buffer.byteLength(text);
    } catch {
      // A full disk must not stop the application; the memory copy still has the line.
    }
  }

  /** After a restart of Berth, the memory copy starts from the file's newest lines. */
  private load(): void {
    if (this.loaded) return;
    this.loaded = true;
    if (this.lines.length > 0) return;
    for (const file of [`${this.file}.1`, this.file]) {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch {
        continue;
      }
      for (const raw of text.split('\n')) {
        if (raw === '') continue;
        try {
          this.lines.push(JSON.parse(raw) as LogLine);
        } catch {
          // A line cut by a crash mid-write.
        }
      }
    }
    if (this.lines.length > MEMORY_LINES) this.lines.splice(0, this.lines.length - MEMORY_LINES);
  }

  tail(count: number, since?: Date): LogLine[] {
    this.load();
    const from = since?.toISOString();
    const selected = from === undefined ? this.lines : this.lines.filter((l) => l.at >= from);
    return selected.slice(Math.max(0, selected.length - count));
  }

  follow(listener: (line: LogLine) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
