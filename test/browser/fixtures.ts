// What every browser spec receives: the Berth of its project (SQLite or PostgreSQL, started once by
// global-setup.ts), a page that fails the test on any console error, and signing in.
import { test as base, expect, type Page } from '@playwright/test';

export interface BrowserBerth {
  dialect: 'sqlite' | 'postgres';
  url: string;
  /**
   * Loopback server of the harness: GET /mails?to=<address>; POST /commit?version=<v> (a new version of
   * the hello repository); POST /pending-restart?database=<name> (a setting that waits for a restart).
   */
  control: string;
  password: string;
  owner: { email: string; teamId: number; token: string };
  /** Signs in with the same password; the only owner of the team solo. */
  colleague: { email: string; teamId: number; token: string };
  /** The edge proxy: the deployed applications answer here for their host names. */
  edge: string;
  rivalAppId: number;
  doomedAppId: number;
  /** The Infrastructure document of the small Node.js application the specs apply. */
  helloDocument: string;
  /** The managed database's plan, and the plan apply left pending. */
  plans: [string, string];
}

export function berthOf(project: string): BrowserBerth {
  const raw = process.env[`BERTH_BROWSER_${project.toUpperCase()}`];
  if (!raw) throw new Error(`no Berth for project ${project}: global-setup.ts did not run`);
  return JSON.parse(raw) as BrowserBerth;
}

export const test = base.extend<{ berth: BrowserBerth; consoleErrors: string[] }>({
  berth: async ({}, use, testInfo) => {
    await use(berthOf(testInfo.project.name));
  },
  consoleErrors: [
    async ({ page }, use) => {
      const errors: string[] = [];
      page.on('console', (message) => {
        // The browser logs every 4xx answer it receives; those the API gives on purpose (no session
        // yet, a wrong password, another team's page) are shown in the page and asserted by the specs.
        // Script errors, CSP violations and 5xx answers fail the test.
        const text = message.text();
        if (
          message.type() === 'error' &&
          !/^Failed to load resource: the server responded with a status of 4\d\d/.test(text)
        ) {
          errors.push(text);
        }
      });
      page.on('pageerror', (error) => errors.push(error.message));
      await use(errors);
      expect(errors, 'console errors').toEqual([]);
    },
    { auto: true },
  ],
});

export { expect };

/** The mails the harness's SMTP sink received for an address. */
export async function mailsTo(
  berth: BrowserBerth,
  to: string,
): Promise<Array<{ subject: string; text: string }>> {
  const response = await fetch(`${berth.control}/mails?to=${encodeURIComponent(to)}`);
  return (await response.json()) as Array<{ subject: string; text: string }>;
}

export async function signIn(page: Page, berth: BrowserBerth, email = berth.owner.email): Promise<void> {
  await page.goto(`${berth.url}/sign-in`);
  await page.getByLabel('E-mail', { exact: true }).fill(email);
  await page.getByLabel('Password', { exact: true }).fill(berth.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('heading', { name: 'Applications' })).toBeVisible();
}
