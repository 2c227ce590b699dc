// What every Kubernetes part of Berth shares: the shape of an object it applies, the names and labels
// of what it makes (issue 28's object map, docs/runtime.md), the check on every name derived from a
// document, and the quantities. Pure: no client, no I/O.
import { createHash } from 'node:crypto';

/** An object as Berth applies it (server-side apply, field manager `berth`). */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** The field manager of every apply. */
export const FIELD_MANAGER = 'berth';

export const LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by';
export const LABEL_NAME = 'app.kubernetes.io/name';
export const LABEL_TEAM = 'berth.dev/team';
export const LABEL_APPLICATION = 'berth.dev/application';
/** On pod templates: the release the pod runs (a new one rolls the Deployment). */
export const ANNOTATION_RELEASE = 'berth.dev/release';
/** On a release's own objects (its Secret, its init Job): what pruning a release selects. */
export const LABEL_RELEASE = 'berth.dev/release';
export const MANAGED_BY = 'berth';

/** The port the application's container listens on (`PORT`), the Service's target. */
export const APP_PORT = 8080;

/** `<prefix>app-<id>`: the namespace of one application and of its services. */
export function namespaceOf(prefix: string, appId: number): string {
  return checkName(`${prefix}app-${appId}`, 'namespace');
}

/** The labels on every object Berth makes for an application. */
export function baseLabels(teamId: number, appId: number): Record<string, string> {
  return {
    [LABEL_MANAGED_BY]: MANAGED_BY,
    [LABEL_TEAM]: String(teamId),
    [LABEL_APPLICATION]: String(appId),
  };
}

/** The base labels and `app.kubernetes.io/name` of one component (`web`, `worker-<name>`, `svc-<name>`). */
export function componentLabels(teamId: number, appId: number, component: string): Record<string, string> {
  return { ...baseLabels(teamId, appId), [LABEL_NAME]: checkName(component, 'component') };
}

/** An RFC 1123 label: what namespaces, Services and label values of names must be. */
export const RFC1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const MAX_NAME_LENGTH = 63;

/**
 * `name` when it is a valid RFC 1123 label (lower-case letters, digits and `-`, at most 63), else an
 * Error naming `what` it was made for: a document's volume, worker or service name can be too long
 * once prefixed, and the API server would refuse the object with a less helpful message.
 */
export function checkName(name: string, what: string): string {
  if (name.length > MAX_NAME_LENGTH)
    throw new Error(
      `${what}: the Kubernetes name '${name}' is ${name.length} characters long, at most ${MAX_NAME_LENGTH} are accepted`,
    );
  if (!RFC1123_LABEL.test(name))
    throw new Error(
      `${what}: the Kubernetes name '${name}' must be lower-case letters, digits and '-', starting and ending with a letter or digit`,
    );
  return name;
}

/**
 * The Ingress of a host name: `host-<10 hex of its SHA-256>` (a host name can be 253 characters and
 * has dots; the name only has to be stable and distinct, the host itself is in the rule).
 */
export function ingressName(hostname: string): string {
  return `host-${createHash('sha256').update(hostname.toLowerCase()).digest('hex').slice(0, 10)}`;
}

/** Bytes as a memory quantity: `256Mi` when whole mebibytes (what the documents give), else bytes. */
export function memoryQuantity(bytes: number): string {
  if (!Number.isSafeInteger(bytes) || bytes <= 0)
    throw new Error(`memory: ${bytes} is not a positive byte count`);
  const mi = 1024 * 1024;
  return bytes % mi === 0 ? `${bytes / mi}Mi` : String(bytes);
}

/** GiB (a document's `volume_size`) as a storage quantity: `20Gi`. */
export function storageQuantity(gib: number): string {
  if (!Number.isSafeInteger(gib) || gib <= 0)
    throw new Error(`volume_size: ${gib} is not a positive number of GiB`);
  return `${gib}Gi`;
}

/**
 * A Secret's `data` (base64 values). Never `stringData`: under server-side apply the field manager
 * owns only `stringData`'s keys, which the API server folds into `data`, so a key dropped from a later
 * apply would stay in `data` (kubernetes/kubernetes#108008): a deleted secret would stay in the
 * application's environment.
 */
export function secretData(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(values).map(([key, value]) => [key, Buffer.from(value, 'utf8').toString('base64')]),
  );
}

/** On a service's objects: the instance (Berth's uuid) a runner finds them by, wherever they are. */
export const LABEL_SERVICE_INSTANCE = 'berth.dev/service-instance';

/** An application's namespace, as the runtime and the service runner both apply it. */
export function namespaceObject(name: string, teamId: number, appId: number): KubeObject {
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: baseLabels(teamId, appId) } };
}

/** A workload (Deployment, StatefulSet) with one more annotation on its pod template. */
export function annotatePodTemplate(object: KubeObject, key: string, value: string): KubeObject {
  const spec = object.spec as { template: { metadata?: { annotations?: Record<string, string> } } };
  const metadata = spec.template.metadata ?? {};
  const annotations = { ...metadata.annotations, [key]: value };
  return {
    ...object,
    spec: { ...spec, template: { ...spec.template, metadata: { ...metadata, annotations } } },
  };
}
