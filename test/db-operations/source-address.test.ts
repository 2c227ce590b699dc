// Migration checks and migrations reach a tenant's source only under the tools' address rule, and
// every refused or unreachable address answers the same, so the internal network cannot be mapped.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkMigrationSource, dumpMigrate } from '../../src/drivers/databases/operations/index.js';
import { createAddressGuard } from '../../src/drivers/net/guard.js';
import { freePort } from '../helpers/processes.js';
import { startPostgres, type PostgresServer } from '../helpers/postgres-server.js';
import { pgQuery, withDb } from './fixtures.js';

describe('source addresses', () => {
  let source: PostgresServer;
  let target: PostgresServer;
  beforeAll(async () => {
    [source, target] = await Promise.all([startPostgres(), startPostgres()]);
    await pgQuery(source.url, 'CREATE DATABASE app');
    await pgQuery(withDb(source.url, 'app'), 'CREATE TABLE t AS SELECT 1 AS x');
  });
  afterAll(async () => {
    await Promise.all([source?.stop(), target?.stop()]);
  });

  const strict = createAddressGuard({ allow: [] });
  const loopbackAllowed = createAddressGuard({ allow: ['127.0.0.1'] });

  it('answers a refused private address, a closed port and an unresolvable name identically', async () => {
    const closed = await freePort();
    const results = await Promise.all([
      checkMigrationSource({ sourceUri: source.url, guard: strict }),
      checkMigrationSource({ sourceUri: 'postgres://u:pw@10.11.12.13:5432/x', guard: strict }),
      checkMigrationSource({ sourceUri: 'postgres://u:pw@169.254.169.254/x', guard: strict }),
      checkMigrationSource({ sourceUri: `postgres://u:pw@127.0.0.1:${closed}/x`, guard: loopbackAllowed }),
      checkMigrationSource({ sourceUri: 'postgres://u:pw@no-such-host.invalid/x', guard: strict }),
    ]);
    for (const result of results) {
      expect(result).toEqual(results[0]);
      expect(result.resultCodes).toEqual([
        { code: 'SOURCE_UNREACHABLE', message: 'Cannot connect to the source server' },
      ]);
    }
  });

  it('refuses a loopback source for a migration unless the operator allows it', async () => {
    const refused = await dumpMigrate({ sourceUri: source.url, targetUri: target.url, guard: strict });
    expect(refused).toMatchObject({ status: 'failed', error: 'Cannot connect to the source server' });
    const allowed = await dumpMigrate({
      sourceUri: source.url,
      targetUri: target.url,
      guard: loopbackAllowed,
    });
    expect(allowed.status).toBe('done');
    expect(await pgQuery(withDb(target.url, 'app'), 'SELECT x FROM t')).toEqual([{ x: 1 }]);
  });
});
