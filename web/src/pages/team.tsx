// The team: members (invite by e-mail, change a role, remove, leave), a new team; and the team's
// notifications (the e-mails Berth sent or holds for it).
import { useState } from 'preact/hooks';
import { api, type Notification, type TeamCreated, type TeamDetail } from '../api';
import { navigate } from '../router';
import { chooseTeam, refreshUser, team, user } from '../state';
import { Badge, Button, Empty, ErrorBox, Form, useAction, useLoad, when } from '../ui';

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
