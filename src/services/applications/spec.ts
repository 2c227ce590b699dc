// What a runtime driver is handed for one application: its stored document, its secrets opened, its
// domains and default host, and the operator's health-check timings. Built fresh for every call, so a
// driver always sees the state the store holds now.
import type { Kysely } from 'kysely';
import type { RuntimeSettings } from '../../config/index.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import { createDeploymentRepository } from '../../db/repositories/deployments.js';
import {
  applicationState,
  createInfrastructureRepository,
  type ApplicationRow,
} from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import { connectionEnvironment, type ServiceConnection } from '../../domain/app-services.js';
import { DEFAULT_MEMORY_MI, defaultHostname, memoryBytes } from '../../domain/deployments.js';
import { effectiveHealthCheckPath } from '../../domain/health-checks.js';
import { hasReferences, resolveReferences } from '../../domain/service-references.js';
import type { AppSpec, SourceSpec } from '../../drivers/runtime/driver.js';

export interface SpecDeps {
  db: Kysely<Database>;
  secretBox: SecretBox;
  runtime: Readonly<RuntimeSettings>;
  /** The connections of the application's running services (docs/services.md); none without it. */
  serviceConnections?: (appId: number) => Promise<ServiceConnection[]>;
}

export function createSpecBuilder(deps: SpecDeps) {
  const infrastructure = createInfrastructureRepository(deps.db);
  const deployments = createDeploymentRepository(deps.db);

  /** Where a git application's source is: its URL, or owner/name against the operator's git base. */
  function repositoryUrl(row: ApplicationRow): { url: string; branch?: string } | undefined {
    const repository = applicationState(row).repository;
    const url =
      repository.url ??
      (repository.owner && repository.name
        ? `${deps.runtime.gitBaseUrl}/${repository.owner}/${repository.name}.git`
        : undefined);
    if (url === undefined) return undefined;
    return { url, ...(repository.branch ? { branch: repository.branch } : {}) };
  }

  return {
    defaultHostname: (row: Pick<ApplicationRow, 'name' | 'id'>) =>
      defaultHostname(row.name, row.id, deps.runtime.appsDomain),

    /** The names the edge routes to the application: its domains, then its default host. */
    async hostnames(row: ApplicationRow): Promise<string[]> {
      const children = await infrastructure.applicationChildren(row.id);
      return [...children.domains, this.defaultHostname(row)];
    },

    async build(row: ApplicationRow): Promise<AppSpec> {
      const app = applicationState(row);
      const [children, secrets, connections] = await Promise.all([
        infrastructure.applicationChildren(row.id),
        deployments.sealedSecrets(row.id),
        deps.serviceConnections?.(row.id) ?? [],
      ]);
      // The services' connection names first: a secret of the same key wins.
      const env: Record<string, string> = connectionEnvironment(row.type, connections);
      for (const secret of secrets) {
        const value = deps.secretBox.decrypt(secret.value_encrypted);
        // A service reference is put in now, from the running service; it is never stored resolved.
        // One whose service has no place to connect to yet is left out, as the service's own names.
        const resolved = hasReferences(value) ? resolveReferences(value, connections) : value;
        if (resolved === undefined) delete env[secret.key];
        else env[secret.key] = resolved;
      }
      return {
        id: row.id,
        teamId: row.team_id,
        name: row.name,
        type: row.type,
        runtime: {
          ...(app.runtime.nodejs_version ? { nodejsVersion: app.runtime.nodejs_version } : {}),
          ...(app.runtime.php_version ? { phpVersion: app.runtime.php_version } : {}),
        },
        commands: {
          build: app.commands.build ?? [],
          init: app.commands.init ?? [],
          ...(app.commands.start ? { start: app.commands.start } : {}),
        },
        php: { extensions: app.php.extensions ?? [], settings: app.php.settings ?? [] },
        replicas: app.replicas ?? 1,
        memoryBytes: memoryBytes(app.memory, DEFAULT_MEMORY_MI),
        health: {
          enabled: app.health_check_enabled,
          path: effectiveHealthCheckPath(row.type, row.health_check_path),
          intervalMs: deps.runtime.healthIntervalSeconds * 1000,
          timeoutMs: deps.runtime.healthTimeoutSeconds * 1000,
          failureThreshold: deps.runtime.healthFailureThreshold,
        },
        schedulerEnabled: app.scheduler_enabled === true,
        workers: children.services.flatMap((s) =>
          s.type === 'worker' && s.command ? [{ name: s.name, command: s.command }] : [],
        ),
        volumes: children.volumes.map((v) => ({
          name: v.name,
          mountPath: v.mount_path,
          volumeSize: v.volume_size,
        })),
        env,
        hostnames: [...children.domains, this.defaultHostname(row)],
      };
    },

    /**
     * The source of a new build: the repository when the document names one (at `branch` when asked),
     * else the last uploaded archive, else WordPress's bundled copy; undefined when there is none.
     */
    source(row: ApplicationRow, uploadedKey: string | undefined, branch?: string): SourceSpec | undefined {
      const repository = repositoryUrl(row);
      if (repository) return { kind: 'git', ...repository, ...(branch ? { branch } : {}) };
      if (uploadedKey) return { kind: 'archive', key: uploadedKey };
      if (row.type === 'wordpress') return { kind: 'bundled' };
      return undefined;
    },
  };
}

export type SpecBuilder = ReturnType<typeof createSpecBuilder>;
