// A managed PostgreSQL through the client: apply --wait returns once it is provisioned, and
// `berth db clone --wait` over /1.3 makes a running copy holding the source's data.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBackground, type Background } from '../../src/lifecycle.js';
import type { TestApp } from '../helpers/app.js';
import { pgQuery, withDb } from '../db-operations/fixtures.js';
import { ensureBuilt, Shell, startBerth } from './helpers.js';

let t: TestApp;
let background: Background;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  let url: string;
  ({ t, url } = await startBerth());
  background = await startBackground(t.ctx, { pollMs: 100 });
  shell = new Shell({ BERTH_DB_USER: t.user.db_api_username, BERTH_DB_PASSWORD: t.user.db_api_password });
  const login = await shell.run(['login', '--url', url, '--token', t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await background?.stop();
  await t?.close();
});

describe('managed databases', () => {
  it('apply --wait returns once the database runs; db clone --wait copies it', async () => {
    const file = shell.file(
      'team.yaml',
      `apiVersion: v1
kind: Infrastructure
metadata:
  name: acme
  team: acme
spec:
  managed_databases:
    - name: main-db
      type: pg
      plan: 1x1xCPU-2GB-25GB
      zone: de-fra1
      logical_databases:
        - name: shop
`,
    );
    const applied = await shell.run(['apply', '-f', file, '--wait'], { timeoutMs: 240_000 });
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stderr).toContain('✓ managed database main-db running');

    const shown = await shell.run(['db', 'show', 'main-db', '--show-password', '--output', 'json']);
    expect(shown.code, shown.stderr).toBe(0);
    const source = JSON.parse(shown.stdout) as { service_uri: string; state: string };
    expect(source.state).toBe('running');
    const masked = await shell.run(['db', 'show', 'main-db']);
    expect(masked.stdout).toMatch(/uri +\S+:\/\/[^:]+:\*\*\*\*@/);
    const sourceUri = withDb(source.service_uri.replace(/\?.*$/, ''), 'shop');
    await pgQuery(sourceUri, 'CREATE TABLE orders (id int); INSERT INTO orders VALUES (42)');

    const clone = await shell.run(['db', 'clone', 'main-db', '--name', 'main-copy', '--wait'], {
      timeoutMs: 240_000,
    });
    expect(clone.code, clone.stderr).toBe(0);
    expect(clone.stdout).toMatch(/Clone main-copy \([0-9a-f-]{36}\) of main-db created: pending\./);
    expect(clone.stderr).toContain('✓ Clone main-copy: running');
    const copy = JSON.parse(
      (await shell.run(['db', 'show', 'main-copy', '--show-password', '--output', 'json'])).stdout,
    ) as { service_uri: string };
    const rows = await pgQuery(
      withDb(copy.service_uri.replace(/\?.*$/, ''), 'shop'),
      'SELECT id FROM orders',
    );
    expect(JSON.stringify(rows)).toContain('42');

    // db connect runs psql with the connection in its environment; the arguments after -- are the user's.
    const connect = await shell.run([
      'db',
      'connect',
      'main-copy',
      '--',
      '-At',
      '-d',
      'shop',
      '-c',
      'SELECT id FROM orders',
    ]);
    expect(connect.code, connect.stderr).toBe(0);
    expect(connect.stdout.trim()).toBe('42');

    const list = await shell.run(['db', 'list']);
    expect(list.stdout).toMatch(/main-copy\s+pg/);
  }, 600_000);
});
