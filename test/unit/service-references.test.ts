// References to a service's values in a secret (docs/services.md, "Referencing a service's values"):
// each field of each type resolves to what the service's connection says, references sit inside a
// larger value, `$${services.` is the literal text, and a service with no connection leaves the value
// unresolved (the secret is then left out of the environment).
import { describe, expect, it } from 'vitest';
import { CONTAINER_SERVICE_TYPES, SERVICE_TYPES } from '../../src/domain/infrastructure/document.js';
import { connectionUrl, type ServiceConnection } from '../../src/domain/app-services.js';
import {
  isOnlyReferences,
  REFERENCE_FIELDS,
  referenceProblems,
  resolveReferences,
} from '../../src/domain/service-references.js';

const at = (
  name: string,
  type: string,
  port: number,
  extra: Record<string, string> = {},
): ServiceConnection => ({
  name,
  type,
  host: '127.0.0.1',
  port,
  username: 'app',
  password: `pw/${name}+`,
  database: type === 'mysql' ? 'shop' : null,
  extra,
});

const db = at('db', 'mysql', 3307);
const queue = at('queue', 'rabbitmq', 5673, { vhost: 'orders' });
const files = at('files', 'minio', 9000, {
  endpoint: 'http://127.0.0.1:9000',
  bucket: 'b1',
  region: 'europe-1',
});
const all = [db, queue, files];

describe('service references', () => {
  it('resolves every field from the connection, inside a larger value too', () => {
    expect(resolveReferences('${services.db.host}', all)).toBe('127.0.0.1');
    expect(resolveReferences('${services.db.port}', all)).toBe('3307');
    expect(resolveReferences('${services.db.user}', all)).toBe('app');
    expect(resolveReferences('${services.db.password}', all)).toBe('pw/db+');
    expect(resolveReferences('${services.db.database}', all)).toBe('shop');
    expect(resolveReferences('${services.db.url}', all)).toBe(connectionUrl(db));
    expect(resolveReferences('${services.queue.vhost}', all)).toBe('orders');
    expect(resolveReferences('${services.files.bucket}/${services.files.region}', all)).toBe('b1/europe-1');
    expect(resolveReferences('${services.files.url}', all)).toBe('http://127.0.0.1:9000');
    expect(
      resolveReferences('mysql://${services.db.user}@${services.db.host}:${services.db.port}/x', all),
    ).toBe('mysql://app@127.0.0.1:3307/x');
  });

  it('reads $${services. as the literal text and leaves other ${…} alone', () => {
    expect(resolveReferences('a $${services.db.host} ${HOME} ${services.db.port}', all)).toBe(
      'a ${services.db.host} ${HOME} 3307',
    );
    expect(referenceProblems('$${services.nope.x}', new Map())).toEqual([]);
    expect(isOnlyReferences('$${services.db.host}')).toBe(false);
  });

  it('leaves a value unresolved when its service has no connection (yet) or does not give the field', () => {
    expect(resolveReferences('${services.cache.url}', all)).toBeUndefined();
    expect(resolveReferences('x${services.db.vhost}', all)).toBeUndefined();
  });

  it('knows a value made only of references from one with literal text', () => {
    expect(isOnlyReferences('${services.db.password}')).toBe(true);
    expect(isOnlyReferences('${services.db.user}${services.db.password}')).toBe(true);
    expect(isOnlyReferences('${services.db.host}:${services.db.port}')).toBe(false);
    expect(isOnlyReferences('plain')).toBe(false);
    expect(isOnlyReferences('')).toBe(false);
  });

  it('gives every service and container service type a field list', () => {
    for (const type of [...SERVICE_TYPES, ...CONTAINER_SERVICE_TYPES])
      expect(REFERENCE_FIELDS[type], type).toBeDefined();
  });
});
