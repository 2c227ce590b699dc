// Removing one domain, secret or volume of an application, as Ploi Cloud's API does
// (DELETE /applications/{application}/domains|secrets|volumes/{…}). Apply never removes what a
// document leaves out (spec, apply rule 3); these are the explicit way.
import type { Kysely } from 'kysely';
import { iso, type Clock } from '../../domain/clock.js';
import { AppError } from '../../domain/errors.js';
import type { Database } from '../../db/schema/index.js';
import { auditChange } from '../audit.js';
import {
  createInfrastructureRepository,
  type ApplicationItemKind,
} from '../../db/repositories/infrastructure.js';
import type { createInfrastructureQueries } from './queries.js';

export type RemovableKind = ApplicationItemKind;

export function createRemovals(deps: {
  db: Kysely<Database>;
  clock: Clock;
  queries: Pick<ReturnType<typeof createInfrastructureQueries>, 'requireApplication'>;
}) {
  return {
    /**
     * Removes the item named `ref` (a domain by its name or id, a secret by its key, a volume by its
     * name); 404 when the application has none such. Recorded in the audit log.
     */
    async remove(userId: number, applicationId: number, kind: RemovableKind, ref: string): Promise<string> {
      const { row, team } = await deps.queries.requireApplication(userId, applicationId);
      const at = iso(deps.clock.now());
      return deps.db.transaction().execute(async (trx) => {
        const items = createInfrastructureRepository(trx);
        const found = await items.findApplicationItem(kind, row.id, ref);
        if (!found) throw new AppError('not_found', `The application has no ${kind} '${ref}'`);
        await items.deleteApplicationItem(kind, found.id);
        await auditChange(trx, {
          at,
          action: `${kind}.delete`,
          teamId: team.id,
          target: { kind, id: `${row.id}/${found.name}` },
          // A secret's key is recorded, never its value.
          before: { application_id: row.id, name: found.name },
        });
        return found.name;
      });
    },
  };
}
