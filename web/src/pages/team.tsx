// The team: members (invite by e-mail, change a role, remove, leave), its webhooks (owners: add, with
// the signing secret shown once; delete; recent deliveries), a new team; and the team's notifications
// (the e-mails Berth sent or holds for it).
import { useState } from 'preact/hooks';
import {
  api,
  enc,
  type CreatedWebhook,
  type Notification,
  type TeamCreated,
  type TeamDetail,
  type Webhook,
  type WebhookDelivery,
} from '../api';
import { navigate } from '../router';
import { chooseTeam, refreshUser, team, user } from '../state';
import { Badge, Button, Empty, ErrorBox, Form, ShownOnce, useAction, useLoad, when } from '../ui';

/** An event a webhook can ask for (POST /api/v1/teams/{team}/webhooks), as the API's answers name it. */
type WebhookEvent = Exclude<Webhook['events'][number], '*'>;

/**
 * Every event, with what sends it. A Record over the API's type: an event the API adds and this list
 * lacks, or one it names that the API does not know, fails the dashboard's type check.
 */
const WEBHOOK_EVENT_HINTS: Record<WebhookEvent, string> = {
  'deployment.started': 'a deployment began',
  'deployment.succeeded': 'a deployment serves',
  'deployment.failed': 'a deployment failed',
  'application.suspended': 'an application was suspended',
  'application.deleted': 'an application was deleted',
  'deletion.warning': 'an application is due for deletion (7 days and 1 day before)',
  'database.operation.finished': 'a database check, migration, clone or upgrade ended',
};
const WEBHOOK_EVENTS = Object.keys(WEBHOOK_EVENT_HINTS) as WebhookEvent[];

function Deliveries({ teamId, hook }: { teamId: number; hook: Webhook }) {
  const list = useLoad(
    () =>
      api
        .get<{ data: WebhookDelivery[] }>(`/api/v1/teams/${teamId}/webhooks/${hook.id}/deliveries?limit=10`)
        .then((r) => r.data),
    [teamId, hook.id],
  );
  return (
    <>
      <ErrorBox error={list.error} />
      {list.data?.length === 0 && <Empty>No deliveries yet.</Empty>}
      <ul class="mails">
        {list.data?.map((d) => {
          const last = d.attempts.at(-1);
          return (
            <li key={d.id}>
              <details>
                <summary>
                  <Badge value={d.state} /> {d.event}{' '}
                  <small>
                    {when(d.created_at)}, {d.attempts.length} attempt{d.attempts.length === 1 ? '' : 's'}
                    {last ? `, last ${last.status_code ?? 'no answer'}` : ''}
                  </small>
                </summary>
                <ol>
                  {d.attempts.map((a) => (
                    <li key={a.attempt}>
                      {when(a.at)}: {a.status_code ?? 'no answer'} in {a.duration_ms} ms
                      {a.error ? ` — ${a.error}` : ''}
                    </li>
                  ))}
                </ol>
              </details>
            </li>
          );
        })}
      </ul>
      <Button kind="secondary" class="small" onClick={() => list.reload()}>
        Refresh deliveries
      </Button>
    </>
  );
}

function Webhooks({ teamId }: { teamId: number }) {
  const list = useLoad(
    () => api.get<{ data: Webhook[] }>(`/api/v1/teams/${teamId}/webhooks`).then((r) => r.data),
    [teamId],
  );
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const [created, setCreated] = useState<CreatedWebhook | null>(null);
  const [open, setOpen] = useState<number | null>(null);
  const [add, adding, addError] = useAction(async () => {
    const made = await api.post<{ data: CreatedWebhook }>(`/api/v1/teams/${teamId}/webhooks`, {
      url,
      events,
    });
    setCreated(made.data);
    setUrl('');
    list.reload();
  });
  const [remove, removing, removeError] = useAction(async (id: number) => {
    await api.del(`/api/v1/teams/${teamId}/webhooks/${enc(String(id))}`);
    if (created?.id === id) setCreated(null);
    list.reload();
  });
  const toggle = (event: string, on: boolean) =>
    setEvents((now) => {
      if (event === '*') return on ? ['*'] : [];
      const named = now.filter((e) => e !== '*' && e !== event);
      return on ? [...named, event] : named;
    });
  return (
    <section aria-labelledby="webhooks-heading">
      <h2 id="webhooks-heading">Webhooks</h2>
      <p class="help">
        Berth POSTs the team's events as JSON to these URLs, signed in <code>X-Berth-Signature</code> with the
        webhook's secret.
      </p>
      <ErrorBox error={list.error} />
      {list.data?.length === 0 && <Empty>No webhooks yet.</Empty>}
      {list.data && list.data.length > 0 && (
        <div class="scroll" tabIndex={0}>
          <table class="list">
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((h) => (
                <tr key={h.id}>
                  <td>
                    <code>{h.url}</code>
                  </td>
                  <td>{h.events.join(', ')}</td>
                  <td>{when(h.created_at)}</td>
                  <td class="row">
                    <Button
                      kind="secondary"
                      class="small"
                      aria-expanded={open === h.id}
                      onClick={() => setOpen(open === h.id ? null : h.id)}
                    >
                      Deliveries
                    </Button>
                    <Button
                      kind="danger"
                      class="small"
                      busy={removing}
                      aria-label={`Delete the webhook to ${h.url}`}
                      onClick={() => void remove(h.id)}
                    >
                      Delete
                    </Button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ErrorBox error={removeError} />
      {open !== null && list.data?.some((h) => h.id === open) && (
        <Deliveries teamId={teamId} hook={list.data.find((h) => h.id === open)!} />
      )}
      {created && (
        <ShownOnce label={`The signing secret of the webhook to ${created.url}`} value={created.secret} />
      )}
      <Form onSubmit={add}>
        <label>
          Webhook URL
          <input
            type="url"
            required
            placeholder="https://example.com/berth-events"
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        </label>
        <fieldset>
          <legend>Events</legend>
          {['*', ...WEBHOOK_EVENTS].map((event) => (
            <label key={event}>
              <input
                type="checkbox"
                checked={events.includes(event)}
                onChange={(e) => toggle(event, e.currentTarget.checked)}
              />{' '}
              {event === '*' ? (
                'Every event'
              ) : (
                <>
                  <code>{event}</code>: {WEBHOOK_EVENT_HINTS[event as WebhookEvent]}
                </>
              )}
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={adding || events.length === 0}>
          Add webhook
        </button>
      </Form>
      <ErrorBox error={addError} />
    </section>
  );
}

function NewTeam() {
  const [name, setName] = useState('');
  const [create, busy, error] = useAction(async () => {
    const made = await api.post<{ data: TeamCreated }>('/api/v1/teams', { name });
    await refreshUser();
    chooseTeam(made.data.id);
    setName('');
  });
  return (
    <section aria-labelledby="new-team-heading">
      <h2 id="new-team-heading">Create a team</h2>
      <Form class="row" onSubmit={create}>
        <label>
          Team name
          <input value={name} required onInput={(e) => setName(e.currentTarget.value)} />
        </label>
        <button type="submit" disabled={busy}>
          Create team
        </button>
      </Form>
      <ErrorBox error={error} />
    </section>
  );
}

export function TeamPage() {
  const current = team.value;
  const me = user.value;
  const detail = useLoad(
    () =>
      current
        ? api.get<{ data: TeamDetail }>(`/api/v1/teams/${current.id}`).then((r) => r.data)
        : Promise.resolve(null),
    [current?.id],
  );
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('member');
  const [invite, inviting, inviteError] = useAction(async () => {
    await api.post(`/api/v1/teams/${current!.id}/members`, { email, role });
    setEmail('');
    detail.reload();
  });
  const [change, changing, changeError] = useAction(async (userId: number, newRole: string) => {
    await api.patch(`/api/v1/teams/${current!.id}/members/${userId}`, { role: newRole });
    detail.reload();
  });
  const [remove, removing, removeError] = useAction(async (userId: number) => {
    await api.del(`/api/v1/teams/${current!.id}/members/${userId}`);
    detail.reload();
  });
  const [leave, leaving, leaveError] = useAction(async () => {
    await api.post(`/api/v1/teams/${current!.id}/leave`);
    await refreshUser();
    navigate('/apps');
  });
  const owner = detail.data?.role === 'owner';
  return (
    <>
      <h1>Team {current?.name}</h1>
      <ErrorBox error={detail.error} />
      {detail.data && (
        <section aria-labelledby="members-heading">
          <h2 id="members-heading">Members</h2>
          <div class="scroll" tabIndex={0}>
            <table class="list">
              <thead>
                <tr>
                  <th scope="col">E-mail</th>
                  <th scope="col">Role</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {detail.data.members.map((m) => (
                  <tr key={m.id}>
                    <td>{m.email}</td>
                    <td>
                      {owner ? (
                        <select
                          aria-label={`Role of ${m.email}`}
                          value={m.role}
                          disabled={changing}
                          onChange={(e) => void change(m.id, e.currentTarget.value)}
                        >
                          <option value="member">member</option>
                          <option value="owner">owner</option>
                        </select>
                      ) : (
                        m.role
                      )}
                    </td>
                    <td>
                      {owner && m.id !== me?.id && (
                        <Button
                          kind="danger"
                          class="small"
                          busy={removing}
                          aria-label={`Remove ${m.email}`}
                          onClick={() => void remove(m.id)}
                        >
                          Remove
                        </Button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <ErrorBox error={changeError ?? removeError} />
          {owner ? (
            <Form class="row" onSubmit={invite}>
              <label>
                Invite by e-mail
                <input type="email" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
              </label>
              <label>
                Role
                <select value={role} onChange={(e) => setRole(e.currentTarget.value)}>
                  <option value="member">member</option>
                  <option value="owner">owner</option>
                </select>
              </label>
              <button type="submit" disabled={inviting}>
                Invite
              </button>
            </Form>
          ) : (
            <p class="help">Only the team's owners invite and manage members.</p>
          )}
          <ErrorBox error={inviteError} />
          <p>
            <Button kind="secondary" busy={leaving} onClick={() => void leave()}>
              Leave {current?.name}
            </Button>
          </p>
          <ErrorBox error={leaveError} />
        </section>
      )}
      {detail.data &&
        current &&
        (owner ? (
          <Webhooks teamId={current.id} />
        ) : (
          <section aria-labelledby="webhooks-heading">
            <h2 id="webhooks-heading">Webhooks</h2>
            <p class="help">Only the team's owners see and manage its webhooks.</p>
          </section>
        ))}
      <NewTeam />
    </>
  );
}

export function NotificationsPage() {
  const current = team.value;
  const list = useLoad(
    () =>
      current
        ? api.get<{ data: Notification[] }>(`/api/v1/teams/${current.id}/notifications`).then((r) => r.data)
        : Promise.resolve([]),
    [current?.id],
  );
  return (
    <>
      <h1>Notifications</h1>
      <p>
        The e-mails Berth sent to {current?.name} (deletion warnings and notices), or holds when no mail
        server is set.
      </p>
      <ErrorBox error={list.error} />
      {list.data?.length === 0 && (
        <Empty>Nothing yet: warnings appear here when an application is scheduled for deletion.</Empty>
      )}
      <ul class="mails">
        {list.data?.map((n) => (
          <li key={n.id}>
            <details>
              <summary>
                <Badge value={n.state} /> {n.subject}{' '}
                <small>
                  to {n.recipient}, {when(n.created_at)}
                </small>
              </summary>
              <pre>{n.body}</pre>
            </details>
          </li>
        ))}
      </ul>
    </>
  );
}
