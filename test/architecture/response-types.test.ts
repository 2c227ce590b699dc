// Every answer shape is written once, in the response schemas (src/http/schemas): the dashboard and the
// CLI's client take theirs from them as types (docs/architecture.md, "Response types"). Fast: the
// sources are parsed, not type-checked.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { copiedShapes, declaredTypes, responseSchemas } from './response-types.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CONSUMERS = ['web/src', 'src/cli/client'];

/**
 * The types the dashboard and the CLI once wrote by hand (issue 27), now taken from the schemas: none
 * of them may be written by hand again, under this name, wherever it is declared.
 */
const DERIVED = [
  // web/src/api.ts, pages
  'User',
  'Team',
  'Role',
  'TeamDetail',
  'Credential',
  'IssuedCredential',
  'Notification',
  'Schedule',
  'Deployment',
  'HealthCheck',
  'AppSummary',
  'AppDetail',
  'AppStatus',
  'AppService',
  'ServiceState',
  'Instance',
  'ApplyResult',
  'DatabaseSummary',
  'DatabaseDetail',
  'StorageSummary',
  'StorageDetail',
  'Task',
  'MigrationStatus',
  'Balance',
  'UsageEntry',
  'SignedIn',
  'Session',
  'TeamCreated',
  // src/cli/client
  'ApplyResponse',
  'ResourceChange',
  'Status',
  'LogLine',
  'Uploaded',
  'SourceUpload',
  'TeamResource',
  'PlatformDatabase',
  'DbService',
];

const schemas = await responseSchemas(path.join(ROOT, 'src/http/schemas'));

describe('response types', () => {
  it('are taken from the response schemas in the dashboard and the CLI, never written again', () => {
    const declared = CONSUMERS.flatMap((dir) => declaredTypes(path.join(ROOT, dir), ROOT));
    expect(copiedShapes(declared, schemas, DERIVED)).toEqual([]);
    // The list names real types: most are still declared (derived) in a consumer.
    const names = new Set(declared.map((d) => d.name));
    expect(DERIVED.filter((name) => names.has(name)).length).toBeGreaterThan(DERIVED.length / 2);
  });

  it('are checked against every response schema, its objects included', () => {
    for (const name of ['UserResponse', 'TaskResponse', 'Deployment', 'ApplyResponse', 'BalanceResponse'])
      expect(schemas.names, name).toContain(name);
    expect(schemas.objects.map((o) => o.where)).toEqual(
      expect.arrayContaining([
        'ApplicationResponse.data',
        'StatusResponse.data.replicas',
        'UsageResponse.data[]',
      ]),
    );
  });

  it('find a copy: a schema’s name, a listed name or a schema’s fields written by hand', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-response-types-'));
    try {
      fs.writeFileSync(
        path.join(dir, 'copies.ts'),
        [
          // A schema's name (and its name without "Response"), as an interface or a type literal.
          'interface TaskResponse { id: string }',
          'export type MigrationStatus = { status: string };',
          // A listed name written by hand again.
          'export interface AppSummary { id: number }',
          // The fields of a schema object under a new name, and inline.
          'export type Replicas = { desired: number; running: number; total: number };',
          'export const f = (b: { allowance: number; used: number; remaining: number }) => b;',
          'export type T = TaskResponse;',
        ].join('\n'),
      );
      fs.writeFileSync(
        path.join(dir, 'derived.tsx'),
        [
          "import type { Static } from 'typebox';",
          "import type { TaskResponse, DeploymentResponse } from './schemas.js';",
          'export type Task = Static<typeof TaskResponse>;',
          "export type Deployment = Static<typeof DeploymentResponse>['data'];",
          // Not a copy: a view with fields of its own, and too few fields to say.
          'export type AppSummary = Pick<Task, "id"> & { shown: Deployment };',
          'export interface Props { appId: number; owner: boolean; onChange: () => void }',
          'export const x = (p: { id: number; name: string }) => <b>{p.name}</b>;',
        ].join('\n'),
      );
      const problems = copiedShapes(declaredTypes(dir), schemas, ['AppSummary']);
      expect(problems).toEqual([
        expect.stringMatching(/^copies\.ts:1: interface TaskResponse is written by hand/),
        expect.stringMatching(/^copies\.ts:2: type MigrationStatus is written by hand/),
        expect.stringMatching(/^copies\.ts:3: interface AppSummary is written by hand/),
        expect.stringMatching(/^copies\.ts:4: type Replicas copies fields of StatusResponse\.data\.replicas/),
        expect.stringMatching(/^copies\.ts:5: a type copies fields of BalanceResponse\.data/),
      ]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
