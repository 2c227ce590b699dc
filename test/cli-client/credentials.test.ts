// A profile with only the platform API token reaches the tools and the managed databases (issue 26,
// item 5): through /api/v1/user/tools and /api/v1/managed-databases (and each team's list), which take
// that token, instead of refusing for want of a tools key or a /1.3 credential. A profile with neither
// gets an error naming what to add.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { makePdf, pdfInfo } from '../tools/helpers.js';
import { ensureBuilt, Shell, startBerth } from './helpers.js';

let t: TestApp;
let url: string;
let shell: Shell;

beforeAll(async () => {
  await ensureBuilt();
  ({ t, url } = await startBerth({ env: { BERTH_TOOLS_MONTHLY_CREDITS: '10' } }));
  shell = new Shell();
  const login = await shell.run(['login', '--url', url, '--token', t.user.api_token]);
  expect(login.code, login.stderr).toBe(0);
  expect(JSON.parse(fs.readFileSync(shell.configFile, 'utf8'))).toMatchObject({
    profiles: { default: { token: t.user.api_token } },
  });
  expect(fs.readFileSync(shell.configFile, 'utf8')).not.toMatch(/tools_key|db_user/);
}, 300_000);

afterAll(async () => {
  shell?.remove();
  await t?.close();
});

describe('a profile with only the API token', () => {
  it('shows the tools balance and spends credits on a merge', async () => {
    const balance = await shell.run(['tools', 'balance']);
    expect(balance.code, balance.stderr).toBe(0);
    expect(balance.stdout).toMatch(/^10 of 10 credits left \(0 used\); resets \S+\.\n$/);

    shell.file('a.pdf', await makePdf(1, 'Alpha'));
    shell.file('b.pdf', await makePdf(1, 'Beta'));
    const merged = await shell.run(['tools', 'merge', 'a.pdf', 'b.pdf', '-o', 'merged.pdf']);
    expect(merged.code, merged.stderr).toBe(0);
    expect(merged.stdout).toMatch(/^Wrote merged\.pdf \(\d+ bytes; 9 credits left\)\.\n$/);
    expect(pdfInfo(fs.readFileSync(`${shell.home}/merged.pdf`)).pages).toBe(2);
    const after = await shell.run(['tools', 'balance', '--output', 'json']);
    expect(JSON.parse(after.stdout)).toMatchObject({ allowance: 10, used: 1, remaining: 9 });
  });

  it('lists and shows the managed databases of its teams, and their operations', async () => {
    const empty = await shell.run(['db', 'list']);
    expect(empty.code, empty.stderr).toBe(0);
    expect(empty.stdout).toBe('No managed databases.\n');

    // Applied without the background work: the database is recorded, and stays pending (no version yet).
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
`,
    );
    const applied = await shell.run(['apply', '-f', file]);
    expect(applied.code, applied.stderr).toBe(0);
    const row = await t.ctx.db
      .selectFrom('managed_databases')
      .select(['uuid'])
      .where('name', '=', 'main-db')
      .executeTakeFirstOrThrow();

    const list = await shell.run(['db', 'list']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+TYPE\s+VERSION\s+PLAN\s+ZONE\s+STATE\s+UUID\n/);
    expect(list.stdout).toMatch(
      new RegExp(`main-db +pg +1x1xCPU-2GB-25GB +de-fra1 +pending +${row.uuid}\\n`),
    );
    const json = await shell.run(['db', 'list', '--output', 'json']);
    expect(JSON.parse(json.stdout)).toEqual([
      expect.objectContaining({ uuid: row.uuid, name: 'main-db', type: 'pg', zone: 'de-fra1' }),
    ]);
    const shown = await shell.run(['db', 'show', 'main-db']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`uuid        ${row.uuid}`);
    expect(shown.stdout).toContain('plan, zone  1x1xCPU-2GB-25GB, de-fra1');
    // An operation of /1.3, under /api/v1/managed-databases/{uuid}/… with the token.
    const status = await shell.run(['db', 'migration-status', 'main-db', '--output', 'json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ status: 'done', databases: [] });
  });
});

describe('a profile with neither the API token nor the other credential', () => {
  it('says what to add, exit code 2', async () => {
    const bare = new Shell({ BERTH_URL: url });
    try {
      const balance = await bare.run(['tools', 'balance']);
      expect(balance.code).toBe(2);
      expect(balance.stderr).toMatch(/has neither a tools key nor an API token; run berth login --token T/);
      const list = await bare.run(['db', 'list']);
      expect(list.code).toBe(2);
      expect(list.stderr).toMatch(
        /has neither a database API credential nor an API token; run berth login --token T/,
      );
    } finally {
      bare.remove();
    }
  });
});
