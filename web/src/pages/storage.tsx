// Object storage: the team's storages, and one (endpoint, buckets, users and their keys revealed on
// demand, the pending zone change and its action).
import { api, enc, type BucketAcl, type StorageDetail, type StorageSummary } from '../api';
import { MEMBER_NOTE, owns, team } from '../state';
import { Badge, Busy, Button, Empty, ErrorBox, Secret, useAction, useLoad } from '../ui';

export function StoragePage() {
  const current = team.value;
  const list = useLoad(
    () =>
      current
        ? api
            .get<{ data: StorageSummary[] }>(`/api/v1/teams/${current.id}/object-storage`)
            .then((r) => r.data)
        : Promise.resolve([]),
    [current?.id],
  );
  return (
    <>
      <h1>Object storage</h1>
      <ErrorBox error={list.error} />
      {!list.data && !list.error && <Busy />}
      {list.data?.length === 0 && (
        <Empty>
          No object storage in {current?.name}. Add one under <code>object_storage</code> in a document and{' '}
          <a href="/apply">apply it</a>.
        </Empty>
      )}
      <ul>
        {list.data?.map((s) => (
          <li key={s.uuid}>
            <a href={`/storage/${enc(s.name)}`}>{s.name}</a> <Badge value={s.state} /> {s.zone},{' '}
            {s.buckets.length} buckets
            {s.pending_changes && ' — a zone change waits'}
          </li>
        ))}
      </ul>
    </>
  );
}

export function StorageDetailPage({ name }: { name: string }) {
  const current = team.value;
  const path = `/api/v1/teams/${current?.id ?? 0}/object-storage/${enc(name)}`;
  const s = useLoad(() => api.get<{ data: StorageDetail }>(path).then((r) => r.data), [path]);
  const [carryOut, busy, error] = useAction(async () => {
    await api.post(`${path}/apply-pending-change`);
    s.reload();
  });
  const [setAccess, settingAccess, accessError] = useAction(async (bucket: string, acl: BucketAcl) => {
    await api.put(`${path}/buckets/${enc(bucket)}/acl`, { acl });
    s.reload();
  });
  if (s.error) return <ErrorBox error={s.error} />;
  const d = s.data;
  if (!d) return <Busy />;
  return (
    <>
      <h1>{d.name}</h1>
      <dl class="facts">
        <dt>State</dt>
        <dd>
          <Badge value={d.state} />
        </dd>
        <dt>Zone</dt>
        <dd>{d.zone}</dd>
        <dt>Endpoint</dt>
        <dd>
          <code>{d.endpoint}</code> (region {d.region}; the access key picks this storage)
        </dd>
        <dt>Storage endpoint</dt>
        <dd>
          <code>{d.endpoints.path}</code>
          {d.endpoints.virtual_host && (
            <>
              {' '}
              or <code>{d.endpoints.virtual_host}</code>
            </>
          )}{' '}
          (names this storage; its bucket names are its own)
        </dd>
      </dl>
      <section aria-labelledby="buckets-heading">
        <h2 id="buckets-heading">Buckets</h2>
        {d.buckets.length === 0 ? (
          <p>—</p>
        ) : (
          <table>
            <thead>
              <tr>
                <th scope="col">Bucket</th>
                <th scope="col">Access</th>
                {owns() && <th scope="col">Change</th>}
              </tr>
            </thead>
            <tbody>
              {d.buckets.map((bucket) => {
                const isPublic = d.public_buckets.includes(bucket);
                return (
                  <tr key={bucket}>
                    <td>
                      <code>{bucket}</code>
                    </td>
                    <td>
                      {isPublic ? (
                        <strong>Public: reachable without a key</strong>
                      ) : (
                        'Private: access keys only'
                      )}
                    </td>
                    {owns() && (
                      <td>
                        <Button
                          busy={settingAccess}
                          onClick={() => void setAccess(bucket, isPublic ? 'private' : 'public-read')}
                        >
                          {isPublic ? `Make ${bucket} private` : `Make ${bucket} public`}
                        </Button>
                      </td>
                    )}
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
        <ErrorBox error={accessError} />
      </section>
      {d.pending_changes && (
        <section class="notice" aria-labelledby="zone-heading">
          <h2 id="zone-heading">A zone change waits for you</h2>
          <p>
            Apply asked for zone <strong>{d.pending_changes.zone}</strong>.
          </p>
          {owns() ? (
            <Button busy={busy} onClick={() => void carryOut()}>
              Move to {d.pending_changes.zone}
            </Button>
          ) : (
            <p class="note">{MEMBER_NOTE}</p>
          )}
          <ErrorBox error={error} />
        </section>
      )}
      <section aria-labelledby="users-heading">
        <h2 id="users-heading">Users and keys</h2>
        <ul>
          {d.users.map((u) => (
            <li key={u.username}>
              <code>{u.username}</code>: access key <code>{u.access_key_id}</code>{' '}
              {u.secret_key ? (
                <Secret value={u.secret_key} label={`secret key of ${u.username}`} />
              ) : (
                <small>secret key: owners only</small>
              )}
            </li>
          ))}
        </ul>
      </section>
    </>
  );
}
