// How the log reads on a terminal (issue 26, item 8): `HH:MM:SS LEVEL message key=value`, one line per
// record, in place of pino's JSON lines, which stay the format for pipes, files and log collectors.
// A few lines of code rather than pino-pretty: Berth does not depend on it.
import type { DestinationStream } from 'pino';

const LEVELS: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};

/** Fields every record has: shown by their place in the line, or not at all. */
const FRAME = new Set(['level', 'time', 'msg', 'pid', 'hostname']);

const two = (n: number) => String(n).padStart(2, '0');

/** A value as `key=value` shows it: bare when it is one word, quoted otherwise, JSON for the rest. */
function valueText(value: unknown): string {
  if (typeof value !== 'string') return JSON.stringify(value);
  return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
}

/** One pino JSON line as a person reads it; a line that is not a record is kept as it is. */
export function formatLogLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return line;
    record = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = new Date(typeof record.time === 'number' ? record.time : Date.now());
  const clock = `${two(time.getHours())}:${two(time.getMinutes())}:${two(time.getSeconds())}`;
  const level = (LEVELS[Number(record.level)] ?? String(record.level)).padEnd(5);
  const parts = [clock, level, typeof record.msg === 'string' ? record.msg : ''];
  let stack = '';
  for (const [key, value] of Object.entries(record)) {
    if (FRAME.has(key)) continue;
    // An error (pino's serializer: type, message, stack) by its message, its stack below the line.
    if (key === 'err' && value !== null && typeof value === 'object' && 'message' in value) {
      const err = value as { message: unknown; stack?: unknown };
      parts.push(`err=${valueText(String(err.message))}`);
      if (typeof err.stack === 'string') stack = `\n    ${err.stack.split('\n').join('\n    ')}`;
      continue;
    }
    parts.push(`${key}=${valueText(value)}`);
  }
  return `${parts.filter((part) => part !== '').join(' ')}${stack}\n`;
}

/** A pino destination that writes each record readably to `out` (the terminal). */
export function prettyDestination(out: { write(text: string): unknown } = process.stdout): DestinationStream {
  return {
    write(chunk: string) {
      for (const line of chunk.split('\n')) if (line !== '') out.write(formatLogLine(line));
    },
  };
}
