// Authorization before body validation (issue 11, item 14): a route whose path names a resource
// (`/1.3/database/:uuid`, `/api/v1/teams/:team/…`) checks that the caller may see it in preValidation,
// before the body schema runs, so another team's resource answers 404/403 whatever the body holds
// and a caller learns nothing about the body rules of what is not theirs. The handlers keep their
// own check (they need the row anyway); this hook only makes the order structural for every route.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AppContext } from '../../context.js';
import { AppError } from '../../domain/errors.js';
import { createInfrastructureRepository } from '../../db/repositories/infrastructure.js';
import { createManagedDatabaseRepository } from '../../services/managed-databases/repository.js';

export function registerOwnershipCheck(app: FastifyInstance, ctx: AppContext): void {
  const databases = createManagedDatabaseRepository(ctx.db);
  const infrastructure = createInfrastructureRepository(ctx.db);

  async function checkApplication(userId: number, idText: string): Promise<void> {
    const row = /^[1-9]\d{0,15}$/.test(idText)
      ? await infrastructure.findApplication(Number(idText))
      : undefined;
    if (!row) throw new AppError('not_found', `Application ${idText} not found`);
    const teams = await ctx.identity.teamsOfUser(userId);
    if (!teams.some((team) => team.id === row.team_id)) {
      throw new AppError('forbidden', 'This application belongs to another team');
    }
  }

  async function checkDatabase(userId: number, uuid: string): Promise<void> {
    const row = await databases.findDatabase(uuid);
    if (!row) {
      throw new AppError('not_found', `Managed database ${uuid} not found`, { apiCode: 'SERVICE_NOT_FOUND' });
    }
    const teams = await ctx.identity.teamsOfUser(userId);
    if (!teams.some((team) => team.id === row.team_id)) {
      throw new AppError('forbidden', `Managed database ${uuid} belongs to another account`, {
        apiCode: 'ACCOUNT_FORBIDDEN',
      });
    }
  }

  app.addHook('preValidation', async (request: FastifyRequest) => {
    const principal = request.principal;
    if (!principal) return;
    const params = (request.params ?? {}) as Record<string, unknown>;
    const kind = request.routeOptions.config?.auth;
    if (kind === 'db_api' && typeof params.uuid === 'string') {
      await checkDatabase(principal.userId, params.uuid);
    } else if (
      kind === 'api_token' &&
      typeof params.id === 'string' &&
      request.routeOptions.url?.startsWith('/api/v1/applications/:id')
    ) {
      await checkApplication(principal.userId, params.id);
    } else if (kind === 'api_token' && typeof params.team === 'string') {
      await ctx.identity.requireTeamAt(principal.userId, params.team);
    }
  });
}
