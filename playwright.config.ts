// Browser tests of the dashboard (test/browser/*.spec.ts): the system Chromium against a real Berth
// per dialect, started once for the run by test/browser/global-setup.ts.
import { defineConfig } from '@playwright/test';

const DIALECTS = (process.env.BERTH_TEST_DIALECTS ?? 'sqlite,postgres')
  .split(',')
  .map((d) => d.trim())
  .filter((d) => d === 'sqlite' || d === 'postgres');

export default defineConfig({
  testDir: 'test/browser',
  testMatch: '*.spec.ts',
  globalSetup: './test/browser/global-setup.ts',
  fullyParallel: false,
  workers: 1,
  forbidOnly: true,
  retries: 0,
  timeout: 60_000,
  expect: { timeout: 15_000 },
  reporter: [['list']],
  outputDir: process.env.PLAYWRIGHT_OUTPUT_DIR ?? 'node_modules/.cache/playwright-results',
  use: {
    launchOptions: { executablePath: process.env.BERTH_CHROMIUM ?? '/usr/bin/chromium' },
    timezoneId: 'UTC',
    locale: 'en-GB',
    trace: 'off',
  },
  // The pages' look (axe, 360 px, screenshots, budgets) does not depend on the store: checked once, on
  // SQLite (or on the one dialect asked for); every flow runs on each dialect.
  projects: DIALECTS.map((name, i) => ({ name, ...(i > 0 ? { testIgnore: '**/pages.spec.ts' } : {}) })),
});
