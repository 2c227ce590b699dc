// One ordered list of migrations for both dialects. Add a feature's migration at the end.
import { Migrator, type Kysely, type Migration, type MigrationProvider } from 'kysely';
import type { Dialect } from '../dialect.js';
import * as m001 from './001_foundation.js';
import * as m002 from './002_infrastructure.js';
import * as m003 from './003_tools.js';
import * as m006 from './006_object_storage.js';
import * as m004 from './004_scheduled_deletion.js';
import * as m005 from './005_managed_instances.js';
import * as m008 from './008_db_operations.js';
import * as m009 from './009_team_revisions.js';
import * as m010 from './010_s3_object_files.js';
import * as m011 from './011_s3_features.js';
import * as m017 from './017_user_credit_allowance.js';
import * as m018 from './018_s3_checksums.js';
import * as m019 from './019_runtime.js';
import * as m020 from './020_accounts.js';
import * as m021 from './021_app_services.js';
import * as m022 from './022_service_instances.js';
import * as m023 from './023_app_object_storage.js';
import * as m024 from './024_bucket_namespaces.js';
import * as m025 from './025_bucket_access.js';
import * as m026 from './026_webhooks.js';
import * as m027 from './027_audit_log.js';
import * as m029 from './029_bucket_acls.js';

type DialectMigration = { up(db: Kysely<unknown>, dialect: Dialect): Promise<void> };

const MIGRATIONS: Record<string, DialectMigration> = {
  '001_foundation': m001,
  '002_infrastructure': m002,
  '003_tools': m003,
  '006_object_storage': m006,
  '004_scheduled_deletion': m004,
  '005_managed_instances': m005,
  '008_db_operations': m008,
  '009_team_revisions': m009,
  '010_s3_object_files': m010,
  '011_s3_features': m011,
  '017_user_credit_allowance': m017,
  '018_s3_checksums': m018,
  '019_runtime': m019,
  '020_accounts': m020,
  '021_app_services': m021,
  '022_service_instances': m022,
  '023_app_object_storage': m023,
  '024_bucket_namespaces': m024,
  '025_bucket_access': m025,
  '026_webhooks': m026,
  '027_audit_log': m027,
  '029_bucket_acls': m029,
};

export function migrator(db: Kysely<unknown>, dialect: Dialect): Migrator {
  const provider: MigrationProvider = {
    getMigrations: () =>
      Promise.resolve(
        Object.fromEntries(
          Object.entries(MIGRATIONS).map(([name, m]): [string, Migration] => [
            name,
            { up: (kdb) => m.up(kdb, dialect) },
          ]),
        ),
      ),
  };
  return new Migrator({ db, provider });
}

export async function migrateToLatest(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  const { error, results } = await migrator(db, dialect).migrateToLatest();
  const failed = results?.find((r) => r.status === 'Error');
  if (error !== undefined || failed) {
    throw new Error(`Migration ${failed?.migrationName ?? ''} failed`, { cause: error });
  }
}
