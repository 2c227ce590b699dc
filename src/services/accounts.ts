// People signing in (issue 16): by e-mail and password, or by a one-time link sent by e-mail; the
// browser sessions that result (listed, revocable, expiring), and the team changes owners make
// (create, invite, change a role, remove, leave). Tokens — session cookies, sign-in links — are
// random, shown once and stored as their sha256 only. API tokens (src/services/identity.ts) are
// untouched by any of this.
import crypto from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import { constantTimeEqual, sha256, type SecretBox } from '../crypto/secret-box.js';
import {
  hashPassword,
  passwordProblem,
  verifyNothing,
  verifyPassword,
  type PasswordCost,
} from '../crypto/passwords.js';
import { createAccountsRepository, type SessionRow } from '../db/repositories/accounts.js';
import { createIdentityRepository } from '../db/repositories/identity.js';
import type { Role } from '../db/schema/foundation.js';
import type { Database } from '../db/schema/index.js';
import { iso, type Clock } from '../domain/clock.js';
import { NAME_CONTROL } from '../domain/control-characters.js';
import { AppError, fieldError } from '../domain/errors.js';
import { requireRole } from '../domain/roles.js';
import { createSlidingCounts } from '../domain/rate-windows.js';
import type { Mailer } from '../drivers/mail/types.js';
import { TEAM_NAME, type IdentityService } from './identity.js';
import { auditChange, auditUnchanged } from './audit.js';

export const SESSION_DAYS = 30;
export const SIGN_IN_LINK_MINUTES = 15;
/** Failed sign-ins per minute before 429: per account (e-mail) and per client address. */
export const SIGN_IN_FAILURES_PER_ACCOUNT = 10;
export const SIGN_IN_FAILURES_PER_ADDRESS = 30;
const TOUCH_INTERVAL_MS = 60_000;
const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,255}$/;

export interface AccountsDeps {
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  secretBox: SecretBox;
  identity: IdentityService;
  /** The SMTP mailer, if one is configured; else mail waits in the account outbox. */
  mailer: () => Mailer | undefined;
  /** Where links in mail point (the dashboard's address). */
  publicUrl: string;
  /**
   * Failed sign-ins a minute before 429 (default SIGN_IN_FAILURES_PER_ADDRESS): lower in tests, where
   * each failure is a deliberate 32 MiB scrypt hash.
   */
  signInFailuresPerAddress?: number;
  /** scrypt cost of new password hashes (default PASSWORD_COST): cheaper only in tests. */
  passwordCost?: PasswordCost;
}

export interface SignedIn {
  /** The cookie's value: shown once, never stored. */
  token: string;
  /** What a cookie-authenticated write sends as X-CSRF-Token. */
  csrfToken: string;
  session: SessionRow;
  user: { id: number; email: string };
}

export interface SessionPrincipal {
  userId: number;
  sessionId: number;
}

/** Where a session comes from, as shown in the account page's list. */
export interface Client {
  address: string;
  userAgent: string;
}

const newToken = () => crypto.randomBytes(32).toString('base64url');

/** The CSRF token of a session: derived from its (HttpOnly) cookie, so it needs no storage. */
export const csrfTokenOf = (sessionToken: string): string => sha256(`berth-csrf\0${sessionToken}`);

export function createAccountsService(deps: AccountsDeps) {
  const { db, clock, secretBox } = deps;
  const repo = createAccountsRepository(db);
  const users = createIdentityRepository(db);
  const failures = createSlidingCounts();
  const lastTouched = new Map<number, number>();
  const now = () => iso(clock.now());

  function normalEmail(email: string): string {
    const value = email.trim().toLowerCase();
    if (!EMAIL.test(value)) throw fieldError('email', 'Give an e-mail address, like name@example.com');
    return value;
  }

  async function startSession(userId: number, email: string, client: Client): Promise<SignedIn> {
    const token = newToken();
    const at = clock.now();
    const row = {
      user_id: userId,
      token_hash: sha256(token),
      user_agent: client.userAgent.slice(0, 300),
      address: client.address.slice(0, 100),
      created_at: iso(at),
      expires_at: iso(new Date(at.getTime() + SESSION_DAYS * 86_400_000)),
    };
    const { token_hash: _hash, ...rest } = row;
    const id = await db.transaction().execute(async (trx) => {
      const session = await createAccountsRepository(trx).insertSession(row);
      // Signed in: the session's author is the account that signed in (the request has no principal).
      await auditChange(trx, {
        at,
        action: 'session.create',
        teamId: null,
        userId,
        target: { kind: 'session', id: session },
        after: { user_agent: rest.user_agent, expires_at: rest.expires_at },
      });
      return session;
    });
    return {
      token,
      csrfToken: csrfTokenOf(token),
      session: { id, ...rest, last_seen_at: row.created_at, revoked_at: null },
      user: { id: userId, email },
    };
  }

  /** Delivers account mail by SMTP, or leaves it in the account outbox (sealed) for the operator. */
  async function mail(userId: number, recipient: string, subject: string, body: string): Promise<void> {
    const id = await repo.insertMail({
      user_id: userId,
      recipient,
      subject,
      body_encrypted: secretBox.encrypt(body),
      created_at: now(),
    });
    const mailer = deps.mailer();
    if (!mailer) return;
    try {
      await mailer.send({ to: recipient, subject, text: body });
      await repo.markMail(id, 'sent', now(), null);
    } catch (error) {
      // The address is the user's own; the body (a sign-in link) never reaches the log.
      deps.logger.warn({ err: error, mail: id }, 'account mail not sent; it stays in the account outbox');
      await repo.markMail(id, 'failed', now(), (error as Error).message.slice(0, 500));
    }
  }

  async function newSignInLink(userId: number): Promise<string> {
    return db.transaction().execute(async (trx) => {
      const link = await newSignInLinkIn(trx, userId);
      await auditChange(trx, {
        at: clock.now(),
        action: 'sign_in_link.create',
        teamId: null,
        userId,
        target: { kind: 'user', id: userId },
      });
      return link;
    });
  }

  async function newSignInLinkIn(trx: Transaction<Database>, userId: number): Promise<string> {
    const token = newToken();
    const at = clock.now();
    await createAccountsRepository(trx).insertSignInLink({
      user_id: userId,
      token_hash: sha256(token),
      created_at: iso(at),
      expires_at: iso(new Date(at.getTime() + SIGN_IN_LINK_MINUTES * 60_000)),
    });
    return `${deps.publicUrl.replace(/\/$/, '')}/sign-in/link#token=${token}`;
  }

  /**
   * Stores a new password (never recorded, only that it changed); `keepSession`: the other sessions
   * end (null: all of them), undefined: they go on.
   */
  async function storePassword(userId: number, password: string, keepSession: number | null | undefined) {
    const problem = passwordProblem(password);
    if (problem) throw fieldError('password', problem);
    const hash = await hashPassword(password, deps.passwordCost);
    await db.transaction().execute(async (trx) => {
      const r = createAccountsRepository(trx);
      await r.setPasswordHash(userId, hash);
      if (keepSession !== undefined) await r.revokeOtherSessions(userId, keepSession ?? undefined, now());
      await auditChange(trx, {
        at: now(),
        action: 'password.update',
        teamId: null,
        target: { kind: 'user', id: userId },
        after: { password: 'set', other_sessions: keepSession === undefined ? 'kept' : 'ended' },
      });
    });
  }

  /** The caller's team with their role, refused unless they own it. */
  async function ownedTeam(userId: number, ref: string | number) {
    const team = await deps.identity.requireTeam(userId, ref);
    requireRole({ teamName: team.name, role: team.role }, 'owner', 'Managing members');
    return team;
  }

  async function requireMember(teamId: number, userId: number): Promise<Role> {
    const membership = await users.findMembership(teamId, userId);
    if (!membership) throw new AppError('not_found', `User ${userId} is not a member of this team`);
    return membership.role;
  }

  /** Refuses a change that would leave the team without an owner. */
  async function keepAnOwner(teamId: number, userId: number, role: Role): Promise<void> {
    if (role === 'owner' && (await repo.countOwners(teamId)) <= 1)
      throw new AppError('conflict', 'A team keeps at least one owner: make another member owner first');
  }

  return {
    async signInWithPassword(input: { email: string; password: string }, client: Client): Promise<SignedIn> {
      const email = input.email.trim().toLowerCase();
      const t = clock.now().getTime();
      const throttled = (key: string, limit: number, what: string): AppError | undefined => {
        const retryAfter = failures.full(key, limit, t);
        return retryAfter === undefined
          ? undefined
          : new AppError('rate_limited', `Too many failed sign-ins for ${what}. Retry later.`, {
              retryAfter,
            });
      };
      // An account under attack refuses even its right password for a minute: passwords are chosen by
      // people, so guesses must stay slow (the e-mailed sign-in link still works). An address does not:
      // behind a proxy it is everyone's, so only its failing attempts are refused (issue 24, item 2).
      const account = throttled(`account:${email}`, SIGN_IN_FAILURES_PER_ACCOUNT, 'this account');
      if (account) throw account;
      const user = await users.findUserByEmail(email);
      const ok = user?.password_hash
        ? await verifyPassword(input.password, user.password_hash)
        : (await verifyNothing(input.password, deps.passwordCost), false);
      if (!user || !ok) {
        const address = throttled(
          `address:${client.address}`,
          deps.signInFailuresPerAddress ?? SIGN_IN_FAILURES_PER_ADDRESS,
          'this address',
        );
        if (address) throw address;
        failures.add(`account:${email}`, t);
        failures.add(`address:${client.address}`, t);
        throw new AppError('unauthenticated', 'The e-mail address or the password is wrong.');
      }
      return startSession(user.id, user.email, client);
    },

    /** Sends a sign-in link if the address is a user's; answers the same either way. */
    async requestSignInLink(emailInput: string): Promise<void> {
      const email = normalEmail(emailInput);
      const user = await users.findUserByEmail(email);
      if (!user) return auditUnchanged();
      const link = await newSignInLink(user.id);
      await mail(
        user.id,
        user.email,
        'Your Berth sign-in link',
        `Sign in to Berth with this link within ${SIGN_IN_LINK_MINUTES} minutes; it works once:\n\n${link}\n\n` +
          'If you did not ask for it, ignore this message.',
      );
    },

    /** A sign-in link for the operator to hand over (`berth admin sign-in-link`). */
    signInLinkFor: (userId: number) => newSignInLink(userId),

    async signInWithLink(token: string, client: Client): Promise<SignedIn> {
      const userId = await repo.useSignInLink(sha256(token), now());
      const user = userId === undefined ? undefined : await users.findUser(userId);
      if (!user) throw new AppError('unauthenticated', 'This sign-in link is unknown, used or expired.');
      return startSession(user.id, user.email, client);
    },

    /** The session behind a cookie, or undefined. */
    async authenticateSession(token: string): Promise<SessionPrincipal | undefined> {
      const session = await repo.findLiveSession(sha256(token), now());
      if (!session) return undefined;
      const t = clock.now().getTime();
      if ((lastTouched.get(session.id) ?? 0) + TOUCH_INTERVAL_MS < t) {
        lastTouched.set(session.id, t);
        await repo.touchSession(session.id, iso(new Date(t)));
      }
      return { userId: session.user_id, sessionId: session.id };
    },

    checkCsrf: (sessionToken: string, presented: string | undefined): boolean =>
      presented !== undefined && constantTimeEqual(presented, csrfTokenOf(sessionToken)),

    listSessions: (userId: number) => repo.listLiveSessions(userId, now()),

    async revokeSession(userId: number, sessionId: number): Promise<void> {
      await db.transaction().execute(async (trx) => {
        if (!(await createAccountsRepository(trx).revokeSession(userId, sessionId, now())))
          throw new AppError('not_found', `Session ${sessionId} not found`);
        await auditChange(trx, {
          at: now(),
          action: 'session.delete',
          teamId: null,
          target: { kind: 'session', id: sessionId },
        });
      });
    },

    /** Sets a password; a user who has one gives it too. Other sessions end. */
    async setPassword(
      userId: number,
      input: { password: string; currentPassword?: string },
      keepSession?: number,
    ): Promise<void> {
      const user = await users.findUser(userId);
      if (!user) throw new AppError('not_found', `User ${userId} not found`);
      if (user.password_hash) {
        const ok =
          input.currentPassword !== undefined &&
          (await verifyPassword(input.currentPassword, user.password_hash));
        if (!ok) throw fieldError('current_password', 'The current password is wrong');
      }
      await storePassword(userId, input.password, keepSession ?? null);
    },

    /** Sets a password without the current one (`berth admin set-password`). */
    async forcePassword(userId: number, password: string): Promise<void> {
      await storePassword(userId, password, undefined);
    },

    /** Account mail that has not gone out (no SMTP server, or it failed), opened for the operator. */
    async unsentMail(userId: number) {
      const rows = await repo.unsentMail(userId);
      return rows.map(({ body_encrypted, ...row }) => ({ ...row, body: secretBox.decrypt(body_encrypted) }));
    },

    async createTeam(userId: number, nameInput: string) {
      const name = nameInput.trim();
      if (!TEAM_NAME.test(name) || NAME_CONTROL.test(name))
        throw fieldError('name', 'A team name is 1-100 letters, digits, spaces, dots, dashes or underscores');
      if (await users.findTeamByName(name)) throw fieldError('name', `A team named ${name} exists already`);
      const at = now();
      const id = await db.transaction().execute(async (trx) => {
        const r = createIdentityRepository(trx);
        const teamId = await r.insertTeam(name, at);
        await r.upsertMembership(teamId, userId, 'owner', at);
        await auditChange(trx, {
          at,
          action: 'team.create',
          teamId,
          target: { kind: 'team', id: teamId },
          after: { name },
        });
        return teamId;
      });
      return { id, name, created_at: at, role: 'owner' as Role };
    },

    /** Adds a member (creating the user when the address is new) and mails them a sign-in link. */
    async invite(ownerId: number, teamRef: string | number, input: { email: string; role: Role }) {
      const team = await ownedTeam(ownerId, teamRef);
      const email = normalEmail(input.email);
      const at = now();
      let user = await users.findUserByEmail(email);
      if (user && (await users.findMembership(team.id, user.id)))
        throw new AppError('conflict', `${email} is already a member of team ${team.name}`);
      const { userId, link } = await db.transaction().execute(async (trx) => {
        const r = createIdentityRepository(trx);
        const id = user?.id ?? (await r.insertUser(email, at));
        await r.upsertMembership(team.id, id, input.role, at);
        await auditChange(trx, {
          at,
          action: 'member.create',
          teamId: team.id,
          target: { kind: 'user', id },
          after: { email, role: input.role },
        });
        return { userId: id, link: await newSignInLinkIn(trx, id) };
      });
      user ??= await users.findUser(userId);
      await mail(
        userId,
        email,
        `You were added to the team ${team.name} on Berth`,
        `You are now ${input.role === 'owner' ? 'an owner' : 'a member'} of the team ${team.name} on Berth.\n\n` +
          `Sign in within ${SIGN_IN_LINK_MINUTES} minutes with this link (it works once; later, ask for a new one on the sign-in page):\n\n${link}\n`,
      );
      return { id: userId, email, role: input.role };
    },

    async setRole(ownerId: number, teamRef: string | number, userId: number, role: Role) {
      const team = await ownedTeam(ownerId, teamRef);
      const current = await requireMember(team.id, userId);
      if (role !== 'owner' && current !== role) await keepAnOwner(team.id, userId, current);
      // Recorded even when the role stays: the request was a change, answered 200.
      await db.transaction().execute(async (trx) => {
        if (current !== role) await createAccountsRepository(trx).setRole(team.id, userId, role);
        await auditChange(trx, {
          at: now(),
          action: 'member.update',
          teamId: team.id,
          target: { kind: 'user', id: userId },
          before: { role: current },
          after: { role },
        });
      });
      const user = await users.findUser(userId);
      return { id: userId, email: user?.email ?? '', role };
    },

    /** Removes a member: an owner removes anyone, a member only themselves (leaving). */
    async removeMember(actorId: number, teamRef: string | number, userId: number): Promise<void> {
      const team = await deps.identity.requireTeam(actorId, teamRef);
      if (actorId !== userId)
        requireRole({ teamName: team.name, role: team.role }, 'owner', 'Removing another member');
      const role = await requireMember(team.id, userId);
      await keepAnOwner(team.id, userId, role);
      await db.transaction().execute(async (trx) => {
        await createAccountsRepository(trx).removeMembership(team.id, userId);
        await auditChange(trx, {
          at: now(),
          action: 'member.delete',
          teamId: team.id,
          target: { kind: 'user', id: userId },
          before: { role },
        });
      });
    },
  };
}

export type AccountsService = ReturnType<typeof createAccountsService>;
