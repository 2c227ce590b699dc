// Engine-level managed-database operations behind the /1.3 routes: checks, migrations, upgrades, clones.
export * from './check.js';
export * from './common.js';
export * from './dump.js';
export * from './errors.js';
export * from '../../../domain/redact.js';
export * from './source-uri.js';
export * from './replication.js';
export * from './clone.js';
export * from './cluster.js';
export * from './upgrade.js';
export * from './maintenance.js';
