// Users, teams and the three kinds of credential. Each secret is shown once and stored only as a hash.
import { NAME_CONTROL } from '../domain/control-characters.js';
import type { Kysely } from 'kysely';
import { AppError } from '../domain/errors.js';
import { iso, type Clock, type IdGenerator } from '../domain/clock.js';
import { createIdentityRepository, type CredentialRow, type TeamRow } from '../db/repositories/identity.js';
import type { CredentialKind, Role } from '../db/schema/foundation.js';
import type { Database } from '../db/schema/index.js';
import { constantTimeEqual, sha256 } from '../crypto/secret-box.js';
import { auditChange } from './audit.js';

export interface Principal {
  userId: number;
  /** The credential presented; 0 for a browser session. */
  credentialId: number;
  kind: CredentialKind;
  /** Set when the caller is a browser session (cookie) rather than a token. */
  sessionId?: number;
}

export interface IssuedCredential {
  id: number;
  kind: CredentialKind;
  name: string;
  /** api_token / tools_key: the token itself. */
  token?: string;
  /** db_api: basic-auth username and password. */
  username?: string;
  password?: string;
}

export interface CreatedUser {
  user_id: number;
  email: string;
  team_id: number;
  team: string;
  api_token: string;
  tools_api_key: string;
  db_api_username: string;
  db_api_password: string;
}

const TOKEN_PREFIX: Record<Exclude<CredentialKind, 'db_api'>, string> = {
  api_token: 'berth_pat_',
  tools_key: 'berth_tk_',
};

const EMAIL = /^[^\s@]+@[^\s@]+$/;
export const TEAM_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,99}$/;
// last_used_at is written at most this often per credential, keeping writes off the hot path.
const TOUCH_INTERVAL_MS = 60_000;

export function createIdentityService(deps: { db: Kysely<Database>; clock: Clock; ids: IdGenerator }) {
  const { db, clock, ids } = deps;
  const repo = createIdentityRepository(db);
  const lastTouched = new Map<number, number>();

  function now(): string {
    return iso(clock.now());
  }

  async function issueWith(
    r: ReturnType<typeof createIdentityRepository>,
    userId: number,
    kind: CredentialKind,
    name: string,
  ): Promise<IssuedCredential> {
    if (kind === 'db_api') {
      const username = `db_${ids
        .token(9)
        .replace(/[^A-Za-z0-9]/g, 'x')
        .toLowerCase()}`;
      const password = ids.token(24);
      const id = await r.insertCredential({
        user_id: userId,
        kind,
        name,
        lookup: username,
        secret_hash: sha256(password),
        hint: username,
        created_at: now(),
      });
      return { id, kind, name, username, password };
    }
    const token = TOKEN_PREFIX[kind] + ids.token(32);
    const id = await r.insertCredential({
      user_id: userId,
      kind,
      name,
      lookup: sha256(token),
      secret_hash: null,
      hint: token.slice(0, TOKEN_PREFIX[kind].length + 4),
      created_at: now(),
    });
    return { id, kind, name, token };
  }

  async function requireTeamAt(
    userId: number,
    ref: string | number,
  ): Promise<TeamRow & { role: Role; revision: number | null }> {
    const text = String(ref).trim();
    // No team name holds one (TEAM_NAME), and PostgreSQL cannot even compare a text holding NUL.
    if (NAME_CONTROL.test(text)) throw new AppError('not_found', 'Team not found');
    // One read: the team and the caller's membership together.
    const found = await repo.findTeamWithRole(text, /^\d+$/.test(text) ? Number(text) : undefined, userId);
    if (!found) throw new AppError('not_found', `Team '${text}' not found`);
    const { role, ...team } = found;
    // Team ids are sequential: the answer names nothing the caller may not see.
    if (role === null) throw new AppError('forbidden', 'You are not a member of this team');
    return { ...team, role };
  }

  return {
    /** Creates the user (or reuses it by e-mail), the team if needed, the membership and one credential of each kind. */
    async createUser(input: { email: string; team: string; role?: Role }): Promise<CreatedUser> {
      const email = input.email.trim().toLowerCase();
      if (!EMAIL.test(email)) throw new AppError('bad_request', `'${input.email}' is not an e-mail address`);
      if (!TEAM_NAME.test(input.team)) {
        throw new AppError(
          'bad_request',
          `team name '${input.team}' must be 1-100 letters, digits, spaces, . _ -`,
        );
      }
      return db.transaction().execute(async (trx) => {
        const r = createIdentityRepository(trx);
        const at = now();
        const userId = (await r.findUserByEmail(email))?.id ?? (await r.insertUser(email, at));
        const teamId = (await r.findTeamByName(input.team))?.id ?? (await r.insertTeam(input.team, at));
        await r.upsertMembership(teamId, userId, input.role ?? 'owner', at);
        const api = await issueWith(r, userId, 'api_token', 'default');
        const tools = await issueWith(r, userId, 'tools_key', 'default');
        const dbApi = await issueWith(r, userId, 'db_api', 'default');
        await auditChange(trx, {
          at,
          action: 'user.create',
          teamId,
          target: { kind: 'user', id: userId },
          after: { email, team: input.team, role: input.role ?? 'owner' },
        });
        return {
          user_id: userId,
          email,
          team_id: teamId,
          team: input.team,
          api_token: api.token ?? '',
          tools_api_key: tools.token ?? '',
          db_api_username: dbApi.username ?? '',
          db_api_password: dbApi.password ?? '',
        };
      });
    },

    async issueCredential(userId: number, kind: CredentialKind, name = 'default'): Promise<IssuedCredential> {
      if (name.trim() === '' || name.length > 100 || NAME_CONTROL.test(name)) {
        throw new AppError('bad_request', 'A credential name is 1-100 characters without control characters');
      }
      if (!(await repo.findUser(userId))) throw new AppError('not_found', `User ${userId} not found`);
      return db.transaction().execute(async (trx) => {
        const issued = await issueWith(createIdentityRepository(trx), userId, kind, name);
        // The name and kind only: the token or password is shown once and stored as a hash.
        await auditChange(trx, {
          at: now(),
          action: 'credential.create',
          teamId: null,
          target: { kind, id: issued.id },
          after: { name, kind, user_id: userId },
        });
        return issued;
      });
    },

    listCredentials: (userId: number, kind?: CredentialKind): Promise<CredentialRow[]> =>
      repo.listCredentials(userId, kind),

    /** Revokes one of the user's credentials: 404 when it does not exist or is not theirs. */
    async revokeCredential(
      userId: number | undefined,
      credentialId: number,
      kind?: CredentialKind,
    ): Promise<void> {
      const credential = await repo.findCredential(credentialId);
      if (
        !credential ||
        credential.revoked_at !== null ||
        (userId !== undefined && credential.user_id !== userId) ||
        (kind && credential.kind !== kind)
      ) {
        throw new AppError('not_found', `Token ${credentialId} not found`);
      }
      await db.transaction().execute(async (trx) => {
        await createIdentityRepository(trx).revokeCredential(credentialId, now());
        await auditChange(trx, {
          at: now(),
          action: 'credential.delete',
          teamId: null,
          target: { kind: credential.kind, id: credentialId },
          before: {
            name: credential.name,
            kind: credential.kind,
            user_id: credential.user_id,
            hint: credential.hint,
          },
        });
      });
    },

    /** The principal behind a presented secret, or undefined. Never says why it failed. */
    async authenticate(
      kind: CredentialKind,
      presented: string,
      password?: string,
    ): Promise<Principal | undefined> {
      const lookup = kind === 'db_api' ? presented : sha256(presented);
      const found = await repo.findActiveCredential(kind, lookup);
      if (!found) return undefined;
      if (kind === 'db_api' && !constantTimeEqual(found.secret_hash ?? '', sha256(password ?? '')))
        return undefined;
      const t = clock.now().getTime();
      if ((lastTouched.get(found.id) ?? 0) + TOUCH_INTERVAL_MS < t) {
        lastTouched.set(found.id, t);
        await repo.touchCredential(found.id, iso(new Date(t)));
      }
      return { userId: found.user_id, credentialId: found.id, kind };
    },

    findUser: (id: number) => repo.findUser(id),
    /** The user with this e-mail address (stored lower-case), if any. */
    findUserByEmail: (email: string) => repo.findUserByEmail(email.toLowerCase()),
    countUsers: () => repo.countUsers(),
    teamsOfUser: (userId: number) => repo.teamsOfUser(userId),
    teamMembers: (teamId: number) => repo.teamMembers(teamId),

    /** A team by id or name; 404 if none, 403 if the user is not a member. */
    async requireTeam(userId: number, ref: string | number): Promise<TeamRow & { role: Role }> {
      const { revision: _revision, ...team } = await requireTeamAt(userId, ref);
      return team;
    },

    /** requireTeam with the team's current revision (null if it has none), in the same read. */
    requireTeamAt,
  };
}

export type IdentityService = ReturnType<typeof createIdentityService>;
