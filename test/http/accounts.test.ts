// People signing in (issue 16): password and one-time link sign-in give an HttpOnly session cookie
// whose writes need the CSRF token; sessions are listed and revoked; failed sign-ins are throttled per
// account and address; team owners create teams, invite by e-mail, change roles and remove members,
// and a team always keeps an owner. Mail goes to a real SMTP server on loopback.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/store.js';
import { startSmtpSink, type SmtpSink } from '../scheduled-deletion/helpers.js';

const PASSWORD = 'correct horse battery staple';

interface Browser {
  cookie: string;
  csrf: string;
  sessionId: number;
}

describe.each(DIALECTS)('accounts (%s)', (dialect) => {
  let t: TestApp;
  let smtp: SmtpSink;

  beforeAll(async () => {
    smtp = await startSmtpSink();
    t = await createTestApp(dialect, { env: { BERTH_SMTP_URL: smtp.url } });
    await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });

  const signIn = (email: string, password: string, headers: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: '/api/v1/auth/sign-in', payload: { email, password }, headers });

  /** Signs in and keeps what a browser keeps: the cookie, and the CSRF token the page holds. */
  function browserOf(response: Awaited<ReturnType<typeof signIn>>): Browser {
    expect(response.statusCode).toBe(200);
    const setCookie = String(response.headers['set-cookie']);
    const body = response.json<{ data: { csrf_token: string; session: { id: number } } }>();
    return {
      cookie: setCookie.split(';')[0]!,
      csrf: body.data.csrf_token,
      sessionId: body.data.session.id,
    };
  }

  const as = (browser: Browser, csrf = true) => ({
    cookie: browser.cookie,
    ...(csrf ? { 'x-csrf-token': browser.csrf } : {}),
  });

  /** The token of the last sign-in link mailed to `email`. */
  function mailedToken(email: string): string {
    const mails = smtp.to(email);
    const match = /#token=([A-Za-z0-9_-]+)/.exec(mails.at(-1)?.text ?? '');
    expect(match, `a sign-in link mailed to ${email}`).not.toBeNull();
    return match![1]!;
  }

  it('signs in with a password: an HttpOnly, SameSite cookie that authenticates the platform API', async () => {
    const response = await signIn('Owner@Example.com', PASSWORD, { 'user-agent': 'test-browser/1' });
    const setCookie = String(response.headers['set-cookie']);
    expect(setCookie).toMatch(
      /^berth_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=2592000$/,
    );
    expect(response.headers['cache-control']).toBe('no-store');
    const browser = browserOf(response);
    const user = await t.request({ url: '/api/v1/user', headers: as(browser, false) });
    expect(user.statusCode).toBe(200);
    expect(user.json()).toMatchObject({ data: { email: 'owner@example.com' } });
    const session = await t.request({ url: '/api/v1/auth/session', headers: as(browser, false) });
    expect(session.json()).toMatchObject({
      data: { csrf_token: browser.csrf, session: { id: browser.sessionId, user_agent: 'test-browser/1' } },
    });
    // A token is no browser session.
    expect((await t.request({ url: '/api/v1/auth/session', headers: t.auth.platform })).statusCode).toBe(404);
  });

  it('answers the session probe signed out with 200 and null, never anything of a session (issue 26, item 7)', async () => {
    const probe = (headers: Record<string, string> = {}) =>
      t.request({ url: '/api/v1/auth/session', headers });
    // No cookie at all: what every first load of the dashboard asks.
    const anonymous = await probe();
    expect(anonymous.statusCode).toBe(200);
    expect(anonymous.json()).toEqual({ data: null });
    expect(anonymous.headers['cache-control']).toBe('no-store');
    expect(anonymous.headers['set-cookie']).toBeUndefined();
    // A cookie whose session ended (signed out), or one that never was: null, and the cookie is cleared.
    const browser = browserOf(await signIn('owner@example.com', PASSWORD));
    expect((await probe(as(browser, false))).json()).toMatchObject({
      data: { csrf_token: browser.csrf, session: { id: browser.sessionId } },
    });
    await t.request({ method: 'POST', url: '/api/v1/auth/sign-out', headers: as(browser) });
    for (const cookie of [browser.cookie, `berth_session=${'x'.repeat(43)}`]) {
      const ended = await probe({ cookie });
      expect(ended.statusCode).toBe(200);
      expect(ended.json()).toEqual({ data: null });
      expect(String(ended.headers['set-cookie'])).toMatch(/^berth_session=; .*Max-Age=0/);
    }
    // Signed out is only for the cookie: a presented token is checked as everywhere.
    expect((await probe({ authorization: 'Bearer berth_pat_unknown' })).statusCode).toBe(401);
    expect((await probe({ authorization: '' })).statusCode).toBe(401);
    // And other routes still refuse a missing credential.
    expect((await t.request({ url: '/api/v1/user' })).statusCode).toBe(401);
  });

  it('refuses a wrong password or an unknown address alike, and a sign-in posted from another site', async () => {
    const wrong = await signIn('owner@example.com', 'not the password');
    const unknown = await signIn('nobody@example.com', PASSWORD);
    expect([wrong.statusCode, unknown.statusCode]).toEqual([401, 401]);
    expect(wrong.json()).toEqual(unknown.json());
    expect(wrong.headers['set-cookie']).toBeUndefined();
    const foreign = await signIn('owner@example.com', PASSWORD, { origin: 'https://evil.example' });
    expect(foreign.statusCode).toBe(403);
    expect(foreign.headers['set-cookie']).toBeUndefined();
  });

  it('needs the CSRF token for a change made with the cookie; a bearer token needs none', async () => {
    const browser = browserOf(await signIn('owner@example.com', PASSWORD));
    const without = await t.request({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: 'csrf-free' },
      headers: as(browser, false),
    });
    expect(without.statusCode).toBe(403);
    expect(without.json<{ message: string }>().message).toContain('X-CSRF-Token');
    const forged = await t.request({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: 'csrf-free' },
      headers: { cookie: browser.cookie, 'x-csrf-token': 'f'.repeat(64) },
    });
    expect(forged.statusCode).toBe(403);
    const teams = await t.request({ url: '/api/v1/teams', headers: t.auth.platform });
    expect(teams.json<{ data: Array<{ name: string }> }>().data.map((team) => team.name)).not.toContain(
      'csrf-free',
    );
    const made = await t.request({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: 'with-token' },
      headers: t.auth.platform,
    });
    expect(made.statusCode).toBe(201);
  });

  it('lists sessions, ends one at once, and signs out', async () => {
    const laptop = browserOf(await signIn('owner@example.com', PASSWORD));
    const phone = browserOf(await signIn('owner@example.com', PASSWORD));
    const listed = await t.request({ url: '/api/v1/user/sessions', headers: as(laptop, false) });
    const sessions = listed.json<{ data: Array<{ id: number; current: boolean }> }>().data;
    expect(sessions.find((s) => s.id === laptop.sessionId)?.current).toBe(true);
    expect(sessions.find((s) => s.id === phone.sessionId)?.current).toBe(false);

    const revoked = await t.request({
      method: 'DELETE',
      url: `/api/v1/user/sessions/${phone.sessionId}`,
      headers: as(laptop),
    });
    expect(revoked.statusCode).toBe(204);
    expect((await t.request({ url: '/api/v1/user', headers: as(phone, false) })).statusCode).toBe(401);

    const out = await t.request({ method: 'POST', url: '/api/v1/auth/sign-out', headers: as(laptop) });
    expect(out.statusCode).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/^berth_session=; .*Max-Age=0/);
    expect((await t.request({ url: '/api/v1/user', headers: as(laptop, false) })).statusCode).toBe(401);
  });

  it('signs in once with a mailed link; the same link does not work twice; an unknown address gets nothing', async () => {
    smtp.clear();
    for (const email of ['owner@example.com', 'stranger@example.com']) {
      const asked = await t.request({
        method: 'POST',
        url: '/api/v1/auth/sign-in-links',
        payload: { email },
      });
      expect(asked.statusCode).toBe(202);
    }
    expect(smtp.to('stranger@example.com')).toHaveLength(0);
    const mail = smtp.to('owner@example.com')[0]!;
    expect(mail.subject).toBe('Your Berth sign-in link');
    const token = mailedToken('owner@example.com');
    const consume = () =>
      t.request({ method: 'POST', url: '/api/v1/auth/sign-in-links/consume', payload: { token } });
    const browser = browserOf(await consume());
    expect((await t.request({ url: '/api/v1/user', headers: as(browser, false) })).statusCode).toBe(200);
    expect((await consume()).statusCode).toBe(401);
    // Sent by SMTP: nothing waits in the account outbox.
    expect(await t.ctx.services.accounts.unsentMail(t.user.user_id)).toEqual([]);
  });

  it('changes a password with the current one, ending the other sessions', async () => {
    const keep = browserOf(await signIn('owner@example.com', PASSWORD));
    const other = browserOf(await signIn('owner@example.com', PASSWORD));
    const wrong = await t.request({
      method: 'PUT',
      url: '/api/v1/user/password',
      payload: { password: 'a new long password', current_password: 'wrong password' },
      headers: as(keep),
    });
    expect(wrong.statusCode).toBe(422);
    expect(wrong.json()).toMatchObject({ errors: { current_password: ['The current password is wrong'] } });
    const short = await t.request({
      method: 'PUT',
      url: '/api/v1/user/password',
      payload: { password: 'short', current_password: PASSWORD },
      headers: as(keep),
    });
    expect(short.json()).toMatchObject({ errors: { password: ['A password has at least 10 characters'] } });
    const changed = await t.request({
      method: 'PUT',
      url: '/api/v1/user/password',
      payload: { password: 'a new long password', current_password: PASSWORD },
      headers: as(keep),
    });
    expect(changed.statusCode).toBe(204);
    expect((await t.request({ url: '/api/v1/user', headers: as(keep, false) })).statusCode).toBe(200);
    expect((await t.request({ url: '/api/v1/user', headers: as(other, false) })).statusCode).toBe(401);
    expect((await signIn('owner@example.com', PASSWORD)).statusCode).toBe(401);
    expect((await signIn('owner@example.com', 'a new long password')).statusCode).toBe(200);
    await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
  });

  it('invites a member by e-mail; only owners manage members; a team keeps an owner', async () => {
    smtp.clear();
    const owner = t.auth.platform;
    const team = t.user.team_id;
    const invited = await t.request({
      method: 'POST',
      url: `/api/v1/teams/${team}/members`,
      payload: { email: 'New.Member@Example.com' },
      headers: owner,
    });
    expect(invited.statusCode).toBe(201);
    const member = invited.json<{ data: { id: number; email: string; role: string } }>().data;
    expect(member).toMatchObject({ email: 'new.member@example.com', role: 'member' });
    expect(smtp.to('new.member@example.com')[0]?.subject).toBe('You were added to the team acme on Berth');
    const again = await t.request({
      method: 'POST',
      url: `/api/v1/teams/${team}/members`,
      payload: { email: 'new.member@example.com' },
      headers: owner,
    });
    expect(again.statusCode).toBe(409);

    // The member signs in with the mailed link and sees the team, but cannot manage it.
    const browser = browserOf(
      await t.request({
        method: 'POST',
        url: '/api/v1/auth/sign-in-links/consume',
        payload: { token: mailedToken('new.member@example.com') },
      }),
    );
    const theirs = await t.request({ url: `/api/v1/teams/${team}`, headers: as(browser, false) });
    expect(theirs.json()).toMatchObject({ data: { name: 'acme', role: 'member' } });
    const refused = await t.request({
      method: 'POST',
      url: `/api/v1/teams/${team}/members`,
      payload: { email: 'friend@example.com' },
      headers: as(browser),
    });
    expect(refused.statusCode).toBe(403);
    const promoteSelf = await t.request({
      method: 'PATCH',
      url: `/api/v1/teams/${team}/members/${member.id}`,
      payload: { role: 'owner' },
      headers: as(browser),
    });
    expect(promoteSelf.statusCode).toBe(403);
    const removeOwner = await t.request({
      method: 'DELETE',
      url: `/api/v1/teams/${team}/members/${t.user.user_id}`,
      headers: as(browser),
    });
    expect(removeOwner.statusCode).toBe(403);

    // The last owner can neither step down nor leave.
    const demote = await t.request({
      method: 'PATCH',
      url: `/api/v1/teams/${team}/members/${t.user.user_id}`,
      payload: { role: 'member' },
      headers: owner,
    });
    expect(demote.statusCode).toBe(409);
    const leave = await t.request({ method: 'POST', url: `/api/v1/teams/${team}/leave`, headers: owner });
    expect(leave.statusCode).toBe(409);

    // With a second owner, the first may step down; then the member leaves by themselves.
    const promoted = await t.request({
      method: 'PATCH',
      url: `/api/v1/teams/${team}/members/${member.id}`,
      payload: { role: 'owner' },
      headers: owner,
    });
    expect(promoted.json()).toMatchObject({ data: { id: member.id, role: 'owner' } });
    const demoted = await t.request({
      method: 'PATCH',
      url: `/api/v1/teams/${team}/members/${t.user.user_id}`,
      payload: { role: 'member' },
      headers: as(browser),
    });
    expect(demoted.json()).toMatchObject({ data: { role: 'member' } });
    const back = await t.request({
      method: 'PATCH',
      url: `/api/v1/teams/${team}/members/${t.user.user_id}`,
      payload: { role: 'owner' },
      headers: as(browser),
    });
    expect(back.statusCode).toBe(200);
    const left = await t.request({
      method: 'POST',
      url: `/api/v1/teams/${team}/leave`,
      headers: as(browser),
    });
    expect(left.statusCode).toBe(204);
    const members = await t.request({ url: `/api/v1/teams/${team}`, headers: owner });
    expect(
      members.json<{ data: { members: Array<{ email: string }> } }>().data.members.map((m) => m.email),
    ).toEqual(['owner@example.com']);
    // No longer a member: the team is another team's now.
    expect((await t.request({ url: `/api/v1/teams/${team}`, headers: as(browser, false) })).statusCode).toBe(
      403,
    );
  });

  it('names the field of a bad team name or e-mail address', async () => {
    const badName = await t.request({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: '../etc' },
      headers: t.auth.platform,
    });
    expect(badName.statusCode).toBe(422);
    expect(badName.json()).toMatchObject({ errors: { name: [expect.stringContaining('team name')] } });
    const taken = await t.request({
      method: 'POST',
      url: '/api/v1/teams',
      payload: { name: 'acme' },
      headers: t.auth.platform,
    });
    expect(taken.json()).toMatchObject({ errors: { name: ['A team named acme exists already'] } });
    const badEmail = await t.request({
      method: 'POST',
      url: `/api/v1/teams/${t.user.team_id}/members`,
      payload: { email: 'not an address' },
      headers: t.auth.platform,
    });
    expect(badEmail.json()).toMatchObject({ errors: { email: [expect.stringContaining('e-mail address')] } });
  });

  it('answers 429 after 10 failed sign-ins for one account, even to the right password', async () => {
    const target = await t.ctx.identity.createUser({
      email: 'target@example.com',
      team: `target-${dialect}`,
    });
    await t.ctx.services.accounts.forcePassword(target.user_id, PASSWORD);
    for (let i = 0; i < 10; i++)
      expect((await signIn('target@example.com', `wrong ${i}`)).statusCode).toBe(401);
    const blocked = await signIn('target@example.com', PASSWORD);
    expect(blocked.statusCode).toBe(429);
    expect(Number(blocked.headers['retry-after'])).toBeGreaterThan(0);
    // Another account from the same address still signs in.
    expect((await signIn('owner@example.com', PASSWORD)).statusCode).toBe(200);
  });

  it("refuses only failing sign-ins from an address past its limit: others' right passwords pass", async () => {
    // Its own Berth with a limit of 3, so that the test makes 4 deliberate scrypt hashes, not 31.
    const limited = await createTestApp(dialect, {
      team: `limited-${dialect}`,
      services: { signInFailuresPerAddress: 3 },
    });
    try {
      await limited.ctx.services.accounts.forcePassword(limited.user.user_id, PASSWORD);
      const signInThere = (email: string, password: string) =>
        limited.request({ method: 'POST', url: '/api/v1/auth/sign-in', payload: { email, password } });
      for (let i = 0; i < 3; i++)
        expect((await signInThere(`nobody${i}@example.com`, 'wrong')).statusCode).toBe(401);
      const failing = await signInThere('nobody-more@example.com', 'wrong');
      expect(failing.statusCode).toBe(429);
      expect(Number(failing.headers['retry-after'])).toBeGreaterThan(0);
      // Every user behind the same proxy address still signs in with their password.
      expect((await signInThere('owner@example.com', PASSWORD)).statusCode).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('account mail without an SMTP server', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp('sqlite');
  });
  afterAll(() => t.close());

  it('keeps a sign-in link in the account outbox, sealed, for the operator', async () => {
    const asked = await t.request({
      method: 'POST',
      url: '/api/v1/auth/sign-in-links',
      payload: { email: 'owner@example.com' },
    });
    expect(asked.statusCode).toBe(202);
    const [mail] = await t.ctx.services.accounts.unsentMail(t.user.user_id);
    expect(mail).toMatchObject({ recipient: 'owner@example.com', state: 'outbox' });
    const token = /#token=([A-Za-z0-9_-]+)/.exec(mail!.body)![1]!;
    const stored = await t.ctx.db
      .selectFrom('account_mail')
      .select('body_encrypted')
      .executeTakeFirstOrThrow();
    expect(stored.body_encrypted).not.toContain(token);
    const consumed = await t.request({
      method: 'POST',
      url: '/api/v1/auth/sign-in-links/consume',
      payload: { token },
    });
    expect(consumed.statusCode).toBe(200);
  });
});

describe('session cookies behind TLS (issue 24, item 11)', () => {
  const cookieOf = (response: { headers: Record<string, unknown> }) => String(response.headers['set-cookie']);

  it('are Secure on every sign-in and sign-out when BERTH_PUBLIC_URL is https, though the hop is plain HTTP', async () => {
    const t = await createTestApp('sqlite', { env: { BERTH_PUBLIC_URL: 'HTTPS://Berth.Example.com' } });
    try {
      await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
      const password = await t.request({
        method: 'POST',
        url: '/api/v1/auth/sign-in',
        payload: { email: 'owner@example.com', password: PASSWORD },
      });
      expect(password.statusCode).toBe(200);
      expect(cookieOf(password)).toMatch(/; Secure(;|$)/);
      const token = await t.ctx.services.accounts.signInLinkFor(t.user.user_id);
      const link = await t.request({
        method: 'POST',
        url: '/api/v1/auth/sign-in-links/consume',
        payload: { token: new URL(token).hash.replace('#token=', '') },
      });
      expect(link.statusCode, link.body).toBe(200);
      expect(cookieOf(link)).toMatch(/; Secure(;|$)/);
      const session = cookieOf(link).split(';')[0]!;
      const out = await t.request({
        method: 'POST',
        url: '/api/v1/auth/sign-out',
        headers: {
          cookie: session,
          'x-csrf-token': link.json<{ data: { csrf_token: string } }>().data.csrf_token,
        },
      });
      expect(out.statusCode).toBeLessThan(300);
      expect(cookieOf(out)).toMatch(/; Secure(;|$)/);
    } finally {
      await t.close();
    }
  });

  it('are Secure when a trusted proxy says the client used https', async () => {
    const t = await createTestApp('sqlite', { env: { BERTH_TRUSTED_PROXIES: '127.0.0.1' } });
    try {
      await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
      const signIn = (headers: Record<string, string>) =>
        t.request({
          method: 'POST',
          url: '/api/v1/auth/sign-in',
          payload: { email: 'owner@example.com', password: PASSWORD },
          headers,
        });
      expect(cookieOf(await signIn({ 'x-forwarded-proto': 'https' }))).toMatch(/; Secure(;|$)/);
      expect(cookieOf(await signIn({}))).not.toMatch(/Secure/);
    } finally {
      await t.close();
    }
  });
});

describe('password hashes (issue 27, item 6)', () => {
  const storedHash = async (t: TestApp) =>
    (
      await t.ctx.db
        .selectFrom('users')
        .select('password_hash')
        .where('id', '=', t.user.user_id)
        .executeTakeFirstOrThrow()
    ).password_hash;

  it('are scrypt at the production cost (N = 2^15, r = 8, p = 3) when nothing overrides it, and sign in', async () => {
    const t = await createTestApp('sqlite', { productionPasswordCost: true });
    try {
      await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
      expect(await storedHash(t)).toMatch(/^scrypt\$15\$8\$3\$[A-Za-z0-9_-]{22}\$[A-Za-z0-9_-]{43}$/);
      const signIn = (email: string, password: string) =>
        t.request({ method: 'POST', url: '/api/v1/auth/sign-in', payload: { email, password } });
      expect((await signIn('owner@example.com', PASSWORD)).statusCode).toBe(200);
      expect((await signIn('owner@example.com', `${PASSWORD}!`)).statusCode).toBe(401);
      expect((await signIn('nobody@example.com', PASSWORD)).statusCode).toBe(401);
    } finally {
      await t.close();
    }
  });

  it('are cheaper in the other tests only through the composition override', async () => {
    const t = await createTestApp('sqlite');
    try {
      await t.ctx.services.accounts.forcePassword(t.user.user_id, PASSWORD);
      expect(await storedHash(t)).toMatch(/^scrypt\$10\$8\$1\$/);
    } finally {
      await t.close();
    }
  });
});
