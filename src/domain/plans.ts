// Plans the platform offers per managed-database engine, copied from UpCloud's catalogue
// (GET /1.3/database/service-types, recorded 2024-11-12; test/fixtures/upcloud/plans.json).
// Copied rather than read at run time so that the server never depends on the reference tree.
// Valkey took over Redis's plans (UpCloud deprecated Redis in favour of Valkey with the same sizes).

export type ManagedDatabaseEngine = 'mysql' | 'pg' | 'valkey';

export const MANAGED_DATABASE_ENGINES: readonly ManagedDatabaseEngine[] = ['mysql', 'pg', 'valkey'];

export const MANAGED_DATABASE_PLANS: Readonly<Record<ManagedDatabaseEngine, readonly string[]>> = {
  mysql: [
    '1x1xCPU-2GB-25GB',
    '1x2xCPU-4GB-100GB',
    '1x2xCPU-4GB-50GB',
    '2x16xCPU-64GB-1000GB',
    '2x16xCPU-64GB-1500GB',
    '2x20xCPU-128GB-2000GB',
    '2x2xCPU-4GB-100GB',
    '2x2xCPU-4GB-50GB',
    '2x4xCPU-8GB-100GB',
    '2x4xCPU-8GB-50GB',
    '2x6xCPU-16GB-100GB',
    '2x6xCPU-16GB-250GB',
    '2x8xCPU-32GB-100GB',
    '2x8xCPU-32GB-250GB',
    '2x8xCPU-32GB-500GB',
    '3x16xCPU-64GB-1000GB',
    '3x16xCPU-64GB-2000GB',
    '3x20xCPU-128GB-2000GB',
    '3x2xCPU-4GB-100GB',
    '3x2xCPU-4GB-200GB',
    '3x4xCPU-8GB-100GB',
    '3x4xCPU-8GB-200GB',
    '3x6xCPU-16GB-200GB',
    '3x6xCPU-16GB-500GB',
    '3x8xCPU-32GB-1000GB',
    '3x8xCPU-32GB-200GB',
    '3x8xCPU-32GB-500GB',
  ],
  pg: [
    '1x1xCPU-2GB-25GB',
    '1x2xCPU-4GB-100GB',
    '1x2xCPU-4GB-50GB',
    '2x16xCPU-64GB-1000GB',
    '2x16xCPU-64GB-1500GB',
    '2x20xCPU-128GB-2000GB',
    '2x2xCPU-4GB-100GB',
    '2x2xCPU-4GB-50GB',
    '2x4xCPU-8GB-100GB',
    '2x4xCPU-8GB-50GB',
    '2x6xCPU-16GB-100GB',
    '2x6xCPU-16GB-250GB',
    '2x8xCPU-32GB-100GB',
    '2x8xCPU-32GB-250GB',
    '2x8xCPU-32GB-500GB',
    '3x16xCPU-64GB-1000GB',
    '3x16xCPU-64GB-2000GB',
    '3x20xCPU-128GB-2000GB',
    '3x2xCPU-4GB-100GB',
    '3x2xCPU-4GB-200GB',
    '3x4xCPU-8GB-100GB',
    '3x4xCPU-8GB-200GB',
    '3x6xCPU-16GB-200GB',
    '3x6xCPU-16GB-500GB',
    '3x8xCPU-32GB-1000GB',
    '3x8xCPU-32GB-200GB',
    '3x8xCPU-32GB-500GB',
  ],
  valkey: [
    '1x16xCPU-112GB',
    '1x1xCPU-2GB',
    '1x2xCPU-14GB',
    '1x2xCPU-4GB',
    '1x2xCPU-8GB',
    '1x4xCPU-28GB',
    '1x8xCPU-56GB',
    '2x16xCPU-112GB',
    '2x1xCPU-2GB',
    '2x2xCPU-14GB',
    '2x2xCPU-4GB',
    '2x2xCPU-8GB',
    '2x4xCPU-28GB',
    '2x8xCPU-56GB',
    '3x16xCPU-112GB',
    '3x1xCPU-2GB',
    '3x2xCPU-14GB',
    '3x2xCPU-4GB',
    '3x2xCPU-8GB',
    '3x4xCPU-28GB',
    '3x8xCPU-56GB',
  ],
};

const PLAN_SETS: Readonly<Record<ManagedDatabaseEngine, ReadonlySet<string>>> = {
  mysql: new Set(MANAGED_DATABASE_PLANS.mysql),
  pg: new Set(MANAGED_DATABASE_PLANS.pg),
  valkey: new Set(MANAGED_DATABASE_PLANS.valkey),
};

export function isPlanOffered(engine: ManagedDatabaseEngine, plan: string): boolean {
  return PLAN_SETS[engine].has(plan);
}

/** Managed database zones (spec, Limits). */
export const MANAGED_DATABASE_ZONES: readonly string[] = [
  'au-syd1',
  'de-fra1',
  'dk-cph1',
  'es-mad1',
  'fi-hel1',
  'fi-hel2',
  'nl-ams1',
  'no-svg1',
  'pl-waw1',
  'se-sto1',
  'sg-sin1',
  'uk-lon1',
  'us-chi1',
  'us-nyc1',
  'us-sjo1',
];

/** Object storage regions, the `zone` field of an object storage entry (spec, Limits). */
export const OBJECT_STORAGE_REGIONS: readonly string[] = [
  'apac-1',
  'europe-1',
  'europe-2',
  'europe-3',
  'europe-4',
  'us-1',
];
