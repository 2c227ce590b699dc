// Managed databases in the panel: carry out the plan change apply left pending, reveal a credential,
// clone to a point in time between two writes; migrate from another managed database, check an upgrade
// and run maintenance.
import pg from 'pg';
import { expect, signIn, test, type BrowserBerth } from './fixtures.js';

async function query(uri: string, sql: string): Promise<Array<Record<string, unknown>>> {
  const client = new pg.Client({ connectionString: uri.replace(/\?.*$/, '') });
  await client.connect();
  try {
    return (await client.query(sql)).rows as Array<Record<string, unknown>>;
  } finally {
    await client.end();
  }
}

test('carries out a pending plan change, reveals the connection and clones to a point in time', async ({
  page,
  berth,
}) => {
  test.setTimeout(180_000);
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Databases' }).click();
  await page.getByRole('link', { name: 'main-db' }).click();
  await expect(page.getByTestId('db-plan')).toHaveText(berth.plans[0]);

  const pending = page.getByRole('region', { name: 'A change waits for you' });
  await expect(pending).toContainText(berth.plans[1]);
  await pending.getByRole('button', { name: 'Carry out the change' }).click();
  await expect(page.getByTestId('db-plan')).toHaveText(berth.plans[1]);
  await expect(page.getByRole('region', { name: 'A change waits for you' })).toHaveCount(0);
  await expect(page.getByTestId('db-state')).toContainText('running', { timeout: 60_000 });

  // Hidden until revealed.
  const uri = page.getByLabel('connection URI', { exact: true });
  await expect(uri).toHaveValue('••••••••••••');
  await page.getByRole('button', { name: 'Reveal connection URI' }).click();
  await expect(uri).toHaveValue(/^postgres(ql)?:\/\//);
  const connection = await uri.inputValue();

  await query(connection, 'CREATE TABLE events (id int PRIMARY KEY)');
  await query(connection, 'INSERT INTO events VALUES (1)');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const between = new Date();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await query(connection, 'INSERT INTO events VALUES (2)');

  await page.getByLabel('Name of the clone').fill('pitr-copy');
  // datetime-local in the page's time zone (UTC, playwright.config.ts), to the second.
  await page.getByLabel(/Point in time/).fill(between.toISOString().slice(0, 19));
  await page.getByRole('button', { name: 'Clone' }).click();
  await expect(page.getByRole('heading', { name: 'pitr-copy' })).toBeVisible();
  await expect(page.getByTestId('db-state')).toContainText('running', { timeout: 120_000 });
  await page.getByRole('button', { name: 'Reveal connection URI' }).click();
  const cloneUri = await page.getByLabel('connection URI', { exact: true }).inputValue();
  const rows = await query(cloneUri, 'SELECT id FROM events ORDER BY id');
  expect(rows.map((r) => r.id)).toEqual([1]);

  // An operation the API refuses: its message is shown as the API words it.
  await page.getByRole('button', { name: 'Run maintenance now' }).click();
  await expect(page.getByRole('alert')).toHaveText('There is no pending maintenance for this database');
});

/** The team's managed databases through the API, as the panel's list reads them. */
async function databases(berth: BrowserBerth): Promise<Array<{ uuid: string; name: string }>> {
  const answer = await fetch(`${berth.url}/api/v1/teams/${berth.owner.teamId}/managed-databases`, {
    headers: { authorization: `Bearer ${berth.owner.token}` },
  });
  return ((await answer.json()) as { data: Array<{ uuid: string; name: string }> }).data;
}

test('migrates from another managed database with its status live, checks an upgrade, runs maintenance', async ({
  page,
  berth,
}) => {
  test.setTimeout(120_000);
  await signIn(page, berth);
  // The source: main-db, whose events table holds 1 and 2 (the test above); the target: its clone,
  // which holds 1 only.
  await page.goto(`${berth.url}/databases`);
  await page.getByRole('link', { name: 'main-db' }).click();
  await page.getByRole('button', { name: 'Reveal connection URI' }).click();
  const source = await page.getByLabel('connection URI', { exact: true }).inputValue();
  await page.goto(`${berth.url}/databases`);
  await page.getByRole('link', { name: 'pitr-copy' }).click();
  await expect(page.getByTestId('db-state')).toContainText('running');
  await page.getByRole('button', { name: 'Reveal connection URI' }).click();
  const target = await page.getByLabel('connection URI', { exact: true }).inputValue();
  expect((await query(target, 'SELECT id FROM events ORDER BY id')).map((r) => r.id)).toEqual([1]);

  // The migration's states as the page showed them, to prove it was followed while it ran.
  await page.evaluate(() => {
    const seen: string[] = [];
    (window as unknown as { migrationStates: string[] }).migrationStates = seen;
    new MutationObserver(() => {
      const badge = document.querySelector('[data-testid="migration"] .badge');
      const state = badge?.textContent ?? '';
      if (state && seen.at(-1) !== state) seen.push(state);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByLabel('Source URI').fill(source);
  await page.getByLabel('TLS to the source').uncheck();
  await page.getByRole('button', { name: 'Check', exact: true }).click();
  const check = page.getByTestId('task');
  await expect(check).toContainText('pg_migration_check: passed');
  await page.getByRole('button', { name: 'Migrate' }).click();
  const migration = page.getByTestId('migration');
  await expect(migration).toContainText('defaultdb: done');
  await expect(migration.locator('.badge')).toHaveText('done');
  const states = await page.evaluate(
    () => (window as unknown as { migrationStates: string[] }).migrationStates,
  );
  expect(states).toEqual(['running', 'done']);
  // The rows of the source, copied over those of the target.
  expect((await query(target, 'SELECT id FROM events ORDER BY id')).map((r) => r.id)).toEqual([1, 2]);

  // An upgrade is offered once its check passes (the upgrade itself: test/dbapi/upgrade.test.ts).
  const upgrade = page.getByRole('button', { name: 'Upgrade', exact: true });
  await expect(upgrade).toBeDisabled();
  const [created] = await Promise.all([
    page.waitForResponse((r) => r.url().endsWith('/tasks') && r.request().method() === 'POST'),
    page.getByRole('button', { name: 'Check the upgrade' }).click(),
  ]);
  const { id } = (await created.json()) as { id: string };
  await expect(check).toContainText('pg_upgrade_check: passed', { timeout: 30_000 });
  await expect(upgrade).toBeEnabled();
  const uuid = (await databases(berth)).find((d) => d.name === 'pitr-copy')!.uuid;
  const task = await fetch(`${berth.url}/api/v1/managed-databases/${uuid}/tasks/${id}`, {
    headers: { authorization: `Bearer ${berth.owner.token}` },
  }).then((r) => r.json() as Promise<{ operation: string; success: boolean }>);
  expect(task).toMatchObject({ operation: 'pg_upgrade_check', success: true });

  // A setting that waits for a restart (set by Berth's own superuser): maintenance applies it.
  expect(await query(target, 'SHOW max_wal_senders')).not.toEqual([{ max_wal_senders: '7' }]);
  const pending = await fetch(`${berth.control}/pending-restart?database=pitr-copy`, { method: 'POST' });
  expect(pending.status).toBe(200);
  await page.getByRole('button', { name: 'Run maintenance now' }).click();
  await expect(page.getByTestId('maintenance')).toHaveText(
    'Maintenance applied: Apply settings that need a restart: max_wal_senders',
  );
  expect(await query(target, 'SHOW max_wal_senders')).toEqual([{ max_wal_senders: '7' }]);
});
