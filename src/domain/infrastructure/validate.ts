// Whole-document validation: every problem of every block is collected, then reported in one 422
// (apply rules 1 and 2). Entries of named lists are addressed by their name
// (`spec.managed_databases.main-db.type`); domains and secrets by index. Every message names the
// resource, the field and what is accepted. Nothing here does I/O; checks that need the store
// (domain owners, type changes, schedule changes) are in plan.ts. One validator per block lives in
// validation/ (the checker, the rules, then application, app-resources, services, managed-databases,
// object-storage).
import { type FieldErrors, validationError } from '../errors.js';
import type { DesiredDocument } from './document.js';
import { validateDomains, validateSecrets, validateVolumes } from './validation/app-resources.js';
import { validateApplication } from './validation/application.js';
import { Checker } from './validation/checker.js';
import { validateManagedDatabases } from './validation/managed-databases.js';
import { validateObjectStorages, type ValidationHooks } from './validation/object-storage.js';
import {
  APPLICATION_FIELDS,
  APPLICATION_NAME,
  APPLICATION_NAME_TEXT,
  isObj,
  SPEC_FIELDS,
  VALIDATION_MESSAGE,
} from './validation/rules.js';
import { validateContainerServices, validateServices } from './validation/services.js';

export type { ValidationHooks } from './validation/object-storage.js';
export { LIST_LIMITS, VALIDATION_MESSAGE } from './validation/rules.js';

/** Checks another part of the system owns, run inside validation so their problems join the one 422. */
export type ValidationResult = { ok: true; document: DesiredDocument } | { ok: false; errors: FieldErrors };

/** Checks the whole document; never throws for content problems. */
export function checkDocument(raw: Record<string, unknown>, hooks: ValidationHooks = {}): ValidationResult {
  const c = new Checker();
  const doc = 'Document';
  c.unknownFields(raw, ['apiVersion', 'kind', 'metadata', 'spec'], '', doc);
  c.enumeration(raw, 'apiVersion', '', doc, ['v1'], true);
  c.enumeration(raw, 'kind', '', doc, ['Infrastructure'], true);

  let name: string | undefined;
  let team: string | number | undefined;
  const metadata = c.field(
    raw,
    'metadata',
    '',
    doc,
    'a mapping with name and team',
    (v) => (isObj(v) ? v : undefined),
    true,
  );
  if (metadata) {
    c.unknownFields(metadata, ['name', 'team'], 'metadata', 'Metadata');
    name = c.pattern(
      metadata,
      'name',
      'metadata',
      'Metadata',
      APPLICATION_NAME,
      `the application name: ${APPLICATION_NAME_TEXT}`,
      true,
    );
    team = c.field(
      metadata,
      'team',
      'metadata',
      'Metadata',
      'a team id (integer) or team name (string)',
      (v) =>
        (typeof v === 'number' && Number.isInteger(v) && v > 0) ||
        (typeof v === 'string' && v.trim() !== '' && v.length <= 100)
          ? v
          : undefined,
      true,
    );
  }
  const spec =
    c.field(
      raw,
      'spec',
      '',
      doc,
      `a mapping with ${SPEC_FIELDS.join(', ')}`,
      (v) => (isObj(v) ? v : undefined),
      true,
    ) ?? {};
  c.unknownFields(spec, SPEC_FIELDS, 'spec', 'Spec');

  const rawApp = c.mapping(spec, 'application', 'spec', 'Spec', APPLICATION_FIELDS.join(', '));
  const application = rawApp ? validateApplication(c, rawApp, name, hooks) : undefined;
  const domains = validateDomains(c, spec);
  const secrets = validateSecrets(c, spec);
  const volumes = validateVolumes(c, spec);
  const services = validateServices(c, spec);
  const containerServices = validateContainerServices(c, spec);
  const managedDatabases = validateManagedDatabases(c, spec);
  const objectStorages = validateObjectStorages(c, spec, hooks);

  if (c.errors.size > 0 || name === undefined || team === undefined) {
    return { ok: false, errors: c.errors.errors };
  }
  const touchesApplication =
    rawApp !== undefined ||
    ['domains', 'secrets', 'volumes', 'services', 'container_services'].some(
      (k) => spec[k] !== undefined && spec[k] !== null,
    );
  return {
    ok: true,
    document: {
      name,
      team,
      ...(application ? { application: { ...application, name } } : {}),
      domains,
      secrets,
      volumes,
      services,
      containerServices,
      managedDatabases,
      objectStorages,
      touchesApplication,
    },
  };
}

/** checkDocument, throwing the spec's 422 when anything is wrong. */
export function validateDocument(raw: Record<string, unknown>, hooks: ValidationHooks = {}): DesiredDocument {
  const result = checkDocument(raw, hooks);
  if (!result.ok) throw validationError(result.errors, VALIDATION_MESSAGE);
  return result.document;
}
