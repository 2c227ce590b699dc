// Names a user types (an application, a team, a managed database) turned into what the API's paths take.
import type { AppSummary, PlatformDatabase, ServiceObject, Team, TeamDatabase } from './answers.js';
import type { Api, Credential } from './http.js';
import { UsageError } from './http.js';

/** An application by id or name (within `--team` when given); a name in two teams needs --team. */
export async function resolveApp(api: Api, ref: string, team?: string): Promise<AppSummary> {
  const apps = await api.data<AppSummary[]>('GET', '/api/v1/applications', { query: { team } });
  const byId = /^\d+$/.test(ref) ? apps.find((a) => a.id === Number(ref)) : undefined;
  if (byId) return byId;
  const named = apps.filter((a) => a.name === ref);
  if (named.length === 1) return named[0]!;
  if (named.length > 1)
    throw new UsageError(`application '${ref}' exists in ${named.length} of your teams; add --team T`);
  throw new UsageError(`no application '${ref}'${team ? ` in team '${team}'` : ''}; see berth apps`);
}

/** `--team`, or the caller's only team. */
export async function resolveTeam(api: Api, team: string | undefined): Promise<Team> {
  const teams = await api.data<Team[]>('GET', '/api/v1/teams');
  if (team !== undefined) {
    const found = teams.find((t) => t.name === team || String(t.id) === team);
    if (!found) throw new UsageError(`you are not a member of team '${team}'; see berth teams`);
    return found;
  }
  if (teams.length === 1) return teams[0]!;
  throw new UsageError(
    `you are in ${teams.length} teams (${teams.map((t) => t.name).join(', ')}); choose one with --team T`,
  );
}

/**
 * A managed database as the CLI shows it: /1.3's service object; with an API token, the platform API's
 * answer put in the same fields (asService), which has none of the others.
 */
export type DbService = Pick<
  ServiceObject,
  | 'uuid'
  | 'name'
  | 'title'
  | 'type'
  | 'plan'
  | 'zone'
  | 'state'
  | 'powered'
  | 'service_uri'
  | 'service_uri_params'
  | 'users'
> &
  Partial<Pick<ServiceObject, 'databases'>> & { properties: Pick<ServiceObject['properties'], 'version'> };

/**
 * Where a managed database's operations are: `/1.3/database` with the database API credential, else the
 * same operations (same bodies and answers) under `/api/v1/managed-databases` with the API token.
 */
export function databaseRoute(api: Api, uuid: string): { path: string; credential: Credential } {
  const credential = api.access('db');
  const base = credential === 'platform' ? '/api/v1/managed-databases' : '/1.3/database';
  return { path: `${base}/${encodeURIComponent(uuid)}`, credential };
}

/** The platform API's view of a database in the fields of `/1.3`'s service object (which it mirrors). */
function asService(d: PlatformDatabase): DbService {
  return {
    uuid: d.uuid,
    name: d.name,
    title: d.name,
    type: d.type,
    plan: d.plan,
    zone: d.zone,
    state: d.state,
    powered: d.state !== 'stopped',
    properties: { version: d.version },
    service_uri: d.connection.uri,
    service_uri_params: d.connection.params,
    users: d.connection.users,
    databases: d.connection.databases,
  };
}

/** One managed database, by uuid. */
export async function getDatabase(api: Api, uuid: string): Promise<DbService> {
  const route = databaseRoute(api, uuid);
  if (route.credential !== 'platform') return api.json<DbService>('GET', route.path, route);
  return asService(await api.data<PlatformDatabase>('GET', route.path, route));
}

/** Every managed database the caller sees: `/1.3`'s list, or each of their teams' with the API token. */
export async function listDatabases(api: Api): Promise<DbService[]> {
  const credential = api.access('db');
  if (credential !== 'platform') return api.json<DbService[]>('GET', '/1.3/database', { credential });
  const teams = await api.data<Team[]>('GET', '/api/v1/teams');
  const listed = await Promise.all(
    teams.map((t) =>
      api.data<TeamDatabase[]>('GET', `/api/v1/teams/${encodeURIComponent(t.name)}/managed-databases`),
    ),
  );
  // The team lists carry no version nor connection: each database's own answer has them.
  return Promise.all(listed.flat().map((d) => getDatabase(api, d.uuid)));
}

/**
 * A managed database by uuid, name or title: a name before a title (a clone keeps its source's title,
 * so a title alone may name both).
 */
export async function resolveDatabase(api: Api, ref: string): Promise<DbService> {
  const all = await listDatabases(api);
  const byUuid = all.find((d) => d.uuid === ref);
  if (byUuid) return byUuid;
  for (const matches of [all.filter((d) => d.name === ref), all.filter((d) => d.title === ref)]) {
    if (matches.length > 1) throw new UsageError(`'${ref}' names ${matches.length} databases; use the uuid`);
    if (matches.length === 1) return matches[0]!;
  }
  throw new UsageError(`no managed database '${ref}'; see berth db list`);
}
