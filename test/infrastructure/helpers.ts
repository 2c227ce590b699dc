// Shared pieces of the infrastructure tests: a representative document, apply/export calls, and a
// dump of every table apply may write (to prove that a failed apply leaves the store as it was).
import type { Kysely } from 'kysely';
import { stringify } from 'yaml';
import type { Database } from '../../src/db/schema/index.js';
import type { TestApp } from '../helpers/app.js';

export const FUTURE = '2030-01-01T00:00:00.000Z';

export function fullDocument(team: string | number, name = 'shop'): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team },
    spec: {
      application: {
        name,
        type: 'laravel',
        version: '12',
        label: 'Shop',
        tags: ['production'],
        repository: { url: 'https://github.com/acme/shop', owner: 'acme', name: 'shop', branch: 'main' },
        runtime: { php_version: '8.2' },
        commands: { build: ['composer install'], init: ['php artisan migrate --force'], start: 'php-fpm' },
        settings: { health_check_path: '/health', scheduler_enabled: true, replicas: 2, memory: '1024Mi' },
        php: { extensions: ['intl'], settings: ['memory_limit=512M'] },
      },
      domains: [{ domain: `${name}.example.com` }],
      secrets: [{ key: 'APP_KEY', value: 'base64:abc' }],
      volumes: [{ name: 'storage', mount_path: '/var/www/html/storage', volume_size: 10 }],
      services: [
        { name: 'cache', type: 'valkey', version: '7', memory: '512Mi' },
        { name: 'worker', type: 'worker', memory: '1Gi', command: 'php artisan queue:work' },
      ],
      container_services: [
        { name: 'pdf', type: 'gotenberg', version: '8', memory: '1Gi', settings: { LOG: 'info' } },
      ],
      managed_databases: [
        {
          name: 'main-db',
          type: 'pg',
          plan: '1x1xCPU-2GB-25GB',
          zone: 'de-fra1',
          users: [{ username: 'app', authentication: 'scram-sha-256' }],
          logical_databases: [{ name: 'shop' }],
        },
      ],
      object_storage: [{ name: 'files', zone: 'europe-1', buckets: ['shop-uploads'] }],
    },
  };
}

export const yaml = (doc: unknown): string => stringify(doc);

export async function apply(t: TestApp, body: string | Record<string, unknown>, query = '') {
  const text = typeof body === 'string' ? body : yaml(body);
  return t.request({
    method: 'POST',
    url: `/api/v1/infrastructure/apply${query}`,
    headers: { ...t.auth.platform, 'content-type': 'application/yaml' },
    payload: text,
  });
}

export const TABLES = [
  'applications',
  'domains',
  'secrets',
  'volumes',
  'services',
  'container_services',
  'deployments',
  'managed_databases',
  'object_storages',
  'jobs',
] as const;

/** Every row of every table apply writes, in a stable order. */
export async function dumpStore(db: Kysely<Database>): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of TABLES) {
    out[table] = await db.selectFrom(table).selectAll().orderBy('id').execute();
  }
  return out;
}
