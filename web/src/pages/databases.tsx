// Managed databases: the team's list, and one database (state, plan, zone, version, connection details
// with reveal and copy, the pending plan or zone change and its action, and the operations: check,
// migration with live status, upgrade, maintenance, clone to a point in time).
import { useEffect, useState } from 'preact/hooks';
import {
  api,
  enc,
  type DatabaseDetail,
  type DatabaseService,
  type DatabaseSummary,
  type Maintenance,
  type MigrationStatus,
  type Task,
} from '../api';
import { navigate } from '../router';
import { MEMBER_NOTE, owns, team } from '../state';
import { Badge, Busy, Button, Empty, ErrorBox, Form, Secret, useAction, useLoad } from '../ui';

export function DatabasesPage() {
  const current = team.value;
  const list = useLoad(
    () =>
      current
        ? api
            .get<{ data: DatabaseSummary[] }>(`/api/v1/teams/${current.id}/managed-databases`)
            .then((r) => r.data)
        : Promise.resolve([]),
    [current?.id],
  );
  return (
    <>
      <h1>Managed databases</h1>
      <ErrorBox error={list.error} />
      {!list.data && !list.error && <Busy />}
      {list.data?.length === 0 && (
        <Empty>
          No managed databases in {current?.name}. Add one under <code>managed_databases</code> in a document
          and <a href="/apply">apply it</a>.
        </Empty>
      )}
      {list.data && list.data.length > 0 && (
        <div class="scroll" tabIndex={0}>
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">State</th>
                <th scope="col">Engine</th>
                <th scope="col">Plan</th>
                <th scope="col">Zone</th>
                <th scope="col">Pending</th>
              </tr>
            </thead>
            <tbody>
              {list.data.map((d) => (
                <tr key={d.uuid}>
                  <td>
                    <a href={`/databases/${d.uuid}`}>{d.name}</a>
                  </td>
                  <td>
                    <Badge value={d.state} />
                  </td>
                  <td>{d.type}</td>
                  <td>{d.plan}</td>
                  <td>{d.zone}</td>
                  <td>{d.pending_changes ? 'change waiting' : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

const TRANSIENT = new Set(['pending', 'setup-service', 'rebalancing', 'rebuilding', 'delete-service']);

/** Polls while something runs; stops on its own. */
function usePoll(active: boolean, tick: () => void, ms = 2000) {
  useEffect(() => {
    if (!active) return;
    const timer = setInterval(tick, ms);
    return () => clearInterval(timer);
  }, [active]);
}

function Operations({ db, reload }: { db: DatabaseDetail; reload: () => void }) {
  const base = `/api/v1/managed-databases/${enc(db.uuid)}`;
  const [task, setTask] = useState<Task | null>(null);
  const [targetVersion, setTargetVersion] = useState('16');
  const [source, setSource] = useState('');
  // The API's default for a migration: TLS to the source, required.
  const [tls, setTls] = useState(true);
  const [migration, setMigration] = useState<MigrationStatus | null>(null);
  const [cloneName, setCloneName] = useState(`${db.name}-copy`);
  const [cloneTime, setCloneTime] = useState('');
  const [message, setMessage] = useState<string | null>(null);
  usePoll(task !== null && task.success === null, () => {
    void api.get<Task>(`${base}/tasks/${enc(task!.id)}`).then(setTask, () => undefined);
  });
  usePoll(migration?.status === 'running', () => {
    void api.get<MigrationStatus>(`${base}/migration-status`).then(setMigration, () => undefined);
  });
  const [check, checking, checkError] = useAction(async (operation: 'upgrade_check' | 'migration_check') => {
    setTask(
      await api.post<Task>(
        `${base}/tasks`,
        operation === 'upgrade_check'
          ? { operation, target_version: targetVersion }
          : {
              operation,
              // With TLS (the default) the check also says whether the source offers it at all.
              migration_check: { source_service_uri: source, ...(tls ? {} : { ssl: false }) },
            },
      ),
    );
  });
  const [upgrade, upgrading, upgradeError] = useAction(async () => {
    await api.post(`${base}/upgrade`, { target_version: targetVersion });
    reload();
  });
  const [migrate, migrating, migrateError] = useAction(async () => {
    await api.post(`${base}/migration`, { source_service_uri: source, ssl: tls });
    setMigration(await api.get<MigrationStatus>(`${base}/migration-status`));
  });
  const [maintain, maintaining, maintainError] = useAction(async () => {
    setMessage((await api.post<Maintenance>(`${base}/maintenance`)).message);
  });
  const [clone, cloning, cloneError] = useAction(async () => {
    const made = await api.post<DatabaseService>(`${base}/clone`, {
      name: cloneName,
      ...(cloneTime ? { recovery_time: new Date(cloneTime).toISOString() } : {}),
    });
    navigate(`/databases/${made.uuid}`);
  });
  return (
    <section aria-labelledby="ops-heading">
      <h2 id="ops-heading">Operations</h2>
      <h3>Clone</h3>
      <Form class="row" onSubmit={clone}>
        <label>
          Name of the clone
          <input
            value={cloneName}
            required
            pattern="[a-z0-9][a-z0-9\-]*"
            onInput={(e) => setCloneName(e.currentTarget.value)}
          />
        </label>
        <label>
          Point in time (empty: now{db.type === 'pg' ? '' : '; PostgreSQL only'})
          <input
            type="datetime-local"
            step={1}
            value={cloneTime}
            onInput={(e) => setCloneTime(e.currentTarget.value)}
          />
        </label>
        <button type="submit" disabled={cloning}>
          {cloning ? 'Cloning…' : 'Clone'}
        </button>
      </Form>
      <ErrorBox error={cloneError} />

      {db.type === 'pg' && (
        <>
          <h3>Upgrade</h3>
          <div class="row">
            <label>
              Target version
              <input value={targetVersion} onInput={(e) => setTargetVersion(e.currentTarget.value)} />
            </label>
            <Button kind="secondary" busy={checking} onClick={() => void check('upgrade_check')}>
              Check the upgrade
            </Button>
            <Button
              busy={upgrading}
              disabled={task?.success !== true || !task.operation.endsWith('upgrade_check')}
              onClick={() => void upgrade()}
            >
              Upgrade
            </Button>
          </div>
          <ErrorBox error={upgradeError} />
        </>
      )}

      <h3>Migration from another server</h3>
      <div class="row">
        <label>
          Source URI
          <input
            value={source}
            placeholder="postgres://user:password@host:5432/db"
            onInput={(e) => setSource(e.currentTarget.value)}
          />
        </label>
        <label>
          <input type="checkbox" checked={tls} onChange={(e) => setTls(e.currentTarget.checked)} /> TLS to the
          source
        </label>
        <Button
          kind="secondary"
          busy={checking}
          disabled={!source}
          onClick={() => void check('migration_check')}
        >
          Check
        </Button>
        <Button busy={migrating} disabled={!source} onClick={() => void migrate()}>
          Migrate
        </Button>
      </div>
      <ErrorBox error={checkError ?? migrateError} />
      {task && (
        <p role="status" data-testid="task">
          Check {task.operation}:{' '}
          {task.success === null ? (
            <>
              <span class="spinner" aria-hidden="true" /> running
            </>
          ) : task.success ? (
            'passed'
          ) : (
            'failed'
          )}{' '}
          {task.result && <small>{task.result}</small>}
        </p>
      )}
      {migration && (
        <div role="status" data-testid="migration">
          Migration <Badge value={migration.status} /> {migration.error}
          <ul>
            {migration.databases.map((d) => (
              <li key={d.dbname}>
                {d.dbname}: {d.status} {d.error}
              </li>
            ))}
          </ul>
        </div>
      )}

      <h3>Maintenance</h3>
      <Button kind="secondary" busy={maintaining} onClick={() => void maintain()}>
        Run maintenance now
      </Button>
      {maintaining && <p role="status">Restarting with the pending updates…</p>}
      {message && (
        <p role="status" data-testid="maintenance">
          {message}
        </p>
      )}
      <ErrorBox error={maintainError} />
    </section>
  );
}

export function DatabasePage({ uuid }: { uuid: string }) {
  const db = useLoad(
    () => api.get<{ data: DatabaseDetail }>(`/api/v1/managed-databases/${enc(uuid)}`).then((r) => r.data),
    [uuid],
  );
  usePoll(db.data !== undefined && TRANSIENT.has(db.data.state), db.reload);
  const [carryOut, carrying, carryError] = useAction(async () => {
    await api.post(`/api/v1/managed-databases/${enc(uuid)}/apply-pending-change`);
    db.reload();
  });
  if (db.error) return <ErrorBox error={db.error} />;
  const d = db.data;
  if (!d) return <Busy />;
  const pending = d.pending_changes;
  return (
    <>
      <h1>{d.name}</h1>
      <dl class="facts">
        <dt>State</dt>
        <dd data-testid="db-state">
          <Badge value={d.state} /> {TRANSIENT.has(d.state) && <span class="spinner" aria-label="working" />}
        </dd>
        <dt>Engine</dt>
        <dd>
          {d.type} {d.version ?? ''}
        </dd>
        <dt>Plan</dt>
        <dd data-testid="db-plan">{d.plan}</dd>
        <dt>Zone</dt>
        <dd>{d.zone}</dd>
      </dl>
      {pending && (
        <section aria-labelledby="pending-heading" class="notice">
          <h2 id="pending-heading">A change waits for you</h2>
          <p>
            Apply asked for{' '}
            {pending.plan && (
              <>
                plan <strong>{pending.plan}</strong>
              </>
            )}
            {pending.plan && pending.zone && ' and '}
            {pending.zone && (
              <>
                zone <strong>{pending.zone}</strong>
              </>
            )}
            . Carrying it out restarts the database with the new limits.
          </p>
          {owns() ? (
            <Button busy={carrying} onClick={() => void carryOut()}>
              Carry out the change
            </Button>
          ) : (
            <p class="note">{MEMBER_NOTE}</p>
          )}
          <ErrorBox error={carryError} />
        </section>
      )}
      <section aria-labelledby="conn-heading">
        <h2 id="conn-heading">Connection</h2>
        {!d.connection.uri ? (
          <p>Available once the database is provisioned.</p>
        ) : (
          <>
            <p>
              URI: <Secret value={d.connection.uri} label="connection URI" />
            </p>
            <ul>
              {d.connection.users.map((u) => (
                <li key={u.username}>
                  <code>{u.username}</code> ({u.type}){' '}
                  {u.password ? (
                    <Secret value={u.password} label={`password of ${u.username}`} />
                  ) : (
                    <small>password: owners only</small>
                  )}
                </li>
              ))}
            </ul>
            <p>Databases: {d.connection.databases.map((x) => x.name).join(', ') || '—'}</p>
          </>
        )}
      </section>
      {/* Every operation starts work on the database: the team's owners'. */}
      {owns() ? (
        <Operations db={d} reload={db.reload} />
      ) : (
        <section aria-labelledby="ops-heading">
          <h2 id="ops-heading">Operations</h2>
          <p class="note">{MEMBER_NOTE}</p>
        </section>
      )}
    </>
  );
}
