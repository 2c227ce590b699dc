// Deployments and application states, named as Ploi Cloud names them (a client written for Ploi reads
// Berth's answers), and the rules between them. Pure: no I/O.

/** Ploi's deployment states. */
export type DeploymentStatus = 'pending' | 'running' | 'success' | 'failed' | 'cancelled';
export const DEPLOYMENT_STATUSES: readonly DeploymentStatus[] = [
  'pending',
  'running',
  'success',
  'failed',
  'cancelled',
];

/** What a running deployment is doing: fetch → build → release (init commands) → roll out. */
export type DeploymentStep = 'fetch' | 'build' | 'release' | 'rollout';

/** Ploi's application states. */
export type ApplicationStatus =
  'starting' | 'active' | 'deploying' | 'stopping' | 'stopped' | 'destroying' | 'failed';

export const isFinished = (status: DeploymentStatus): boolean =>
  status === 'success' || status === 'failed' || status === 'cancelled';

/** Releases kept for rollback (the live one included); older ones are removed after a success. */
export const RELEASES_KEPT = 3;

/** The release directory name of a deployment: Berth's own, never a user's input. */
export const releaseName = (deploymentId: number): string => `d${deploymentId}`;

/**
 * The default host of an application, under the operator's apps domain: reachable before any domain
 * is set. Names are DNS labels already (the document's rule), so only the length needs care.
 */
export function defaultHostname(name: string, id: number, appsDomain: string): string {
  const label = `${name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, 50)}-${id}`.replace(/^-+/, '');
  return `${label}.${appsDomain}`;
}

/** `512Mi`, `1Gi` → bytes; the document's rule already checked the form. */
export function memoryBytes(value: string | null, fallbackMi: number): number {
  const match = value === null ? null : /^(\d+)(Mi|Gi)$/.exec(value);
  if (!match) return fallbackMi * 1024 * 1024;
  return Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1) * 1024 * 1024;
}

/** Memory an application's replica gets when its document names none. */
export const DEFAULT_MEMORY_MI = 512;
