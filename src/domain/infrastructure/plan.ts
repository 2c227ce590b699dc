// Desired document + current state → the writes to make and the report of an apply. Pure: the
// service loads the state, calls planApply, then performs `ops` in one transaction (or not at all
// for a dry run). Checks that need the current state live here: domains held by other
// applications, type changes, schedules in the past, placeholders without a stored value.
import type { FieldErrors } from '../errors.js';
import {
  planApplication,
  planContainerServices,
  planDomains,
  planSecrets,
  planServices,
  planVolumes,
} from './planning/application.js';
import { planManagedDatabases, planObjectStorages } from './planning/team-resources.js';
import type { ApplyPlan, Plan, PlanInputs } from './planning/types.js';

export * from './planning/types.js';

export function planApply(input: PlanInputs): ApplyPlan {
  const errors: FieldErrors = {};
  const p: Plan = {
    doc: input.document,
    state: input.state,
    now: input.now,
    hash: (value) => input.hash(value),
    runsServiceType: input.runsServiceType,
    fail: (path, message) => (errors[path] ??= []).push(message),
    ops: [],
    lines: [],
    structured: {
      application: null,
      domains: [],
      secrets: [],
      volumes: [],
      services: [],
      container_services: [],
      managed_databases: [],
      object_storage: [],
    },
    resources: [],
    needsDeployment: false,
  };
  if (p.doc.touchesApplication) {
    planApplication(p);
    planDomains(p);
    planSecrets(p);
    planVolumes(p);
    planServices(p);
    planContainerServices(p);
  }
  planManagedDatabases(p);
  planObjectStorages(p);
  const { ops, lines, structured, resources, needsDeployment } = p;
  return { errors, ops, lines, structured, resources, needsDeployment };
}
