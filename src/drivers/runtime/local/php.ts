// PHP for laravel and wordpress applications: Debian's php8.2-fpm behind nginx-light, both inside the
// replica's sandbox, serving HTTP on the replica's port. Bookworm ships PHP 8.2 only, so that is the
// one version offered.
//
// The replica contract: `renderPhpReplica` returns the files to place in `runDir` and the argv that
// runs php-fpm and nginx in the foreground as one process tree. Both run as whatever uid the sandbox
// gives them, on a read-only system where only the release (/app) and /tmp are writable: every pid,
// socket and temporary path lives in `runDir`, and logs go to stderr.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';

export const PHP_VERSIONS_OFFERED = ['8.2'] as const;
export type PhpVersion = (typeof PHP_VERSIONS_OFFERED)[number];

const PHP_CLI = '/usr/bin/php8.2';
const PHP_FPM = '/usr/sbin/php-fpm8.2';
const NGINX = '/usr/sbin/nginx';
const MODS_AVAILABLE = '/etc/php/8.2/mods-available';

/** Where the release is mounted in the sandbox: settings may name files there and nowhere else. */
const APP_ROOT = '/app';

/** `8.2` or `8.2.x` (a patch is whatever Debian ships); undefined means 8.2. */
export function parsePhpVersion(value: string | undefined): { version: PhpVersion } | { error: string } {
  if (value === undefined) return { version: '8.2' };
  const match = /^\s*(\d+\.\d+)(?:\.(?:x|\d+))?\s*$/i.exec(value);
  const version = PHP_VERSIONS_OFFERED.find((offered) => offered === match?.[1]);
  if (version) return { version };
  return { error: `PHP version '${value}' is not offered; offered: ${PHP_VERSIONS_OFFERED.join(', ')}` };
}

// ---------------------------------------------------------------------------------------------------
// Extensions

let extensionsCache: string[] | undefined;

/** Module names as `php -m` prints them, lower-cased ("Zend OPcache" is the `opcache` extension). */
function modulesOf(binary: string): string[] {
  try {
    const output = execFileSync(binary, ['-m'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return output
      .split('\n')
      .map((line) => line.trim().toLowerCase())
      .filter((line) => line && !line.startsWith('['))
      .map((name) => (name === 'zend opcache' ? 'opcache' : name));
  } catch {
    return [];
  }
}

/**
 * The extensions of the installed php8.2 packages, lower-cased and sorted: what the cli and fpm load
 * (compiled-in ones such as `pcre` or, for the cli only, `pcntl` that queue workers use) plus every
 * module in mods-available (Debian enables them all). Read once per process.
 */
export function availablePhpExtensions(): string[] {
  if (!extensionsCache) {
    const names = new Set([...modulesOf(PHP_CLI), ...modulesOf(PHP_FPM)]);
    try {
      for (const file of fs.readdirSync(MODS_AVAILABLE)) {
        if (file.endsWith('.ini')) names.add(file.slice(0, -'.ini'.length).toLowerCase());
      }
    } catch {
      // No mods-available: the `-m` lists are all there is.
    }
    extensionsCache = [...names].sort();
  }
  return [...extensionsCache];
}

/** An error naming the requested extensions that are not installed, or undefined when all are. */
export function checkPhpExtensions(requested: string[]): string | undefined {
  const available = new Set(availablePhpExtensions());
  const missing = requested.filter((name) => !available.has(name.trim().toLowerCase()));
  if (missing.length === 0) return undefined;
  return (
    `PHP extension${missing.length > 1 ? 's' : ''} not available: ${missing.join(', ')}; ` +
    `available: ${[...available].join(', ')}`
  );
}

// ---------------------------------------------------------------------------------------------------
// Settings (php.ini directives, applied per pool as php_admin_value / php_admin_flag)

const DIRECTIVE = /^[a-z0-9_.]+$/i;
const CONTROL_CHARACTERS = /[\x00-\x1f\x7f]/;
const MAX_VALUE_LENGTH = 1024;
const MAX_SETTINGS = 100;

/**
 * Directives a tenant may not set, and why. Policy: the sandbox (read-only system, only /app and /tmp
 * writable) is the security boundary, not PHP, so directives that only narrow what PHP does
 * (`disable_functions`, `open_basedir`) are allowed; refused are those that load native code, move
 * the log away from what Berth collects, or that php-fpm reads only at startup (in a pool they would
 * be silently ignored, which is worse than an error).
 */
const REFUSED_DIRECTIVES: ReadonlyMap<string, string> = new Map([
  ['extension', 'loads native code (php-fpm dlopens it for the pool); request the extension instead'],
  ['zend_extension', 'loads native code'],
  ['extension_dir', 'chooses where native code is loaded from'],
  ['error_log', "PHP's errors go to the replica's log (stderr), which Berth collects"],
  ...[
    'opcache.memory_consumption',
    'opcache.interned_strings_buffer',
    'opcache.max_accelerated_files',
    'opcache.jit_buffer_size',
    'opcache.preload',
    'opcache.preload_user',
    'opcache.huge_code_pages',
    'opcache.lockfile_path',
    'opcache.file_cache',
    'opcache.file_cache_only',
    'opcache.file_cache_consistency_checks',
    'opcache.enable_cli',
  ].map((name): [string, string] => [name, 'read only when php-fpm starts, so a pool cannot set it']),
]);

/** Directives whose value names files PHP includes: only inside the release. */
const FILE_DIRECTIVES = new Set(['auto_prepend_file', 'auto_append_file']);

const BOOLEAN_WORDS = new Set(['on', 'off', 'true', 'false', 'yes', 'no', '1', '0']);

function insideRelease(file: string): boolean {
  return file.startsWith(`${APP_ROOT}/`) && !file.split('/').includes('..');
}

interface PhpSetting {
  directive: string;
  value: string;
}

/** A setting's syntax and policy (no PHP needed): the setting, or why it is refused. */
function parseSetting(setting: string): PhpSetting | { error: string } {
  const equals = setting.indexOf('=');
  if (equals < 0) return { error: `'${setting}' is not <directive>=<value>` };
  const directive = setting.slice(0, equals).trim();
  const value = setting.slice(equals + 1).trim();
  if (!DIRECTIVE.test(directive)) return { error: `'${directive}' is not a php.ini directive name` };
  if (CONTROL_CHARACTERS.test(value)) return { error: `${directive}: the value has control characters` };
  if (value.length > MAX_VALUE_LENGTH)
    return { error: `${directive}: the value is over ${MAX_VALUE_LENGTH} characters` };
  const refusal = REFUSED_DIRECTIVES.get(directive.toLowerCase());
  if (refusal) return { error: `${directive} may not be set: ${refusal}` };
  if (directive === 'include_path') {
    const outside = value
      .split(':')
      .filter((entry) => entry !== '.' && entry !== APP_ROOT && !insideRelease(entry));
    if (outside.length > 0)
      return { error: `include_path may only name '.' and ${APP_ROOT}/…: ${outside.join(':')}` };
  }
  if (
    FILE_DIRECTIVES.has(directive) &&
    value !== '' &&
    value.toLowerCase() !== 'none' &&
    !insideRelease(value)
  ) {
    return { error: `${directive} may only name a file under ${APP_ROOT}/` };
  }
  return { directive, value };
}

let knownDirectivesCache: Set<string> | undefined;

/** Directives of the FastCGI SAPI, which the cli does not list. */
const FPM_DIRECTIVES = ['cgi.fix_pathinfo', 'cgi.discard_path', 'fastcgi.logging', 'fastcgi.error_header'];

/** Every directive the installed PHP knows (its extensions' too), from the cli's ini_get_all(). */
function knownDirectives(): Set<string> {
  if (!knownDirectivesCache) {
    const output = execFileSync(PHP_CLI, ['-r', 'echo json_encode(array_keys(ini_get_all()));'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    knownDirectivesCache = new Set([...(JSON.parse(output) as string[]), ...FPM_DIRECTIVES]);
  }
  return knownDirectivesCache;
}

/**
 * An error listing every refused setting (each `<directive>=<value>`), or undefined when all are
 * accepted: the syntax and policy of `parseSetting`, and the directive must be one PHP knows.
 */
export function checkPhpSettings(settings: string[]): string | undefined {
  if (settings.length > MAX_SETTINGS) return `at most ${MAX_SETTINGS} PHP settings`;
  const errors: string[] = [];
  const seen = new Set<string>();
  for (const setting of settings) {
    const parsed = parseSetting(setting);
    if ('error' in parsed) {
      errors.push(parsed.error);
    } else if (!knownDirectives().has(parsed.directive)) {
      errors.push(
        `${parsed.directive} is not a directive of PHP ${PHP_VERSIONS_OFFERED[0]} or its extensions`,
      );
    } else if (seen.has(parsed.directive)) {
      errors.push(`${parsed.directive} is set twice`);
    } else {
      seen.add(parsed.directive);
    }
  }
  return errors.length > 0 ? `invalid PHP settings: ${errors.join('; ')}` : undefined;
}

// ---------------------------------------------------------------------------------------------------
// The replica: one php-fpm pool behind nginx

export interface PhpReplicaOptions {
  /** The TCP port nginx serves on (127.0.0.1). */
  port: number;
  /** Absolute path inside the sandbox, e.g. /app/public (laravel) or /app (wordpress). */
  documentRoot: string;
  /** A writable directory inside the sandbox, e.g. /tmp/berth; holds the files and the socket. */
  runDir: string;
  /** `<directive>=<value>` (see checkPhpSettings). */
  settings: string[];
  /** The application's environment: never rendered into a file (see `env` of the result). */
  env: Record<string, string>;
  /** php-fpm workers (pm static); 2 unless given. */
  workers?: number;
}

export interface PhpReplica {
  /** Relative file name → content, to be placed in `runDir` before `command` runs. */
  files: Record<string, string>;
  /** Runs php-fpm and nginx in the foreground; SIGTERM stops both (nginx gracefully first). */
  command: string[];
  /**
   * The environment `command` must run with: the application's variables plus PORT. php-fpm runs
   * with `clear_env = no`, so its workers see exactly this environment: secrets stay in the process
   * environment and are never written to a file (the `env[KEY] = value` form would put them on disk
   * in runDir, readable by anything that reads the release's temporary files or a log of them).
   */
  env: Record<string, string>;
}

/** Paths go unquoted into nginx and php-fpm configs and quoted into a bash script: keep them plain. */
const SAFE_PATH = /^\/[A-Za-z0-9._/-]*$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const DEFAULT_WORKERS = 2;

/** A value inside double quotes of php-fpm's INI syntax, where `\`, `"` and `$` (`${VAR}`) are special. */
function iniQuote(value: string): string {
  return `"${value.replace(/[\\"$]/g, (character) => `\\${character}`)}"`;
}

/** nginx's client_max_body_size from PHP's post_max_size (`200M`, `1G`, `0` = no limit); 8m as PHP's default. */
function bodyLimit(settings: PhpSetting[]): string {
  const postMax = settings.find((setting) => setting.directive === 'post_max_size')?.value;
  const match = postMax ? /^(\d+)\s*([kmg]?)$/i.exec(postMax) : null;
  return match ? `${match[1]}${(match[2] ?? '').toLowerCase()}` : '8m';
}

function renderFpmConfig(options: PhpReplicaOptions, settings: PhpSetting[]): string {
  const { runDir } = options;
  const workers = options.workers ?? DEFAULT_WORKERS;
  const lines = [
    '; Rendered by Berth: one pool for one replica.',
    '[global]',
    `pid = ${runDir}/php-fpm.pid`,
    // php-fpm opens this file even in the foreground, and /proc/self/fd/2 cannot be opened when stderr
    // is a socket (Node's pipes are socketpairs: ENXIO). Its own messages reach stderr through
    // --force-stderr instead.
    'error_log = /dev/null',
    'daemonize = no',
    // Bounds a graceful stop (SIGQUIT) before php-fpm terminates its workers.
    'process_control_timeout = 10s',
    '',
    '[app]',
    `listen = ${runDir}/php-fpm.sock`,
    'listen.mode = 0600',
    'pm = static',
    `pm.max_children = ${workers}`,
    // A leaking request handler is restarted now and then instead of growing to the memory cap.
    'pm.max_requests = 1000',
    // Workers inherit the replica's environment (see PhpReplica.env): nothing secret in this file.
    'clear_env = no',
    'catch_workers_output = yes',
    'decorate_workers_output = no',
    // Errors to the worker's stderr, which php-fpm forwards to its own: the replica's log.
    'php_value[error_log] = /proc/self/fd/2',
    // Debian compiles in /var/lib/php/sessions, which is read-only here; the app may change it.
    `php_value[session.save_path] = ${runDir}/sessions`,
  ];
  for (const { directive, value } of settings) {
    const kind = BOOLEAN_WORDS.has(value.toLowerCase()) ? 'php_admin_flag' : 'php_admin_value';
    lines.push(
      `${kind}[${directive}] = ${kind === 'php_admin_flag' ? value.toLowerCase() : iniQuote(value)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

function renderNginxConfig(options: PhpReplicaOptions, settings: PhpSetting[]): string {
  const { runDir, documentRoot, port } = options;
  return `# Rendered by Berth: serves one replica of a PHP application on 127.0.0.1:${port}.
# \`daemon\` and \`master_process\` come from the command line (they depend on the uid).
pid ${runDir}/nginx.pid;
lock_file ${runDir}/nginx.lock;
error_log stderr warn;
worker_processes 1;
worker_shutdown_timeout 25s;

events {
  worker_connections 512;
}

http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  # Berth's router logs requests; errors still go to stderr.
  access_log off;
  server_tokens off;
  sendfile on;
  client_max_body_size ${bodyLimit(settings)};
  client_body_temp_path ${runDir}/nginx-body;
  fastcgi_temp_path ${runDir}/nginx-fastcgi;
  proxy_temp_path ${runDir}/nginx-proxy;
  uwsgi_temp_path ${runDir}/nginx-uwsgi;
  scgi_temp_path ${runDir}/nginx-scgi;

  server {
    listen 127.0.0.1:${port};
    root ${documentRoot};
    index index.php index.html;

    # Dotfiles (.env, .git) are never served; .well-known is.
    location ~ /\\.(?!well-known/) {
      deny all;
    }

    # Laravel's and WordPress's front controller: anything that is not a file goes to index.php.
    location / {
      try_files $uri $uri/ /index.php?$query_string;
    }

    location ~ \\.php$ {
      # Only scripts that exist run: an uploaded "image.jpg/x.php" does not reach PHP.
      try_files $fastcgi_script_name =404;
      include /etc/nginx/fastcgi_params;
      fastcgi_param SCRIPT_FILENAME $realpath_root$fastcgi_script_name;
      fastcgi_param DOCUMENT_ROOT $realpath_root;
      # httpoxy: a request header must not become the HTTP_PROXY variable.
      fastcgi_param HTTP_PROXY "";
      fastcgi_pass unix:${runDir}/php-fpm.sock;
      fastcgi_read_timeout 300s;
    }
  }
}
`;
}

function renderStartScript(runDir: string): string {
  return `#!/bin/bash
# Rendered by Berth: php-fpm and nginx in the foreground as one process tree.
# SIGTERM: nginx stops first (gracefully when it has workers), then php-fpm; if either exits on its
# own the other is stopped too and the script fails, so the supervisor watches one process.
set -u
run='${runDir}'
fpm=''
web=''
stop() {
  trap '' TERM INT
  if [ -n "$web" ]; then kill -QUIT "$web" 2>/dev/null; wait "$web"; fi
  if [ -n "$fpm" ]; then kill -QUIT "$fpm" 2>/dev/null; wait "$fpm"; fi
  exit 0
}
trap stop TERM INT

fpm_flags=()
nginx_globals='daemon off;'
if [ "$EUID" -eq 0 ]; then
  # As root php-fpm needs -R to keep its workers' uid, and nginx's workers would switch to nobody
  # (which fails in a user namespace, where setgroups is denied): one nginx process keeps the uid.
  fpm_flags=(-R)
  nginx_globals='daemon off; master_process off;'
fi
mkdir -p "$run/sessions"
rm -f "$run/php-fpm.sock"
${PHP_FPM} --nodaemonize --force-stderr --fpm-config "$run/php-fpm.conf" "\${fpm_flags[@]}" &
fpm=$!
# nginx opens the port only once PHP can answer, so "port open" means ready.
for ((i = 0; i < 400; i++)); do
  [ -S "$run/php-fpm.sock" ] && break
  kill -0 "$fpm" 2>/dev/null || break
  sleep 0.025
done
${NGINX} -c "$run/nginx.conf" -g "$nginx_globals" &
web=$!

wait -n "$fpm" "$web"
status=$?
trap '' TERM INT
kill -TERM "$fpm" "$web" 2>/dev/null
wait
echo "berth: php-fpm or nginx exited with status $status" >&2
exit $(( status == 0 ? 1 : status ))
`;
}

/** php-fpm's pool and nginx's config for one replica, and the command that runs both. */
export function renderPhpReplica(options: PhpReplicaOptions): PhpReplica {
  const { port, documentRoot, runDir } = options;
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`invalid port ${port}`);
  for (const [name, value] of [
    ['documentRoot', documentRoot],
    ['runDir', runDir],
  ] as const) {
    if (!SAFE_PATH.test(value) || value.split('/').includes('..'))
      throw new Error(`${name} '${value}' is not a plain absolute path`);
  }
  const workers = options.workers ?? DEFAULT_WORKERS;
  if (!Number.isInteger(workers) || workers < 1 || workers > 64)
    throw new Error(`invalid worker count ${workers}`);
  const badNames = Object.keys(options.env).filter((name) => !ENV_NAME.test(name));
  if (badNames.length > 0) throw new Error(`invalid environment variable names: ${badNames.join(', ')}`);

  const settings: PhpSetting[] = [];
  for (const setting of options.settings) {
    const parsed = parseSetting(setting);
    if ('error' in parsed) throw new Error(`invalid PHP setting: ${parsed.error}`);
    settings.push(parsed);
  }
  return {
    files: {
      'php-fpm.conf': renderFpmConfig(options, settings),
      'nginx.conf': renderNginxConfig(options, settings),
      'start.sh': renderStartScript(runDir),
    },
    command: ['/bin/bash', `${runDir}/start.sh`],
    env: { ...options.env, PORT: String(port) },
  };
}
