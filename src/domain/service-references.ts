// References to a service's values in a secret (`value: ${services.db.password}`): the grammar, the
// fields each service type gives, and their resolution. The secret stores the reference text (sealed as
// any secret); the value is put in at each release from the service's connection, so it is never
// stored. docs/services.md ("Referencing a service's values") says the same in prose. Pure: no I/O.
import { connectionUrl, type ServiceConnection } from './app-services.js';
import type { ContainerServiceType, ServiceType } from './infrastructure/document.js';

/** The fields a reference may name, by the service's type (a service's or a container service's). */
export const REFERENCE_FIELDS: Readonly<Record<ServiceType | ContainerServiceType, readonly string[]>> = {
  mysql: ['host', 'port', 'user', 'password', 'database', 'url'],
  postgresql: ['host', 'port', 'user', 'password', 'database', 'url'],
  redis: ['host', 'port', 'user', 'password', 'url'],
  valkey: ['host', 'port', 'user', 'password', 'url'],
  rabbitmq: ['host', 'port', 'user', 'password', 'vhost', 'url'],
  minio: ['host', 'port', 'user', 'password', 'bucket', 'region', 'url'],
  sftp: ['host', 'port', 'user', 'password', 'url'],
  gotenberg: ['host', 'port', 'url'],
  'chrome-headless': ['host', 'port', 'url'],
  clickhouse: ['host', 'port'],
  meilisearch: ['host', 'port'],
  worker: [],
};

/** The fields of a type; none for a type this version does not know. */
const fieldsOf = (type: string): readonly string[] =>
  (REFERENCE_FIELDS as Readonly<Record<string, readonly string[]>>)[type] ?? [];

/**
 * `${services.<name>.<field>}`, or its escape `$${services.` (the literal text `${services.`). Any
 * other `${services.` is a malformed reference; other `${…}` text is not Berth's and stays as written.
 */
const TOKEN = /\$?\$\{services\.(?:([a-z0-9][a-z0-9-]*)\.([a-z]+)\})?/g;

export interface ServiceReference {
  service: string;
  field: string;
}

/** One piece of a secret's value: literal text or a reference. */
type Part = { text: string } | ServiceReference;

/** The value split into text and references, or the first malformed `${services.` it holds. */
function parse(value: string): { parts: Part[] } | { malformed: string } {
  const parts: Part[] = [];
  let last = 0;
  for (const match of value.matchAll(TOKEN)) {
    const at = match.index;
    if (at > last) parts.push({ text: value.slice(last, at) });
    last = at + match[0].length;
    if (match[0].startsWith('$$')) {
      parts.push({ text: match[0].slice(1) });
    } else if (match[1] === undefined || match[2] === undefined) {
      return { malformed: value.slice(at, at + 40) };
    } else {
      parts.push({ service: match[1], field: match[2] });
    }
  }
  if (last < value.length) parts.push({ text: value.slice(last) });
  return { parts };
}

const isReference = (part: Part): part is ServiceReference => 'service' in part;

/** Whether the value holds a reference or its escape (then it is resolved at each release). */
export function hasReferences(value: string): boolean {
  return value.includes('${services.');
}

/**
 * Whether the value is only references (`${services.db.host}:${services.db.port}` has literal text
 * too): export shows such a value as written, since it holds no credential; literal text might.
 */
export function isOnlyReferences(value: string): boolean {
  const parsed = parse(value);
  return 'parts' in parsed && parsed.parts.length > 0 && parsed.parts.every(isReference);
}

/**
 * What is wrong with the value's references, given the application's services (name → type): a
 * malformed reference, an unknown service, a field its type does not give. Empty when all is well.
 */
export function referenceProblems(value: string, services: ReadonlyMap<string, string>): string[] {
  const parsed = parse(value);
  if ('malformed' in parsed) {
    return [
      `'${parsed.malformed}' is not a service reference; expected \${services.<name>.<field>} (write $\${services. for the literal text).`,
    ];
  }
  const names = [...services.keys()].sort();
  const problems: string[] = [];
  for (const part of parsed.parts.filter(isReference)) {
    const type = services.get(part.service);
    if (type === undefined) {
      problems.push(
        `\${services.${part.service}.${part.field}} names no service of this application; ${
          names.length > 0 ? `its services are ${names.join(', ')}` : 'it has no services'
        }.`,
      );
      continue;
    }
    const fields = fieldsOf(type);
    if (!fields.includes(part.field)) {
      problems.push(
        `\${services.${part.service}.${part.field}}: service '${part.service}' (${type}) ${
          fields.length > 0 ? `gives ${fields.join(', ')}` : 'gives no values to reference'
        }.`,
      );
    }
  }
  return problems;
}

/** One field of a running service's connection. */
function fieldOf(c: ServiceConnection, field: string): string | undefined {
  switch (field) {
    case 'host':
      return c.host;
    case 'port':
      return String(c.port);
    case 'user':
      return c.username;
    case 'password':
      return c.password;
    case 'database':
      return c.database ?? undefined;
    case 'url':
      return connectionUrl(c);
    case 'vhost':
      return c.extra.vhost ?? '/';
    case 'bucket':
    case 'region':
      return c.extra[field] ?? '';
    default:
      return undefined;
  }
}

/**
 * The value with its references put in from the services' connections; undefined when one cannot be
 * (its service has no place to connect to yet, or it is gone): the secret is then left out, as the
 * service's own names are.
 */
export function resolveReferences(
  value: string,
  connections: readonly ServiceConnection[],
): string | undefined {
  const parsed = parse(value);
  // Only a value stored before references existed (apply refuses one) can be malformed: kept as written.
  if ('malformed' in parsed) return value;
  let out = '';
  for (const part of parsed.parts) {
    if (!isReference(part)) {
      out += part.text;
      continue;
    }
    const connection = connections.find((c) => c.name === part.service);
    const given = connection && fieldsOf(connection.type).includes(part.field);
    const resolved = given ? fieldOf(connection, part.field) : undefined;
    if (resolved === undefined) return undefined;
    out += resolved;
  }
  return out;
}
