// Signing in (password and e-mailed link), signing out, teams and members (leaving one), tokens, and the
// refusal of another team's pages: through the panel, in the system Chromium, against a real Berth.
import { expect, mailsTo, signIn, test, type BrowserBerth } from './fixtures.js';

test('logs nothing on a first load signed out, nor after a session ended (issue 26, item 7)', async ({
  page,
  berth,
}) => {
  // Every console message, 4xx answers included (the fixture lets those through for the specs that
  // provoke one): a first visit must not look broken in the developer tools.
  const logged: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' || message.type() === 'warning') logged.push(message.text());
  });
  await page.goto(`${berth.url}/`);
  await expect(page.getByRole('heading', { name: 'Sign in to Berth' })).toBeVisible();
  expect(logged).toEqual([]);
  // A cookie whose session ended, as a browser keeps it: the same quiet sign-in page, and it is dropped.
  const host = new URL(berth.url).hostname;
  await page
    .context()
    .addCookies([{ name: 'berth_session', value: 'x'.repeat(43), domain: host, path: '/' }]);
  await page.reload();
  await expect(page.getByRole('heading', { name: 'Sign in to Berth' })).toBeVisible();
  expect(logged).toEqual([]);
  expect((await page.context().cookies()).map((c) => c.name)).not.toContain('berth_session');
});

test('signs in with a password and out again', async ({ page, berth }) => {
  await page.goto(`${berth.url}/apps`);
  await expect(page.getByRole('heading', { name: 'Sign in to Berth' })).toBeVisible();
  await page.getByLabel('E-mail', { exact: true }).fill(berth.owner.email);
  await page.getByLabel('Password', { exact: true }).fill('not the password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  // The API's own message, shown as it is.
  await expect(page.getByRole('alert')).toContainText(/password/i);
  await page.getByLabel('Password', { exact: true }).fill(berth.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('heading', { name: 'Applications' })).toBeVisible();
  // The session is a cookie the page's scripts cannot read.
  expect(await page.evaluate(() => document.cookie)).not.toContain('berth_session');
  const cookie = (await page.context().cookies()).find((c) => c.name === 'berth_session');
  expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
  await page.reload();
  await expect(page.getByRole('heading', { name: 'Applications' })).toBeVisible();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page.getByRole('heading', { name: 'Sign in to Berth' })).toBeVisible();
  await page.goto(`${berth.url}/account`);
  await expect(page.getByRole('heading', { name: 'Sign in to Berth' })).toBeVisible();
});

test('signs in with a link sent by e-mail, which works once', async ({ page, berth }) => {
  const before = (await mailsTo(berth, berth.owner.email)).length;
  await page.goto(`${berth.url}/sign-in`);
  await page.getByLabel('E-mail', { exact: true }).fill(berth.owner.email);
  await page.getByRole('button', { name: 'E-mail me a link' }).click();
  await expect(page.getByRole('status')).toContainText('a sign-in link is on its way');
  await expect.poll(async () => (await mailsTo(berth, berth.owner.email)).length).toBe(before + 1);
  const mail = (await mailsTo(berth, berth.owner.email)).at(-1)!;
  expect(mail.subject).toBe('Your Berth sign-in link');
  const token = /#token=([A-Za-z0-9_-]+)/.exec(mail.text)![1]!;
  await page.goto(`${berth.url}/sign-in/link#token=${token}`);
  await expect(page.getByRole('heading', { name: 'Applications' })).toBeVisible();
  // The token left the address bar.
  expect(page.url()).not.toContain(token);
  // A second use is refused, with the API's message.
  await page.context().clearCookies();
  await page.goto(`${berth.url}/sign-in/link#token=${token}`);
  await expect(page.getByRole('alert')).toContainText('unknown, used or expired');
});

test('creates a team, invites a member who gets a link, changes the role', async ({ page, berth }) => {
  await signIn(page, berth);
  const name = `crew-${berth.dialect}`;
  const member = `member-${berth.dialect}@example.com`;
  await page.getByRole('link', { name: 'Team' }).click();
  await page.getByLabel('Team name').fill(name);
  await page.getByRole('button', { name: 'Create team' }).click();
  await expect(page.getByRole('heading', { name: `Team ${name}` })).toBeVisible();
  await expect(page.getByLabel('Team', { exact: true })).toHaveValue(/\d+/);
  // The same name again: the API's field error is shown with its field.
  await page.getByLabel('Team name').fill(name);
  await page.getByRole('button', { name: 'Create team' }).click();
  await expect(page.getByRole('alert').filter({ hasText: 'name' })).toBeVisible();

  await page.getByLabel('Invite by e-mail').fill(member);
  await page.getByRole('button', { name: 'Invite' }).click();
  await expect(page.getByRole('cell', { name: member, exact: true })).toBeVisible();
  await expect
    .poll(async () => (await mailsTo(berth, member)).map((m) => m.subject))
    .toContain(`You were added to the team ${name} on Berth`);
  await page.getByLabel(`Role of ${member}`).selectOption('owner');
  await expect(page.getByLabel(`Role of ${member}`)).toHaveValue('owner');
  await page.reload();
  await expect(page.getByLabel(`Role of ${member}`)).toHaveValue('owner');
  await page.getByRole('button', { name: `Remove ${member}` }).click();
  await expect(page.getByRole('cell', { name: member, exact: true })).toHaveCount(0);
});

test('creates an API token shown once and revokes it', async ({ page, berth }) => {
  await signIn(page, berth);
  await page.getByRole('link', { name: 'Account' }).click();
  const tokens = page.getByRole('region', { name: 'API tokens' });
  await tokens.getByLabel('Name of the new API token').fill('ci');
  await tokens.getByRole('button', { name: 'Create API token' }).click();
  const shown = tokens.getByLabel('The new API token', { exact: true });
  const token = await shown.inputValue();
  expect(token).toMatch(/^berth_pat_/);
  const ping = () =>
    fetch(`${berth.url}/api/v1/ping`, { headers: { authorization: `Bearer ${token}` } }).then(
      (r) => r.status,
    );
  expect(await ping()).toBe(200);
  // Listed by name and hint, never the secret.
  await page.reload();
  await expect(page.getByText(token)).toHaveCount(0);
  await expect(page.locator(`input[value="${token}"]`)).toHaveCount(0);
  await page
    .getByRole('region', { name: 'API tokens' })
    .getByRole('button', { name: 'Revoke API token ci' })
    .first()
    .click();
  await expect.poll(ping).toBe(401);
});

test("is refused another team's application page", async ({ page, berth }) => {
  await signIn(page, berth);
  await page.goto(`${berth.url}/apps/${berth.rivalAppId}`);
  await expect(page.getByRole('alert')).toContainText(/team|forbidden/i);
  await expect(page.getByRole('heading', { name: 'rival-app' })).toHaveCount(0);
});

test('ends another browser, changes the password, and shows new credentials once', async ({
  page,
  berth,
  browser,
}) => {
  await signIn(page, berth);
  const other = await browser.newContext();
  const otherPage = await other.newPage();
  await signIn(otherPage, berth);
  const otherSession = await otherPage.evaluate(async () => {
    const answer = (await (await fetch('/api/v1/auth/session')).json()) as {
      data: { session: { id: number } };
    };
    return answer.data.session.id;
  });

  await page.getByRole('link', { name: 'Account' }).click();
  await page.getByRole('button', { name: `End session ${otherSession}`, exact: true }).click();
  await expect(page.getByRole('button', { name: `End session ${otherSession}`, exact: true })).toHaveCount(0);
  // The ended browser is told so at its next call, and asked to sign in.
  await otherPage.getByRole('link', { name: 'Tools' }).click();
  await expect(otherPage.getByText('Your session has ended: sign in again.')).toBeVisible();
  await other.close();

  const password = page.getByRole('region', { name: 'Password' });
  await password.getByLabel('New password (10 to 200 characters)').fill('short');
  await password.getByLabel('Current password (if you have one)').fill(berth.password);
  await password.getByRole('button', { name: 'Set password' }).click();
  await expect(password.getByRole('alert')).toContainText('password');
  await password.getByLabel('New password (10 to 200 characters)').fill('a different long password');
  await password.getByRole('button', { name: 'Set password' }).click();
  await expect(password.getByRole('status')).toContainText('Password set');
  // And back, for the other specs (this session stays signed in).
  await password.getByLabel('Current password (if you have one)').fill('a different long password');
  await password.getByLabel('New password (10 to 200 characters)').fill(berth.password);
  await password.getByRole('button', { name: 'Set password' }).click();
  await expect(password.getByRole('status')).toContainText('Password set');

  const keys = page.getByRole('region', { name: 'Tools API keys' });
  await keys.getByRole('button', { name: 'Create tools API key' }).click();
  await expect(keys.getByLabel('The new tools API key', { exact: true })).toHaveValue(/^berth_tk_/);
  const credentials = page.getByRole('region', { name: 'Managed-database API credentials' });
  await credentials.getByRole('button', { name: 'Create database API credential' }).click();
  await expect(credentials.getByText(/^Username db_/)).toBeVisible();
  const secret = await credentials.getByLabel('The password', { exact: true }).inputValue();
  expect(secret.length).toBeGreaterThan(10);
  await page.reload();
  await expect(page.locator(`input[value="${secret}"]`)).toHaveCount(0);
  await expect(page.getByText(secret)).toHaveCount(0);
});

/** A call to the API with a token: its status and JSON answer. */
async function call(
  berth: BrowserBerth,
  token: string,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: { message?: string; data?: unknown } }> {
  const response = await fetch(`${berth.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, json: (await response.json()) as { message?: string; data?: unknown } };
}

test("a member leaves a team (its last owner may not), and is refused another team's database and storage", async ({
  page,
  berth,
}) => {
  // acme's owner makes a team and adds the colleague to it, as a member.
  const made = await call(berth, berth.owner.token, 'POST', '/api/v1/teams', { name: 'visitors' });
  expect(made.status).toBe(201);
  const visitors = (made.json.data as { id: number }).id;
  const added = await call(berth, berth.owner.token, 'POST', `/api/v1/teams/${visitors}/members`, {
    email: berth.colleague.email,
    role: 'member',
  });
  expect(added.status).toBe(201);
  const teamsOf = async () =>
    (
      (await call(berth, berth.colleague.token, 'GET', '/api/v1/user')).json.data as {
        teams: Array<{ name: string }>;
      }
    ).teams.map((t) => t.name);
  expect(await teamsOf()).toEqual(expect.arrayContaining(['solo', 'visitors']));

  await signIn(page, berth, berth.colleague.email);
  const switcher = page.getByLabel('Team', { exact: true });
  await switcher.selectOption({ label: 'visitors (member)' });
  await page.getByRole('link', { name: 'Team' }).click();
  await expect(page.getByRole('heading', { name: 'Team visitors' })).toBeVisible();
  await page.getByRole('button', { name: 'Leave visitors' }).click();
  await expect(page.getByRole('heading', { name: 'Applications' })).toBeVisible();
  await expect(switcher.getByRole('option')).toHaveText(['solo (owner)']);
  await page.reload();
  await expect(page.getByLabel('Team', { exact: true }).getByRole('option')).toHaveText(['solo (owner)']);
  expect(await teamsOf()).toEqual(['solo']);
  const members = await call(berth, berth.owner.token, 'GET', `/api/v1/teams/${visitors}`);
  expect(JSON.stringify(members.json)).not.toContain(berth.colleague.email);

  // The only owner of solo may not leave it: the API's message, and solo stays.
  await page.getByRole('link', { name: 'Team' }).click();
  await expect(page.getByRole('heading', { name: 'Team solo' })).toBeVisible();
  await page.getByRole('button', { name: 'Leave solo' }).click();
  await expect(page.getByRole('alert')).toHaveText(
    'A team keeps at least one owner: make another member owner first',
  );
  await expect(page.getByRole('heading', { name: 'Team solo' })).toBeVisible();
  expect(await teamsOf()).toEqual(['solo']);

  // Another team's pages (the colleague is not in acme): refused, none of their data shown.
  const listed = await call(
    berth,
    berth.owner.token,
    'GET',
    `/api/v1/teams/${berth.owner.teamId}/managed-databases`,
  );
  const mainDb = (listed.json.data as Array<{ uuid: string; name: string }>).find(
    (d) => d.name === 'main-db',
  )!;
  // The colleague is not in acme: the API refuses both, and the page shows its words.
  const database = await call(
    berth,
    berth.colleague.token,
    'GET',
    `/api/v1/managed-databases/${mainDb.uuid}`,
  );
  expect([403, 404]).toContain(database.status);
  const storage = await call(
    berth,
    berth.colleague.token,
    'GET',
    `/api/v1/teams/${berth.owner.teamId}/object-storage/files`,
  );
  expect([403, 404]).toContain(storage.status);

  await page.goto(`${berth.url}/databases/${mainDb.uuid}`);
  await expect(page.getByRole('alert')).toHaveText(database.json.message!);
  await expect(page.getByRole('heading', { name: 'main-db' })).toHaveCount(0);
  await expect(page.getByLabel('connection URI', { exact: true })).toHaveCount(0);
  await expect(page.getByTestId('db-plan')).toHaveCount(0);

  // The storage page asks for the storage of the team chosen in the switcher (acme is not offered):
  // the API's answer there is shown, and nothing of acme's.
  const own = await call(
    berth,
    berth.colleague.token,
    'GET',
    `/api/v1/teams/${berth.colleague.teamId}/object-storage/files`,
  );
  expect(own.status).toBe(404);
  await page.goto(`${berth.url}/storage/files`);
  await expect(page.getByRole('alert')).toHaveText(own.json.message!);
  await expect(page.getByRole('heading', { name: 'files' })).toHaveCount(0);
  await expect(page.getByText('uploads')).toHaveCount(0);
  await expect(page.getByText('uploader')).toHaveCount(0);
});
