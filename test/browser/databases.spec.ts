// Managed databases in the panel: carry out the plan change apply left pending, reveal a credential,
// and clone to a point in time between two writes.
import pg from 'pg';
import { expect, signIn, test } from './fixtures.js';

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
