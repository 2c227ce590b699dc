// The postgresql, mysql, redis and valkey services run as private instances of the managed-database
// driver's engines (docs/services.md): this adapter gives that driver the shape of a service runner.
// The application's account is the instance's admin, which on these instances is no superuser
// (Berth keeps a maintenance account of its own), and its database is made with the extensions asked.
import { DEFAULT_SERVICE_DATABASE, engineOfService, type ServiceEngine } from '../../domain/app-services.js';
import type { InstanceSpec, ManagedDatabaseDriver } from '../databases/types.js';
import type { ServiceRef, ServiceRunner, ServiceSpec } from './types.js';

/** The driver's name for what a service is: its sizing, not a plan (InstanceSpec.limits). */
const SERVICE_PLAN = 'service';

function engineOf(type: string): ServiceEngine {
  const engine = engineOfService(type);
  if (!engine) throw new Error(`service type ${type} does not run on a database engine`);
  return engine;
}

function instanceSpec(spec: ServiceSpec): InstanceSpec {
  const engine = engineOf(spec.type);
  const database =
    typeof spec.settings.database === 'string' ? spec.settings.database : DEFAULT_SERVICE_DATABASE;
  const extensions = spec.settings.extensions;
  return {
    id: spec.id,
    engine,
    plan: SERVICE_PLAN,
    limits: {
      memoryMiB: spec.memoryMiB,
      ...(spec.volumeGiB ? { diskMiB: spec.volumeGiB * 1024 } : {}),
    },
    ...(spec.port ? { port: spec.port } : {}),
    adminUser: spec.username,
    adminPassword: spec.password,
    users: [],
    databases:
      engine === 'valkey'
        ? []
        : [
            {
              name: database,
              ...(engine === 'pg' && Array.isArray(extensions) && extensions.length > 0
                ? { extensions: extensions.map(String) }
                : {}),
            },
          ],
  };
}

const instanceRef = (ref: ServiceRef) => ({ id: ref.id, engine: engineOf(ref.type) });

export function createDatabaseServiceRunner(driver: () => ManagedDatabaseDriver): ServiceRunner {
  const run = async (
    call: (d: ManagedDatabaseDriver, spec: InstanceSpec) => ReturnType<ManagedDatabaseDriver['start']>,
    spec: ServiceSpec,
  ) => {
    const runtime = await call(driver(), instanceSpec(spec));
    return {
      host: runtime.host,
      port: runtime.port,
      pid: runtime.pid,
      version: runtime.version,
      location: runtime.location,
    };
  };
  return {
    types: ['postgresql', 'mysql', 'redis', 'valkey'],
    provision: (spec) => run((d, s) => d.provision(s), spec),
    start: (spec) => run((d, s) => d.start(s), spec),
    restart: (spec) => run((d, s) => d.restart(s), spec),
    stop: (ref) => driver().stop(instanceRef(ref)),
    delete: (ref) => driver().delete(instanceRef(ref)),
    async status(ref) {
      const status = await driver().status(instanceRef(ref));
      return { running: status.running, pid: status.pid };
    },
    async logs(ref, tail) {
      const d = driver();
      return d.logs ? d.logs(instanceRef(ref), tail) : [];
    },
    // The driver's count (the local one reads the kernel's socket table); none when it cannot tell.
    connections: (ports) => driver().connections?.(ports) ?? Promise.resolve(new Map<number, number>()),
    // The managed databases' dumps (pg_dump, mariadb-dump, an RDB snapshot) for a backup.
    exportData(spec, dir) {
      const d = driver();
      if (!d.exportData) throw new Error(`the ${d.name} database driver cannot dump a service`);
      return d.exportData(instanceSpec(spec), dir);
    },
    importData(spec, dir) {
      const d = driver();
      if (!d.importData) throw new Error(`the ${d.name} database driver cannot load a service's dump`);
      return d.importData(instanceSpec(spec), dir);
    },
  };
}
