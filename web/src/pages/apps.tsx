// Applications: the team's list, and one application's page (status, instances, deployments and their
// live log, actions, domains, secrets, volumes, services, health check, deletion schedule).
import { useEffect, useState } from 'preact/hooks';
import { parseDocument } from 'yaml';
import {
  api,
  enc,
  type AppDetail,
  type AppStatus,
  type AppSummary,
  type Deployment,
  type Instance,
} from '../api';
import { DeploymentLog, ScheduleSection, ServicesSection, SourceUploadSection } from './app-sections';
import { navigate } from '../router';
import { MEMBER_NOTE, owns, team } from '../state';
import {
  Badge,
  Busy,
  Button,
  download,
  Empty,
  ErrorBox,
  Form,
  TypedConfirm,
  useAction,
  useLoad,
  when,
} from '../ui';

export function AppsPage() {
  const current = team.value;
  const { data, error } = useLoad(async () => {
    if (!current) return [];
    const apps = (await api.get<{ data: AppSummary[] }>(`/api/v1/applications?team=${current.id}`)).data;
    const statuses = await Promise.all(
      apps.map((app) =>
        api.get<{ data: AppStatus }>(`/api/v1/applications/${app.id}/status`).then(
          (s) => s.data,
          () => null,
        ),
      ),
    );
    return apps.map((app, i) => ({ app, status: statuses[i] ?? null }));
  }, [current?.id]);
  return (
    <>
      <h1>Applications</h1>
      <ErrorBox error={error} />
      {!data && !error && <Busy />}
      {data?.length === 0 && (
        <Empty>
          <p>
            No applications in {current?.name ?? 'this team'} yet. Describe one in a document and{' '}
            <a href="/apply">apply it</a>.
          </p>
        </Empty>
      )}
      {data && data.length > 0 && (
        <div class="scroll" tabIndex={0}>
          <table class="list">
            <caption class="visually-hidden">Applications of {current?.name}</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Last deployment</th>
                <th scope="col">Deletion</th>
              </tr>
            </thead>
            <tbody>
              {data.map(({ app, status }) => (
                <tr key={app.id}>
                  <td>
                    <a href={`/apps/${app.id}`}>{app.name}</a> <small>{app.type}</small>
                  </td>
                  <td>{status ? <Badge value={status.status} /> : '—'}</td>
                  <td>
                    {status?.latest_deployment ? (
                      <>
                        <Badge value={status.latest_deployment.status} />{' '}
                        {when(status.latest_deployment.created_at)}
                      </>
                    ) : (
                      'never deployed'
                    )}
                  </td>
                  <td>{app.scheduled_deletion_at ? when(app.scheduled_deletion_at) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

function duration(d: Deployment): string {
  if (d.duration_seconds !== null) return `${d.duration_seconds} s`;
  if (d.started_at) return 'running';
  return '—';
}

/** Sets or replaces one secret: the application's export with that value, applied. Values are never read. */
async function setSecret(appId: number, key: string, value: string): Promise<void> {
  const yaml = await api.text(`/api/v1/applications/${appId}/export-yaml`);
  const doc = parseDocument(yaml);
  const secrets = (doc.getIn(['spec', 'secrets']) as { items?: unknown[] } | undefined)?.items ?? [];
  const list =
    (doc.toJS() as { spec?: { secrets?: Array<{ key: string; value: string }> } }).spec?.secrets ?? [];
  const index = list.findIndex((s) => s.key === key);
  if (index >= 0) doc.setIn(['spec', 'secrets', index, 'value'], value);
  else if (secrets.length > 0) doc.addIn(['spec', 'secrets'], { key, value });
  else doc.setIn(['spec', 'secrets'], [{ key, value }]);
  // Not deployed here: the new value reaches the processes with the next deployment (the page says so).
  await api.post('/api/v1/infrastructure/apply?auto_deploy=false', doc.toString(), {
    contentType: 'application/yaml',
  });
}

const HEALTH_HELP =
  'Every few seconds Berth asks each replica for this path; only a 200 within the timeout counts as healthy (a redirect or an error page does not). After several failed checks in a row the replica is restarted, and a new release only takes traffic once it is healthy.';

export function AppPage({ id }: { id: number }) {
  const app = useLoad(
    () => api.get<{ data: AppDetail }>(`/api/v1/applications/${id}`).then((r) => r.data),
    [id],
  );
  const status = useLoad(
    () => api.get<{ data: AppStatus }>(`/api/v1/applications/${id}/status`).then((r) => r.data),
    [id],
  );
  const instances = useLoad(
    () => api.get<{ data: Instance[] }>(`/api/v1/applications/${id}/instances`).then((r) => r.data),
    [id],
  );
  const deployments = useLoad(
    () =>
      api
        .get<{ data: Deployment[] }>(`/api/v1/applications/${id}/deployments?per_page=10`)
        .then((r) => r.data),
    [id],
  );
  const [logOf, setLogOf] = useState<Deployment | null>(null);
  const refresh = () => {
    status.reload();
    instances.reload();
    deployments.reload();
  };
  useEffect(() => {
    const first = deployments.data?.[0];
    if (!logOf && first) setLogOf(first);
  }, [deployments.data]);
  const [act, acting, actionError] = useAction(async (action: string) => {
    const answer = await api.post<{ data: Deployment | AppStatus }>(`/api/v1/applications/${id}/${action}`);
    if (action === 'deploy' || action === 'rollback') setLogOf(answer.data as Deployment);
    refresh();
  });
  const [secretKey, setSecretKey] = useState('');
  const [secretValue, setSecretValue] = useState('');
  const [secretSaved, setSecretSaved] = useState<string | null>(null);
  const [saveSecret, savingSecret, secretError] = useAction(async () => {
    setSecretSaved(null);
    await setSecret(id, secretKey, secretValue);
    setSecretSaved(secretKey);
    setSecretValue('');
    setSecretKey('');
    app.reload();
  });
  const [remove, removing, removeError] = useAction(async (segment: string, item: string) => {
    await api.del(`/api/v1/applications/${id}/${segment}/${enc(item)}`);
    app.reload();
  });
  const [exportYaml, exporting, exportError] = useAction(async () => {
    const a = app.data;
    download(
      await api.blob('GET', `/api/v1/applications/${id}/export-yaml`),
      `${a?.name ?? 'application'}.yaml`,
    );
  });

  if (app.error) return <ErrorBox error={app.error} />;
  const a = app.data;
  const s = status.data;
  if (!a) return <Busy />;
  const owner = owns(a.team_id);
  return (
    <>
      <h1>
        {a.name}{' '}
        <small>
          {a.type}
          {a.version ? ` ${a.version}` : ''}
        </small>
      </h1>
      <section aria-labelledby="status-heading">
        <h2 id="status-heading">Status</h2>
        <ErrorBox error={status.error} />
        {s && (
          <dl class="facts">
            <dt>Status</dt>
            <dd data-testid="app-status">
              <Badge value={s.status} /> {s.status_reason}
            </dd>
            <dt>Replicas</dt>
            <dd>
              {s.replicas.running} running of {s.replicas.desired}
            </dd>
            <dt>Health</dt>
            <dd>{s.health_check.status}</dd>
            <dt>Addresses</dt>
            <dd>{s.hostnames.join(', ') || '—'}</dd>
          </dl>
        )}
        {!owner && <p class="note">{MEMBER_NOTE}</p>}
        <div class="row">
          {owner && (
            <>
              <Button busy={acting} onClick={() => void act('deploy')}>
                Deploy
              </Button>
              <Button kind="secondary" busy={acting} onClick={() => void act('rollback')}>
                Roll back
              </Button>
              {s?.suspended ? (
                <Button kind="secondary" busy={acting} onClick={() => void act('resume')}>
                  Resume
                </Button>
              ) : (
                <Button kind="secondary" busy={acting} onClick={() => void act('suspend')}>
                  Suspend
                </Button>
              )}
            </>
          )}
          <Button kind="secondary" busy={exporting} onClick={() => void exportYaml()}>
            Export YAML
          </Button>
        </div>
        <ErrorBox error={actionError ?? exportError} />
      </section>

      <section aria-labelledby="deployments-heading">
        <h2 id="deployments-heading">Deployments</h2>
        <ErrorBox error={deployments.error} />
        {deployments.data?.length === 0 && <Empty>Not deployed yet: press Deploy.</Empty>}
        {deployments.data && deployments.data.length > 0 && (
          <div class="scroll" tabIndex={0}>
            <table class="list">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Status</th>
                  <th scope="col">Step</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Commit</th>
                  <th scope="col">Why</th>
                  <th scope="col">Log</th>
                </tr>
              </thead>
              <tbody>
                {deployments.data.map((d) => (
                  <tr key={d.id}>
                    <td>{d.id}</td>
                    <td>
                      <Badge value={d.status} />
                      {d.error && <small> {d.error}</small>}
                    </td>
                    <td>{d.step ?? '—'}</td>
                    <td>{duration(d)}</td>
                    <td>
                      <code>{d.commit_sha?.slice(0, 10) ?? '—'}</code>
                    </td>
                    <td>{d.reason}</td>
                    <td>
                      <button
                        type="button"
                        class="small secondary"
                        onClick={() => setLogOf(d)}
                        aria-label={`Show the log of deployment ${d.id}`}
                      >
                        Log
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {logOf && <DeploymentLog appId={id} deployment={logOf} onEnd={refresh} />}
      </section>

      {owner && (
        <SourceUploadSection
          appId={id}
          onDeployment={(d) => {
            setLogOf(d);
            refresh();
          }}
        />
      )}

      <section aria-labelledby="instances-heading">
        <h2 id="instances-heading">Instances</h2>
        {instances.data?.length === 0 && (
          <Empty>No instance runs: deploy, or resume a suspended application.</Empty>
        )}
        {instances.data && instances.data.length > 0 && (
          <ul>
            {instances.data.map((i) => (
              <li key={i.name}>
                <code>{i.name}</code> <Badge value={i.state} /> {i.restarts} restarts, since{' '}
                {when(i.started_at)}
              </li>
            ))}
          </ul>
        )}
      </section>

      <section aria-labelledby="domains-heading">
        <h2 id="domains-heading">Domains</h2>
        {a.domains.length === 0 && (
          <Empty>
            No domains: add them under <code>domains</code> in the document.
          </Empty>
        )}
        <ul>
          {a.domains.map((d) => (
            <li key={d.domain}>
              {d.domain}{' '}
              {owner && (
                <Button
                  kind="secondary"
                  class="small"
                  busy={removing}
                  aria-label={`Remove domain ${d.domain}`}
                  onClick={() => void remove('domains', d.domain)}
                >
                  Remove
                </Button>
              )}
            </li>
          ))}
        </ul>
      </section>

      <section aria-labelledby="secrets-heading">
        <h2 id="secrets-heading">Secrets</h2>
        <p>
          Values are write-only: set or replace one, it is never shown again. The processes see a new value
          from the next deployment.
        </p>
        <ul>
          {a.secrets.map((sec) => (
            <li key={sec.key}>
              <code>{sec.key}</code>{' '}
              {owner && (
                <>
                  <Button
                    class="small"
                    kind="secondary"
                    aria-label={`Replace secret ${sec.key}`}
                    onClick={() => setSecretKey(sec.key)}
                  >
                    Replace
                  </Button>{' '}
                  <Button
                    class="small"
                    kind="secondary"
                    busy={removing}
                    aria-label={`Remove secret ${sec.key}`}
                    onClick={() => void remove('secrets', sec.key)}
                  >
                    Remove
                  </Button>
                </>
              )}
            </li>
          ))}
        </ul>
        {owner && (
          <Form class="row" onSubmit={saveSecret}>
            <label>
              Key
              <input
                value={secretKey}
                required
                pattern="[A-Za-z_][A-Za-z0-9_]*"
                onInput={(e) => setSecretKey(e.currentTarget.value)}
              />
            </label>
            <label>
              Value
              <input
                type="password"
                autoComplete="off"
                required
                value={secretValue}
                onInput={(e) => setSecretValue(e.currentTarget.value)}
              />
            </label>
            <button type="submit" disabled={savingSecret}>
              {savingSecret ? 'Saving…' : 'Set secret'}
            </button>
          </Form>
        )}
        {secretSaved && (
          <p role="status" class="ok">
            Secret {secretSaved} saved. Deploy to start using it.
          </p>
        )}
        <ErrorBox error={secretError ?? removeError} />
      </section>

      <section aria-labelledby="volumes-heading">
        <h2 id="volumes-heading">Volumes</h2>
        {a.volumes.length === 0 && <Empty>No volumes.</Empty>}
        <ul>
          {a.volumes.map((v) => (
            <li key={v.name}>
              <code>{v.name}</code> at <code>{v.mount_path}</code>, {v.volume_size} GB
            </li>
          ))}
        </ul>
      </section>

      <ServicesSection appId={id} owner={owner} />

      <section aria-labelledby="health-heading">
        <h2 id="health-heading">Health check</h2>
        <p>
          {a.settings.health_check_enabled ? (
            <>
              Enabled on <code>{a.settings.health_check_path}</code>: {a.health_check.status}.
            </>
          ) : (
            'Disabled: replicas count as healthy once they listen.'
          )}
        </p>
        <p class="help">{HEALTH_HELP}</p>
        <p class="help">
          Replicas: {a.settings.replicas ?? 1}; memory per replica: {a.settings.memory ?? 'default'}.
        </p>
      </section>

      <ScheduleSection appId={id} owner={owner} />

      <section aria-labelledby="danger-heading">
        <h2 id="danger-heading">Delete</h2>
        <p>Deleting stops the processes and removes releases, volumes, domains, secrets and deployments.</p>
        <TypedConfirm
          name={a.name}
          action="Delete application"
          onConfirm={async () => {
            await api.del(`/api/v1/applications/${id}`);
            navigate('/apps');
          }}
        />
      </section>
    </>
  );
}
