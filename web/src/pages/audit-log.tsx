// The team's audit log (issue 31, item 2): who changed what, newest first, with the API's filters and
// its paging (older entries on demand). Owners only: a member sees why there is nothing.
import { useState } from 'preact/hooks';
import { api, type AuditEntry, type AuditPage } from '../api';
import { owns, team, MEMBER_NOTE } from '../state';
import { Button, Empty, ErrorBox, Form, useAction, useLoad, when } from '../ui';

interface Filters {
  action: string;
  actor: string;
  target: string;
  since: string;
  until: string;
}

const NONE: Filters = { action: '', actor: '', target: '', since: '', until: '' };

function query(filters: Filters, before?: number): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters) as Array<[keyof Filters, string]>) {
    if (value.trim() === '') continue;
    // A date field gives a day (UTC), the API a time with its zone: since its start, until its end.
    const day =
      name === 'since' ? `${value}T00:00:00Z` : name === 'until' ? `${value}T23:59:59.999Z` : undefined;
    params.set(name, day ?? value.trim());
  }
  if (before !== undefined) params.set('before', String(before));
  const text = params.toString();
  return text ? `?${text}` : '';
}

function Change({ entry }: { entry: AuditEntry }) {
  if (entry.before === null && entry.after === null) return null;
  return (
    <details>
      <summary>Before and after</summary>
      <pre>{JSON.stringify({ before: entry.before, after: entry.after }, null, 2)}</pre>
    </details>
  );
}

export function AuditLogPage() {
  const current = team.value;
  const [draft, setDraft] = useState<Filters>(NONE);
  const [filters, setFilters] = useState<Filters>(NONE);
  const [older, setOlder] = useState<AuditEntry[]>([]);
  const [next, setNext] = useState<number | null>(null);
  const owner = owns();
  const page = useLoad(async () => {
    if (!current || !owner) return null;
    const answer = await api.get<AuditPage>(`/api/v1/teams/${current.id}/audit-log${query(filters)}`);
    setOlder([]);
    setNext(answer.meta.next_before);
    return answer.data;
  }, [current?.id, owner, filters]);
  const [more, loadingMore, moreError] = useAction(async () => {
    if (!current || next === null) return;
    const answer = await api.get<AuditPage>(`/api/v1/teams/${current.id}/audit-log${query(filters, next)}`);
    setOlder([...older, ...answer.data]);
    setNext(answer.meta.next_before);
  });
  const field = (name: keyof Filters) => ({
    value: draft[name],
    onInput: (e: { currentTarget: HTMLInputElement }) =>
      setDraft({ ...draft, [name]: e.currentTarget.value }),
  });
  const entries = [...(page.data ?? []), ...older];
  return (
    <>
      <h1>Audit log</h1>
      <p>Every change made to {current?.name} through the API, the CLI, this dashboard or by the operator.</p>
      {!owner ? (
        <p class="help">{MEMBER_NOTE} The audit log is for its owners.</p>
      ) : (
        <>
          <Form class="row" onSubmit={() => setFilters(draft)}>
            <label>
              Action
              <input placeholder="application.*" {...field('action')} />
            </label>
            <label>
              Actor
              <input placeholder="e-mail" {...field('actor')} />
            </label>
            <label>
              Target
              <input placeholder="application:12" {...field('target')} />
            </label>
            <label>
              Since
              <input type="date" {...field('since')} />
            </label>
            <label>
              Until
              <input type="date" {...field('until')} />
            </label>
            <button type="submit">Filter</button>
          </Form>
          <ErrorBox error={page.error ?? moreError} />
          {page.data?.length === 0 && <Empty>No entries match.</Empty>}
          {entries.length > 0 && (
            <div class="scroll" tabIndex={0}>
              <table class="list">
                <thead>
                  <tr>
                    <th scope="col">When</th>
                    <th scope="col">Who</th>
                    <th scope="col">Action</th>
                    <th scope="col">Target</th>
                    <th scope="col">From</th>
                    <th scope="col">Change</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.map((e) => (
                    <tr key={e.id}>
                      <td>{when(e.at)}</td>
                      <td>
                        {e.actor ?? '—'}
                        {e.credential && <small> ({e.credential})</small>}
                      </td>
                      <td>
                        <code>{e.action}</code>
                      </td>
                      <td>{e.target.kind ? `${e.target.kind}:${e.target.id}` : e.target.id}</td>
                      <td>{e.address ?? '—'}</td>
                      <td>
                        <Change entry={e} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          {next !== null && (
            <p>
              <Button kind="secondary" busy={loadingMore} onClick={() => void more()}>
                Older entries
              </Button>
            </p>
          )}
        </>
      )}
    </>
  );
}
