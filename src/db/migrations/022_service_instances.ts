// Container services run too (issue 15): an instance now belongs to a row of `services` or of
// `container_services`, told apart by `source`, so the one-instance-per-service rule becomes
// unique (source, service_id); `extra` keeps what a runner says the application connects with beyond
// host and port (a vhost, a bucket, a token path). The table is rebuilt (SQLite cannot drop a unique constraint); nothing
// refers to an instance's id, so rows are copied without it.
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';
import { TEXT, withId } from './helpers.js';

const COLUMNS = [
  'service_id',
  'application_id',
  'uuid',
  'engine',
  'state',
  'state_reason',
  'port',
  'pid',
  'version',
  'data_dir',
  'applied_sizing',
  'username',
  'password_encrypted',
  'restarts',
  'last_restart_at',
  'last_restart_reason',
  'created_at',
  'updated_at',
];

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await withId(db.schema.createTable('service_instances_next'), dialect)
    .addColumn('source', 'text', (c) => c.notNull().defaultTo('service'))
    .addColumn('service_id', 'integer', (c) => c.notNull())
    .addColumn('application_id', 'integer', (c) => c.notNull())
    .addColumn('uuid', 'text', (c) => c.notNull().unique())
    .addColumn('engine', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('state_reason', TEXT)
    .addColumn('port', 'integer')
    .addColumn('pid', 'integer')
    .addColumn('version', 'text')
    .addColumn('data_dir', 'text')
    .addColumn('applied_sizing', 'text')
    .addColumn('extra', TEXT)
    .addColumn('username', 'text', (c) => c.notNull())
    .addColumn('password_encrypted', TEXT, (c) => c.notNull())
    .addColumn('restarts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_restart_at', 'text')
    .addColumn('last_restart_reason', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'text', (c) => c.notNull())
    .addUniqueConstraint('service_instances_one_per_service', ['source', 'service_id'])
    .execute();
  const columns = sql.join(COLUMNS.map((c) => sql.ref(c)));
  await sql`insert into service_instances_next (source, ${columns}) select 'service', ${columns} from app_service_instances`.execute(
    db,
  );
  await db.schema.dropTable('app_service_instances').execute();
  await db.schema.alterTable('service_instances_next').renameTo('app_service_instances').execute();
  await db.schema
    .createIndex('app_service_instances_app')
    .on('app_service_instances')
    .column('application_id')
    .execute();
}
