// Object storage in the panel: endpoint, buckets and whether each is public (an owner makes one public),
// a user's secret key revealed on demand, and the zone change apply left waiting, carried out.
import { expect, signIn, test } from './fixtures.js';

test('shows the storage, reveals a secret key and carries out the pending zone change', async ({
  page,
  berth,
}) => {
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Object storage' }).click();
  await expect(page.getByText('a zone change waits')).toBeVisible();
  await page.getByRole('link', { name: 'files' }).click();
  await expect(page.getByRole('heading', { name: 'files', level: 1 })).toBeVisible();
  const buckets = page.getByRole('region', { name: 'Buckets' });
  const row = buckets.getByRole('row', { name: /uploads/ });
  await expect(row).toContainText('Private: access keys only');
  await row.getByRole('button', { name: 'Make uploads public' }).click();
  await expect(row).toContainText('Public: reachable without a key');
  await expect(row.getByRole('button', { name: 'Make uploads private' })).toBeVisible();
  await expect(page.getByText(/^http:\/\/127\.0\.0\.1:\d+$/)).toBeVisible();
  // The storage's own endpoint: the shared one with the storage's uuid as a path prefix.
  await expect(page.getByText(/^http:\/\/127\.0\.0\.1:\d+\/[0-9a-f-]{36}$/)).toBeVisible();

  const key = page.getByLabel('secret key of uploader', { exact: true });
  await expect(key).toHaveValue('••••••••••••');
  await page.getByRole('button', { name: 'Reveal secret key of uploader' }).click();
  const secret = await key.inputValue();
  expect(secret).toMatch(/^[A-Za-z0-9+/=_-]{20,}$/);
  const api = await fetch(`${berth.url}/api/v1/teams/acme/object-storage/files`, {
    headers: { authorization: `Bearer ${berth.owner.token}` },
  }).then(
    (r) =>
      r.json() as Promise<{
        data: { public_buckets: string[]; users: Array<{ username: string; secret_key: string }> };
      }>,
  );
  expect(api.data.users.find((u) => u.username === 'uploader')?.secret_key).toBe(secret);
  expect(api.data.public_buckets).toEqual(['uploads']);

  const pending = page.getByRole('region', { name: 'A zone change waits for you' });
  await expect(pending).toContainText('europe-2');
  await pending.getByRole('button', { name: 'Move to europe-2' }).click();
  await expect(page.getByRole('region', { name: 'A zone change waits for you' })).toHaveCount(0);
  await expect(page.getByText('europe-2', { exact: true })).toBeVisible();
});
