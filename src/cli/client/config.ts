// Profiles of the `berth` client: where each Berth is and the credentials for its three APIs, kept in
// the user's config dir (`$XDG_CONFIG_HOME/berth/config.json` or `~/.config/berth/config.json`, 0600).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { UsageError } from './errors.js';

export interface Profile {
  url: string;
  /** Platform API token (`berth_pat_…`). */
  token?: string;
  /** Tools API key (`berth_tk_…`). */
  tools_key?: string;
  /** Managed-database API credential (`db_…` and its password), for `/1.3`. */
  db_user?: string;
  db_password?: string;
}

export interface ClientConfig {
  current: string;
  profiles: Record<string, Profile>;
}

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || path.join(env.HOME || os.homedir(), '.config');
  return path.join(base, 'berth', 'config.json');
}

export function readConfig(file = configPath()): ClientConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { current: 'default', profiles: {} };
    throw error;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${file} is not valid JSON; fix it or remove it and log in again`);
  }
  const config = parsed as Partial<ClientConfig>;
  return {
    current: typeof config.current === 'string' ? config.current : 'default',
    profiles: config.profiles && typeof config.profiles === 'object' ? config.profiles : {},
  };
}

/** Writes the file whole, 0600 from its first byte (a new file is never readable by others). */
export function writeConfig(config: ClientConfig, file = configPath()): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(temporary, 'w', 0o600);
  try {
    fs.writeSync(fd, JSON.stringify(config, null, 2) + '\n');
  } finally {
    fs.closeSync(fd);
  }
  fs.chmodSync(temporary, 0o600);
  fs.renameSync(temporary, file);
}

export interface ResolvedProfile extends Profile {
  name: string;
}

/**
 * The profile a command uses: `--profile`, else `BERTH_PROFILE`, else the current one; `BERTH_URL`,
 * `BERTH_TOKEN`, `BERTH_TOOLS_KEY`, `BERTH_DB_USER` and `BERTH_DB_PASSWORD` override its fields (CI
 * needs no config file at all).
 */
export function resolveProfile(
  requested: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedProfile | undefined {
  const config = readConfig(configPath(env));
  const name = requested ?? env.BERTH_PROFILE ?? config.current;
  const stored = config.profiles[name];
  if (requested !== undefined && !stored && !env.BERTH_URL)
    throw new UsageError(
      `no profile '${requested}'; log in with berth login --profile ${requested} --url URL`,
    );
  const profile: ResolvedProfile = { name, url: '', ...stored };
  if (env.BERTH_URL) profile.url = env.BERTH_URL;
  if (env.BERTH_TOKEN) profile.token = env.BERTH_TOKEN;
  if (env.BERTH_TOOLS_KEY) profile.tools_key = env.BERTH_TOOLS_KEY;
  if (env.BERTH_DB_USER) profile.db_user = env.BERTH_DB_USER;
  if (env.BERTH_DB_PASSWORD) profile.db_password = env.BERTH_DB_PASSWORD;
  return profile.url ? profile : undefined;
}
