// The tools page: converting HTML to a PDF in the try-it form spends a credit, as the API does.
import fs from 'node:fs';
import { expect, signIn, test } from './fixtures.js';

test('converts HTML to a PDF in the try-it form and the balance drops', async ({ page, berth }) => {
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Tools' }).click();
  const balance = page.getByTestId('balance');
  await expect(balance).toHaveText(/^\d+$/);
  const before = Number(await balance.textContent());
  await page.getByLabel('HTML to convert').fill('<h1>Invoice 42</h1>');
  await page.getByRole('button', { name: 'Convert' }).click();
  await expect(page.getByText(/Done: application\/pdf/)).toBeVisible({ timeout: 30_000 });
  await expect(balance).toHaveText(String(before - 1));
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('link', { name: 'Download' }).click(),
  ]);
  expect(download.suggestedFilename()).toBe('berth.pdf');
  const pdf = fs
    .readFileSync(await download.path())
    .subarray(0, 5)
    .toString('latin1');
  expect(pdf).toBe('%PDF-');
  // Spent today: the chart has a bar, named for what it shows.
  await expect(page.getByRole('img', { name: 'Credits spent per day' })).toBeVisible();
  await expect(page.locator('svg.chart rect')).not.toHaveCount(0);

  // A screenshot, previewed in the page.
  await page.getByLabel('Screenshot').check();
  await page.getByRole('button', { name: 'Convert' }).click();
  await expect(page.getByRole('img', { name: 'Screenshot preview' })).toBeVisible({ timeout: 30_000 });
  await expect(balance).toHaveText(String(before - 2));
  const width = await page
    .getByRole('img', { name: 'Screenshot preview' })
    .evaluate((img) => (img as HTMLImageElement).naturalWidth);
  expect(width).toBeGreaterThan(100);
});
