// What the whole panel shares: the signed-in user, their teams, and the team being looked at.
import { computed, signal } from '@preact/signals';
import { api, setCsrf, sessionEnded, type SignedIn, type Team, type User } from './api';

export const user = signal<User | null>(null);
/** false until the first session check has answered. */
export const ready = signal(false);
const TEAM_KEY = 'berth.team';
export const teamId = signal<number | null>(Number(localStorage.getItem(TEAM_KEY)) || null);

export const team = computed<Team | null>(() => {
  const teams = user.value?.teams ?? [];
  return teams.find((t) => t.id === teamId.value) ?? teams[0] ?? null;
});

/**
 * True when the user is an owner of team `id` (default: the team being looked at). Owner-only actions
 * are offered only then; the API refuses them to members anyway (docs/security.md, "Roles").
 */
export function owns(id?: number): boolean {
  const of = id === undefined ? team.value : user.value?.teams.find((t) => t.id === id);
  return of?.role === 'owner';
}

/** What a member sees where an owner has buttons. */
export const MEMBER_NOTE = 'You are a member of this team: changes are for its owners.';

export function chooseTeam(id: number): void {
  teamId.value = id;
  localStorage.setItem(TEAM_KEY, String(id));
}

/** Reloads the user and their teams (after a team is made or left). */
export async function refreshUser(): Promise<void> {
  user.value = (await api.get<{ data: User }>('/api/v1/user')).data;
}

/** On load: the session the cookie holds, if any, and its CSRF token. */
export async function loadSession(): Promise<void> {
  try {
    // Signed out answers { data: null } (not 401): a first load logs no error.
    const session = await api.get<{ data: SignedIn | null }>('/api/v1/auth/session');
    if (session.data === null) {
      user.value = null;
      return;
    }
    setCsrf(session.data.csrf_token);
    await refreshUser();
    sessionEnded.value = false;
  } catch {
    user.value = null;
  } finally {
    ready.value = true;
  }
}

export async function signedIn(csrf: string): Promise<void> {
  setCsrf(csrf);
  sessionEnded.value = false;
  await refreshUser();
}

export function signedOut(): void {
  setCsrf('');
  user.value = null;
}
