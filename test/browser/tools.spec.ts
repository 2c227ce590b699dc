// The tools page: converting HTML to a PDF in the try-it form spends a credit, as the API does.
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
  const link = page.getByRole('link', { name: 'Download' });
  const pdf = await page.evaluate(
    async (href) => {
      const bytes = new Uint8Array(await (await fetch(href)).arrayBuffer());
      return String.fromCharCode(...bytes.slice(0, 5));
    },
    (await link.getAttribute('href'))!,
  );
  expect(pdf).toBe('%PDF-');
});
