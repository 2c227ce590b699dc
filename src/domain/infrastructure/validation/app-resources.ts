// The application's own resources: spec.domains, spec.secrets and spec.volumes.
import { type DesiredSecret, type DesiredVolume, secretPlaceholder } from '../document.js';
import { Checker, checkUnique, entryLabel, entryPath, isAbsolutePath, isHostName } from './checker.js';
import {
  MAX_SECRET_VALUE_BYTES,
  MAX_VOLUME_GB,
  type Obj,
  RESOURCE_NAME,
  RESOURCE_NAME_TEXT,
  SECRET_KEY,
} from './rules.js';

export function validateDomains(c: Checker, spec: Obj): string[] {
  const domains: string[] = [];
  const seen = new Map<string, number>();
  for (const [entry, index] of c.list(spec, 'domains', 'spec', 'Domains', 'a domain field')) {
    const path = `spec.domains.${index}`;
    const label = `Domain #${index}`;
    c.unknownFields(entry, ['domain'], path, label);
    const domain = c.field(
      entry,
      'domain',
      path,
      label,
      'a host name such as app.example.com (letters, digits, hyphens, dot-separated labels)',
      (v) => (typeof v === 'string' && isHostName(v.toLowerCase()) ? v.toLowerCase() : undefined),
      true,
    );
    if (domain === undefined) continue;
    const first = seen.get(domain);
    if (first !== undefined) {
      c.add(
        `${path}.domain`,
        `${label}: domain '${domain}' is already listed as domain #${first}; domains must be unique.`,
      );
      continue;
    }
    seen.set(domain, index);
    domains.push(domain);
  }
  return domains;
}

export function validateSecrets(c: Checker, spec: Obj): DesiredSecret[] {
  const secrets: DesiredSecret[] = [];
  const seen = new Map<string, number>();
  for (const [entry, index] of c.list(spec, 'secrets', 'spec', 'Secrets', 'key and value fields')) {
    const path = `spec.secrets.${index}`;
    const key = typeof entry.key === 'string' ? entry.key : undefined;
    const label = key ? `Secret #${index} ('${key}')` : `Secret #${index}`;
    c.unknownFields(entry, ['key', 'value'], path, label);
    const checkedKey = c.pattern(
      entry,
      'key',
      path,
      label,
      SECRET_KEY,
      'an environment variable name (letters, digits and "_", not starting with a digit)',
      true,
    );
    const value = c.field(
      entry,
      'value',
      path,
      label,
      `a string of at most ${MAX_SECRET_VALUE_BYTES / 1024} KiB (numbers and booleans are taken as their text)`,
      (v) =>
        (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') &&
        Buffer.byteLength(String(v)) <= MAX_SECRET_VALUE_BYTES
          ? String(v)
          : undefined,
      true,
    );
    if (checkedKey === undefined || value === undefined) continue;
    const first = seen.get(checkedKey);
    if (first !== undefined) {
      c.add(
        `${path}.key`,
        `${label}: key '${checkedKey}' is already used by secret #${first}; keys must be unique.`,
      );
      continue;
    }
    seen.set(checkedKey, index);
    secrets.push({ key: checkedKey, value: value === secretPlaceholder(checkedKey) ? null : value });
  }
  return secrets;
}

export function validateVolumes(c: Checker, spec: Obj): DesiredVolume[] {
  const volumes: DesiredVolume[] = [];
  const names: Array<[string, string]> = [];
  for (const [entry, index] of c.list(
    spec,
    'volumes',
    'spec',
    'Volumes',
    'name, mount_path and volume_size',
  )) {
    const path = entryPath('spec.volumes', entry, index);
    const label = entryLabel('Volume', entry, index);
    c.unknownFields(entry, ['name', 'mount_path', 'volume_size'], path, label);
    const name = c.pattern(entry, 'name', path, label, RESOURCE_NAME, RESOURCE_NAME_TEXT, true);
    const mount = c.field(
      entry,
      'mount_path',
      path,
      label,
      'an absolute path such as /var/www/html/storage',
      (v) => (typeof v === 'string' && isAbsolutePath(v) ? v : undefined),
      true,
    );
    const size = c.field(
      entry,
      'volume_size',
      path,
      label,
      `an integer number of GB from 1 to ${MAX_VOLUME_GB}`,
      (v) => (typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= MAX_VOLUME_GB ? v : undefined),
      true,
    );
    if (name !== undefined) names.push([name, path]);
    if (name !== undefined && mount !== undefined && size !== undefined)
      volumes.push({ name, mount_path: mount, volume_size: size });
  }
  checkUnique(c, names, 'Volume');
  return volumes;
}
