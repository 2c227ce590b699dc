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
  return redactPaths(redactCredentials(out));
}

/** `scheme://user:pass@`, libpq's `password=…` and `PGPASSWORD=`/`MYSQL_PWD=` masked; nothing else. */
function redactCredentials(text: string): string {
  return text
    .replace(/(\b[a-z][a-z0-9+.-]*:\/\/[^:/?#@\s]*:)([^@\s]*)@/gi, `$1${MASK}@`)
    .replace(/\b(password|sslpassword)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s]+)/gi, `$1=${MASK}`)
    .replace(/\b(PGPASSWORD|MYSQL_PWD)=\S+/g, `$1=${MASK}`);
}

/**
 * Server file paths (`/var/lib/…/data/base/16384`, a data directory, a temp dir) say how the host is
 * laid out; answers and task results carry `<path>` instead. A path is a `/` that starts a token and
 * has at least two segments, so the `//host/db` of a URI stays.
 */
export function redactPaths(text: string): string {
  return text.replace(/(?<![\w:/.~@-])\/(?:[\w.@+-]+\/)+[\w.@+-]*/g, '<path>');
}

/** Field names whose values are secrets wherever they stand (a password, a token, a key's secret). */
const SECRET_FIELD = /(password|passphrase|secret|token|api_?key|private_?key|credentials?)$/i;
/** Maps of names to values that are secrets as a whole (an application's secrets, its environment). */
const SECRET_MAP = /^(secrets|environment|env|env_vars|variables)$/i;

/**
 * A JSON value as the audit log keeps it (issue 31, item 2): every value of a secret field or of a
 * secrets map replaced by ***, the names kept, and credentials inside text (URIs) masked as redactText
 * masks them (paths stay). `{secrets: {API_KEY: "x"}}` becomes `{secrets: {API_KEY: "***"}}`; `[{key, value}]` lists under
 * a secrets map keep `key` and lose `value`.
 */
export function redactValues(value: unknown, inSecretMap = false): unknown {
  if (Array.isArray(value)) return value.map((item) => redactValues(item, inSecretMap));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>).map(([key, item]) => {
        if (SECRET_FIELD.test(key)) return [key, item === null || item === undefined ? item : MASK];
        if (inSecretMap && !/^(key|name)$/i.test(key)) {
          return [key, item !== null && typeof item === 'object' ? redactValues(item, true) : MASK];
        }
        return [key, redactValues(item, SECRET_MAP.test(key))];
      }),
    );
  }
  if (inSecretMap) return MASK;
  return typeof value === 'string' ? redactCredentials(value) : value;
}
