// What the client prints: colour only on a terminal and never with NO_COLOR, spinners only on a
// terminal, tables for people, JSON for scripts.
import type { WriteStream } from 'node:tty';

export type Format = 'human' | 'json';

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
} as const;
export type Style = keyof typeof CODES;

export function colourEnabled(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.TERM === 'dumb') return false;
  return stream.isTTY === true;
}

export interface Painter {
  (style: Style, text: string): string;
  enabled: boolean;
}

/** Strings this process coloured: a table passes them through, and escapes every other cell. */
const PAINTED = new Set<string>();

export function painter(stream: NodeJS.WriteStream): Painter {
  const enabled = colourEnabled(stream);
  const paint = ((style: Style, text: string) => {
    if (!enabled) return text;
    const [open, close] = CODES[style];
    const painted = `\u001b[${open}m${text}\u001b[${close}m`;
    PAINTED.add(painted);
    return painted;
  }) as Painter;
  paint.enabled = enabled;
  return paint;
}

export const out = painter(process.stdout);
export const err = painter(process.stderr);

export function print(text = ''): void {
  process.stdout.write(text + '\n');
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + '\n');
}

/** A control character or escape from the server is shown, never interpreted by the terminal. */
export function clean(value: unknown): string {
  if (value === null || value === undefined) return '';
  const text =
    typeof value === 'string'
      ? value
      : typeof value === 'number' || typeof value === 'boolean'
        ? String(value)
        : JSON.stringify(value);
  return text.replace(
    /[\u0000-\u0008\u000b-\u001f\u007f\u009b]/g,
    (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
}

const visible = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, '').length;

/** A plain table: a header row in bold, columns padded, no borders. */
export function table(headers: string[], rows: unknown[][]): string {
  const cells = rows.map((row) =>
    row.map((cell) => (typeof cell === 'string' && PAINTED.has(cell) ? cell : clean(cell))),
  );
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((row) => visible(row[i] ?? ''))));
  const line = (row: string[]) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - visible(cell))))
      .join('  ')
      .trimEnd();
  return [out('bold', line(headers.map((h, i) => h.padEnd(widths[i] ?? 0)))), ...cells.map(line)].join('\n');
}

export function statusStyle(status: string): Style {
  if (['success', 'running', 'healthy', 'active', 'scheduled'].includes(status)) return 'green';
  if (['failed', 'error', 'unhealthy', 'cancelled', 'destroying', 'delete-service'].includes(status))
    return 'red';
  return 'yellow';
}

export interface Spinner {
  update(text: string): void;
  /** Writes a line above the spinner (build output). */
  log(line: string): void;
  stop(final?: string): void;
}

/** A spinner on stderr when it is a terminal; elsewhere only the lines and the final text. */
export function spinner(text: string, stream: NodeJS.WriteStream = process.stderr): Spinner {
  const tty = stream.isTTY === true && process.env.TERM !== 'dumb';
  if (!tty) {
    return {
      update: () => undefined,
      log: (line) => stream.write(line + '\n'),
      stop: (final) => {
        if (final) stream.write(final + '\n');
      },
    };
  }
  const paint = painter(stream);
  const frames = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
  let frame = 0;
  let current = text;
  const tty$: Partial<WriteStream> = stream;
  const clear = () => {
    tty$.clearLine?.(0);
    tty$.cursorTo?.(0);
  };
  const draw = () => {
    clear();
    stream.write(`${paint('cyan', frames[frame % frames.length] ?? '')} ${current}`);
  };
  const timer = setInterval(() => {
    frame += 1;
    draw();
  }, 80);
  draw();
  return {
    update(next) {
      current = next;
      draw();
    },
    log(line) {
      clear();
      stream.write(line + '\n');
      draw();
    },
    stop(final) {
      clearInterval(timer);
      clear();
      if (final) stream.write(final + '\n');
    },
  };
}
