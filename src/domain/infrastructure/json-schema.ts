// A JSON Schema (draft 2020-12) of the Infrastructure document for editors (YAML language servers
// read it from /schemas/infrastructure.json). Built from the same constants as the validator, so
// enumerations never drift; the validator stays the authority (it also checks cross-field rules).
import { APPLICATION_TYPES } from '../health-checks.js';
import { MANAGED_DATABASE_PLANS, MANAGED_DATABASE_ZONES, OBJECT_STORAGE_REGIONS } from '../plans.js';
import {
  CONTAINER_SERVICE_TYPES,
  DOCUMENT_BUCKET_ACLS,
  NODEJS_VERSIONS,
  PHP_VERSIONS,
  SERVICE_TYPES,
} from './document.js';

const str = (description?: string) => ({ type: 'string', ...(description ? { description } : {}) });
const strList = (description?: string) => ({
  type: 'array',
  items: { type: 'string' },
  ...(description ? { description } : {}),
});
const closed = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object',
  additionalProperties: false,
  properties,
  ...(required.length > 0 ? { required } : {}),
});
const name = { type: 'string', pattern: '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$' };
const memory = { type: 'string', pattern: '^[1-9][0-9]{0,6}(Mi|Gi)$', description: 'e.g. 512Mi or 2Gi' };
const sizeGi = { type: 'string', pattern: '^[1-9][0-9]{0,6}Gi$', description: 'e.g. 20Gi' };
const version = { type: ['string', 'number'] };

function managedDatabaseSchema() {
  const engines = (['mysql', 'pg', 'valkey'] as const).map((engine) => ({
    if: { properties: { type: { enum: engine === 'valkey' ? ['valkey', 'redis'] : [engine] } } },
    then: { properties: { plan: { enum: MANAGED_DATABASE_PLANS[engine] } } },
  }));
  return {
    ...closed(
      {
        name,
        type: { enum: ['mysql', 'pg', 'valkey', 'redis'], description: 'redis is stored as valkey' },
        plan: str('A plan the platform offers for the engine'),
        zone: { enum: MANAGED_DATABASE_ZONES },
        password: {
          type: 'string',
          pattern: '^\\$\\{DB_[A-Z0-9_]+_PASSWORD\\}$',
          description: 'Export placeholder only',
        },
        users: { type: 'array', items: closed({ username: str(), authentication: str() }, ['username']) },
        logical_databases: {
          type: 'array',
          items: closed({ name: str(), character_set: str(), collation: str() }, ['name']),
        },
      },
      ['name', 'type', 'plan', 'zone'],
    ),
    allOf: engines,
  };
}

export function infrastructureJsonSchema(): Record<string, unknown> {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    $id: '/schemas/infrastructure.json',
    title: 'Berth Infrastructure document',
    ...closed(
      {
        apiVersion: { const: 'v1' },
        kind: { const: 'Infrastructure' },
        metadata: closed({ name: str('Application name'), team: { type: ['string', 'integer'] } }, [
          'name',
          'team',
        ]),
        spec: closed({
          application: closed(
            {
              name: str('Must equal metadata.name'),
              type: { enum: APPLICATION_TYPES, description: 'Cannot change after creation' },
              version,
              label: str(),
              tags: strList(),
              repository: closed({
                url: str('an https://, http:// or git:// URL (ssh is not supported)'),
                owner: str(),
                name: str(),
                branch: str(),
              }),
              runtime: closed({
                php_version: { enum: [...PHP_VERSIONS, ...PHP_VERSIONS.map(Number)] },
                nodejs_version: { enum: [...NODEJS_VERSIONS, 20, 22, 24] },
              }),
              commands: closed({ build: strList(), init: strList(), start: str() }),
              settings: closed({
                health_check_path: { type: 'string', pattern: '^/\\S*$' },
                health_check_enabled: { type: 'boolean' },
                scheduler_enabled: { type: 'boolean' },
                replicas: { type: 'integer', minimum: 1, maximum: 100 },
                memory,
                scheduled_deletion_at: {
                  type: 'string',
                  description: 'ISO 8601; omit to clear the schedule',
                },
              }),
              php: closed({
                extensions: strList(),
                settings: { type: 'array', items: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_.]*=' } },
              }),
            },
            ['type'],
          ),
          domains: { type: 'array', items: closed({ domain: str('Host name') }, ['domain']) },
          secrets: {
            type: 'array',
            items: closed(
              {
                key: { type: 'string', pattern: '^[A-Za-z_][A-Za-z0-9_]*$' },
                value: {
                  type: ['string', 'number', 'boolean'],
                  description:
                    'The value; ${services.<name>.<field>} is put in from the service at each release (docs/services.md)',
                },
              },
              ['key', 'value'],
            ),
          },
          volumes: {
            type: 'array',
            items: closed(
              {
                name,
                mount_path: { type: 'string', pattern: '^/' },
                volume_size: { type: 'integer', minimum: 1 },
              },
              ['name', 'mount_path', 'volume_size'],
            ),
          },
          services: {
            type: 'array',
            items: closed(
              {
                name,
                type: { enum: SERVICE_TYPES },
                version,
                memory,
                volume_size: sizeGi,
                settings: { type: 'object' },
                command: str('Required for type worker'),
              },
              ['name', 'type'],
            ),
          },
          container_services: {
            type: 'array',
            items: closed(
              {
                name,
                type: { enum: CONTAINER_SERVICE_TYPES },
                version,
                memory,
                volume_size: sizeGi,
                settings: { type: 'object', additionalProperties: { type: 'string' } },
              },
              ['name', 'type'],
            ),
          },
          managed_databases: { type: 'array', items: managedDatabaseSchema() },
          object_storage: {
            type: 'array',
            items: closed(
              {
                name,
                zone: { enum: OBJECT_STORAGE_REGIONS },
                plan: str('Accepted and ignored'),
                secret_key: { type: 'string', pattern: '^\\$\\{STORAGE_[A-Z0-9_]+_SECRET_KEY\\}$' },
                buckets: {
                  type: 'array',
                  items: {
                    oneOf: [
                      { type: 'string' },
                      closed({ name: str(), acl: { enum: [...DOCUMENT_BUCKET_ACLS] } }, ['name']),
                    ],
                  },
                },
                users: {
                  type: 'array',
                  items: closed({ username: str(), policies: { type: 'array' } }, ['username']),
                },
              },
              ['name', 'zone'],
            ),
          },
        }),
      },
      ['apiVersion', 'kind', 'metadata', 'spec'],
    ),
  };
}
