// Parses the `source_service_uri` of a migration into connection parts; the password stays out of messages.
import { OperationError } from './errors.js';
import { redactUri } from '../../../domain/redact.js';

export type Engine = 'pg' | 'mysql';
export type SslMode = 'disable' | 'prefer' | 'require';

export interface ConnectionSpec {
  engine: Engine;
  host: string;
  port: number;
  user: string;
  password: string;
  /** Database named in the URI path (the one to connect to for catalogue queries). */
  database: string;
  sslMode: SslMode;
}

const SCHEMES: Record<string, Engine> = {
  'postgres:': 'pg',
  'postgresql:': 'pg',
  'pg:': 'pg',
  'mysql:': 'mysql',
  'mariadb:': 'mysql',
};

/**
 * `ssl` (the request's boolean) wins over the URI's `sslmode`/`ssl-mode` parameter: true → require,
 * false → disable. Without either, `prefer` (TLS if the source offers it).
 */
export function parseConnectionUri(uri: string, options: { ssl?: boolean } = {}): ConnectionSpec {
  const url = parseLenient(uri);
  if (!url)
    throw new OperationError('INVALID_SOURCE_URI', `Source URI is not a valid URI: ${redactUri(uri)}`);
  const secrets = [decodeURIComponent(url.password)];
  const engine = SCHEMES[url.protocol];
  if (!engine) {
    throw new OperationError(
      'INVALID_SOURCE_URI',
      `Unsupported scheme "${url.protocol.replace(/:$/, '')}" (use postgres:// or mysql://)`,
      secrets,
    );
  }
  if (!url.hostname) throw new OperationError('INVALID_SOURCE_URI', 'Source URI has no host', secrets);
  const port = url.port ? Number(url.port) : engine === 'pg' ? 5432 : 3306;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new OperationError('INVALID_SOURCE_URI', 'Source URI has an invalid port', secrets);
  }
  const user = decodeURIComponent(url.username);
  if (!user) throw new OperationError('INVALID_SOURCE_URI', 'Source URI has no user name', secrets);
  const path = decodeURIComponent(url.pathname.replace(/^\//, ''));
  const database = path || (engine === 'pg' ? 'postgres' : '');
  let sslMode: SslMode = 'prefer';
  const param = (url.searchParams.get('sslmode') ?? url.searchParams.get('ssl-mode') ?? '').toLowerCase();
  if (param === 'disable' || param === 'disabled') sslMode = 'disable';
  else if (param && param !== 'prefer' && param !== 'preferred' && param !== 'allow') sslMode = 'require';
  if (options.ssl === true) sslMode = 'require';
  if (options.ssl === false) sslMode = 'disable';
  // IPv6 literals come back bracketed from URL; drivers and libpq want them bare.
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return { engine, host, port, user, password: decodeURIComponent(url.password), database, sslMode };
}

/**
 * People paste passwords with `/`, `#`, `?` or `@` unencoded; WHATWG URL parsing then fails or splits in the
 * wrong place. The password runs from the first `:` after the user to the last `@` before the host.
 */
function parseLenient(uri: string): URL | undefined {
  const raw = /^([a-z][a-z0-9+.-]*:\/\/)([^:@/]*):(.*)@([^@/?#]+)([/?#].*)?$/i.exec(uri);
  if (raw) {
    const [, scheme, user, password, host, rest] = raw;
    let decoded = password ?? '';
    try {
      decoded = decodeURIComponent(decoded);
    } catch {
      // A raw `%` that is not an escape: take the password literally.
    }
    try {
      return new URL(`${scheme}${user}:${encodeURIComponent(decoded)}@${host}${rest ?? ''}`);
    } catch {
      return undefined;
    }
  }
  try {
    return new URL(uri);
  } catch {
    return undefined;
  }
}

/** A URI for the same connection with a different database, for per-database work. */
export function withDatabase(spec: ConnectionSpec, database: string): ConnectionSpec {
  return { ...spec, database };
}
