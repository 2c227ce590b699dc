// Apply through the editor (checked as you type, a dry-run preview, then apply), a deployment's log
// streaming to success, a rollback to the earlier release, removing a domain and a secret, the exports,
// the deletion schedule: change and cancel, never set; and a source archive uploaded from the page.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { parse, stringify } from 'yaml';
import { nodeAppFiles } from '../runtime/node-app.js';
import { expect, signIn, test, type BrowserBerth } from './fixtures.js';

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
  // Where the application reaches it: its network's host end as root (docs/runtime.md, "Networks"),
  // the host's loopback otherwise.
  await expect(url).toHaveValue(/^redis:\/\/.+@(127\.0\.0\.1|10\.\d+\.\d+\.\d+):\d+$/);
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
  const appExport = parse(exported) as {
    spec: { application: { name: string }; secrets: Array<{ key: string; value: string }> };
  };
  expect(appExport.spec.application.name).toBe('hello');
  expect(appExport.spec.secrets).toContainEqual({ key: 'MAIL_PASSWORD', value: '${SECRET_MAIL_PASSWORD}' });
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

/** The API's answer for a path, with the owner's token. */
async function get<T>(berth: BrowserBerth, path: string): Promise<T> {
  const response = await fetch(`${berth.url}${path}`, {
    headers: { authorization: `Bearer ${berth.owner.token}` },
  });
  expect(response.status, path).toBe(200);
  return ((await response.json()) as { data: T }).data;
}

/** The version the application answers with through the edge, for one of its host names. */
function served(berth: BrowserBerth, host: string): Promise<string> {
  return new Promise((resolve) => {
    const request = http.get(`${berth.edge}/`, { headers: { host }, timeout: 5000 }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => {
        try {
          resolve((JSON.parse(body) as { version: string }).version);
        } catch {
          resolve(`${response.statusCode}: ${body.slice(0, 100)}`);
        }
      });
    });
    request.on('error', (error) => resolve(error.message));
    request.on('timeout', () => request.destroy(new Error('timed out')));
  });
}

test('rolls back to the earlier release, removes a domain and a secret, and exports the team', async ({
  page,
  berth,
}) => {
  test.setTimeout(120_000);
  // hello, as the test above deployed it (v1, the domain hello.test, the secret MAIL_PASSWORD).
  const apps = await get<Array<{ id: number; name: string }>>(berth, `/api/v1/applications?team=acme`);
  const id = apps.find((a) => a.name === 'hello')!.id;
  const status = await get<{ hostnames: string[] }>(berth, `/api/v1/applications/${id}/status`);
  const host = status.hostnames.at(-1)!;
  await expect.poll(() => served(berth, host), { timeout: 30_000 }).toBe('v1');

  // A new version, deployed from the panel.
  expect((await fetch(`${berth.control}/commit?version=v2`, { method: 'POST' })).status).toBe(200);
  await signIn(page, berth);
  await page.goto(`${berth.url}/apps/${id}`);
  const logHeading = page.getByRole('heading', { name: /Log of deployment/ });
  await expect(logHeading).toContainText('success');
  const first = await logHeading.textContent();
  await page.getByRole('button', { name: 'Deploy', exact: true }).click();
  await expect(logHeading).not.toHaveText(first!);
  await expect(logHeading).toContainText('success', { timeout: 90_000 });
  await expect.poll(() => served(berth, host), { timeout: 30_000 }).toBe('v2');

  // Rolled back: a deployment of the earlier release, followed in the page to its end.
  const second = await logHeading.textContent();
  await page.getByRole('button', { name: 'Roll back' }).click();
  await expect(logHeading).not.toHaveText(second!);
  const rollbackId = Number(/#(\d+)/.exec((await logHeading.textContent()) ?? '')?.[1]);
  await expect(logHeading).toContainText('success', { timeout: 60_000 });
  const row = page
    .getByRole('row')
    .filter({ has: page.getByRole('cell', { name: String(rollbackId), exact: true }) });
  await expect(row).toContainText('rollback');
  await expect(row.getByRole('cell', { name: 'success' })).toBeVisible();
  await expect.poll(() => served(berth, host), { timeout: 30_000 }).toBe('v1');
  const rollback = await get<{
    reason: string;
    status: string;
    step: string | null;
    rollback_of: number | null;
  }>(berth, `/api/v1/applications/${id}/deployments/${rollbackId}`);
  expect(rollback).toMatchObject({ reason: 'rollback', status: 'success' });
  expect(rollback.rollback_of).not.toBeNull();
  await expect(row.getByRole('cell', { name: rollback.step ?? '—', exact: true })).toBeVisible();

  // A domain and a secret removed: gone from the page, after a reload, and from the API.
  await page.getByRole('button', { name: 'Remove domain hello.test' }).click();
  const domains = page.getByRole('region', { name: 'Domains' });
  await expect(domains.getByText('hello.test')).toHaveCount(0);
  await page.getByRole('button', { name: 'Remove secret MAIL_PASSWORD' }).click();
  const secrets = page.getByRole('region', { name: 'Secrets' });
  await expect(secrets.getByText('MAIL_PASSWORD', { exact: true })).toHaveCount(0);
  await page.reload();
  await expect(page.getByRole('heading', { name: /^hello/ })).toBeVisible();
  await expect(domains.getByText('No domains')).toBeVisible();
  await expect(secrets.getByText('APP_SECRET', { exact: true })).toBeVisible();
  await expect(secrets.getByText('MAIL_PASSWORD', { exact: true })).toHaveCount(0);
  const detail = await get<{ domains: Array<{ domain: string }>; secrets: Array<{ key: string }> }>(
    berth,
    `/api/v1/applications/${id}`,
  );
  expect(detail.domains).toEqual([]);
  expect(detail.secrets.map((s) => s.key)).toEqual(['APP_SECRET']);

  // The team's export, as a download: its databases and storages, credentials as placeholders.
  await page.getByRole('link', { name: 'Apply' }).click();
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByRole('button', { name: /Export/ }).click(),
  ]);
  expect(download.suggestedFilename()).toBe('acme.yaml');
  const exported = fs.readFileSync(await download.path(), 'utf8');
  const teamExport = parse(exported) as {
    metadata: { team: number | string };
    spec: {
      managed_databases: Array<{ name: string; password: string }>;
      object_storage: Array<{ name: string; secret_key: string }>;
    };
  };
  expect(teamExport.metadata.team).toBe(berth.owner.teamId);
  expect(teamExport.spec.managed_databases).toContainEqual(
    expect.objectContaining({ name: 'main-db', password: '${DB_MAIN_DB_PASSWORD}' }),
  );
  expect(teamExport.spec.object_storage).toContainEqual(
    expect.objectContaining({ name: 'files', secret_key: '${STORAGE_FILES_SECRET_KEY}' }),
  );
  // The real credentials are nowhere in it.
  const storage = await get<{ users: Array<{ secret_key: string }> }>(
    berth,
    '/api/v1/teams/acme/object-storage/files',
  );
  for (const user of storage.users) expect(exported).not.toContain(user.secret_key);
  const databases = await get<Array<{ uuid: string; name: string }>>(
    berth,
    `/api/v1/teams/${berth.owner.teamId}/managed-databases`,
  );
  const mainDb = await get<{ connection: { users: Array<{ password: string | null }> } }>(
    berth,
    `/api/v1/managed-databases/${databases.find((d) => d.name === 'main-db')!.uuid}`,
  );
  const passwords = mainDb.connection.users.flatMap((u) => (u.password ? [u.password] : []));
  expect(passwords.length).toBeGreaterThan(0);
  for (const password of passwords) expect(exported).not.toContain(password);
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

test("uploads a source archive: a bad file gets the server's message, a good one is deployed", async ({
  page,
  berth,
}) => {
  test.setTimeout(120_000);
  // Without a repository: an application that names one builds it, whatever was uploaded.
  const document = parse(berth.helloDocument.replaceAll('hello', 'uploaded')) as {
    spec: { application: Record<string, unknown> };
  };
  delete document.spec.application.repository;
  const applied = await fetch(`${berth.url}/api/v1/infrastructure/apply?auto_deploy=false`, {
    method: 'POST',
    headers: { authorization: `Bearer ${berth.owner.token}`, 'content-type': 'application/yaml' },
    body: stringify(document),
  }).then((r) => r.json() as Promise<{ application_id: number }>);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'berth-browser-upload-'));
  try {
    for (const [name, content] of Object.entries(nodeAppFiles('from-upload')))
      fs.writeFileSync(path.join(work, name), content);
    const archive = execFileSync('tar', ['-czf', '-', '-C', work, '.']);
    await signIn(page, berth);
    await page.goto(`${berth.url}/apps/${applied.application_id}`);
    const section = page.getByRole('region', { name: 'Upload source' });
    const input = section.getByLabel('Archive');
    await input.setInputFiles({
      name: 'broken.tar.gz',
      mimeType: 'application/gzip',
      buffer: Buffer.from('no'),
    });
    await section.getByRole('button', { name: 'Upload and deploy' }).click();
    await expect(section.getByRole('alert')).toContainText('The source archive cannot be used');

    await input.setInputFiles({ name: 'app.tar.gz', mimeType: 'application/gzip', buffer: archive });
    await section.getByRole('button', { name: 'Upload and deploy' }).click();
    await expect(section.getByRole('status')).toContainText(
      new RegExp(`Uploaded app\\.tar\\.gz \\(${archive.length} bytes\\): deployment \\d+ started\\.`),
    );
    await expect(section.getByRole('alert')).toHaveCount(0);
    await expect(page.getByRole('heading', { name: /Log of deployment/ })).toContainText('success', {
      timeout: 90_000,
    });
    await expect(page.getByTestId('deployment-log')).toContainText('Unpacking the uploaded source archive');
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
});
