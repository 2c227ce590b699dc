// The audit log's one writer: who did what to which resource, in the caller's transaction (so the
// record commits with the change it records, or not at all); and its readers and retention prune.
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../schema/index.js';

type Db = Kysely<Database> | Transaction<Database>;

export interface AuditEntry {
  at: string;
  /** null: Berth itself (a job, a schedule, the supervisor) or the operator (berth admin). */
  userId: number | null;
  /** null: a change to an account rather than to a team (its tokens, its password). */
  teamId: number | null;
  action: string;
  target: string;
  targetKind?: string | null;
  details?: unknown;
  /** Who, as shown: `operator` for berth admin; default: the e-mail of `userId` now, null without one. */
  actor?: string | null;
  credential?: string | null;
  address?: string | null;
  /** Already without secret values (src/services/audit.ts redacts them). */
  before?: unknown;
  after?: unknown;
}

export interface AuditFilter {
  /** Undefined: every team's and the account-level entries (the operator's view). */
  teamId?: number;
  /** An exact action, or a prefix ending in `*` (`application.*`). */
  action?: string;
  /** An e-mail, `operator`, or `berth` for Berth's own entries. */
  actor?: string;
  /** A target's id or name, or `kind:id`. */
  target?: string;
  since?: string;
  until?: string;
  /** Only entries older than this id (the next page). */
  beforeId?: number;
  limit: number;
}

const json = (value: unknown): string | null => (value === undefined ? null : JSON.stringify(value));

export async function recordAudit(db: Db, entry: AuditEntry): Promise<void> {
  const actor =
    entry.actor !== undefined
      ? entry.actor
      : entry.userId === null
        ? null
        : ((await db.selectFrom('users').select('email').where('id', '=', entry.userId).executeTakeFirst())
            ?.email ?? null);
  await db
    .insertInto('audit_log')
    .values({
      at: entry.at,
      user_id: entry.userId,
      team_id: entry.teamId,
      action: entry.action,
      target: entry.target,
      target_kind: entry.targetKind ?? null,
      details: JSON.stringify(entry.details ?? {}),
      actor,
      credential: entry.credential ?? null,
      address: entry.address ?? null,
      before_state: json(entry.before),
      after_state: json(entry.after),
    })
    .execute();
}

export function createAuditRepository(db: Kysely<Database>) {
  return {
    /** Writes one entry with the caller's transaction (or the store, for a change that is one statement). */
    record: recordAudit,

    /** Newest first. */
    async list(filter: AuditFilter) {
      let query = db.selectFrom('audit_log').selectAll().orderBy('id', 'desc').limit(filter.limit);
      if (filter.teamId !== undefined) query = query.where('team_id', '=', filter.teamId);
      if (filter.action !== undefined) {
        // A prefix as a range, not LIKE: `_` would be a wildcard there, and SQLite's LIKE ignores case.
        const prefix = filter.action.slice(0, -1);
        query = filter.action.endsWith('*')
          ? query.where('action', '>=', prefix).where('action', '<', `${prefix}\uffff`)
          : query.where('action', '=', filter.action);
      }
      if (filter.actor === 'berth') query = query.where('actor', 'is', null);
      else if (filter.actor !== undefined) query = query.where('actor', '=', filter.actor);
      if (filter.target !== undefined) {
        const colon = filter.target.indexOf(':');
        const [kind, id] = colon > 0 ? [filter.target.slice(0, colon), filter.target.slice(colon + 1)] : [];
        const target = filter.target;
        query = query.where((eb) =>
          eb.or([
            eb('target', '=', target),
            ...(kind !== undefined && id !== undefined
              ? [eb.and([eb('target_kind', '=', kind), eb('target', '=', id)])]
              : []),
          ]),
        );
      }
      if (filter.since !== undefined) query = query.where('at', '>=', filter.since);
      if (filter.until !== undefined) query = query.where('at', '<', filter.until);
      if (filter.beforeId !== undefined) query = query.where('id', '<', filter.beforeId);
      return query.execute();
    },

    /** Deletes entries older than `before`; answers how many. */
    async prune(before: string): Promise<number> {
      const result = await db.deleteFrom('audit_log').where('at', '<', before).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

export type AuditRepository = ReturnType<typeof createAuditRepository>;
export type AuditRow = Awaited<ReturnType<AuditRepository['list']>>[number];
