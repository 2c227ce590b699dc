// spec.services and spec.container_services: the application's companion processes.
import {
  CONTAINER_SERVICE_TYPES,
  type ContainerServiceType,
  type DesiredContainerService,
  type DesiredService,
  SERVICE_TYPES,
  servicePasswordPlaceholder,
  type ServiceType,
} from '../document.js';
import { Checker, checkUnique, entryLabel, entryPath, repr, versionText } from './checker.js';
import {
  BUCKET,
  ENV_NAME,
  type Obj,
  RESOURCE_NAME,
  RESOURCE_NAME_TEXT,
  SIZE_GI,
  SIZE_MI_GI,
} from './rules.js';

/**
 * Settings each service type takes (spec: database for databases, extensions for postgresql, sftp
 * credentials; minio: the bucket's name, docs/services.md).
 */
export const SERVICE_SETTINGS: Readonly<Record<ServiceType, readonly string[]>> = {
  mysql: ['database'],
  postgresql: ['database', 'extensions'],
  redis: [],
  valkey: [],
  rabbitmq: [],
  minio: ['bucket'],
  sftp: ['username', 'password'],
  worker: [],
};

/** The version and sizing fields both kinds of service take. */
function sizing(c: Checker, entry: Obj, path: string, label: string) {
  return {
    version: c.field(entry, 'version', path, label, 'a version string or latest', (v) =>
      versionText(v, false),
    ),
    memory: c.pattern(
      entry,
      'memory',
      path,
      label,
      SIZE_MI_GI,
      'a memory size with unit suffix Mi or Gi, such as 512Mi or 2Gi',
    ),
    volumeSize: c.pattern(
      entry,
      'volume_size',
      path,
      label,
      SIZE_GI,
      'a size with unit suffix Gi, such as 20Gi',
    ),
  };
}

export function validateServices(c: Checker, spec: Obj): DesiredService[] {
  const services: DesiredService[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'type', 'version', 'memory', 'volume_size', 'settings', 'command'];
  for (const [entry, index] of c.list(spec, 'services', 'spec', 'Services', fields.join(', '))) {
    const path = entryPath('spec.services', entry, index);
    const label = entryLabel('Service', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const type = c.enumeration(entry, 'type', path, label, SERVICE_TYPES, true);
    const { version, memory, volumeSize } = sizing(c, entry, path, label);
    const command = c.field(entry, 'command', path, label, 'a non-empty shell command', (v) =>
      typeof v === 'string' && v.trim() !== '' && v.length <= 2000 ? v : undefined,
    );
    if (
      type === 'worker' &&
      command === undefined &&
      (entry.command === undefined || entry.command === null)
    ) {
      c.add(
        `${path}.command`,
        `${label}: field 'command' is required for type worker; expected the shell command the worker runs.`,
      );
    }
    if (type !== undefined && type !== 'worker' && command !== undefined) {
      c.add(
        `${path}.command`,
        `${label}: field 'command' is only used by type worker; remove it or use type worker.`,
      );
    }
    let settings: Record<string, string | string[]> | undefined;
    let password: string | null | undefined;
    const rawSettings = c.mapping(entry, 'settings', path, label, 'the settings of the service type');
    if (rawSettings && type !== undefined && name !== undefined) {
      const p = `${path}.settings`;
      const allowed = SERVICE_SETTINGS[type];
      const l = `${label} (${type}) settings`;
      if (allowed.length === 0) {
        for (const key of Object.keys(rawSettings))
          c.add(`${p}.${key}`, `${l}: field '${key}' is not accepted; type ${type} takes no settings.`);
      } else {
        c.unknownFields(rawSettings, allowed, p, l);
      }
      settings = {};
      const database = allowed.includes('database')
        ? c.pattern(
            rawSettings,
            'database',
            p,
            l,
            /^[A-Za-z_][A-Za-z0-9_$-]{0,63}$/,
            'a database name (letters, digits, "_", "$" and "-", at most 64 characters)',
          )
        : undefined;
      if (database !== undefined) settings.database = database;
      const extensions = allowed.includes('extensions')
        ? c.stringList(rawSettings, 'extensions', p, l, 'PostgreSQL extension names', (s) =>
            /^[a-z0-9_-]{1,63}$/.test(s),
          )
        : undefined;
      if (extensions !== undefined) settings.extensions = extensions;
      const bucket = allowed.includes('bucket')
        ? c.pattern(
            rawSettings,
            'bucket',
            p,
            l,
            BUCKET,
            'a bucket name (3-63 lower-case letters, digits, "." and "-")',
          )
        : undefined;
      if (bucket !== undefined) settings.bucket = bucket;
      if (type === 'sftp') {
        const username = c.pattern(
          rawSettings,
          'username',
          p,
          l,
          /^[a-z_][a-z0-9_-]{0,31}$/,
          'a user name (lower-case letters, digits, "_" and "-", at most 32 characters)',
        );
        if (username !== undefined) settings.username = username;
        const pass = c.string(rawSettings, 'password', p, l);
        if (pass !== undefined) password = pass === servicePasswordPlaceholder(name) ? null : pass;
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || type === undefined) continue;
    const service: DesiredService = { name, type };
    if (version !== undefined) service.version = version;
    if (memory !== undefined) service.memory = memory;
    if (volumeSize !== undefined) service.volume_size = volumeSize;
    if (settings !== undefined) service.settings = settings;
    if (password !== undefined) service.password = password;
    if (command !== undefined) service.command = command;
    services.push(service);
  }
  checkUnique(c, names, 'Service');
  return services;
}

export function validateContainerServices(c: Checker, spec: Obj): DesiredContainerService[] {
  const result: DesiredContainerService[] = [];
  const names: Array<[string, string]> = [];
  const fields = ['name', 'type', 'version', 'memory', 'volume_size', 'settings'];
  for (const [entry, index] of c.list(
    spec,
    'container_services',
    'spec',
    'Container services',
    fields.join(', '),
  )) {
    const path = entryPath('spec.container_services', entry, index);
    const label = entryLabel('Container service', entry, index);
    c.unknownFields(entry, fields, path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const type = c.enumeration<ContainerServiceType>(
      entry,
      'type',
      path,
      label,
      CONTAINER_SERVICE_TYPES,
      true,
    );
    const { version, memory, volumeSize } = sizing(c, entry, path, label);
    const rawSettings = c.mapping(
      entry,
      'settings',
      path,
      label,
      'environment-style settings whose values are strings',
    );
    let settings: Record<string, string> | undefined;
    if (rawSettings) {
      settings = {};
      for (const [key, value] of Object.entries(rawSettings)) {
        const at = `${path}.settings.${key}`;
        if (!ENV_NAME.test(key)) {
          c.add(
            at,
            `${label} settings: '${key}' is not a usable setting name; expected letters, digits and "_", not starting with a digit.`,
          );
        } else if (typeof value !== 'string') {
          c.add(
            at,
            `${label} settings: value of '${key}' must be a string (quote it in YAML); got ${repr(value)}.`,
          );
        } else {
          settings[key] = value;
        }
      }
    }
    if (name !== undefined) names.push([name, path]);
    if (name === undefined || type === undefined) continue;
    const service: DesiredContainerService = { name, type };
    if (version !== undefined) service.version = version;
    if (memory !== undefined) service.memory = memory;
    if (volumeSize !== undefined) service.volume_size = volumeSize;
    if (settings !== undefined) service.settings = settings;
    result.push(service);
  }
  checkUnique(c, names, 'Container service');
  return result;
}
