// What a client command is, and what it receives: its parsed arguments, the output format and the
// API of the chosen profile.
import type { ParseArgsConfig } from 'node:util';
import { resolveProfile, type ResolvedProfile } from './config.js';
import { Api, UsageError } from './http.js';
import type { Format } from './output.js';

export type Options = NonNullable<ParseArgsConfig['options']>;
export type Values = Record<string, string | boolean | Array<string | boolean> | undefined>;

export interface Command {
  /** `apply`, or `db clone` for a group's subcommand. */
  name: string;
  summary: string;
  /** The arguments after the name: `APP [--wait]`. */
  usage: string;
  options?: Options;
  /** Shown by --help: `berth deploy shop --wait`. */
  examples?: string[];
  /** Longer help text. */
  details?: string;
  run(context: CommandContext): Promise<number | void>;
}

export interface CommandContext {
  values: Values;
  positionals: string[];
  /** Everything after `--`. */
  rest: string[];
  format: Format;
  /** The profile named by --profile (or the environment, or the current one). */
  profile: () => ResolvedProfile;
  api: () => Api;
}

/** Options every command takes. */
export const GLOBAL_OPTIONS: Options = {
  profile: { type: 'string' },
  output: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
};

export function makeContext(values: Values, positionals: string[], rest: string[]): CommandContext {
  const output = values.json === true ? 'json' : ((values.output as string | undefined) ?? 'human');
  if (output !== 'json' && output !== 'human' && output !== 'table')
    throw new UsageError(`--output must be json or human; got '${output}'`);
  let resolved: ResolvedProfile | undefined;
  const profile = () => {
    if (resolved) return resolved;
    const found = resolveProfile(values.profile as string | undefined);
    if (!found)
      throw new UsageError(
        'not logged in: run berth login --url URL --token T (or set BERTH_URL and BERTH_TOKEN)',
      );
    resolved = found;
    return found;
  };
  return {
    values,
    positionals,
    rest,
    format: output === 'json' ? 'json' : 'human',
    profile,
    api: () => new Api(profile()),
  };
}

export function stringOption(values: Values, name: string): string | undefined {
  const value = values[name];
  return typeof value === 'string' ? value : undefined;
}

export function requireArg(value: string | undefined, what: string): string {
  if (value === undefined || value === '') throw new UsageError(`${what} is required`);
  return value;
}

export function integerOption(values: Values, name: string, min = 0): number | undefined {
  const text = stringOption(values, name);
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < min)
    throw new UsageError(`--${name} must be a whole number of at least ${min}; got '${text}'`);
  return Number(text);
}
