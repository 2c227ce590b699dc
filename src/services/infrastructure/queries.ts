// Reading what apply stored: applications, deployments, team resources, and the YAML exports.
// Every read checks membership of the owning team (404 when missing, 403 when not a member).
import type { Kysely } from 'kysely';
import type { SecretBox } from '../../crypto/secret-box.js';
import { createDeploymentRepository } from '../../db/repositories/deployments.js';
import {
  applicationState,
  createInfrastructureRepository,
  managedDatabaseState,
  objectStorageState,
  type ApplicationRow,
  type ManagedDatabaseRow,
  type ObjectStorageRow,
} from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import { AppError } from '../../domain/errors.js';
import { effectiveHealthCheckPath, healthCheckStatus } from '../../domain/health-checks.js';
import {
  applicationDocument,
  storageEndpointNotes,
  teamDocument,
  toYaml,
} from '../../domain/infrastructure/export.js';
import type { IdentityService } from '../identity.js';
import { deploymentView } from '../applications/views.js';

export interface QueryDeps {
  db: Kysely<Database>;
  identity: Pick<IdentityService, 'requireTeam' | 'teamsOfUser'>;
  /** Opens secrets for export, which shows a secret made of service references as written. */
  secretBox: SecretBox;
  /** A storage's own endpoint (the object-storage driver's), shown in its view and its export. */
  storageEndpoints: (uuid: string) => { path: string; virtual_host: string | null };
}

function healthCheck(row: ApplicationRow) {
  const enabled = row.health_check_enabled !== 0;
  return {
    enabled,
    path: effectiveHealthCheckPath(row.type, row.health_check_path),
    status: healthCheckStatus(enabled),
  };
}

export function applicationSummary(row: ApplicationRow) {
  const app = applicationState(row);
  return {
    id: row.id,
    team_id: row.team_id,
    name: app.name,
    type: app.type,
    version: app.version,
    label: app.label,
    tags: app.tags,
    health_check: healthCheck(row),
    scheduled_deletion_at: app.scheduled_deletion_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function managedDatabaseView(row: ManagedDatabaseRow) {
  const db = managedDatabaseState(row);
  return {
    id: row.id,
    uuid: row.uuid,
    team_id: row.team_id,
    name: db.name,
    type: db.type,
    plan: db.plan,
    zone: db.zone,
    state: row.state,
    state_reason: row.state_reason,
    users: db.users,
    logical_databases: db.logical_databases,
    // A plan or zone change from apply waiting for action in the panel.
    pending_changes:
      db.pending_plan === null && db.pending_zone === null
        ? null
        : { plan: db.pending_plan, zone: db.pending_zone },
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function objectStorageView(
  row: ObjectStorageRow,
  endpoints: { path: string; virtual_host: string | null },
) {
  const storage = objectStorageState(row);
  return {
    id: row.id,
    uuid: row.uuid,
    team_id: row.team_id,
    name: storage.name,
    zone: storage.zone,
    plan: storage.plan,
    state: row.state,
    state_reason: row.state_reason,
    endpoints,
    buckets: storage.buckets,
    bucket_acls: storage.bucket_acls,
    users: storage.users,
    pending_changes: storage.pending_zone === null ? null : { zone: storage.pending_zone },
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function createInfrastructureQueries(deps: QueryDeps) {
  const repo = createInfrastructureRepository(deps.db);
  const deployments = createDeploymentRepository(deps.db);

  async function requireApplication(userId: number, id: number) {
    const row = await repo.findApplication(id);
    if (!row) throw new AppError('not_found', `Application ${id} not found`);
    const team = await deps.identity.requireTeam(userId, row.team_id);
    return { row, team };
  }

  return {
    requireApplication,

    async listApplications(userId: number, teamRef: string | undefined) {
      const teamIds =
        teamRef === undefined
          ? (await deps.identity.teamsOfUser(userId)).map((t) => t.id)
          : [(await deps.identity.requireTeam(userId, teamRef)).id];
      return (await repo.listApplications(teamIds)).map(applicationSummary);
    },

    async getApplication(userId: number, id: number) {
      const { row } = await requireApplication(userId, id);
      const app = applicationState(row);
      const [children, latest] = await Promise.all([
        repo.applicationChildren(id),
        repo.listDeployments(id, 1),
      ]);
      const secretsByKey = children.secrets.map((s) => ({ key: s.key }));
      return {
        ...applicationSummary(row),
        repository: app.repository,
        runtime: app.runtime,
        commands: app.commands,
        settings: {
          health_check_path: effectiveHealthCheckPath(app.type, app.health_check_path),
          health_check_enabled: app.health_check_enabled,
          scheduler_enabled: app.scheduler_enabled,
          replicas: app.replicas,
          memory: app.memory,
          scheduled_deletion_at: app.scheduled_deletion_at,
        },
        php: app.php,
        domains: children.domains.map((domain) => ({ domain })),
        // Keys only: values are write-only.
        secrets: secretsByKey,
        volumes: children.volumes.map((v) => ({
          name: v.name,
          mount_path: v.mount_path,
          volume_size: v.volume_size,
        })),
        services: children.services.map((s) => ({
          name: s.name,
          type: s.type,
          version: s.version,
          memory: s.memory,
          volume_size: s.volume_size,
          settings: s.settings,
          has_password: s.secret_settings_hash !== null,
          command: s.command,
        })),
        container_services: children.containerServices.map((s) => ({
          name: s.name,
          type: s.type,
          version: s.version,
          memory: s.memory,
          volume_size: s.volume_size,
          settings: s.settings,
        })),
        latest_deployment: latest[0] ? deploymentView(latest[0]) : null,
      };
    },

    async exportApplication(userId: number, id: number): Promise<string> {
      const { row, team } = await requireApplication(userId, id);
      const children = await repo.applicationChildren(id);
      return toYaml(
        applicationDocument({
          team: { id: team.id, name: team.name },
          application: applicationState(row),
          domains: children.domains,
          secrets: (await deployments.sealedSecrets(id)).map((s) => ({
            key: s.key,
            value: deps.secretBox.decrypt(s.value_encrypted),
          })),
          volumes: children.volumes,
          services: children.services.map((s) => ({ ...s, hasPassword: s.secret_settings_hash !== null })),
          containerServices: children.containerServices,
        }),
      );
    },

    async exportTeam(userId: number, teamRef: string): Promise<string> {
      const team = await deps.identity.requireTeam(userId, teamRef);
      const [databases, storages] = await Promise.all([
        repo.managedDatabases(team.id),
        repo.objectStorages(team.id),
      ]);
      return toYaml(
        teamDocument({
          team: { id: team.id, name: team.name },
          managedDatabases: databases.map(managedDatabaseState),
          objectStorages: storages.map(objectStorageState),
        }),
        storageEndpointNotes(storages.map((row) => deps.storageEndpoints(row.uuid).path)),
      );
    },

    async listManagedDatabases(userId: number, teamRef: string) {
      const team = await deps.identity.requireTeam(userId, teamRef);
      return (await repo.managedDatabases(team.id)).map(managedDatabaseView);
    },

    async listObjectStorages(userId: number, teamRef: string) {
      const team = await deps.identity.requireTeam(userId, teamRef);
      return (await repo.objectStorages(team.id)).map((row) =>
        objectStorageView(row, deps.storageEndpoints(row.uuid)),
      );
    },
  };
}

export type InfrastructureQueries = ReturnType<typeof createInfrastructureQueries>;
