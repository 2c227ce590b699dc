// The apply use case: parse → validate the whole document → resolve the team → load the current
// state → plan → perform every write and enqueue every job in one transaction (nothing for a dry run).
import type { RuntimeCapabilities } from '../../drivers/runtime/driver.js';
import type { DatabaseCapabilities, ManagedDatabaseDriver } from '../../drivers/databases/types.js';
import {
  engineOfService,
  RESERVED_SERVICE_DATABASES,
  SERVICE_DATABASE_NAME,
} from '../../domain/app-services.js';
import type { Kysely, Transaction } from 'kysely';
import type { Dialect } from '../../db/dialect.js';
import {
  applicationState,
  createInfrastructureRepository,
  managedDatabaseState,
  objectStorageState,
  type ApplicationChildren,
  type InfrastructureRepository,
} from '../../db/repositories/infrastructure.js';
import type { Database } from '../../db/schema/index.js';
import { iso, type Clock, type IdGenerator } from '../../domain/clock.js';
import type { TeamQuotas } from '../../config/index.js';
import { AppError, validationError } from '../../domain/errors.js';
import { requireRole } from '../../domain/roles.js';
import { controlCharacterErrors } from '../../domain/control-characters.js';
import { DEFAULT_MEMORY_MI } from '../../domain/deployments.js';
import { applicationMemoryMiB, memoryMiB, memoryText, type ApplicationMemory } from '../../domain/memory.js';
import type { DesiredDocument } from '../../domain/infrastructure/document.js';
import { parseInfrastructureYaml } from '../../domain/infrastructure/parse.js';
import {
  planApply,
  type ApplyPlan,
  type CurrentState,
  type ResourceChange,
  type StructuredChanges,
} from '../../domain/infrastructure/plan.js';
import {
  VALIDATION_MESSAGE,
  validateDocument,
  type ValidationHooks,
} from '../../domain/infrastructure/validate.js';
import { enqueue } from '../jobs.js';
import type { DeploymentService } from '../applications/deployments.js';
import type { IdentityService } from '../identity.js';
import type { SecretBox } from '../../crypto/secret-box.js';
import { auditChange, auditUnchanged } from '../audit.js';

export interface InfrastructureDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  ids: IdGenerator;
  secretBox: SecretBox;
  identity: Pick<IdentityService, 'requireTeam' | 'requireTeamAt' | 'teamsOfUser'>;
  quotas: Readonly<TeamQuotas>;
  /** Records the deployment an apply triggers, in apply's transaction, and starts it after the commit. */
  deployments: Pick<DeploymentService, 'request' | 'started'>;
  /** What the application runtime can provide (runtime versions, PHP extensions); undefined: not checked. */
  runtimeCapabilities?: () => RuntimeCapabilities;
  /** Whether a runner of this Berth runs the service type (a change line notes the others unavailable). */
  runsServiceType?: (type: string) => boolean;
  /** Drivers' checks run with the document's (what provisioning would refuse is refused at apply). */
  validationHooks: ValidationHooks;
  /** What the managed-database driver can make, for the services it runs (versions, extensions). */
  serviceCapabilities?: () => DatabaseCapabilities | undefined;
  /** The managed-database driver's check of logical databases' character sets and collations. */
  charsetProblems?: ManagedDatabaseDriver['charsetProblems'];
}

export interface ApplyOptions {
  dryRun: boolean;
  autoDeploy: boolean;
}

/** The spec's "Apply response body", with volumes and container services added to structured_changes. */
export interface ApplyResponse {
  success: true;
  application_id: number | null;
  application_name: string;
  team: string;
  dry_run: boolean;
  changes: string[];
  structured_changes: StructuredChanges;
  /** Berth's addition: every entry with its kind, action and the paths of the fields that change. */
  resource_changes: ResourceChange[];
  errors: string[];
  needs_deployment: boolean;
  auto_deploy_enabled: boolean;
  deployment_id: number | null;
}

/** Unique-constraint violations: a concurrent apply (of another team, for domains) won the race. */
function isUniqueViolation(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE';
}

const ATTEMPTS = 3;

function readBody(body: unknown): Record<string, unknown> {
  if (typeof body === 'string') {
    // YAML escapes ("\0") reach what JSON bodies are checked for by the input guard.
    const parsed = parseInfrastructureYaml(body);
    const errors = controlCharacterErrors(parsed, '');
    if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
    return parsed;
  }
  if (body !== null && typeof body === 'object' && !Array.isArray(body))
    return body as Record<string, unknown>;
  if (body === undefined || body === null) {
    throw new AppError(
      'bad_request',
      'The request body is empty; send one YAML document (kind: Infrastructure).',
    );
  }
  throw new AppError(
    'bad_request',
    'The document must be a mapping with apiVersion, kind, metadata and spec.',
  );
}

/** Documents re-applied unchanged (GitOps loops, CI) skip parsing: validation is a pure function of the text. */
const DOCUMENT_CACHE_SIZE = 32;
const CACHEABLE_BYTES = 64 * 1024;

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

export function createDocumentReader(hooks: ValidationHooks): (body: unknown) => DesiredDocument {
  const cache = new Map<string, DesiredDocument>();
  return (body) => {
    if (typeof body !== 'string' || body.length > CACHEABLE_BYTES) {
      return validateDocument(readBody(body), hooks);
    }
    const hit = cache.get(body);
    if (hit) {
      // Re-insert: the Map's order is then least recently used first.
      cache.delete(body);
      cache.set(body, hit);
      return hit;
    }
    // Frozen: the cached document is shared by every later apply of the same text.
    const doc = deepFreeze(validateDocument(readBody(body), hooks));
    cache.set(body, doc);
    if (cache.size > DOCUMENT_CACHE_SIZE) cache.delete(cache.keys().next().value ?? '');
    return doc;
  };
}

/** Everything the plan compares against: 3-4 reads whatever the document's size. */
export async function loadState(
  repo: InfrastructureRepository,
  dialect: Dialect,
  teamId: number,
  doc: DesiredDocument,
): Promise<CurrentState> {
  const empty: ApplicationChildren = {
    domains: [],
    secrets: [],
    volumes: [],
    services: [],
    containerServices: [],
  };
  const [found, databases, storages] = await Promise.all([
    repo.findApplicationWithChildren(dialect, teamId, doc.name),
    repo.managedDatabases(
      teamId,
      doc.managedDatabases.map((d) => d.name),
      dialect,
    ),
    repo.objectStorages(
      teamId,
      doc.objectStorages.map((s) => s.name),
      dialect,
    ),
  ]);
  const app = found ? applicationState(found.row) : undefined;
  const children = found && doc.touchesApplication ? found.children : empty;
  // Domains the application already holds need no look-up (the usual case when a document is re-applied).
  const own = new Set(children.domains);
  const newDomains = doc.touchesApplication ? doc.domains.filter((d) => !own.has(d)) : [];
  const [held, created] = await Promise.all([
    repo.domainsHeldElsewhere(newDomains, app?.id),
    // Only a storage whose provisioning failed may lose a bucket name (planning/team-resources.ts).
    repo.createdBuckets(storages.filter((row) => row.state === 'error').map((row) => row.id)),
  ]);
  return {
    ...(app ? { application: app } : {}),
    domains: own,
    domainsHeldElsewhere: held,
    secrets: new Map(children.secrets.map((s) => [s.key, s])),
    volumes: new Map(children.volumes.map((v) => [v.name, v])),
    services: new Map(children.services.map((s) => [s.name, s])),
    containerServices: new Map(children.containerServices.map((s) => [s.name, s])),
    managedDatabases: new Map(databases.map((row) => [row.name, managedDatabaseState(row)])),
    objectStorages: new Map(
      storages.map((row) => [
        row.name,
        { ...objectStorageState(row), state: row.state, created_buckets: created.get(row.id) ?? [] },
      ]),
    ),
  };
}

/** A plan made in a snapshot at the team's `revision`. */
interface PlannedSnapshot {
  teamId: number;
  revision: number;
  appId: number | undefined;
  result: ApplyPlan;
}

/**
 * Whether the plan is a function of the team's rows alone, so that it holds while the team's revision
 * does: not when it looked up domains other teams hold, nor when it compared a deletion time with now.
 */
function dependsOnTeamOnly(doc: DesiredDocument, state: CurrentState): boolean {
  if (!doc.touchesApplication) return true;
  return (
    doc.application?.settings.scheduled_deletion_at === undefined &&
    doc.domains.every((d) => state.domains.has(d))
  );
}

/**
 * The team's quotas (config: BERTH_QUOTA_*), checked against what the team holds plus what the
 * document would add; 422 at the list that goes over, naming the quota and how to raise it.
 */
async function checkQuotas(
  repo: InfrastructureRepository,
  teamId: number,
  doc: DesiredDocument,
  state: CurrentState,
  quotas: Readonly<TeamQuotas>,
): Promise<void> {
  const errors: Record<string, string[]> = {};
  const countOf = (kind: Parameters<InfrastructureRepository['teamCount']>[1]) => () =>
    repo.teamCount(teamId, kind);
  const over = async (
    path: string,
    adding: number,
    existing: () => Promise<number>,
    quota: number,
    what: string,
    variable: string,
  ) => {
    if (adding === 0) return;
    const total = (await existing()) + adding;
    if (total <= quota) return;
    errors[path] = [
      `The team may have at most ${quota} ${what}; this document would make ${total}. Delete some first, or ask the operator to raise ${variable}.`,
    ];
  };
  await over(
    'spec.managed_databases',
    doc.managedDatabases.filter((d) => !state.managedDatabases.has(d.name)).length,
    countOf('managed_databases'),
    quotas.managedDatabases,
    'managed databases',
    'BERTH_QUOTA_MANAGED_DATABASES',
  );
  await over(
    'spec.object_storage',
    doc.objectStorages.filter((o) => !state.objectStorages.has(o.name)).length,
    countOf('object_storages'),
    quotas.objectStorages,
    'object storages',
    'BERTH_QUOTA_OBJECT_STORAGES',
  );
  await over(
    'spec.application',
    doc.application && !state.application ? 1 : 0,
    countOf('applications'),
    quotas.applications,
    'applications',
    'BERTH_QUOTA_APPLICATIONS',
  );
  await over(
    'spec.domains',
    doc.touchesApplication ? doc.domains.filter((d) => !state.domains.has(d)).length : 0,
    countOf('domains'),
    quotas.domains,
    'domains over all its applications',
    'BERTH_QUOTA_DOMAINS',
  );
  await overMemory(repo, teamId, doc, state, quotas.memoryMiB, errors);
  if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
}

/** The application's memory as the store has it (children are loaded when the document touches it). */
function storedMemory(state: CurrentState): ApplicationMemory | undefined {
  if (!state.application) return undefined;
  return {
    memory: state.application.memory,
    replicas: state.application.replicas,
    services: [...state.services.values()],
    containerServices: [...state.containerServices.values()],
  };
}

/** The application's memory once the document is applied: what it gives replaces, what it omits stays. */
function memoryAfter(doc: DesiredDocument, state: CurrentState): ApplicationMemory {
  const stored = storedMemory(state);
  const services = new Map<string, { type: string; memory: string | null }>(state.services);
  for (const s of doc.services)
    services.set(s.name, { type: s.type, memory: s.memory ?? services.get(s.name)?.memory ?? null });
  const containers = new Map<string, { memory: string | null }>(state.containerServices);
  for (const s of doc.containerServices)
    containers.set(s.name, { memory: s.memory ?? containers.get(s.name)?.memory ?? null });
  return {
    memory: doc.application?.settings.memory ?? stored?.memory ?? null,
    replicas: doc.application?.settings.replicas ?? stored?.replicas ?? null,
    services: [...services.values()],
    containerServices: [...containers.values()],
  };
}

/**
 * BERTH_QUOTA_TEAM_MEMORY: only a document that makes its application ask more is checked (a team
 * over a lowered quota can still apply what does not grow), against the team's other applications.
 * The 422 is at the fields of the document that grow.
 */
async function overMemory(
  repo: InfrastructureRepository,
  teamId: number,
  doc: DesiredDocument,
  state: CurrentState,
  quota: number,
  errors: Record<string, string[]>,
): Promise<void> {
  if (!doc.touchesApplication) return;
  const stored = storedMemory(state);
  const after = memoryAfter(doc, state);
  const before = stored ? applicationMemoryMiB(stored) : 0;
  const mine = applicationMemoryMiB(after);
  if (mine <= before) return;
  const others = (await repo.teamMemory(teamId))
    .filter((app) => app.id !== state.application?.id)
    .reduce((sum, app) => sum + applicationMemoryMiB(app), 0);
  const total = others + mine;
  if (total <= quota) return;
  const message = `Application '${doc.name}' would ask ${memoryText(mine)} of memory (memory × (replicas + workers), plus each service's memory), bringing the team's applications to ${memoryText(total)}; the team may ask at most ${memoryText(quota)} in all. Ask for less, or ask the operator to raise BERTH_QUOTA_TEAM_MEMORY.`;
  // Named: the fields of the document that make it grow (for a new application, all it gives).
  const paths: string[] = [];
  const settings = doc.application?.settings;
  const each = (app: ApplicationMemory | undefined) => (app ? memoryMiB(app.memory, DEFAULT_MEMORY_MI) : 0);
  if (settings?.memory !== undefined && each(after) > each(stored))
    paths.push('spec.application.settings.memory');
  if (settings?.replicas !== undefined && (after.replicas ?? 1) > (stored ? (stored.replicas ?? 1) : 0))
    paths.push('spec.application.settings.replicas');
  // One list at a time, each at the new memory (workers run at it).
  const only = (app: ApplicationMemory | undefined, list: 'services' | 'containerServices') =>
    app
      ? applicationMemoryMiB({
          memory: after.memory,
          replicas: 0,
          services: list === 'services' ? app.services : [],
          containerServices: list === 'containerServices' ? app.containerServices : [],
        })
      : 0;
  if (doc.services.length > 0 && only(after, 'services') > only(stored, 'services'))
    paths.push('spec.services');
  if (
    doc.containerServices.length > 0 &&
    only(after, 'containerServices') > only(stored, 'containerServices')
  )
    paths.push('spec.container_services');
  for (const path of paths.length > 0 ? paths : ['spec.application']) errors[path] = [message];
}

/**
 * BERTH_MAX_APP_MEMORY: no replica, worker or service may ask more than the ceiling; 422 at each
 * field over it, dry run included, before anything is read.
 */
function checkMemoryCeiling(doc: DesiredDocument, max: number): void {
  const errors: Record<string, string[]> = {};
  const check = (path: string, label: string, value: string | undefined) => {
    if (value === undefined || memoryMiB(value, 0) <= max) return;
    errors[path] = [
      `${label}: field 'memory' is ${value}; at most ${memoryText(max)} is accepted for one process here. Ask for less, or ask the operator to raise BERTH_MAX_APP_MEMORY.`,
    ];
  };
  check(
    'spec.application.settings.memory',
    `Application '${doc.name}' settings`,
    doc.application?.settings.memory,
  );
  for (const s of doc.services) check(`spec.services.${s.name}.memory`, `Service '${s.name}'`, s.memory);
  for (const s of doc.containerServices)
    check(`spec.container_services.${s.name}.memory`, `Container service '${s.name}'`, s.memory);
  if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
}

/**
 * Character sets and collations of logical databases, against what the engine on this host offers
 * (the driver's charsetProblems): 422 at the field now, instead of a database in `error` later.
 */
function checkCharsets(doc: DesiredDocument, problemsOf: InfrastructureDeps['charsetProblems']): void {
  if (!problemsOf) return;
  const errors: Record<string, string[]> = {};
  for (const database of doc.managedDatabases) {
    if (database.type !== 'pg' && database.type !== 'mysql') continue;
    (database.logical_databases ?? []).forEach((logical, index) => {
      for (const problem of problemsOf(database.type as 'pg' | 'mysql', logical)) {
        errors[`spec.managed_databases.${database.name}.logical_databases.${index}.${problem.field}`] = [
          `Managed database '${database.name}' logical database '${logical.name}': ${problem.message}`,
        ];
      }
    });
  }
  if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
}

/**
 * Runtime versions and PHP extensions the runtime cannot provide: 422 at the field, dry run included
 * (spec rule: nothing that cannot be provisioned is accepted), naming what is available.
 */
function checkRuntime(doc: DesiredDocument, capabilities: RuntimeCapabilities): void {
  const app = doc.application;
  if (!app) return;
  const errors: Record<string, string[]> = {};
  const label = `Application '${app.name}'`;
  const node = app.runtime?.nodejs_version;
  if (node !== undefined && node !== 'none' && !capabilities.nodejsVersions.includes(node)) {
    errors['spec.application.runtime.nodejs_version'] = [
      `${label}: Node.js ${node} is not available here; available: ${capabilities.nodejsVersions.join(', ')}.`,
    ];
  }
  const php = app.runtime?.php_version;
  if (php !== undefined && !capabilities.phpVersions.includes(php)) {
    errors['spec.application.runtime.php_version'] = [
      `${label}: PHP ${php} is not available here; available: ${capabilities.phpVersions.join(', ')}.`,
    ];
  }
  const missing = (app.php?.extensions ?? []).filter(
    (extension) => !capabilities.phpExtensions.includes(extension.toLowerCase()),
  );
  if (missing.length > 0) {
    errors['spec.application.php.extensions'] = [
      `${label}: PHP extension${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not available here; available: ${capabilities.phpExtensions.join(', ')}.`,
    ];
  }
  const settings = app.php?.settings ?? [];
  const refused = settings.length > 0 ? capabilities.checkPhpSettings(settings) : undefined;
  if (refused) errors['spec.application.php.settings'] = [`${label}: ${refused}.`];
  if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
}

/**
 * Services that run on the managed-database engines (docs/services.md): a version, extension or
 * database name the driver cannot provide is a 422 at the field, dry run included, naming what is
 * available.
 */
function checkServices(doc: DesiredDocument, capabilities: DatabaseCapabilities | undefined): void {
  const errors: Record<string, string[]> = {};
  for (const service of doc.services) {
    const engine = engineOfService(service.type);
    if (!engine) continue;
    const at = `spec.services.${service.name}`;
    const label = `Service '${service.name}' (${service.type})`;
    const versions = capabilities?.versions[engine] ?? [];
    if (
      service.version !== undefined &&
      service.version !== 'latest' &&
      !versions.includes(service.version)
    ) {
      errors[`${at}.version`] = [
        `${label}: version ${service.version} is not available here; available: ${['latest', ...versions].join(', ')}.`,
      ];
    }
    const database = service.settings?.database;
    if (typeof database === 'string' && engine !== 'valkey') {
      if (!SERVICE_DATABASE_NAME.test(database) || RESERVED_SERVICE_DATABASES[engine].includes(database)) {
        errors[`${at}.settings.database`] = [
          `${label}: database name '${database}' cannot be used; expected letters, digits, "_" and "-" (not starting with a digit, at most 63 characters), and none of ${RESERVED_SERVICE_DATABASES[engine].join(', ')}.`,
        ];
      }
    }
    const extensions = service.settings?.extensions;
    if (Array.isArray(extensions) && extensions.length > 0) {
      const available = capabilities?.pgExtensions ?? [];
      const missing = extensions.filter((name) => !available.includes(name));
      if (missing.length > 0) {
        errors[`${at}.settings.extensions`] = [
          `${label}: extension${missing.length > 1 ? 's' : ''} ${missing.join(', ')} not installable here; available: ${available.join(', ') || 'none'}.`,
        ];
      }
    }
  }
  if (Object.keys(errors).length > 0) throw validationError(errors, VALIDATION_MESSAGE);
}

export function createApplyService(deps: InfrastructureDeps) {
  const { db, dialect, clock, ids, secretBox } = deps;
  const readDocument = createDocumentReader(deps.validationHooks);
  // Plans of cached (frozen) documents, keyed by the document: they go when the document cache drops it.
  // Every write to the tables the plan reads raises the team's revision (triggers, migration 009), so a
  // plan is reused only while the revision read with the team in this request is the one it was made at.
  const planned = new WeakMap<DesiredDocument, PlannedSnapshot>();

  function plan(doc: DesiredDocument, state: CurrentState, now: Date): ApplyPlan {
    const result = planApply({
      document: doc,
      state,
      now,
      hash: (v) => secretBox.keyedHash(v),
      ...(deps.runsServiceType ? { runsServiceType: deps.runsServiceType } : {}),
    });
    if (Object.keys(result.errors).length > 0) throw validationError(result.errors, VALIDATION_MESSAGE);
    return result;
  }

  /** Performs the plan's writes; returns the application id (new or existing). */
  async function write(
    trx: Transaction<Database>,
    teamId: number,
    result: ApplyPlan,
    existingAppId: number | undefined,
    now: Date,
  ): Promise<number | undefined> {
    const repo = createInfrastructureRepository(trx);
    const at = iso(now);
    let appId = existingAppId;
    const requireApp = (): number => {
      if (appId === undefined) throw new Error('plan writes to an application that does not exist');
      return appId;
    };
    const seal = (value: string) => ({ sealed: secretBox.encrypt(value), hash: secretBox.keyedHash(value) });
    for (const op of result.ops) {
      switch (op.kind) {
        case 'application.create':
          appId = await repo.insertApplication(teamId, op.values, at);
          break;
        case 'application.update':
          await repo.updateApplication(op.id, op.values, at);
          break;
        case 'domain.create':
          await repo.insertDomain(requireApp(), op.domain, at);
          break;
        case 'secret.create': {
          const s = seal(op.value);
          await repo.insertSecret(requireApp(), op.key, s.sealed, s.hash, at);
          break;
        }
        case 'secret.update': {
          const s = seal(op.value);
          await repo.updateSecret(op.id, s.sealed, s.hash, at);
          break;
        }
        case 'volume.create':
          await repo.insertVolume(requireApp(), op.values, at);
          break;
        case 'volume.update':
          await repo.updateVolume(op.id, op.values, at);
          break;
        case 'service.create':
          await repo.insertService(
            requireApp(),
            op.values,
            op.password === null ? null : seal(op.password),
            at,
          );
          // Provisioned by a job of this transaction: it runs once the document is stored (a worker is
          // a process of the application: its deployment starts it).
          if (op.values.type !== 'worker') {
            await enqueue(trx, 'app_service.provision', { applicationId: requireApp() }, { now });
          }
          break;
        case 'service.update':
          await repo.updateService(
            op.id,
            op.values,
            op.password === undefined ? undefined : seal(op.password),
            at,
          );
          break;
        case 'container_service.create':
          await repo.insertContainerService(requireApp(), op.values, at);
          await enqueue(trx, 'app_service.provision', { applicationId: requireApp() }, { now });
          break;
        case 'container_service.update':
          await repo.updateContainerService(op.id, op.values, at);
          break;
        case 'managed_database.create': {
          const uuid = ids.uuid();
          await repo.insertManagedDatabase(teamId, uuid, op.values, at);
          await enqueue(trx, 'managed_database.provision', { uuid }, { now });
          break;
        }
        case 'managed_database.update':
          await repo.updateManagedDatabase(op.id, op.values, at);
          if (op.reconcile) {
            await enqueue(trx, 'managed_database.provision', { uuid: op.uuid }, { now });
          }
          break;
        case 'object_storage.create': {
          const uuid = ids.uuid();
          await repo.insertObjectStorage(teamId, uuid, op.values, at);
          await enqueue(trx, 'object_storage.provision', { uuid }, { now });
          break;
        }
        case 'object_storage.update':
          await repo.updateObjectStorage(op.id, op.values, at);
          if (op.reconcile) {
            await enqueue(trx, 'object_storage.provision', { uuid: op.uuid }, { now });
          }
          break;
      }
    }
    return appId;
  }

  return {
    /** `body` is the YAML text, or an already parsed JSON object (JSON is YAML's subset). */
    async apply(userId: number, body: unknown, options: ApplyOptions): Promise<ApplyResponse> {
      const doc = readDocument(body);
      checkMemoryCeiling(doc, deps.quotas.processMemoryMiB);
      checkCharsets(doc, deps.charsetProblems);
      if (deps.runtimeCapabilities) checkRuntime(doc, deps.runtimeCapabilities());
      if (doc.services.some((service) => engineOfService(service.type)))
        checkServices(doc, deps.serviceCapabilities?.());
      const team = await deps.identity.requireTeamAt(userId, doc.team);
      // The route's `owner` role, for the team the document names (dry runs too: docs/security.md).
      requireRole({ teamName: team.name, role: team.role }, 'owner', 'Applying a document');
      const respond = (
        result: ApplyPlan,
        appId: number | undefined,
        deploymentId: number | null,
      ): ApplyResponse => ({
        success: true,
        application_id: appId ?? null,
        application_name: doc.name,
        team: team.name,
        dry_run: options.dryRun,
        changes: result.lines.map((l) => (options.dryRun ? l.would : l.done)),
        structured_changes: result.structured,
        resource_changes: result.resources,
        errors: [],
        needs_deployment: result.needsDeployment,
        auto_deploy_enabled: options.autoDeploy,
        deployment_id: deploymentId,
      });

      // Planned in one read snapshot. A dry run answers with it. So does a document that matches
      // the store: nothing to write, so no write transaction and no lock (the apply is ordered at
      // the snapshot); re-applying an unchanged document is then as cheap as a dry run.
      // A plan made at the revision the team has now is the plan this snapshot would give.
      const cached = planned.get(doc);
      const snapshot =
        cached !== undefined && cached.teamId === team.id && cached.revision === team.revision
          ? cached
          : await db
              .transaction()
              .setIsolationLevel('repeatable read')
              .execute(async (trx) => {
                const repo = createInfrastructureRepository(trx);
                // Only documents of the document cache (frozen) are kept, so only they need the revision.
                const revision = Object.isFrozen(doc) ? await repo.teamRevision(team.id) : undefined;
                const state = await loadState(repo, dialect, team.id, doc);
                const made = { appId: state.application?.id, result: plan(doc, state, clock.now()) };
                await checkQuotas(repo, team.id, doc, state, deps.quotas);
                if (revision !== undefined && dependsOnTeamOnly(doc, state))
                  planned.set(doc, deepFreeze({ teamId: team.id, revision, ...made }));
                return made;
              });
      if (options.dryRun || snapshot.result.ops.length === 0) {
        auditUnchanged();
        return respond(snapshot.result, snapshot.appId, null);
      }

      for (let attempt = 1; ; attempt += 1) {
        try {
          return await db
            .transaction()
            .execute(async (trx) => {
              const repo = createInfrastructureRepository(trx);
              await repo.lockTeam(dialect, team.id);
              const now = clock.now();
              const state = await loadState(repo, dialect, team.id, doc);
              const existingId = state.application?.id;
              const result = plan(doc, state, now);
              await checkQuotas(repo, team.id, doc, state, deps.quotas);
              const appId = await write(trx, team.id, result, existingId, now);
              let deploymentId: number | null = null;
              if (result.needsDeployment && options.autoDeploy && appId !== undefined) {
                deploymentId = await deps.deployments.request(trx, {
                  applicationId: appId,
                  reason: 'apply',
                  requestedBy: userId,
                });
              }
              const answer = respond(result, existingId ?? appId, deploymentId);
              // One entry for the whole document: what it changed, as the answer lists it.
              await auditChange(trx, {
                at: now,
                action: 'infrastructure.apply',
                teamId: team.id,
                target:
                  answer.application_id !== null
                    ? { kind: 'application', id: answer.application_id }
                    : { kind: 'team', id: team.id },
                after: {
                  application: doc.name,
                  changes: answer.changes,
                  resource_changes: answer.resource_changes,
                  deployment_id: deploymentId,
                },
              });
              return answer;
            })
            .then((response) => {
              if (response.deployment_id !== null && response.application_id !== null)
                deps.deployments.started(response.application_id, response.deployment_id);
              return response;
            });
        } catch (error) {
          // The loser of a race re-plans against the winner's rows: it then finds them unchanged,
          // or reports the conflict (a domain taken by another team) as a 422.
          if (attempt < ATTEMPTS && isUniqueViolation(error)) continue;
          if (isUniqueViolation(error)) {
            throw new AppError(
              'conflict',
              'Another apply changed the same resources at the same time; retry.',
              {
                cause: error,
              },
            );
          }
          throw error;
        }
      }
    },
  };
}

export type ApplyService = ReturnType<typeof createApplyService>;
