// Apply through the editor (checked as you type, a dry-run preview, then apply), a deployment's log
// streaming to success, and the deletion schedule: change and cancel, never set.
import fs from 'node:fs';
import { expect, signIn, test } from './fixtures.js';

test('applies a document through the editor and watches its deployment stream to success', async ({
  page,
  berth,
}) => {
  test.setTimeout(120_000);
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Apply' }).click();
  const editor = page.getByLabel('Infrastructure document (YAML)');
  const problems = page.getByTestId('problems');
  await expect(problems).toContainText('matches the schema');
  // Checked as you type, with the line of the problem.
  await editor.fill(berth.helloDocument.replace('type: nodejs', 'type: cobol'));
  const typeLine = berth.helloDocument.split('\n').findIndex((l) => l.includes('type: nodejs')) + 1;
  await expect(problems).toContainText(`Line ${typeLine}:`);
  await expect(problems).toContainText('spec.application.type must be one of');
  await editor.fill(berth.helloDocument.replace('metadata:', 'metadata:\n  colour: blue'));
  await expect(problems).toContainText("Line 4: metadata: unknown field 'colour'");
  await editor.fill(berth.helloDocument);
  await expect(problems).toContainText('matches the schema');

  await expect(page.getByRole('button', { name: 'Apply', exact: true })).toBeDisabled();
  await page.getByRole('button', { name: 'Preview changes' }).click();
  const plan = page.getByRole('region', { name: 'Changes (dry run, nothing applied yet)' });
  await expect(plan).toContainText("[DRY RUN] Would create application 'hello'");
  await expect(plan).toContainText("[DRY RUN] Would create secret 'APP_SECRET'");
  // A dry run applies nothing.
  const before = await fetch(`${berth.url}/api/v1/applications?team=acme`, {
    headers: { authorization: `Bearer ${berth.owner.token}` },
  }).then((r) => r.json() as Promise<{ data: Array<{ name: string }> }>);
  expect(before.data.map((a) => a.name)).not.toContain('hello');

  // What the log showed at each change of the page, to prove lines arrived before the end.
  await page.evaluate(() => {
    const seen: Array<{ lines: number; ended: boolean }> = [];
    (window as unknown as { logSnapshots: typeof seen }).logSnapshots = seen;
    new MutationObserver(() => {
      const log = document.querySelector('[data-testid="deployment-log"]');
      const heading = document.getElementById('log-heading');
      if (!log || !heading) return;
      const lines = (log.textContent ?? '').split('\n').filter(Boolean).length;
      const ended = /success|failed|cancelled/.test(heading.textContent ?? '');
      const last = seen.at(-1);
      if (!last || last.lines !== lines || last.ended !== ended) seen.push({ lines, ended });
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await page.getByRole('button', { name: 'Apply', exact: true }).click();
  await page.getByRole('link', { name: 'Open hello' }).click();
  await expect(page.getByRole('heading', { name: /^hello/ })).toBeVisible();
  const log = page.getByTestId('deployment-log');
  // Lines arrive while the deployment runs, then its end.
  await expect(log).toContainText('fetch', { timeout: 60_000 });
  await expect(page.getByRole('heading', { name: /Log of deployment/ })).toContainText('success', {
    timeout: 90_000,
  });
  await expect(log).toContainText(/rollout|live/i);
  const snapshots = await page.evaluate(
    () => (window as unknown as { logSnapshots: Array<{ lines: number; ended: boolean }> }).logSnapshots,
  );
  // Streamed: lines were on the page while the deployment still ran, in more than one arrival.
  const whileRunning = snapshots.filter((s) => !s.ended && s.lines > 0);
  expect(whileRunning.length, JSON.stringify(snapshots)).toBeGreaterThanOrEqual(2);
  await expect(page.getByTestId('app-status')).toContainText('active');
  await expect(page.getByRole('cell', { name: 'success' }).first()).toBeVisible();
  // The Redis service of the document: running before the release, its URL revealed on demand.
  const services = page.getByRole('region', { name: 'Services' });
  await expect(services.getByRole('heading', { name: /cache redis/ })).toContainText('running');
  await services.getByRole('button', { name: 'Connection settings of cache' }).click();
  const url = services.getByRole('textbox', { name: 'cache url' });
  await expect(url).not.toHaveValue(/redis:/);
  await services.getByRole('button', { name: 'Reveal cache url' }).click();
  await expect(url).toHaveValue(/^redis:\/\/.+@127\.0\.0\.1:\d+/);
  // A secret set through the panel: listed by key, its value never on the page.
  const secrets = page.getByRole('region', { name: 'Secrets' });
  await secrets.getByLabel('Key').fill('MAIL_PASSWORD');
  await secrets.getByLabel('Value').fill('hunter2-but-longer');
  await secrets.getByRole('button', { name: 'Set secret' }).click();
  await expect(secrets.getByRole('status')).toHaveText(
    'Secret MAIL_PASSWORD saved. Deploy to start using it.',
  );
  await expect(secrets.getByText('MAIL_PASSWORD', { exact: true })).toBeVisible();
  await expect(page.locator('body')).not.toContainText('hunter2');
  await expect(secrets.getByLabel('Value')).toHaveValue('');
  // The application's export, as a download: secrets as placeholders.
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: 'Export YAML' }).click(),
  ]);
  expect(download.suggestedFilename()).toBe('hello.yaml');
  const exported = fs.readFileSync(await download.path(), 'utf8');
  expect(exported).toContain('name: hello');
  expect(exported).toContain('key: MAIL_PASSWORD');
  expect(exported).not.toContain('hunter2');
  // Suspended, then running again.
  await page.getByRole('button', { name: 'Suspend' }).click();
  await expect(page.getByTestId('app-status')).toContainText('stopped suspended');
  await page.getByRole('button', { name: 'Resume' }).click();
  await expect(page.getByTestId('app-status')).toContainText(/starting|active/);
  // No schedule, and no control that would set one.
  await expect(page.getByTestId('no-schedule')).toBeVisible();
  await expect(page.getByLabel('New deletion date')).toHaveCount(0);
});

test('changes and cancels a deletion date, and offers no control to set one', async ({ page, berth }) => {
  await signIn(page, berth);
  await page.goto(`${berth.url}/apps/${berth.doomedAppId}`);
  const schedule = page.getByRole('region', { name: 'Deletion schedule' });
  await expect(schedule.getByTestId('deletion-date')).toBeVisible();
  await schedule.getByLabel('New deletion date').fill('2031-05-20T10:30');
  await schedule.getByRole('button', { name: 'Change date' }).click();
  await expect(schedule.getByTestId('deletion-date')).toContainText('20 May 2031');
  const api = () =>
    fetch(`${berth.url}/api/v1/applications/${berth.doomedAppId}/scheduled-deletion`, {
      headers: { authorization: `Bearer ${berth.owner.token}` },
    }).then((r) => r.json() as Promise<{ data: { scheduled_deletion_at: string | null } }>);
  expect((await api()).data.scheduled_deletion_at).toBe('2031-05-20T10:30:00.000Z');

  await schedule.getByRole('button', { name: 'Cancel deletion' }).click();
  await expect(schedule.getByTestId('no-schedule')).toBeVisible();
  expect((await api()).data.scheduled_deletion_at).toBeNull();
  // Without a schedule the panel offers nothing that would set one.
  await expect(schedule.getByRole('button')).toHaveCount(0);
  await expect(schedule.getByRole('textbox')).toHaveCount(0);
  await expect(page.getByLabel('New deletion date')).toHaveCount(0);
});

test('deletes an application only once its name is typed', async ({ page, berth }) => {
  const document = berth.helloDocument.replaceAll('hello', 'scratch');
  const applied = await fetch(`${berth.url}/api/v1/infrastructure/apply?auto_deploy=false`, {
    method: 'POST',
    headers: { authorization: `Bearer ${berth.owner.token}`, 'content-type': 'application/yaml' },
    body: document,
  }).then((r) => r.json() as Promise<{ application_id: number }>);
  await signIn(page, berth);
  await page.goto(`${berth.url}/apps/${applied.application_id}`);
  await page.getByRole('button', { name: 'Delete application…' }).click();
  const confirm = page.getByRole('button', { name: 'Delete application', exact: true });
  await expect(confirm).toBeDisabled();
  await page.getByLabel('Type scratch to delete application').fill('scratc');
  await expect(confirm).toBeDisabled();
  await page.getByLabel('Type scratch to delete application').fill('scratch');
  await confirm.click();
  await expect(page.getByRole('heading', { name: 'Applications', level: 1 })).toBeVisible();
  const status = () =>
    fetch(`${berth.url}/api/v1/applications/${applied.application_id}`, {
      headers: { authorization: `Bearer ${berth.owner.token}` },
    }).then((r) => r.status);
  // Deleted by a job: gone soon after.
  await expect.poll(status, { timeout: 30_000 }).toBe(404);
});
