// Users, teams, memberships and credentials: the only SQL about identities.
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { CredentialKind, CredentialsTable, Role, TeamsTable } from '../schema/foundation.js';
import type { Database } from '../schema/index.js';

type Db = Kysely<Database> | Transaction<Database>;

export type TeamRow = Selectable<TeamsTable>;

/** A credential as listed: without its lookup and secret hashes. */
export type CredentialRow = Pick<Selectable<CredentialsTable>, (typeof credentialColumns)[number]>;

const credentialColumns = [
  'id',
  'user_id',
  'kind',
  'name',
  'hint',
  'created_at',
  'last_used_at',
  'revoked_at',
] as const;

export function createIdentityRepository(db: Db) {
  return {
    findUserByEmail: (email: string) =>
      db.selectFrom('users').selectAll().where('email', '=', email).executeTakeFirst(),
    findUser: (id: number) => db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst(),
    async insertUser(email: string, at: string): Promise<number> {
      const row = await db
        .insertInto('users')
        .values({ email, created_at: at })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },
    countUsers: async () =>
      Number(
        (
          await db
            .selectFrom('users')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      ),

    findTeamByName: (name: string): Promise<TeamRow | undefined> =>
      db.selectFrom('teams').selectAll().where('name', '=', name).executeTakeFirst(),
    findTeam: (id: number): Promise<TeamRow | undefined> =>
      db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst(),
    /**
     * The team a reference names (by id, else by name when `id` is given; by name only otherwise) with
     * the user's role in it (null when not a member), in one statement: at most two rows match, the
     * team with that id and the team with that name, and the id wins.
     */
    async findTeamWithRole(
      name: string,
      id: number | undefined,
      userId: number,
    ): Promise<(TeamRow & { role: Role | null; revision: number | null }) | undefined> {
      const rows = await db
        .selectFrom('teams')
        .leftJoin('memberships', (join) =>
          join.onRef('memberships.team_id', '=', 'teams.id').on('memberships.user_id', '=', userId),
        )
        // The team's revision comes along for apply's plan cache: a primary-key join, no extra read.
        .leftJoin('team_revisions', 'team_revisions.team_id', 'teams.id')
        .select(['teams.id', 'teams.name', 'teams.created_at', 'memberships.role', 'team_revisions.revision'])
        .where((eb) =>
          id === undefined
            ? eb('teams.name', '=', name)
            : eb.or([eb('teams.id', '=', id), eb('teams.name', '=', name)]),
        )
        .execute();
      return rows.find((row) => row.id === id) ?? rows[0];
    },
    async insertTeam(name: string, at: string): Promise<number> {
      const row = await db
        .insertInto('teams')
        .values({ name, created_at: at })
        .returning('id')
        .executeTakeFirstOrThrow();
      return row.id;
    },

    async upsertMembership(teamId: number, userId: number, role: Role, at: string): Promise<void> {
      await db
        .insertInto('memberships')
        .values({ team_id: teamId, user_id: userId, role, created_at: at })
        .onConflict((oc) => oc.columns(['team_id', 'user_id']).doUpdateSet({ role }))
        .execute();
    },
    findMembership: (teamId: number, userId: number) =>
      db
        .selectFrom('memberships')
        .select(['role'])
        .where('team_id', '=', teamId)
        .where('user_id', '=', userId)
        .executeTakeFirst(),
    teamsOfUser: (userId: number) =>
      db
        .selectFrom('memberships')
        .innerJoin('teams', 'teams.id', 'memberships.team_id')
        .select(['teams.id', 'teams.name', 'teams.created_at', 'memberships.role'])
        .where('memberships.user_id', '=', userId)
        .orderBy('teams.id')
        .execute(),
    teamMembers: (teamId: number) =>
      db
        .selectFrom('memberships')
        .innerJoin('users', 'users.id', 'memberships.user_id')
        .select(['users.id', 'users.email', 'memberships.role'])
        .where('memberships.team_id', '=', teamId)
        .orderBy('users.id')
        .execute(),

    /** The team's owners, with their e-mail. */
    teamOwners: (teamId: number) =>
      db
        .selectFrom('memberships')
        .innerJoin('users', 'users.id', 'memberships.user_id')
        .select(['users.id', 'users.email'])
        .where('memberships.team_id', '=', teamId)
        .where('memberships.role', '=', 'owner')
        .orderBy('users.id')
        .execute(),

    async insertCredential(values: {
      user_id: number;
      kind: CredentialKind;
      name: string;
      lookup: string;
      secret_hash: string | null;
      hint: string;
      created_at: string;
    }): Promise<number> {
      const row = await db.insertInto('credentials').values(values).returning('id').executeTakeFirstOrThrow();
      return row.id;
    },
    findActiveCredential: (kind: CredentialKind, lookup: string) =>
      db
        .selectFrom('credentials')
        .select(['id', 'user_id', 'secret_hash'])
        .where('kind', '=', kind)
        .where('lookup', '=', lookup)
        .where('revoked_at', 'is', null)
        .executeTakeFirst(),
    listCredentials: (userId: number, kind?: CredentialKind): Promise<CredentialRow[]> => {
      let query = db.selectFrom('credentials').select(credentialColumns).where('user_id', '=', userId);
      if (kind) query = query.where('kind', '=', kind);
      return query.orderBy('id').execute();
    },
    findCredential: (id: number): Promise<CredentialRow | undefined> =>
      db.selectFrom('credentials').select(credentialColumns).where('id', '=', id).executeTakeFirst(),
    async revokeCredential(id: number, at: string): Promise<boolean> {
      const result = await db
        .updateTable('credentials')
        .set({ revoked_at: at })
        .where('id', '=', id)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      return Number(result.numUpdatedRows) > 0;
    },
    async touchCredential(id: number, at: string): Promise<void> {
      await db.updateTable('credentials').set({ last_used_at: at }).where('id', '=', id).execute();
    },
  };
}

export type IdentityRepository = ReturnType<typeof createIdentityRepository>;
