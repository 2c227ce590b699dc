// WordPress for a wordpress application that brings no source: Debian's package (/usr/share/wordpress,
// 6.1 with its security updates), copied whole into the release with its links resolved (Debian links
// bundled libraries to /usr/share/javascript and /usr/share/php, which a sandbox does not bind), and a
// wp-config.php of Berth's that reads everything from the environment, that is from the application's
// secrets and its mysql service's injected names: nothing secret is ever written into the release.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileAsync = promisify(execFile);

export const WORDPRESS_SOURCE = '/usr/share/wordpress';

/** The secrets the configuration reads, with the default of each (docs/runtime.md, WordPress). */
export const WORDPRESS_CONFIG = `<?php
// Written by Berth: every value comes from the application's secrets (the environment).
function berth_env($name, $default = null) {
    $value = getenv($name);
    return ($value === false || $value === '') ? $default : $value;
}

// The application's own secrets first; then what a mysql service injects (WORDPRESS_DB_*, the names
// of the official image; docs/services.md).
define('DB_NAME', berth_env('DB_DATABASE', berth_env('DB_NAME', berth_env('WORDPRESS_DB_NAME', 'wordpress'))));
define('DB_USER', berth_env('DB_USERNAME', berth_env('DB_USER', berth_env('WORDPRESS_DB_USER', 'wordpress'))));
define('DB_PASSWORD', berth_env('DB_PASSWORD', berth_env('WORDPRESS_DB_PASSWORD', '')));
define('DB_HOST', (berth_env('DB_HOST') !== null || berth_env('DB_PORT') !== null)
    ? berth_env('DB_HOST', '127.0.0.1') . (berth_env('DB_PORT') ? ':' . berth_env('DB_PORT') : '')
    : berth_env('WORDPRESS_DB_HOST', '127.0.0.1'));
define('DB_CHARSET', 'utf8mb4');
define('DB_COLLATE', '');

// Keys and salts: the secrets of the same names, else derived from the database password, so they
// stay the same across deployments (a new release does not sign everyone out) and are never public.
foreach (array('AUTH_KEY', 'SECURE_AUTH_KEY', 'LOGGED_IN_KEY', 'NONCE_KEY',
               'AUTH_SALT', 'SECURE_AUTH_SALT', 'LOGGED_IN_SALT', 'NONCE_SALT') as $berth_key) {
    define($berth_key, berth_env($berth_key, hash_hmac('sha256', $berth_key, 'berth:' . DB_PASSWORD . ':' . DB_NAME)));
}

$table_prefix = berth_env('WP_TABLE_PREFIX', 'wp_');
define('WP_DEBUG', berth_env('WP_DEBUG') === 'true');
// Berth's edge terminates TLS and says so.
if (isset($_SERVER['HTTP_X_FORWARDED_PROTO']) && $_SERVER['HTTP_X_FORWARDED_PROTO'] === 'https') {
    $_SERVER['HTTPS'] = 'on';
}
// Updates come with new releases of the application, never written into a running one.
define('AUTOMATIC_UPDATER_DISABLED', true);
define('DISALLOW_FILE_MODS', berth_env('WP_DISALLOW_FILE_MODS', 'true') === 'true');

if (!defined('ABSPATH')) {
    define('ABSPATH', __DIR__ . '/');
}
require_once ABSPATH . 'wp-settings.php';
`;

/**
 * Debian's files the release does without: its wp-config.php reads /etc/wordpress per host (Berth's
 * replaces it), and .htaccess is Apache's, a link to /etc/wordpress/htaccess that `cp -L` would fail
 * on when the admin removed that file.
 */
const LEFT_OUT = new Set(['.htaccess', 'wp-config.php', 'wp-config-sample.php']);

/** Fills `dest` (absent) with WordPress ready to serve from /app. */
export async function prepareWordPressRelease(dest: string): Promise<void> {
  await fs.access(path.join(WORDPRESS_SOURCE, 'wp-settings.php')).catch(() => {
    throw new Error(
      `WordPress is not installed on this host (${WORDPRESS_SOURCE}); run scripts/install-system.sh`,
    );
  });
  const entries = (await fs.readdir(WORDPRESS_SOURCE)).filter((name) => !LEFT_OUT.has(name));
  // The application's account's alone (0700) once handed over, like every release.
  await fs.mkdir(dest, { mode: 0o700 });
  // -L: the links into other Debian packages become files of the release (56 MB, 2,500 files: one
  // to two seconds on a small machine, the second longest part of such a deployment after packing it).
  await execFileAsync(
    'cp',
    ['-RL', '--', ...entries.map((name) => path.join(WORDPRESS_SOURCE, name)), `${dest}/`],
    { maxBuffer: 1024 * 1024 },
  );
  await fs.writeFile(path.join(dest, 'wp-config.php'), WORDPRESS_CONFIG, { mode: 0o644 });
  await fs.mkdir(path.join(dest, 'wp-content', 'uploads'), { recursive: true });
}
