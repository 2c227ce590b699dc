// Planning the team's resources beside the application: managed databases and object storages.
import { line, lower, mergeByKey, mergeStorageUsers, report, same } from './compare.js';
import type { Action, ManagedDatabaseState, ObjectStorageState, Plan } from './types.js';

/** Managed databases: users and logical databases merged in; plan and zone changes need action. */
export function planManagedDatabases(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  for (const database of doc.managedDatabases) {
    const stored = state.managedDatabases.get(database.name);
    const subject = `Managed database '${database.name}'`;
    const at = `spec.managed_databases.${database.name}`;
    if (!stored) {
      ops.push({
        kind: 'managed_database.create',
        values: {
          name: database.name,
          type: database.type,
          plan: database.plan,
          zone: database.zone,
          users: database.users ?? [],
          logical_databases: database.logical_databases ?? [],
          pending_plan: null,
          pending_zone: null,
        },
      });
      structured.managed_databases.push({ action: 'created', name: database.name, type: database.type });
      report(p, 'managed_database', database.name, database.type, 'created');
      lines.push(
        line(
          subject,
          'created (provisioning started)',
          `create ${lower(subject)} (provisioning would start)`,
        ),
      );
      continue;
    }
    if (stored.type !== database.type) {
      fail(
        `${at}.type`,
        `${subject}: field 'type' cannot change; it is ${stored.type}, the document says ${database.type}.`,
      );
      continue;
    }
    const values: Partial<ManagedDatabaseState> = {};
    const users = mergeByKey(stored.users, database.users, 'username');
    const logical = mergeByKey(stored.logical_databases, database.logical_databases, 'name');
    if (!same(users, stored.users)) values.users = users;
    if (!same(logical, stored.logical_databases)) values.logical_databases = logical;
    const reconcile = Object.keys(values).length > 0;
    const needsAction: string[] = [];
    const pending: Array<{ field: string; from: string; to: string }> = [];
    if (database.plan !== stored.plan) {
      needsAction.push(`plan change from '${stored.plan}' to '${database.plan}'`);
      pending.push({ field: 'plan', from: stored.plan, to: database.plan });
      if (stored.pending_plan !== database.plan) values.pending_plan = database.plan;
    }
    if (database.zone !== stored.zone) {
      needsAction.push(`zone change from '${stored.zone}' to '${database.zone}'`);
      pending.push({ field: 'zone', from: stored.zone, to: database.zone });
      if (stored.pending_zone !== database.zone) values.pending_zone = database.zone;
    }
    if (Object.keys(values).length > 0) {
      ops.push({ kind: 'managed_database.update', id: stored.id, uuid: stored.uuid, values, reconcile });
    }
    const fields = reconcile ? ['users', 'logical_databases'].filter((k) => k in values) : [];
    if (reconcile) {
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
    }
    for (const what of needsAction) {
      lines.push(
        line(
          subject,
          `${what} needs action in the panel (not applied)`,
          `record the ${what} of ${lower(subject)}; it needs action in the panel and would not be applied`,
        ),
      );
    }
    const action: Action = needsAction.length > 0 ? 'needs_action' : reconcile ? 'updated' : 'unchanged';
    structured.managed_databases.push({ action, name: database.name, type: database.type });
    report(p, 'managed_database', database.name, database.type, action, fields, pending);
  }
}

/** Object storages: buckets and users merged in; a zone change needs action. */
export function planObjectStorages(p: Plan): void {
  const { doc, state, ops, lines, structured } = p;
  for (const storage of doc.objectStorages) {
    const stored = state.objectStorages.get(storage.name);
    const subject = `Object storage '${storage.name}'`;
    if (!stored) {
      ops.push({
        kind: 'object_storage.create',
        values: {
          name: storage.name,
          zone: storage.zone,
          plan: storage.plan ?? null,
          buckets: storage.buckets ?? [],
          bucket_acls: storage.bucket_acls ?? {},
          users: (storage.users ?? []).map((u) => ({ username: u.username, policies: u.policies ?? [] })),
          pending_zone: null,
        },
      });
      structured.object_storage.push({ action: 'created', name: storage.name });
      report(p, 'object_storage', storage.name, null, 'created');
      lines.push(
        line(
          subject,
          'created (provisioning started)',
          `create ${lower(subject)} (provisioning would start)`,
        ),
      );
      continue;
    }
    const values: Partial<ObjectStorageState> = {};
    // Buckets are never deleted by apply; but in a storage whose provisioning failed (`error`), a name
    // that was never created (another storage took it meanwhile, say) goes once the document stops
    // naming it, so the storage recovers when its document is fixed. A storage not provisioned yet
    // keeps merging its list.
    const kept =
      storage.buckets && stored.state === 'error'
        ? stored.buckets.filter((b) => stored.created_buckets.includes(b) || storage.buckets!.includes(b))
        : stored.buckets;
    const buckets = storage.buckets
      ? [...kept, ...storage.buckets.filter((b) => !stored.buckets.includes(b))]
      : stored.buckets;
    const users = mergeStorageUsers(stored.users, storage.users);
    // The listed buckets' ACLs are as written now (a name alone: the document no longer sets its ACL);
    // a bucket the document stopped listing keeps what it had.
    const bucketAcls = storage.buckets
      ? {
          ...Object.fromEntries(
            Object.entries(stored.bucket_acls).filter(([b]) => !storage.buckets!.includes(b)),
          ),
          ...storage.bucket_acls,
        }
      : stored.bucket_acls;
    if (!same(buckets, stored.buckets)) values.buckets = buckets;
    if (!same(bucketAcls, stored.bucket_acls)) values.bucket_acls = bucketAcls;
    if (!same(users, stored.users)) values.users = users;
    const reconcile = Object.keys(values).length > 0;
    const needsAction = storage.zone !== stored.zone;
    if (needsAction && stored.pending_zone !== storage.zone) values.pending_zone = storage.zone;
    if (Object.keys(values).length > 0) {
      ops.push({ kind: 'object_storage.update', id: stored.id, uuid: stored.uuid, values, reconcile });
    }
    const fields = reconcile ? ['buckets', 'bucket_acls', 'users'].filter((k) => k in values) : [];
    if (reconcile) {
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
    }
    if (needsAction) {
      const what = `zone change from '${stored.zone}' to '${storage.zone}'`;
      lines.push(
        line(
          subject,
          `${what} needs action in the panel (not applied)`,
          `record the ${what} of ${lower(subject)}; it needs action in the panel and would not be applied`,
        ),
      );
    }
    const action: Action = needsAction ? 'needs_action' : reconcile ? 'updated' : 'unchanged';
    structured.object_storage.push({ action, name: storage.name });
    report(
      p,
      'object_storage',
      storage.name,
      null,
      action,
      fields,
      needsAction ? [{ field: 'zone', from: stored.zone, to: storage.zone }] : [],
    );
  }
}
