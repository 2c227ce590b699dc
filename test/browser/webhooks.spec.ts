// Team webhooks on the team page (issue 31, item 4): an owner adds one and sees its signing secret once
// (gone after a reload, never listed), sees it in the list, and deletes it.
import { expect, signIn, test } from './fixtures.js';

test('adds a webhook, shows its secret once, and deletes it', async ({ page, berth }) => {
  await signIn(page, berth);
  await page.goto(`${berth.url}/team`);
  const section = page.getByRole('region', { name: 'Webhooks' });
  await expect(section).toBeVisible();
  // The harness's loopback server: the browser Berth allows loopback (BERTH_TOOLS_ALLOW_PRIVATE).
  const url = `${berth.control}/webhook-from-the-panel`;
  await section.getByLabel('Webhook URL').fill(url);
  await section.getByLabel('deployment.succeeded').check();
  await section.getByRole('button', { name: 'Add webhook' }).click();
  const secret = section.getByRole('textbox', { name: `The signing secret of the webhook to ${url}` });
  await expect(secret).toHaveValue(/^whsec_/);
  await expect(section.getByText('shown this once')).toBeVisible();
  const row = section.getByRole('row').filter({ hasText: url });
  await expect(row).toContainText('deployment.succeeded');

  await page.reload();
  await expect(section.getByRole('row').filter({ hasText: url })).toBeVisible();
  await expect(section.getByText('shown this once')).toHaveCount(0);

  await section.getByRole('button', { name: `Delete the webhook to ${url}` }).click();
  await expect(section.getByRole('row').filter({ hasText: url })).toHaveCount(0);
});
