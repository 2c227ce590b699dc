// What a managed database's row declares: its engine, and the users and logical databases of its document.
import { PermanentDriverError, type DatabaseEngine } from '../../drivers/databases/types.js';
import type { ManagedDatabaseRow } from '../../db/repositories/managed-databases.js';

export interface DocumentUser {
  username?: string;
  authentication?: string;
}
export interface DocumentDatabase {
  name?: string;
  character_set?: string;
  collation?: string;
}

export function engineOf(type: string): DatabaseEngine {
  if (type === 'pg' || type === 'mysql' || type === 'valkey') return type;
  if (type === 'redis') return 'valkey';
  throw new PermanentDriverError(`unknown managed database type '${type}'`);
}

function parseJson<T>(text: string | null | undefined, fallback: T): T {
  if (!text) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

/** The document's users, each with a name (entries without one are numbered). */
export function declaredUsers(row: ManagedDatabaseRow): Array<{ username: string; authentication?: string }> {
  return parseJson<DocumentUser[]>(row.users, []).map((u, i) => ({
    username: u.username ?? `user${i + 1}`,
    ...(u.authentication ? { authentication: u.authentication } : {}),
  }));
}

export function declaredDatabases(row: ManagedDatabaseRow): DocumentDatabase[] {
  return parseJson<DocumentDatabase[]>(row.logical_databases, []).filter((d) => !!d.name);
}
