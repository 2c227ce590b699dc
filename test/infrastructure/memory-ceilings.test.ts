// The operator's memory ceilings (issue 24): no replica, worker or service may ask more than
// BERTH_MAX_APP_MEMORY, and a team's applications together no more than BERTH_QUOTA_TEAM_MEMORY.
// Past either, apply answers 422 at the field, naming the ceiling and the setting, dry run included,
// and stores nothing.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { applicationMemoryMiB } from '../../src/domain/memory.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { apply, dumpStore } from './helpers.js';

type Obj = Record<string, unknown>;
type Errors = Record<string, string[]>;

describe('what an application asks of memory', () => {
  it('counts replicas and workers at its memory, services at theirs, minio not at all', () => {
    expect(applicationMemoryMiB({ memory: null, replicas: null, services: [], containerServices: [] })).toBe(
      512,
    );
    expect(
      applicationMemoryMiB({
        memory: '1Gi',
        replicas: 2,
        services: [
          { type: 'worker', memory: '8Gi' },
          { type: 'valkey', memory: '512Mi' },
          { type: 'postgresql', memory: null },
          { type: 'minio', memory: '4Gi' },
        ],
        containerServices: [{ memory: '1Gi' }],
      }),
    ).toBe(3 * 1024 + 512 + 256 + 1024);
  });

  it('reads both settings as memory sizes and reports every bad value together', () => {
    const config = loadConfig({ BERTH_MAX_APP_MEMORY: '512Mi', BERTH_QUOTA_TEAM_MEMORY: '10Gi' });
    expect(config.quotas).toMatchObject({ processMemoryMiB: 512, memoryMiB: 10 * 1024 });
    expect(loadConfig({}).quotas).toMatchObject({ processMemoryMiB: 4096, memoryMiB: 64 * 1024 });
    let error: unknown;
    try {
      loadConfig({ BERTH_MAX_APP_MEMORY: 'lots', BERTH_QUOTA_TEAM_MEMORY: '10GB' });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([
      "BERTH_QUOTA_TEAM_MEMORY must be a memory size with unit suffix Mi or Gi, such as 4Gi or 512Mi, got '10GB'",
      "BERTH_MAX_APP_MEMORY must be a memory size with unit suffix Mi or Gi, such as 4Gi or 512Mi, got 'lots'",
    ]);
  });
});

describe.each(DIALECTS)('memory ceilings at apply (%s)', (dialect) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(dialect, {
      env: { BERTH_MAX_APP_MEMORY: '2Gi', BERTH_QUOTA_TEAM_MEMORY: '6Gi' },
    });
  });
  afterAll(() => t.close());

  const document = (name: string, settings: Obj, more: Obj = {}) => ({
    apiVersion: 'v1',
    kind: 'Infrastructure',
    metadata: { name, team: t.user.team_id },
    spec: { application: { name, type: 'nodejs', settings }, ...more },
  });

  /** A 422 for `doc`, as a dry run and for real, with nothing stored; its errors. */
  async function refused(doc: Obj): Promise<Errors> {
    const before = await dumpStore(t.ctx.db);
    let errors: Errors = {};
    for (const query of ['?dry_run=true', '']) {
      const res = await apply(t, doc, query);
      expect(res.statusCode, res.body).toBe(422);
      errors = res.json<{ errors: Errors }>().errors;
    }
    expect(await dumpStore(t.ctx.db)).toEqual(before);
    return errors;
  }

  it('refuses a replica, worker or service over BERTH_MAX_APP_MEMORY, naming the field and the ceiling', async () => {
    const errors = await refused(
      document(
        'huge',
        { memory: '100000Gi' },
        {
          services: [
            { name: 'cache', type: 'valkey', memory: '3Gi' },
            { name: 'jobs', type: 'worker', command: 'node jobs.js', memory: '2Gi' },
          ],
          container_services: [{ name: 'pdf', type: 'gotenberg', memory: '2049Mi' }],
        },
      ),
    );
    expect(errors).toEqual({
      'spec.application.settings.memory': [
        "Application 'huge' settings: field 'memory' is 100000Gi; at most 2Gi is accepted for one process here. Ask for less, or ask the operator to raise BERTH_MAX_APP_MEMORY.",
      ],
      'spec.services.cache.memory': [
        "Service 'cache': field 'memory' is 3Gi; at most 2Gi is accepted for one process here. Ask for less, or ask the operator to raise BERTH_MAX_APP_MEMORY.",
      ],
      'spec.container_services.pdf.memory': [
        "Container service 'pdf': field 'memory' is 2049Mi; at most 2Gi is accepted for one process here. Ask for less, or ask the operator to raise BERTH_MAX_APP_MEMORY.",
      ],
    });
    // At the ceiling it is accepted.
    expect((await apply(t, document('huge', { memory: '2048Mi' }), '?dry_run=true')).statusCode).toBe(200);
  });

  it("keeps the team's applications within BERTH_QUOTA_TEAM_MEMORY, counting replicas, workers and services", async () => {
    // 1Gi × (2 replicas + 1 worker) + 512Mi + 1Gi = 4.5Gi of the 6Gi.
    const first = document(
      'first',
      { memory: '1Gi', replicas: 2 },
      {
        services: [
          { name: 'cache', type: 'valkey', memory: '512Mi' },
          { name: 'jobs', type: 'worker', command: 'node jobs.js' },
        ],
        container_services: [{ name: 'pdf', type: 'gotenberg', memory: '1Gi' }],
      },
    );
    expect((await apply(t, first)).statusCode).toBe(200);

    // 2Gi more would make 6.5Gi.
    const second = document('second', { memory: '1Gi', replicas: 2 });
    const message =
      "Application 'second' would ask 2Gi of memory (memory × (replicas + workers), plus each service's memory), bringing the team's applications to 6656Mi; the team may ask at most 6Gi in all. Ask for less, or ask the operator to raise BERTH_QUOTA_TEAM_MEMORY.";
    expect(await refused(second)).toEqual({
      'spec.application.settings.memory': [message],
      'spec.application.settings.replicas': [message],
    });

    // One replica fits (5.5Gi); scaling it to two later is refused at replicas alone.
    expect((await apply(t, document('second', { memory: '1Gi', replicas: 1 }))).statusCode).toBe(200);
    expect(Object.keys(await refused(second))).toEqual(['spec.application.settings.replicas']);
    // So is a worker added to it: it runs at the application's memory.
    const withWorker = document(
      'second',
      { memory: '1Gi' },
      { services: [{ name: 'mailer', type: 'worker', command: 'node mail.js' }] },
    );
    expect(Object.keys(await refused(withWorker))).toEqual(['spec.services']);

    // What does not grow is applied even at the quota; what shrinks frees room for the other.
    expect((await apply(t, first)).statusCode).toBe(200);
    const smaller = document('first', { memory: '512Mi', replicas: 2 });
    expect((await apply(t, smaller)).statusCode).toBe(200);
    expect((await apply(t, second)).statusCode).toBe(200);
  });
});
