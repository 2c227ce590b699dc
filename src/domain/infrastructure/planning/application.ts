// Planning the application and what belongs to it: its row, domains, secrets, volumes, services and
// container services (only when the document touches the application).
import { UNAVAILABLE_SERVICE_TYPES, volumeGiB } from '../../app-services.js';
import { hasReferences, referenceProblems } from '../../service-references.js';
import { secretPlaceholder, servicePasswordPlaceholder } from '../document.js';
import {
  DEPLOYED_FIELDS,
  applicationPaths,
  changedPaths,
  desiredApplicationValues,
  line,
  lower,
  mergedApplication,
  report,
  same,
} from './compare.js';
import type { ApplicationState, ContainerServiceState, Plan, ServiceState, VolumeState } from './types.js';

/** The application's own row: created, updated (with what changed), or refused. */
export function planApplication(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  const current = state.application;
  const appSubject = `Application '${doc.name}'`;
  const { now } = p;
  const desired = desiredApplicationValues(doc);
  if (!current && !desired) {
    fail(
      'spec.application',
      `${appSubject} does not exist in this team; add spec.application with its type (${['laravel', 'nodejs', 'wordpress'].join(', ')}) to create it.`,
    );
  }
  const scheduled = doc.application?.settings.scheduled_deletion_at;
  if (
    scheduled !== undefined &&
    scheduled !== current?.scheduled_deletion_at &&
    Date.parse(scheduled) <= now.getTime()
  ) {
    fail(
      'spec.application.settings.scheduled_deletion_at',
      `${appSubject} settings: field 'scheduled_deletion_at' must be a future ISO 8601 timestamp; got ${scheduled} (now is ${now.toISOString()}).`,
    );
  }
  if (current && desired && desired.type !== current.type) {
    fail(
      'spec.application.type',
      `${appSubject}: field 'type' cannot change after creation; it is ${current.type}, the document says ${desired.type}.`,
    );
  } else if (!current && desired) {
    ops.push({ kind: 'application.create', values: desired });
    structured.application = { action: 'created', name: doc.name };
    report(p, 'application', doc.name, desired.type, 'created');
    lines.push(line(appSubject, 'created', `create ${lower(appSubject)}`));
    if (desired.scheduled_deletion_at) {
      lines.push(
        line(
          appSubject,
          `scheduled for deletion at ${desired.scheduled_deletion_at}`,
          `schedule ${lower(appSubject)} for deletion at ${desired.scheduled_deletion_at}`,
        ),
      );
    }
    p.needsDeployment = true;
  } else if (current) {
    const merged = mergedApplication(current, doc);
    const changed = (Object.keys(merged) as Array<keyof ApplicationState>).filter(
      (key) => !same(merged[key], current[key]),
    );
    if (changed.length === 0) {
      structured.application = { action: 'unchanged', name: doc.name };
      report(p, 'application', doc.name, current.type, 'unchanged');
    } else {
      const values: Partial<ApplicationState> = {};
      for (const key of changed) Object.assign(values, { [key]: merged[key] });
      ops.push({ kind: 'application.update', id: current.id, values });
      structured.application = { action: 'updated', name: doc.name };
      report(p, 'application', doc.name, current.type, 'updated', applicationPaths(changed, merged, current));
      const fields = changed.filter((k) => k !== 'scheduled_deletion_at');
      if (fields.length > 0) {
        lines.push(
          line(
            appSubject,
            `updated (${fields.join(', ')})`,
            `update ${lower(appSubject)} (${fields.join(', ')})`,
          ),
        );
      }
      if (changed.includes('scheduled_deletion_at')) {
        lines.push(
          merged.scheduled_deletion_at === null
            ? line(
                appSubject,
                'deletion schedule cleared',
                `clear the deletion schedule of ${lower(appSubject)}`,
              )
            : line(
                appSubject,
                `scheduled for deletion at ${merged.scheduled_deletion_at}`,
                `schedule ${lower(appSubject)} for deletion at ${merged.scheduled_deletion_at}`,
              ),
        );
      }
      if (changed.some((k) => DEPLOYED_FIELDS.has(k))) p.needsDeployment = true;
    }
  }
}

/** Domains are added, never removed; one held by another application is refused. */
export function planDomains(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  doc.domains.forEach((domain, index) => {
    if (state.domains.has(domain)) {
      structured.domains.push({ action: 'unchanged', domain });
      report(p, 'domain', domain, null, 'unchanged');
    } else if (state.domainsHeldElsewhere.has(domain)) {
      fail(
        `spec.domains.${index}.domain`,
        `Domain #${index}: domain '${domain}' is already used by another application; a domain can belong to one application on the platform.`,
      );
    } else {
      ops.push({ kind: 'domain.create', domain });
      structured.domains.push({ action: 'created', domain });
      report(p, 'domain', domain, null, 'created');
      lines.push(line(`Domain '${domain}'`, 'added', `add domain '${domain}'`));
    }
  });
}

/** The application's services by name with their type: the stored ones and the document's. */
function serviceTypes(p: Plan): Map<string, string> {
  const { doc, state } = p;
  return new Map<string, string>([
    ...[...state.services.values(), ...state.containerServices.values()].map(
      (s) => [s.name, s.type] as [string, string],
    ),
    ...[...doc.services, ...doc.containerServices].map((s) => [s.name, s.type] as [string, string]),
  ]);
}

/**
 * Secrets compared by keyed hash; an export placeholder keeps the stored value. A value's service
 * references must name a service of the application (stored or in the document) and a field it gives.
 */
export function planSecrets(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  const services = serviceTypes(p);
  doc.secrets.forEach((secret, index) => {
    if (secret.value !== null && hasReferences(secret.value)) {
      const problems = referenceProblems(secret.value, services);
      for (const problem of problems)
        fail(`spec.secrets.${index}.value`, `Secret #${index} ('${secret.key}'): ${problem}`);
      if (problems.length > 0) return;
    }
    const stored = state.secrets.get(secret.key);
    const subject = `Secret '${secret.key}'`;
    if (secret.value === null) {
      if (stored) {
        structured.secrets.push({ action: 'unchanged', key: secret.key });
        report(p, 'secret', secret.key, null, 'unchanged');
      } else
        fail(
          `spec.secrets.${index}.value`,
          `Secret #${index} ('${secret.key}'): field 'value' is the export placeholder ${secretPlaceholder(secret.key)} but the application holds no value for it; put the real value in the document.`,
        );
      return;
    }
    if (!stored) {
      ops.push({ kind: 'secret.create', key: secret.key, value: secret.value });
      structured.secrets.push({ action: 'created', key: secret.key });
      report(p, 'secret', secret.key, null, 'created');
      lines.push(line(subject, 'created', `create ${lower(subject)}`));
      p.needsDeployment = true;
    } else if (stored.value_hash !== p.hash(secret.value)) {
      ops.push({ kind: 'secret.update', id: stored.id, key: secret.key, value: secret.value });
      structured.secrets.push({ action: 'updated', key: secret.key });
      report(p, 'secret', secret.key, null, 'updated', ['value']);
      lines.push(line(subject, 'updated', `update ${lower(subject)}`));
      p.needsDeployment = true;
    } else {
      structured.secrets.push({ action: 'unchanged', key: secret.key });
      report(p, 'secret', secret.key, null, 'unchanged');
    }
  });
}

/** Volumes created or resized or moved. */
export function planVolumes(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  for (const volume of doc.volumes) {
    const stored = state.volumes.get(volume.name);
    const subject = `Volume '${volume.name}'`;
    if (!stored) {
      ops.push({ kind: 'volume.create', values: volume });
      structured.volumes.push({ action: 'created', name: volume.name });
      report(p, 'volume', volume.name, null, 'created');
      lines.push(
        line(
          subject,
          `created (${volume.volume_size} GB at ${volume.mount_path})`,
          `create ${lower(subject)} (${volume.volume_size} GB at ${volume.mount_path})`,
        ),
      );
      p.needsDeployment = true;
      continue;
    }
    // The volume is a file system of that size (docs/runtime.md): its data may not fit a smaller one.
    if (volume.volume_size < stored.volume_size) {
      fail(
        `spec.volumes.${volume.name}.volume_size`,
        `${subject}: field 'volume_size' cannot shrink; it is ${stored.volume_size} GB, the document says ${volume.volume_size} GB. Keep it, or make a new volume for a smaller size.`,
      );
      continue;
    }
    const values: Partial<VolumeState> = {};
    if (stored.mount_path !== volume.mount_path) values.mount_path = volume.mount_path;
    if (stored.volume_size !== volume.volume_size) values.volume_size = volume.volume_size;
    const fields = Object.keys(values);
    if (fields.length === 0) {
      structured.volumes.push({ action: 'unchanged', name: volume.name });
      report(p, 'volume', volume.name, null, 'unchanged');
    } else {
      ops.push({ kind: 'volume.update', id: stored.id, values });
      structured.volumes.push({ action: 'updated', name: volume.name });
      report(p, 'volume', volume.name, null, 'updated', fields);
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
      p.needsDeployment = true;
    }
  }
}

/** The paths of a service's changed fields: `settings` by the keys that differ (`settings.database`). */
function fieldPaths(values: { settings?: Record<string, unknown> }, storedSettings: Record<string, unknown>) {
  return Object.keys(values).flatMap((key) =>
    key === 'settings' ? changedPaths('settings', values.settings, storedSettings) : [key],
  );
}

/** Services: created, updated field by field; their type never changes. */
export function planServices(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  for (const service of doc.services) {
    const stored = state.services.get(service.name);
    const subject = `Service '${service.name}' (${service.type})`;
    const at = `spec.services.${service.name}`;
    if (!stored) {
      if (service.password === null) {
        fail(
          `${at}.settings.password`,
          `Service '${service.name}' settings: field 'password' is the export placeholder ${servicePasswordPlaceholder(service.name)} but the service does not exist yet; put the real password in the document.`,
        );
        continue;
      }
      ops.push({
        kind: 'service.create',
        values: {
          name: service.name,
          type: service.type,
          version: service.version ?? null,
          memory: service.memory ?? null,
          volume_size: service.volume_size ?? null,
          settings: service.settings ?? {},
          command: service.command ?? null,
        },
        password: service.password ?? null,
      });
      structured.services.push({ action: 'created', name: service.name, type: service.type });
      report(p, 'service', service.name, service.type, 'created');
      lines.push(line(subject, 'created', `create ${lower(subject)}`));
      p.needsDeployment = true;
      continue;
    }
    if (stored.type !== service.type) {
      fail(
        `${at}.type`,
        `Service '${service.name}': field 'type' cannot change; it is ${stored.type}, the document says ${service.type}.`,
      );
      continue;
    }
    const shrink = volumeShrink(`Service '${service.name}'`, stored.volume_size, service.volume_size);
    if (shrink) {
      fail(`${at}.volume_size`, shrink);
      continue;
    }
    const values: Partial<ServiceState> = {};
    if (service.version !== undefined && service.version !== stored.version) values.version = service.version;
    if (service.memory !== undefined && service.memory !== stored.memory) values.memory = service.memory;
    if (service.volume_size !== undefined && service.volume_size !== stored.volume_size)
      values.volume_size = service.volume_size;
    if (service.settings !== undefined && !same(service.settings, stored.settings))
      values.settings = service.settings;
    if (service.command !== undefined && service.command !== stored.command) values.command = service.command;
    const password =
      typeof service.password === 'string' && p.hash(service.password) !== stored.secret_settings_hash
        ? service.password
        : undefined;
    const fields = [...Object.keys(values), ...(password !== undefined ? ['settings.password'] : [])];
    if (fields.length === 0) {
      structured.services.push({ action: 'unchanged', name: service.name, type: service.type });
      report(p, 'service', service.name, service.type, 'unchanged');
    } else {
      ops.push({
        kind: 'service.update',
        id: stored.id,
        values,
        ...(password !== undefined ? { password } : {}),
      });
      structured.services.push({ action: 'updated', name: service.name, type: service.type });
      report(p, 'service', service.name, service.type, 'updated', [
        ...fieldPaths(values, stored.settings),
        ...(password !== undefined ? ['settings.password'] : []),
      ]);
      lines.push(
        line(subject, `updated (${fields.join(', ')})`, `update ${lower(subject)} (${fields.join(', ')})`),
      );
      p.needsDeployment = true;
    }
  }
}

/** Container services, as services. */
export function planContainerServices(p: Plan): void {
  const { doc, state, fail, ops, lines, structured } = p;
  for (const service of doc.containerServices) {
    const stored = state.containerServices.get(service.name);
    const subject = `Container service '${service.name}' (${service.type})`;
    if (!stored) {
      ops.push({
        kind: 'container_service.create',
        values: {
          name: service.name,
          type: service.type,
          version: service.version ?? null,
          memory: service.memory ?? null,
          volume_size: service.volume_size ?? null,
          settings: service.settings ?? {},
        },
      });
      structured.container_services.push({ action: 'created', name: service.name, type: service.type });
      report(p, 'container_service', service.name, service.type, 'created');
      const note = unavailableNote(p, service.type);
      lines.push(line(subject, `created${note}`, `create ${lower(subject)}${note}`));
      p.needsDeployment = true;
      continue;
    }
    if (stored.type !== service.type) {
      fail(
        `spec.container_services.${service.name}.type`,
        `Container service '${service.name}': field 'type' cannot change; it is ${stored.type}, the document says ${service.type}.`,
      );
      continue;
    }
    const shrink = volumeShrink(
      `Container service '${service.name}'`,
      stored.volume_size,
      service.volume_size,
    );
    if (shrink) {
      fail(`spec.container_services.${service.name}.volume_size`, shrink);
      continue;
    }
    const values: Partial<ContainerServiceState> = {};
    if (service.version !== undefined && service.version !== stored.version) values.version = service.version;
    if (service.memory !== undefined && service.memory !== stored.memory) values.memory = service.memory;
    if (service.volume_size !== undefined && service.volume_size !== stored.volume_size)
      values.volume_size = service.volume_size;
    if (service.settings !== undefined && !same(service.settings, stored.settings))
      values.settings = service.settings;
    const fields = Object.keys(values);
    if (fields.length === 0) {
      structured.container_services.push({ action: 'unchanged', name: service.name, type: service.type });
      report(p, 'container_service', service.name, service.type, 'unchanged');
    } else {
      ops.push({ kind: 'container_service.update', id: stored.id, values });
      structured.container_services.push({ action: 'updated', name: service.name, type: service.type });
      report(
        p,
        'container_service',
        service.name,
        service.type,
        'updated',
        fieldPaths(values, stored.settings),
      );
      const note = unavailableNote(p, service.type);
      lines.push(
        line(
          subject,
          `updated (${fields.join(', ')})${note}`,
          `update ${lower(subject)} (${fields.join(', ')})${note}`,
        ),
      );
      p.needsDeployment = true;
    }
  }
}

/** What a change line adds for a type that cannot run here: it is stored, and never reads `running`. */
function unavailableNote(p: Plan, type: string): string {
  if (p.runsServiceType?.(type)) return '';
  const reason = UNAVAILABLE_SERVICE_TYPES[type];
  return reason ? `; unavailable: ${reason}` : '';
}

/** A service's volume holds its data: a smaller `volume_size` than it has is refused (docs/services.md). */
function volumeShrink(label: string, stored: string | null, asked: string | undefined): string | undefined {
  const from = volumeGiB(stored);
  const to = asked === undefined ? undefined : volumeGiB(asked);
  if (from === undefined || to === undefined || to >= from) return undefined;
  return `${label}: field 'volume_size' cannot shrink; it is ${stored}, the document says ${asked}. Keep it, or make a new service for a smaller volume.`;
}
