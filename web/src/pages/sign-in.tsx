// Signing in: a password, or a one-time link sent by e-mail (and the page that link opens).
import { useEffect, useState } from 'preact/hooks';
import { api, type SignedIn } from '../api';
import { currentHash, navigate } from '../router';
import { signedIn } from '../state';
import { Busy, Button, ErrorBox, Form, useAction } from '../ui';

export function SignInPage({ ended }: { ended: boolean }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [linkSent, setLinkSent] = useState(false);
  const [signIn, busy, error] = useAction(async () => {
    const answer = await api.post<{ data: SignedIn }>(
      '/api/v1/auth/sign-in',
      { email, password },
      { signingIn: true },
    );
    await signedIn(answer.data.csrf_token);
    navigate(location.pathname.startsWith('/sign-in') ? '/apps' : location.pathname, true);
  });
  const [sendLink, sending, linkError] = useAction(async () => {
    await api.post('/api/v1/auth/sign-in-links', { email }, { signingIn: true });
    setLinkSent(true);
  });
  return (
    <main id="main" class="sign-in">
      <h1>Sign in to Berth</h1>
      {ended && <p class="notice">Your session has ended: sign in again.</p>}
      <Form onSubmit={signIn}>
        <label>
          E-mail
          <input
            type="email"
            name="email"
            autoComplete="username"
            required
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
        </label>
        <label>
          Password
          <input
            type="password"
            name="password"
            autoComplete="current-password"
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <ErrorBox error={error} />
      </Form>
      <section aria-labelledby="link-heading">
        <h2 id="link-heading">No password?</h2>
        <p>We can e-mail you a link that signs you in once, within 15 minutes.</p>
        <Button kind="secondary" busy={sending} disabled={!email} onClick={() => void sendLink()}>
          E-mail me a link
        </Button>
        {linkSent && (
          <p role="status" class="ok">
            If {email} has an account, a sign-in link is on its way. Open it in this browser.
          </p>
        )}
        <ErrorBox error={linkError} />
      </section>
    </main>
  );
}

export function SignInLinkPage() {
  const token = /token=([A-Za-z0-9_-]+)/.exec(currentHash.value)?.[1];
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!token) return;
    // The token leaves the address bar at once (history, screenshots).
    history.replaceState(null, '', '/sign-in/link');
    api
      .post<{ data: SignedIn }>('/api/v1/auth/sign-in-links/consume', { token }, { signingIn: true })
      .then(async (answer) => {
        await signedIn(answer.data.csrf_token);
        navigate('/apps', true);
      })
      .catch(setError);
  }, [token]);
  return (
    <main id="main" class="sign-in">
      <h1>Signing in with your link</h1>
      {!token && !error && (
        <p>
          This page needs the link from your e-mail. <a href="/sign-in">Sign in another way</a>.
        </p>
      )}
      {token && !error && <Busy label="Checking your link…" />}
      {Boolean(error) && (
        <>
          <ErrorBox error={error} />
          <p>
            <a href="/sign-in">Ask for a new link</a>
          </p>
        </>
      )}
    </main>
  );
}
