// What a build needs of the host to reach package registries (issue 26): the host's npm registry, CA
// files and proxies, read once from the host's npm and environment, carried into every build whatever
// Node.js runtime it uses. A downloaded runtime's npm has no global npmrc and Node.js reads no CA
// variable nobody passed: without these, a host that trusts its network's CA through its npmrc or
// NODE_EXTRA_CA_CERTS builds nothing but SELF_SIGNED_CERT_IN_CHAIN. The CA files are copied where every
// application's account can read them and bound read-only into the build's sandbox.
//
// npm, yarn 1 and pnpm read `npm_config_*` variables; yarn 2+ reads `YARN_*`; Composer and git read the
// proxy variables. npm's retries are cut short so a registry that refuses or cannot be trusted fails a
// build in seconds, not after minutes of backoff.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

/** Where the CA files appear in a build's sandbox. */
export const BUILD_CA_MOUNT = '/opt/berth/ca';
const DEFAULT_REGISTRY = 'https://registry.npmjs.org/';

export interface HostPackageConfig {
  registry: string;
  /** npm's `cafile`: the only roots npm trusts when set. */
  npmCafile: string | undefined;
  /** NODE_EXTRA_CA_CERTS: added to Node.js's own roots. */
  extraCaCerts: string | undefined;
  strictSsl: boolean;
  httpProxy: string | undefined;
  httpsProxy: string | undefined;
  noProxy: string | undefined;
}

/** npm's `null`, `undefined` and empty mean unset. */
const setting = (value: string | undefined): string | undefined =>
  value === undefined || value === '' || value === 'null' || value === 'undefined' ? undefined : value;

/**
 * The host's effective npm configuration (global and user npmrc, `npm_config_*` variables) and proxy
 * variables. Without a working npm: the public registry and the variables alone.
 */
export async function readHostPackageConfig(
  env: NodeJS.ProcessEnv = process.env,
  npm = 'npm',
): Promise<HostPackageConfig> {
  const keys = ['registry', 'cafile', 'proxy', 'https-proxy', 'strict-ssl', 'noproxy'];
  const npmConfig = new Map<string, string>();
  try {
    const { stdout } = await execFileAsync(npm, ['config', 'get', ...keys], {
      env: { ...env, npm_config_update_notifier: 'false' },
      cwd: '/',
      timeout: 30_000,
    });
    for (const line of stdout.split('\n')) {
      const at = line.indexOf('=');
      if (at > 0) npmConfig.set(line.slice(0, at), line.slice(at + 1).trim());
    }
  } catch {
    // No npm on the host: the variables below still hold.
  }
  const variable = (name: string) => setting(env[name] ?? env[name.toLowerCase()]);
  return {
    registry: setting(npmConfig.get('registry')) ?? DEFAULT_REGISTRY,
    npmCafile: setting(npmConfig.get('cafile')),
    extraCaCerts: setting(env.NODE_EXTRA_CA_CERTS),
    strictSsl: npmConfig.get('strict-ssl') !== 'false',
    httpProxy: setting(npmConfig.get('proxy')) ?? variable('HTTP_PROXY'),
    httpsProxy: setting(npmConfig.get('https-proxy')) ?? variable('HTTPS_PROXY'),
    noProxy: setting(npmConfig.get('noproxy')) ?? variable('NO_PROXY'),
  };
}

export interface BuildNetwork {
  /** The registry builds install from (named in the build's log). */
  registry: string;
  env: Record<string, string>;
  /** CA files to bind read-only at their `target`. */
  binds: Array<{ source: string; target: string; writable: false }>;
}

/**
 * The build environment for `host`, with `registry` (BERTH_BUILD_REGISTRY) in place of the host's when
 * given and the operator's `extra` (BERTH_BUILD_ENV) last, so it wins. The CA files are copied into
 * `caDir` (readable by everyone: certificates are public) when `caDir` is given.
 */
export async function prepareBuildNetwork(
  host: HostPackageConfig,
  options: { registry?: string | undefined; extra?: Readonly<Record<string, string>>; caDir?: string },
): Promise<BuildNetwork> {
  const registry = options.registry ?? host.registry;
  const env: Record<string, string> = {
    npm_config_registry: registry,
    YARN_NPM_REGISTRY_SERVER: registry.replace(/\/$/, ''),
    // Fail fast: one retry after 2 s (npm: two after 10 s then 60 s), a request given up after 30 s.
    npm_config_fetch_retries: '1',
    npm_config_fetch_retry_mintimeout: '2000',
    npm_config_fetch_retry_maxtimeout: '5000',
    npm_config_fetch_timeout: '30000',
    YARN_HTTP_RETRY: '1',
    YARN_HTTP_TIMEOUT: '30000',
  };
  if (!host.strictSsl) {
    env.npm_config_strict_ssl = 'false';
    env.YARN_ENABLE_STRICT_SSL = 'false';
  }
  if (host.httpProxy) {
    env.npm_config_proxy = env.HTTP_PROXY = env.http_proxy = env.YARN_HTTP_PROXY = host.httpProxy;
  }
  if (host.httpsProxy) {
    env.npm_config_https_proxy = env.HTTPS_PROXY = env.https_proxy = env.YARN_HTTPS_PROXY = host.httpsProxy;
  }
  if (host.noProxy) env.npm_config_noproxy = env.NO_PROXY = env.no_proxy = host.noProxy;
  const binds: BuildNetwork['binds'] = [];
  const carry = async (file: string | undefined, name: string): Promise<string | undefined> => {
    if (!file || !options.caDir) return undefined;
    const copy = path.join(options.caDir, name);
    try {
      await fs.copyFile(file, copy);
    } catch {
      return undefined; // a CA file the host names but lacks: the host's npm fails the same way
    }
    await fs.chmod(copy, 0o644);
    const target = `${BUILD_CA_MOUNT}/${name}`;
    binds.push({ source: copy, target, writable: false });
    return target;
  };
  if (options.caDir) {
    await fs.mkdir(options.caDir, { recursive: true, mode: 0o755 });
    await fs.chmod(options.caDir, 0o755);
  }
  const npmCafile = await carry(host.npmCafile, 'npm-cafile.pem');
  if (npmCafile) env.npm_config_cafile = env.YARN_HTTPS_CA_FILE_PATH = npmCafile;
  const extra = await carry(host.extraCaCerts, 'node-extra-ca-certs.pem');
  if (extra) env.NODE_EXTRA_CA_CERTS = extra;
  return { registry, env: { ...env, ...options.extra }, binds };
}

/** A registry URL as a log may show it: credentials in it are the operator's. */
export function withoutCredentials(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.username || parsed.password) parsed.username = parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(an invalid URL)';
  }
}
