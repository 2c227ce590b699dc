// What the API server says of an application's workloads and pods, in the runtime interface's words: instances, their
// states and restarts, log lines. Pure: no client.
import type { InstanceState, InstanceStatus, LogLine } from '../driver.js';
import { ANNOTATION_RELEASE, LABEL_NAME, type KubeObject } from '../../kubernetes/objects.js';
import { workerInstanceName } from '../../../domain/app-services.js';

export type Pod = KubeObject & {
  metadata: KubeObject['metadata'] & { deletionTimestamp?: string };
  spec?: {
    containers?: Array<{
      name: string;
      readinessProbe?: object;
      resources?: { limits?: Record<string, string> };
    }>;
  };
  status?: {
    phase?: string;
    startTime?: string;
    conditions?: Array<{ type: string; status: string }>;
    containerStatuses?: Array<{
      name: string;
      ready?: boolean;
      restartCount?: number;
      state?: { waiting?: { reason?: string }; running?: object; terminated?: { reason?: string } };
      lastState?: { terminated?: { reason?: string; exitCode?: number } };
    }>;
  };
};

/** `256Mi`, `1Gi`, `512M`, plain bytes → bytes; 0 for what it does not read. */
export function quantityBytes(quantity: string | undefined): number {
  const match = quantity === undefined ? null : /^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(quantity);
  if (!match) return 0;
  const units: Record<string, number> = {
    Ki: 1024,
    Mi: 1024 ** 2,
    Gi: 1024 ** 3,
    Ti: 1024 ** 4,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
  };
  return Number(match[1]) * (match[2] ? units[match[2]]! : 1);
}

/** What an instance is, from its pod, as the local driver names its states. */
export function podState(pod: Pod): InstanceState {
  if (pod.metadata.deletionTimestamp) return 'stopping';
  const phase = pod.status?.phase;
  if (phase === 'Succeeded') return 'idle';
  if (phase === 'Failed') return 'crashed';
  if (phase !== 'Running') return 'starting';
  const container = pod.status?.containerStatuses?.[0];
  if (container?.ready) return 'running';
  if (container?.state?.waiting) return (container.restartCount ?? 0) > 0 ? 'restarting' : 'starting';
  return (container?.restartCount ?? 0) > 0 ? 'unhealthy' : 'starting';
}

/** Why the pod's container last restarted, in the local driver's words. */
function restartReason(pod: Pod): string | null {
  const last = pod.status?.containerStatuses?.[0]?.lastState?.terminated;
  if (!last) return null;
  if (last.reason === 'OOMKilled') return 'killed: out of memory';
  return last.exitCode !== undefined ? `exited with ${last.exitCode}` : (last.reason ?? null);
}

/** The instance a pod is: its name, or `worker-<name>` for a worker's one pod. */
export function instanceName(pod: Pod): string | undefined {
  const component = pod.metadata.labels?.[LABEL_NAME] ?? '';
  if (component === 'web') return pod.metadata.name;
  if (component.startsWith('worker-')) return workerInstanceName(component.slice('worker-'.length));
  if (component === 'scheduler') return 'scheduler';
  return undefined; // the init Job's pods are no instances
}

export function instanceOf(pod: Pod, name: string): InstanceStatus {
  const container = pod.status?.containerStatuses?.[0];
  const state = podState(pod);
  // Without a readiness probe (health checks disabled) the instance is not monitored.
  const probed = pod.spec?.containers?.[0]?.readinessProbe !== undefined;
  return {
    name,
    release: pod.metadata.annotations?.[ANNOTATION_RELEASE] ?? '',
    state,
    pid: null,
    port: null,
    startedAt: pod.status?.startTime ?? null,
    restarts: container?.restartCount ?? 0,
    lastRestartReason: restartReason(pod),
    healthy: probed ? container?.ready === true : null,
    memoryLimitBytes: quantityBytes(pod.spec?.containers?.[0]?.resources?.limits?.memory),
  };
}

/** The log API's lines (`<RFC 3339 time> <text>` with `timestamps=true`) as the runtime's. */
export function parseLogLines(text: string, source: string): LogLine[] {
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => {
      const space = line.indexOf(' ');
      const at = space > 0 ? line.slice(0, space) : '';
      return Number.isNaN(Date.parse(at))
        ? { at: new Date().toISOString(), source, stream: 'stdout' as const, line }
        : { at: new Date(at).toISOString(), source, stream: 'stdout' as const, line: line.slice(space + 1) };
    });
}

/** Why each pod that is not ready is not (`web-…: CrashLoopBackOff, restarted 3 times`), for a log. */
export function notReady(pods: Pod[]): string[] {
  return pods.flatMap((pod) => {
    const container = pod.status?.containerStatuses?.[0];
    if (container?.ready) return [];
    const why = container?.state?.waiting?.reason ?? pod.status?.phase ?? 'Pending';
    const restarts = container?.restartCount ? `, restarted ${container.restartCount} times` : '';
    return [`${pod.metadata.name}: ${why}${restarts}`];
  });
}

export type Deployment = KubeObject & {
  metadata: KubeObject['metadata'] & { generation?: number };
  spec?: { replicas?: number; template?: { metadata?: { annotations?: Record<string, string> } } };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
};

export type Job = KubeObject & {
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
};
