// The rights the kubernetes runtime driver needs in its cluster, and the check that it has them
// (`berth admin k8s-check`, docs/runtime.md "Kubernetes: configuration and rights"). Berth makes a
// namespace per application, so every namespaced right is needed in all namespaces: each is asked at
// cluster scope. Objects are written by server-side apply and merge patch (verb patch; create for a new
// one), never replaced (no update), and read without watches.
import type { KubeClient, KubeObject } from './client.js';

export interface Right {
  verb: string;
  /** API group, '' for the core group. */
  group: string;
  /** Plural resource, `pods/log` for a subresource. */
  resource: string;
  /** Whether the resource lives in namespaces (asked cluster-wide all the same). */
  namespaced: boolean;
}

const WRITE = ['get', 'list', 'create', 'patch', 'delete'];

function rights(group: string, resources: string[], verbs: string[], namespaced = true): Right[] {
  return resources.flatMap((resource) => verbs.map((verb) => ({ verb, group, resource, namespaced })));
}

/** Every right Berth needs, in a stable order (the order of `missing`). */
export const BERTH_RIGHTS: readonly Right[] = Object.freeze([
  // One namespace per application, labelled (patch), deleted with everything in it.
  ...rights('', ['namespaces'], WRITE, false),
  // The environment and service credentials, the web Service, volumes, the operator's ceilings.
  ...rights('', ['secrets', 'services', 'persistentvolumeclaims', 'resourcequotas', 'configmaps'], WRITE),
  // Instances, logs and one-off commands: pods are made by their controllers, read and deleted by Berth.
  ...rights('', ['pods'], ['get', 'list', 'delete']),
  ...rights('', ['pods/log'], ['get']),
  ...rights('', ['pods/exec'], ['create']),
  ...rights('apps', ['deployments', 'statefulsets'], WRITE),
  // A rollout's state and the previous release's pods.
  ...rights('apps', ['replicasets'], ['get', 'list']),
  ...rights('batch', ['jobs', 'cronjobs'], WRITE),
  ...rights('networking.k8s.io', ['ingresses', 'networkpolicies'], WRITE),
]);

/** `create deployments.apps (cluster-wide)`, as kubectl names a resource of a group. */
export function describeRight(right: Right): string {
  return `${right.verb} ${right.resource}${right.group ? `.${right.group}` : ''} (cluster-wide)`;
}

export interface RightsCheck {
  server: string;
  /** The server's gitVersion, `v1.20.2`. */
  version: string;
  /** How many rights were asked. */
  checked: number;
  missing: Right[];
}

/** Asks the server (SelfSubjectAccessReview) about each right, `concurrency` at once. */
export async function checkRights(
  client: KubeClient,
  options: { concurrency?: number; rights?: readonly Right[] } = {},
): Promise<RightsCheck> {
  const wanted = options.rights ?? BERTH_RIGHTS;
  // Unreachable or refused credentials fail here, before any review.
  const version = await client.serverVersion();
  const allowed = new Array<boolean>(wanted.length);
  let next = 0;
  const worker = async () => {
    while (next < wanted.length) {
      const index = next++;
      const right = wanted[index]!;
      const [resource, subresource] = right.resource.split('/');
      allowed[index] = await client.reviewAccess({
        verb: right.verb,
        group: right.group,
        resource: resource!,
        ...(subresource ? { subresource } : {}),
        namespace: '',
      });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 8, wanted.length) }, worker));
  return {
    server: client.server,
    version: version.gitVersion,
    checked: wanted.length,
    missing: wanted.filter((_, index) => !allowed[index]),
  };
}

/** A ClusterRole granting exactly BERTH_RIGHTS (docs/runtime.md shows it; bind it to Berth's identity). */
export function berthClusterRole(name = 'berth'): KubeObject {
  // The verbs of each resource, then one rule per group and set of verbs (as a person would write it).
  const verbs = new Map<string, { group: string; resource: string; verbs: string[] }>();
  for (const right of BERTH_RIGHTS) {
    const key = `${right.group} ${right.resource}`;
    const entry = verbs.get(key) ?? { group: right.group, resource: right.resource, verbs: [] };
    entry.verbs.push(right.verb);
    verbs.set(key, entry);
  }
  const rules = new Map<string, { apiGroups: string[]; resources: string[]; verbs: string[] }>();
  for (const entry of verbs.values()) {
    const key = `${entry.group} ${entry.verbs.join(',')}`;
    const rule = rules.get(key) ?? { apiGroups: [entry.group], resources: [], verbs: entry.verbs };
    rule.resources.push(entry.resource);
    rules.set(key, rule);
  }
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { 'app.kubernetes.io/managed-by': 'berth' } },
    rules: [...rules.values()],
  };
}
