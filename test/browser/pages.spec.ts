// Every main page: no serious or critical accessibility issue (axe), usable at 360 px wide, and the
// budgets: the applications page loads in under a second, its JavaScript is at most 300 KB gzipped.
// Screenshots of the pages for docs/dashboard.md (BERTH_SCREENSHOTS=docs writes them there).
import fs from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { AxeBuilder } from '@axe-core/playwright';
import { expect, signIn, test } from './fixtures.js';

const PAGES: Array<[string, string, string]> = [
  ['applications', '/apps', 'Applications'],
  ['application', '/apps/DOOMED', 'doomed'],
  ['apply', '/apply', 'Apply a document'],
  ['databases', '/databases', 'Managed databases'],
  ['storage', '/storage', 'Object storage'],
  ['tools', '/tools', 'Tools'],
  ['team', '/team', 'Team acme'],
  ['notifications', '/notifications', 'Notifications'],
  ['audit-log', '/audit-log', 'Audit log'],
  ['account', '/account', 'Account'],
];

test('the panel serves its scripts within budget, cached for a year, with a CSP', async ({
  berth,
  request,
}) => {
  const index = await request.get(`${berth.url}/`);
  expect(index.headers()['cache-control']).toBe('no-cache');
  expect(index.headers()['content-security-policy']).toContain("script-src 'self'");
  const html = await index.text();
  const assets = [...html.matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1]!);
  expect(assets.some((a) => a.endsWith('.js'))).toBe(true);
  let gzipped = 0;
  for (const asset of assets) {
    const response = await request.get(`${berth.url}${asset}`);
    expect(response.status()).toBe(200);
    expect(response.headers()['cache-control']).toBe('public, max-age=31536000, immutable');
    if (asset.endsWith('.js')) gzipped += gzipSync(await response.body()).length;
  }
  // Every script the build emits counts, loaded at first or later.
  const dir = path.resolve('dist/web/assets');
  const all = fs.readdirSync(dir).filter((f) => f.endsWith('.js'));
  const total = all.reduce((sum, f) => sum + gzipSync(fs.readFileSync(path.join(dir, f))).length, 0);
  expect(total).toBeGreaterThanOrEqual(gzipped);
  expect(total, `JavaScript gzipped: ${total} bytes`).toBeLessThanOrEqual(300 * 1024);
  // The API keeps its own answers: the panel shadows none of its paths.
  expect((await request.get(`${berth.url}/api/v1/nothing`)).status()).toBe(404);
  expect((await request.get(`${berth.url}/api/v1/nothing`)).headers()['content-type']).toContain('json');
  expect((await request.get(`${berth.url}/readyz`)).status()).toBe(200);
  expect((await request.get(`${berth.url}/apps/whatever/deep`)).headers()['content-type']).toContain(
    'text/html',
  );
});

test('loads the applications page in under a second', async ({ page, berth }) => {
  await signIn(page, berth);
  // A fresh load of the page, as after typing its address: scripts, session check, the list.
  await page.goto('about:blank');
  const started = Date.now();
  await page.goto(`${berth.url}/apps`);
  await expect(page.getByRole('table').or(page.getByText('No applications'))).toBeVisible();
  const elapsed = Date.now() - started;
  test.info().annotations.push({ type: 'first load (ms)', description: String(elapsed) });
  expect(elapsed, `first load took ${elapsed} ms`).toBeLessThan(1000);
});

for (const [name, url, heading] of PAGES) {
  test(`the ${name} page: axe finds no serious issue, and it works at 360 px`, async ({
    page,
    berth,
  }, testInfo) => {
    await signIn(page, berth);
    await page.goto(`${berth.url}${url.replace('DOOMED', String(berth.doomedAppId))}`);
    await expect(page.getByRole('heading', { name: heading, level: 1 })).toBeVisible();
    await expect(page.getByText('Loading…')).toHaveCount(0);
    const axe = async () => {
      const results = await new AxeBuilder({ page }).analyze();
      const serious = results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      return serious.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    };
    expect(await axe()).toEqual([]);

    const shots = process.env.BERTH_SCREENSHOTS === 'docs' && berth.dialect === 'sqlite';
    const target = (file: string) =>
      shots ? path.resolve('docs/dashboard', file) : testInfo.outputPath(file);
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.screenshot({ path: target(`${name}.png`), fullPage: true });

    await page.setViewportSize({ width: 360, height: 740 });
    // Nothing wider than the screen: no sideways scrolling of the page.
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    expect(await axe(), 'at 360 px').toEqual([]);
    if (name === 'applications') await page.screenshot({ path: target(`${name}-360.png`), fullPage: true });
  });
}

test('works by keyboard: skip link, navigation, focus', async ({ page, berth }) => {
  await signIn(page, berth);
  await page.keyboard.press('Tab');
  await expect(page.getByRole('link', { name: 'Skip to content' })).toBeFocused();
  await page.getByRole('link', { name: 'Tools' }).focus();
  await page.keyboard.press('Enter');
  await expect(page.getByRole('heading', { name: 'Tools', level: 1 })).toBeVisible();
});
