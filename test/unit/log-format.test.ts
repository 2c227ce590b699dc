// Log lines a person reads at a terminal (issue 26, item 8): pino's records, through the real logger,
// as `HH:MM:SS LEVEL message key=value`; JSON stays the format when stdout is not a terminal.
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { loadConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/context.js';
import { formatLogLine, prettyDestination } from '../../src/log-format.js';

/** The lines a real pino logger writes through the pretty destination. */
function prettyLines(log: (logger: pino.Logger) => void): string[] {
  let written = '';
  const logger = pino({ level: 'debug' }, prettyDestination({ write: (text: string) => (written += text) }));
  log(logger);
  return written.split('\n').filter((line) => line !== '');
}

describe('log format', () => {
  it('writes time, level, message and fields, without pid, hostname or JSON braces', () => {
    const [line] = prettyLines((logger) =>
      logger.info({ file: '/srv/berth data/bootstrap.json', count: 3, ok: true }, 'credentials written'),
    );
    expect(line).toMatch(
      /^\d\d:\d\d:\d\d INFO {2}credentials written file="\/srv\/berth data\/bootstrap.json" count=3 ok=true$/,
    );
    expect(line).not.toMatch(/pid|hostname|"level"/);
  });

  it('names each level, shows nested values as JSON and an error by its message, its stack below', () => {
    const lines = prettyLines((logger) => {
      logger.debug('a detail');
      logger.warn({ paths: ['/a', '/b'] }, 'tightened');
      logger.error({ err: new Error('disk full') }, 'unclean stop');
    });
    expect(lines[0]).toMatch(/^\d\d:\d\d:\d\d DEBUG a detail$/);
    expect(lines[1]).toMatch(/^\d\d:\d\d:\d\d WARN {2}tightened paths=\["\/a","\/b"\]$/);
    expect(lines[2]).toMatch(/^\d\d:\d\d:\d\d ERROR unclean stop err="disk full"$/);
    expect(lines[3]).toBe('    Error: disk full');
    expect(lines[4]).toMatch(/^ {4}\s*at /);
  });

  it('keeps a line that is not a record as it is', () => {
    expect(formatLogLine('not json')).toBe('not json');
    expect(formatLogLine('[1,2]')).toBe('[1,2]');
  });

  it('is chosen by BERTH_LOG_FORMAT, else pretty on a terminal and JSON otherwise', () => {
    expect(loadConfig({}).logFormat).toBeUndefined();
    expect(loadConfig({ BERTH_LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadConfig({}, { logFormat: 'pretty' }).logFormat).toBe('pretty');
    expect(() => loadConfig({ BERTH_LOG_FORMAT: 'yaml', BERTH_LOG_LEVEL: 'loud' })).toThrow(
      /BERTH_LOG_LEVEL[\s\S]*BERTH_LOG_FORMAT must be one of pretty, json, got 'yaml'/,
    );
    // pino's own stream (sonic-boom) for JSON; the formatter's plain object for pretty.
    const streamOf = (logger: pino.Logger) =>
      (logger as unknown as Record<symbol, unknown>)[pino.symbols.streamSym];
    const kind = (env: Record<string, string>, terminal: boolean) =>
      streamOf(createLogger(loadConfig(env), terminal))?.constructor.name;
    expect(kind({}, true)).toBe('Object');
    expect(kind({}, false)).not.toBe('Object');
    expect(kind({ BERTH_LOG_FORMAT: 'json' }, true)).not.toBe('Object');
    expect(kind({ BERTH_LOG_FORMAT: 'pretty' }, false)).toBe('Object');
  });
});
