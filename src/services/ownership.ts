// Who may see what a path names (issue 11, item 14): the ownership plugin asks these before the body
// schema runs, so another team's resource answers 404/403 whatever the body holds. Each answers the
// caller's membership of the resource's team, whose role the plugin then checks against the route's
// (src/domain/roles.ts). Handlers keep their own check (they need the row anyway).
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema/index.js';
import { createInfrastructureRepository } from '../db/repositories/infrastructure.js';
import { AppError } from '../domain/errors.js';
import type { Membership } from '../domain/roles.js';
import type { IdentityService } from './identity.js';
import { createManagedDatabaseRepository } from '../db/repositories/managed-databases.js';

export interface OwnershipDeps {
  db: Kysely<Database>;
  identity: Pick<IdentityService, 'teamsOfUser' | 'requireTeamAt'>;
}

export function createOwnershipChecks(deps: OwnershipDeps) {
  const databases = createManagedDatabaseRepository(deps.db);
  const infrastructure = createInfrastructureRepository(deps.db);

  /** The caller's membership of team `teamId`, undefined when they are not in it. */
  async function membershipOf(userId: number, teamId: number): Promise<Membership | undefined> {
    const team = (await deps.identity.teamsOfUser(userId)).find((t) => t.id === teamId);
    return team && { teamName: team.name, role: team.role };
  }

  return {
    /** `/api/v1/applications/:id`: 404 unknown (or not an id), 403 another team's. */
    async application(userId: number, idText: string): Promise<Membership> {
      const row = /^[1-9]\d{0,15}$/.test(idText)
        ? await infrastructure.findApplication(Number(idText))
        : undefined;
      if (!row) throw new AppError('not_found', `Application ${idText} not found`);
      const membership = await membershipOf(userId, row.team_id);
      if (!membership) throw new AppError('forbidden', 'This application belongs to another team');
      return membership;
    },

    /** `/1.3/database/:uuid` (and `/api/v1/managed-databases/:uuid`), with the codes /1.3 answers. */
    async database(userId: number, uuid: string): Promise<Membership> {
      const row = await databases.findDatabase(uuid);
      if (!row) {
        throw new AppError('not_found', `Managed database ${uuid} not found`, {
          apiCode: 'SERVICE_NOT_FOUND',
        });
      }
      const membership = await membershipOf(userId, row.team_id);
      if (!membership) {
        throw new AppError('forbidden', `Managed database ${uuid} belongs to another account`, {
          apiCode: 'ACCOUNT_FORBIDDEN',
        });
      }
      return membership;
    },

    /** `/api/v1/teams/:team/…`: the caller is a member of the team. */
    async team(userId: number, ref: string): Promise<Membership> {
      const team = await deps.identity.requireTeamAt(userId, ref);
      return { teamName: team.name, role: team.role };
    },
  };
}

export type OwnershipChecks = ReturnType<typeof createOwnershipChecks>;
