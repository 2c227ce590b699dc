// Parts of an application's page: a deployment's log, streamed while it runs, the source upload (owners),
// the services with their state and connection settings, and the deletion schedule (its date and
// warnings; change the date or cancel, never set one).
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  api,
  type AppService,
  type ConnectionFormat,
  type Deployment,
  type Schedule,
  type SourceUpload,
} from '../api';
import { Badge, Button, Empty, ErrorBox, Form, Secret, useAction, useLoad, when } from '../ui';

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

export function ScheduleSection({ appId, owner }: { appId: number; owner: boolean }) {
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
          {owner && (
            <Form class="row" onSubmit={change}>
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
            </Form>
          )}
          <ErrorBox error={changeError ?? cancelError} />
        </>
      )}
    </section>
  );
}

/** The services: state, where they listen, restarts; connection settings revealed on demand; restart. */
export function ServicesSection({ appId, owner }: { appId: number; owner: boolean }) {
  const services = useLoad(
    () => api.get<{ data: AppService[] }>(`/api/v1/applications/${appId}/services`).then((r) => r.data),
    [appId],
  );
  // A service still coming up is looked at again until it runs (or fails).
  const settling = services.data?.some((s) => s.status === 'provisioning' || s.status === 'restarting');
  useEffect(() => {
    if (!settling) return;
    const timer = setTimeout(services.reload, 2000);
    return () => clearTimeout(timer);
  }, [services.data]);
  return (
    <section aria-labelledby="services-heading">
      <h2 id="services-heading">Services</h2>
      <ErrorBox error={services.error} />
      {services.data?.length === 0 && (
        <Empty>No services: add them under spec.services in the document (a database, Redis…).</Empty>
      )}
      {services.data?.map((service) => (
        <ServiceRow
          key={`${service.kind}-${service.id}`}
          appId={appId}
          service={service}
          owner={owner}
          onChange={services.reload}
        />
      ))}
    </section>
  );
}

function ServiceRow({
  appId,
  service,
  owner,
  onChange,
}: {
  appId: number;
  service: AppService;
  /** Connection settings (credentials) and restarts are for the team's owners. */
  owner: boolean;
  onChange: () => void;
}) {
  const base = `/api/v1/applications/${appId}/services/${encodeURIComponent(service.name)}`;
  const [formats, setFormats] = useState<ConnectionFormat[] | null>(null);
  const [show, showBusy, showError] = useAction(async () => {
    setFormats((await api.get<{ data: ConnectionFormat[] }>(`${base}/connection-formats`)).data);
  });
  const [restart, restartBusy, restartError] = useAction(async () => {
    await api.post(`${base}/restart`);
    onChange();
  });
  return (
    <div class="service">
      <h3>
        <code>{service.name}</code> {service.type} {service.engine_version ?? service.version ?? ''}{' '}
        <Badge value={service.status} />
      </h3>
      {service.status_reason && <p>{service.status_reason}</p>}
      {service.port !== null && (
        <p>
          Listens on {service.host ?? '127.0.0.1'}:{service.port}
          {service.restarts > 0 && `; restarted ${service.restarts} time${service.restarts > 1 ? 's' : ''}`}.
          The application finds its connection settings in its environment.
        </p>
      )}
      {owner && service.status === 'running' && (
        <p>
          {!formats && (
            <Button kind="secondary" busy={showBusy} onClick={() => void show()}>
              Connection settings of {service.name}
            </Button>
          )}{' '}
          <Button kind="secondary" busy={restartBusy} onClick={() => void restart()}>
            Restart {service.name}
          </Button>
        </p>
      )}
      <ErrorBox error={showError ?? restartError} />
      {formats && (
        <dl>
          {formats.map((format) => (
            <div key={format.name}>
              <dt>{format.name}</dt>
              <dd>
                <Secret value={format.value} label={`${service.name} ${format.name}`} />
              </dd>
            </div>
          ))}
        </dl>
      )}
    </div>
  );
}

/**
 * Owners send a source archive (.tar.gz, .tgz or .zip, at most 100 MB) as the application's source:
 * stored and deployed, or refused with the server's message (422 for an archive that cannot be used).
 */
export function SourceUploadSection({
  appId,
  onDeployment,
}: {
  appId: number;
  onDeployment: (deployment: Deployment) => void;
}) {
  const [file, setFile] = useState<File | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const [upload, uploading, uploadError] = useAction(async () => {
    setDone(null);
    if (!file) return;
    const answer = await api.post<{ data: SourceUpload }>(`/api/v1/applications/${appId}/source`, file, {
      contentType: /\.zip$/i.test(file.name) ? 'application/zip' : 'application/gzip',
    });
    const { size, deployment } = answer.data;
    setDone(
      `Uploaded ${file.name} (${size} bytes)${deployment ? `: deployment ${deployment.id} started.` : '.'}`,
    );
    if (deployment) onDeployment(deployment);
  });
  return (
    <section aria-labelledby="upload-heading">
      <h2 id="upload-heading">Upload source</h2>
      <p class="help">
        A .tar.gz or .zip of the application's files (at most 100 MB) replaces its source and is deployed.
        From a terminal: <code>berth deploy APP --source DIR</code>.
      </p>
      <Form class="row" onSubmit={upload}>
        <label>
          Archive
          <input
            type="file"
            accept=".tar.gz,.tgz,.zip,application/gzip,application/zip"
            required
            onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)}
          />
        </label>
        <button type="submit" disabled={uploading || !file}>
          {uploading ? 'Uploading…' : 'Upload and deploy'}
        </button>
      </Form>
      {done && (
        <p role="status" class="ok">
          {done}
        </p>
      )}
      <ErrorBox error={uploadError} />
    </section>
  );
}
