// A revision per team, raised by triggers on every write to a table apply plans against, whoever
// writes (apply, PATCH, scheduled deletion, clones, provisioning, another replica): a plan made at
// revision R holds for as long as the team's revision is still R (see the apply service's plan cache).
import { sql, type Kysely } from 'kysely';
import type { Dialect } from '../dialect.js';

/** Tables with the team's id in `team_id`. */
export const TEAM_TABLES = ['applications', 'managed_databases', 'object_storages'] as const;
/** Tables attached to an application by `application_id`. */
export const APPLICATION_TABLES = [
  'domains',
  'secrets',
  'volumes',
  'services',
  'container_services',
] as const;

export async function up(db: Kysely<unknown>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('team_revisions')
    .addColumn('team_id', 'integer', (c) => c.primaryKey().references('teams.id').onDelete('cascade'))
    .addColumn('revision', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await sql`INSERT INTO team_revisions (team_id, revision) SELECT id, 0 FROM teams`.execute(db);

  if (dialect === 'postgres') {
    await sql`CREATE FUNCTION team_revisions_insert() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO team_revisions (team_id, revision) VALUES (NEW.id, 0);
        RETURN NULL;
      END $$`.execute(db);
    await sql`CREATE TRIGGER team_revisions_insert AFTER INSERT ON teams
      FOR EACH ROW EXECUTE FUNCTION team_revisions_insert()`.execute(db);
    // TG_ARGV[0]: the column that leads to the team (team_id, or application_id through applications).
    await sql`CREATE FUNCTION team_revisions_bump() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE ids integer[] := '{}';
      BEGIN
        IF TG_OP <> 'INSERT' THEN ids := ids || (to_jsonb(OLD) ->> TG_ARGV[0])::integer; END IF;
        IF TG_OP <> 'DELETE' THEN ids := ids || (to_jsonb(NEW) ->> TG_ARGV[0])::integer; END IF;
        IF TG_ARGV[0] = 'application_id' THEN
          UPDATE team_revisions SET revision = revision + 1
            WHERE team_id IN (SELECT team_id FROM applications WHERE id = ANY (ids));
        ELSE
          UPDATE team_revisions SET revision = revision + 1 WHERE team_id = ANY (ids);
        END IF;
        RETURN NULL;
      END $$`.execute(db);
    // Deferred to commit: the team's row is locked last, after every row the transaction writes, so
    // that a transaction holding a row of the team cannot wait for one holding the revision (deadlock).
    // Still in the same transaction, so the revision and the rows become visible together.
    for (const [tables, column] of [
      [TEAM_TABLES, 'team_id'],
      [APPLICATION_TABLES, 'application_id'],
    ] as const) {
      for (const table of tables) {
        await sql`CREATE CONSTRAINT TRIGGER ${sql.raw(`${table}_team_revision`)}
          AFTER INSERT OR UPDATE OR DELETE ON ${sql.table(table)}
          DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
          EXECUTE FUNCTION team_revisions_bump(${sql.lit(column)})`.execute(db);
      }
    }
    return;
  }

  // SQLite has one writer at a time: plain row triggers.
  await sql`CREATE TRIGGER team_revisions_insert AFTER INSERT ON teams BEGIN
    INSERT INTO team_revisions (team_id, revision) VALUES (NEW.id, 0); END`.execute(db);
  for (const [tables, teamOf] of [
    [TEAM_TABLES, (row: string) => `${row}.team_id`],
    [
      APPLICATION_TABLES,
      (row: string) => `(SELECT team_id FROM applications WHERE id = ${row}.application_id)`,
    ],
  ] as const) {
    for (const table of tables) {
      for (const [event, rows] of [
        ['INSERT', ['NEW']],
        ['UPDATE', ['OLD', 'NEW']],
        ['DELETE', ['OLD']],
      ] as const) {
        const teams = rows.map(teamOf).join(', ');
        await sql
          .raw(
            `CREATE TRIGGER ${table}_team_revision_${event.toLowerCase()} AFTER ${event} ON ${table} BEGIN ` +
              `UPDATE team_revisions SET revision = revision + 1 WHERE team_id IN (${teams}); END`,
          )
          .execute(db);
      }
    }
  }
}
