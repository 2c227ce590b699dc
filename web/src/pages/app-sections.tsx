// Parts of an application's page: a deployment's log, streamed while it runs, and the deletion
// schedule (its date and warnings; change the date or cancel, never set one).
import { useEffect, useRef, useState } from 'preact/hooks';
import { api, type Deployment, type Schedule } from '../api';
import { Badge, Button, ErrorBox, useAction, useLoad, when } from '../ui';

/** A deployment's log: the stored lines, then (while it runs) new ones as the server sends them. */
export function DeploymentLog({
  appId,
  deployment,
  onEnd,
}: {
  appId: number;
  deployment: Deployment;
  onEnd: () => void;
}) {
  const [lines, setLines] = useState<string[]>([]);
  const [ended, setEnded] = useState<string | null>(null);
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    setLines([]);
    setEnded(null);
    const source = new EventSource(
      `/api/v1/applications/${appId}/deployments/${deployment.id}/logs?follow=true`,
    );
    source.addEventListener('line', (event) => {
      const { line } = JSON.parse((event as MessageEvent<string>).data) as { line: string };
      setLines((all) => [...all, line]);
    });
    source.addEventListener('end', (event) => {
      const { status } = JSON.parse((event as MessageEvent<string>).data) as { status: string };
      setEnded(status);
      source.close();
      onEnd();
    });
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) setEnded((e) => e ?? 'disconnected');
    };
    return () => source.close();
    // onEnd changes each render; the stream depends on the deployment only
  }, [appId, deployment.id]);
  useEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines.length]);
  return (
    <section aria-labelledby="log-heading">
      <h3 id="log-heading">
        Log of deployment #{deployment.id}{' '}
        {ended ? (
          <Badge value={ended} />
        ) : (
          <span role="status">
            <span class="spinner" aria-hidden="true" /> streaming
          </span>
        )}
      </h3>
      <pre
        class="log"
        ref={box}
        tabIndex={0}
        aria-label={`Log of deployment ${deployment.id}`}
        data-testid="deployment-log"
      >
        {lines.join('\n')}
      </pre>
    </section>
  );
}

export function ScheduleSection({ appId }: { appId: number }) {
  const { data, error, reload } = useLoad(
    () => api.get<{ data: Schedule }>(`/api/v1/applications/${appId}/scheduled-deletion`).then((r) => r.data),
    [appId],
  );
  const [date, setDate] = useState('');
  const [change, changing, changeError] = useAction(async () => {
    await api.post(`/api/v1/applications/${appId}/scheduled-deletion/reschedule`, {
      scheduled_deletion_at: new Date(date).toISOString(),
    });
    reload();
  });
  const [cancel, cancelling, cancelError] = useAction(async () => {
    await api.post(`/api/v1/applications/${appId}/scheduled-deletion/cancel`);
    reload();
  });
  return (
    <section aria-labelledby="schedule-heading">
      <h2 id="schedule-heading">Deletion schedule</h2>
      <ErrorBox error={error} />
      {data?.state === 'no_schedule' && (
        <p data-testid="no-schedule">
          No deletion is scheduled. A schedule is set in the application's document (
          <code>settings.scheduled_deletion_at</code>), never here.
        </p>
      )}
      {data?.state === 'scheduled' && (
        <>
          <p>
            Deleted on <strong data-testid="deletion-date">{when(data.scheduled_deletion_at)}</strong>.
          </p>
          <ul>
            {(['seven_days', 'one_day'] as const).map((k) => {
              const w = data.warnings[k];
              return (
                <li key={k}>
                  Warning {k === 'seven_days' ? '7 days' : '1 day'} before:{' '}
                  {w ? (
                    <>
                      {when(w.due_at)} <Badge value={w.status === 'handled' ? 'sent' : 'pending'} />
                    </>
                  ) : (
                    'none'
                  )}
                </li>
              );
            })}
          </ul>
          <form
            class="row"
            onSubmit={(e) => {
              e.preventDefault();
              void change();
            }}
          >
            <label>
              New deletion date
              <input
                type="datetime-local"
                required
                value={date}
                onInput={(e) => setDate(e.currentTarget.value)}
              />
            </label>
            <button type="submit" disabled={changing || !date}>
              Change date
            </button>
            <Button kind="secondary" busy={cancelling} onClick={() => void cancel()}>
              Cancel deletion
            </Button>
          </form>
          <ErrorBox error={changeError ?? cancelError} />
        </>
      )}
    </section>
  );
}
