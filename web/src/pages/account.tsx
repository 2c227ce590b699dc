// The account: browser sessions, password, and the credentials clients use (API tokens, tools API
// keys, managed-database API credentials): created and shown once, listed, revoked.
import { useState } from 'preact/hooks';
import { api, type Credential, type IssuedCredential, type Session } from '../api';
import { user } from '../state';
import { Badge, Button, Empty, ErrorBox, Form, ShownOnce, useAction, useLoad, when } from '../ui';

const KINDS = [
  {
    path: 'tokens',
    title: 'API tokens',
    one: 'API token',
    help: 'For the platform API and the berth command.',
  },
  {
    path: 'tools-keys',
    title: 'Tools API keys',
    one: 'tools API key',
    help: 'For PDF conversion and screenshots.',
  },
  {
    path: 'database-credentials',
    title: 'Managed-database API credentials',
    one: 'database API credential',
    help: 'For the /1.3 API (HTTP basic).',
  },
] as const;

function Credentials({ kind }: { kind: (typeof KINDS)[number] }) {
  const list = useLoad(() =>
    api.get<{ data: Credential[] }>(`/api/v1/user/${kind.path}`).then((r) => r.data),
  );
  const [name, setName] = useState('');
  const [issued, setIssued] = useState<IssuedCredential | null>(null);
  const [create, creating, createError] = useAction(async () => {
    setIssued(
      (await api.post<{ data: IssuedCredential }>(`/api/v1/user/${kind.path}`, name ? { name } : {})).data,
    );
    setName('');
    list.reload();
  });
  const [revoke, revoking, revokeError] = useAction(async (id: number) => {
    await api.del(`/api/v1/user/${kind.path}/${id}`);
    list.reload();
  });
  const live = list.data?.filter((c) => !c.revoked_at) ?? [];
  const headingId = `cred-${kind.path}`;
  return (
    <section aria-labelledby={headingId}>
      <h2 id={headingId}>{kind.title}</h2>
      <p class="help">{kind.help}</p>
      <ErrorBox error={list.error} />
      {list.data && live.length === 0 && <Empty>None yet: create one below.</Empty>}
      {live.length > 0 && (
        <ul class="creds">
          {live.map((c) => (
            <li key={c.id}>
              <strong>{c.name}</strong> <code>{c.hint}…</code>{' '}
              <small>
                created {when(c.created_at)}, last used {when(c.last_used_at)}
              </small>{' '}
              <Button
                kind="danger"
                class="small"
                busy={revoking}
                aria-label={`Revoke ${kind.one} ${c.name}`}
                onClick={() => void revoke(c.id)}
              >
                Revoke
              </Button>
            </li>
          ))}
        </ul>
      )}
      <Form class="row" onSubmit={create}>
        <label>
          Name of the new {kind.one}
          <input value={name} maxLength={100} onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={creating}>
          Create {kind.one}
        </button>
      </Form>
      <ErrorBox error={createError ?? revokeError} />
      {issued?.token && <ShownOnce label={`The new ${kind.one}`} value={issued.token} />}
      {issued?.password && (
        <>
          <p>
            Username <code>{issued.username}</code>
          </p>
          <ShownOnce label="The password" value={issued.password} />
        </>
      )}
    </section>
  );
}

function Sessions() {
  const list = useLoad(() => api.get<{ data: Session[] }>('/api/v1/user/sessions').then((r) => r.data));
  const [revoke, busy, error] = useAction(async (id: number) => {
    await api.del(`/api/v1/user/sessions/${id}`);
    list.reload();
  });
  return (
    <section aria-labelledby="sessions-heading">
      <h2 id="sessions-heading">Signed-in browsers</h2>
      <ErrorBox error={list.error ?? error} />
      <ul>
        {list.data?.map((s) => (
          <li key={s.id}>
            {s.user_agent || 'unknown browser'} from {s.address || '?'}, last seen {when(s.last_seen_at)},
            ends {when(s.expires_at)}{' '}
            {s.current ? (
              <Badge value="this browser" />
            ) : (
              <Button
                kind="danger"
                class="small"
                busy={busy}
                aria-label={`End session ${s.id}`}
                onClick={() => void revoke(s.id)}
              >
                End
              </Button>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

function Password() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [done, setDone] = useState(false);
  const [save, busy, error] = useAction(async () => {
    setDone(false);
    await api.put(
      '/api/v1/user/password',
      current ? { password: next, current_password: current } : { password: next },
    );
    setCurrent('');
    setNext('');
    setDone(true);
  });
  return (
    <section aria-labelledby="password-heading">
      <h2 id="password-heading">Password</h2>
      <Form class="row" onSubmit={save}>
        <label>
          Current password (if you have one)
          <input
            type="password"
            autoComplete="current-password"
            value={current}
            onInput={(e) => setCurrent(e.currentTarget.value)}
          />
        </label>
        <label>
          New password (10 to 200 characters)
          <input
            type="password"
            autoComplete="new-password"
            required
            value={next}
            onInput={(e) => setNext(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={busy}>
          Set password
        </button>
      </Form>
      {done && (
        <p role="status" class="ok">
          Password set; your other browsers were signed out.
        </p>
      )}
      <ErrorBox error={error} />
    </section>
  );
}

export function AccountPage() {
  return (
    <>
      <h1>Account</h1>
      <p>Signed in as {user.value?.email}.</p>
      <Sessions />
      <Password />
      {KINDS.map((kind) => (
        <Credentials key={kind.path} kind={kind} />
      ))}
    </>
  );
}
