// What owners and members of a team may do (docs/security.md, "Roles: what owners and members may
// do"). Every owner check goes through requireRole: the ownership hook for the role a route declares,
// and the few services that decide from what only they read (apply's document names its team; a
// member may remove only themselves).
import { AppError } from './errors.js';

export type TeamRole = 'owner' | 'member';

/** A caller's membership of a team, as the checks read it. */
export interface Membership {
  teamName: string;
  role: string;
}

/**
 * Throws 403 unless `membership` holds `need`. `action` names what was refused (a route, or words);
 * `apiCode` is the /1.3 code (UpCloud's ACCOUNT_FORBIDDEN there).
 */
export function requireRole(
  membership: Membership,
  need: TeamRole,
  action: string,
  options: { apiCode?: string } = {},
): void {
  if (need === 'member' || membership.role === 'owner') return;
  throw new AppError(
    'forbidden',
    `${action} needs the owner role in team ${membership.teamName}; your role is ${membership.role}.`,
    options.apiCode ? { apiCode: options.apiCode } : {},
  );
}
