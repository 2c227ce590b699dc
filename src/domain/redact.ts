// Passwords in source URIs must never reach logs, task results or error messages; server paths never
// reach answers. Pure text rules: the database drivers and the services both apply them.

const MASK = '***';

/** The URI with its password (if any) replaced by ***; unparsable input is masked wholesale after `//`. */
export function redactUri(uri: string): string {
  try {
    const url = new URL(uri);
    if (url.password) url.password = MASK;
    for (const key of ['password', 'sslpassword'])
      if (url.searchParams.has(key)) url.searchParams.set(key, MASK);
    return url.toString();
  } catch {
    return redactText(uri);
  }
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * Removes the given secrets (raw and URL-encoded) wherever they stand as a whole (not inside a longer
 * word: the password `p` leaves "unexpectedly" alone) and anything that looks like a credential:
 * `scheme://user:pass@`, `password=…` in libpq conninfo strings, and `PGPASSWORD=`/`MYSQL_PWD=`.
 */
export function redactText(text: string, secrets: readonly string[] = []): string {
  let out = text;
  for (const secret of secrets) {
    if (!secret) continue;
    for (const form of new Set([secret, encodeURIComponent(secret)])) {
      out = out.replace(new RegExp(`(?<![A-Za-z0-9])${escapeRegExp(form)}(?![A-Za-z0-9])`, 'g'), MASK);
    }
  }
  out = out.replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)([^@\s]*)@/gi, `$1${MASK}@`);
  out = out.replace(/\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]+)/gi, `$1=${MASK}`);
  out = out.replace(/\b(PGPASSWORD|MYSQL_PWD)=\S+/g, `$1=${MASK}`);
  return redactPaths(out);
}

/**
 * Server file paths (`/var/lib/…/data/base/16384`, a data directory, a temp dir) say how the host is
 * laid out; answers and task results carry `<path>` instead. A path is a `/` that starts a token and
 * has at least two segments, so the `//host/db` of a URI stays.
 */
export function redactPaths(text: string): string {
  return text.replace(/(?<![\w:/.~@-])\/(?:[\w.@+-]+\/)+[\w.@+-]*/g, '<path>');
}
