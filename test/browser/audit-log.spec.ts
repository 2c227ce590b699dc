// The team's audit log page (issue 31, item 2): the owner sees who changed what, newest first, and
// narrows it with the filters; the entries are the API's (test/http/audit-log.test.ts proves them).
import { expect, signIn, test } from './fixtures.js';

test("shows the team's changes and filters them by action", async ({ page, berth }) => {
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Audit log' }).click();
  await expect(page.getByRole('heading', { name: 'Audit log' })).toBeVisible();
  // The harness applied the team's applications with the owner's token.
  const table = page.getByRole('table');
  await expect(table).toContainText('infrastructure.apply');
  await expect(table).toContainText(berth.owner.email);

  await page.getByLabel('Action').fill('infrastructure.*');
  await page.getByRole('button', { name: 'Filter' }).click();
  const actions = page.getByRole('table').locator('tbody tr td:nth-child(3)');
  await expect(actions.first()).toHaveText('infrastructure.apply');
  for (const text of await actions.allTextContents()) expect(text).toBe('infrastructure.apply');

  await page.getByLabel('Action').fill('nothing.*');
  await page.getByRole('button', { name: 'Filter' }).click();
  await expect(page.getByText('No entries match.')).toBeVisible();
});
