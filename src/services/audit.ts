// The audit log (issue 31, item 2; docs/decisions/0014-audit-log.md). Who made a change (the account and
// credential of an API request, or the operator of `berth admin`) is an AuditContext that the HTTP layer
// and the admin command set around the call (`withAudit`); the service that makes the change records it
// with `auditChange(trx, …)` inside its own transaction, so the entry commits with the change or not at
// all. Outside such a call (a job, the supervisor) the entry is Berth's own (no actor).
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Kysely, Transaction } from 'kysely';
import {
  createAuditRepository,
  recordAudit,
  type AuditFilter,
  type AuditRow,
} from '../db/repositories/audit.js';
import type { Database } from '../db/schema/index.js';
import { iso, type Clock } from '../domain/clock.js';
import { redactValues } from '../domain/redact.js';
import { AppError } from '../domain/errors.js';
import { requireRole } from '../domain/roles.js';
import { createIdentityRepository } from '../db/repositories/identity.js';
import { enqueue, handles } from './jobs.js';

export const DAY_MS = 86_400_000;
/** How often the recurring prune job deletes entries past BERTH_AUDIT_RETENTION_DAYS. */
export const PRUNE_INTERVAL_MS = 3_600_000;
/** A recurring job must outlive a passing outage (as the deletion sweep does). */
const PRUNE_MAX_ATTEMPTS = 1_000_000;

/** Who is making the changes of a request or an admin command. */
export interface AuditContext {
  /** The account; undefined: the operator (berth admin), or a caller not signed in yet (sign-in). */
  userId?: number;
  /** `api_token:<id>`, `session:<id>`, `tools_key:<id>`, `db_api:<id>`, or `operator`. */
  credential: string;
  /** The client's address (request.ip); null for berth admin. */
  address: string | null;
  /** `operator` for berth admin; otherwise the account's e-mail is looked up when recording. */
  actor?: 'operator';
}

/** What a request recorded: the HTTP layer checks that a change route wrote its one action. */
export interface AuditTally {
  actions: string[];
  /** The service found nothing to change (a dry run, a document equal to the store): no entry is due. */
  unchanged: boolean;
}

interface AuditScope {
  context: AuditContext;
  recorded: AuditTally;
  /** False once the request or command has answered: what it left running is Berth's own work. */
  open: boolean;
}

const scopes = new AsyncLocalStorage<AuditScope>();

/**
 * Runs `work` with `context` as the author of the changes it records; `recorded` is kept up to date as
 * they are written (the HTTP layer reads it before it answers).
 */
export async function withAudit<T>(
  context: AuditContext,
  work: () => Promise<T>,
  recorded: AuditTally = { actions: [], unchanged: false },
): Promise<T> {
  const scope: AuditScope = { context, recorded, open: true };
  try {
    return await scopes.run(scope, work);
  } finally {
    scope.open = false;
  }
}

/** What a change is, as its service knows it. */
export interface AuditedChange {
  at: string | Date;
  /** `<resource>.<verb>`, the action the route declares (config.audit). */
  action: string;
  teamId: number | null;
  target: { kind: string; id: string | number };
  /** The state before and after (secret values are replaced here, whatever the caller passes). */
  before?: unknown;
  after?: unknown;
  /** A different author than the request's credential holder: who signed in with a password. */
  userId?: number;
}

/** Records `change` in `db`, which must be the transaction that makes the change (or the store for one statement). */
export async function auditChange(
  db: Kysely<Database> | Transaction<Database>,
  change: AuditedChange,
): Promise<void> {
  const scope = scopes.getStore();
  const context = scope?.open ? scope.context : undefined;
  const userId = change.userId ?? context?.userId ?? null;
  await recordAudit(db, {
    at: typeof change.at === 'string' ? change.at : iso(change.at),
    userId,
    teamId: change.teamId,
    action: change.action,
    targetKind: change.target.kind,
    target: String(change.target.id),
    ...(context?.actor ? { actor: context.actor } : {}),
    credential: context?.credential ?? null,
    address: context?.address ?? null,
    ...(change.before !== undefined ? { before: redactValues(change.before) } : {}),
    ...(change.after !== undefined ? { after: redactValues(change.after) } : {}),
  });
  if (context) scope?.recorded.actions.push(change.action);
}

/** Says that the current request changed nothing, so it records nothing (apply's dry run). */
export function auditUnchanged(): void {
  const scope = scopes.getStore();
  if (scope?.open) scope.recorded.unchanged = true;
}

/** An entry as the API and `berth admin audit` show it. */
export function auditEntryView(row: AuditRow) {
  const parse = (text: string | null): unknown => (text === null ? null : (JSON.parse(text) as unknown));
  return {
    id: row.id,
    at: row.at,
    team_id: row.team_id,
    action: row.action,
    actor: row.actor ?? (row.user_id === null ? 'berth' : null),
    user_id: row.user_id,
    credential: row.credential,
    address: row.address,
    target: { kind: row.target_kind, id: row.target },
    before: parse(row.before_state),
    after: parse(row.after_state),
    details: parse(row.details),
  };
}

export type AuditEntryView = ReturnType<typeof auditEntryView>;
export type AuditQuery = Omit<AuditFilter, 'teamId'>;
/** The operator's query: a team by name or id, or every team. */
export type OperatorAuditQuery = AuditQuery & { team?: string };

export function createAuditService(deps: {
  db: Kysely<Database>;
  clock: Clock;
  /** The identity service's requireTeam (named by shape: the identity service records entries too). */
  identity: { requireTeam(userId: number, ref: string): Promise<{ id: number; name: string; role: string }> };
  /** BERTH_AUDIT_RETENTION_DAYS. */
  retentionDays: number;
}) {
  const repo = createAuditRepository(deps.db);
  const teams = createIdentityRepository(deps.db);
  async function prune(): Promise<number> {
    const cutoff = new Date(deps.clock.now().getTime() - deps.retentionDays * DAY_MS);
    return repo.prune(iso(cutoff));
  }

  return {
    /** A team's log, for its owners (403 for members). */
    async forTeam(userId: number, teamRef: string, query: AuditQuery): Promise<AuditEntryView[]> {
      const team = await deps.identity.requireTeam(userId, teamRef);
      requireRole({ teamName: team.name, role: team.role }, 'owner', 'reading the audit log');
      return (await repo.list({ ...query, teamId: team.id })).map(auditEntryView);
    },

    /** Every team's entries and the account-level ones, or one team's: the operator's (berth admin audit). */
    async all(query: OperatorAuditQuery): Promise<AuditEntryView[]> {
      const { team: ref, ...filter } = query;
      let teamId: number | undefined;
      if (ref !== undefined) {
        const team = /^\d+$/.test(ref) ? { id: Number(ref) } : await teams.findTeamByName(ref);
        if (!team) throw new AppError('not_found', `Team '${ref}' not found`);
        teamId = team.id;
      }
      return (await repo.list({ ...filter, ...(teamId !== undefined ? { teamId } : {}) })).map(
        auditEntryView,
      );
    },

    /** Runs `work` with the operator (berth admin) as the author of the changes it makes. */
    asOperator: <T>(work: () => Promise<T>): Promise<T> =>
      withAudit({ actor: 'operator', credential: 'operator', address: null }, work),

    /** Deletes entries past the retention; answers how many. */
    prune,

    /** The recurring prune: runs hourly, the periodic work beside the deletion sweep. */
    jobHandlers() {
      return handles('audit.prune', async () => {
        await prune();
        return { runAgainAt: new Date(deps.clock.now().getTime() + PRUNE_INTERVAL_MS) };
      });
    },

    /** At start: the recurring prune exists and runs now. */
    async start(): Promise<void> {
      const now = deps.clock.now();
      await enqueue(deps.db, 'audit.prune', {}, { now, maxAttempts: PRUNE_MAX_ATTEMPTS });
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
