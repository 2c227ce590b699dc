// Who may see what a path names (issue 11, item 14): the ownership plugin asks these before the body
// schema runs, so another team's resource answers 404/403 whatever the body holds. Handlers keep their
// own check (they need the row anyway).
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema/index.js';
import { createInfrastructureRepository } from '../db/repositories/infrastructure.js';
import { AppError } from '../domain/errors.js';
import type { IdentityService } from './identity.js';
import { createManagedDatabaseRepository } from './managed-databases/repository.js';

export interface OwnershipDeps {
  db: Kysely<Database>;
  identity: Pick<IdentityService, 'teamsOfUser' | 'requireTeamAt'>;
}

export function createOwnershipChecks(deps: OwnershipDeps) {
  const databases = createManagedDatabaseRepository(deps.db);
  const infrastructure = createInfrastructureRepository(deps.db);

  return {
    /** `/api/v1/applications/:id`: 404 unknown (or not an id), 403 another team's. */
    async application(userId: number, idText: string): Promise<void> {
      const row = /^[1-9]\d{0,15}$/.test(idText)
        ? await infrastructure.findApplication(Number(idText))
        : undefined;
      if (!row) throw new AppError('not_found', `Application ${idText} not found`);
      const teams = await deps.identity.teamsOfUser(userId);
      if (!teams.some((team) => team.id === row.team_id)) {
        throw new AppError('forbidden', 'This application belongs to another team');
      }
    },

    /** `/1.3/database/:uuid`, with the codes /1.3 answers. */
    async database(userId: number, uuid: string): Promise<void> {
      const row = await databases.findDatabase(uuid);
      if (!row) {
        throw new AppError('not_found', `Managed database ${uuid} not found`, {
          apiCode: 'SERVICE_NOT_FOUND',
        });
      }
      const teams = await deps.identity.teamsOfUser(userId);
      if (!teams.some((team) => team.id === row.team_id)) {
        throw new AppError('forbidden', `Managed database ${uuid} belongs to another account`, {
          apiCode: 'ACCOUNT_FORBIDDEN',
        });
      }
    },

    /** `/api/v1/teams/:team/…`: the caller is a member of the team. */
    async team(userId: number, ref: string): Promise<void> {
      await deps.identity.requireTeamAt(userId, ref);
    },
  };
}

export type OwnershipChecks = ReturnType<typeof createOwnershipChecks>;
