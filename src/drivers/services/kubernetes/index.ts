// An application's services on Kubernetes: each one a StatefulSet from the engine's official image with a
// headless Service, a PersistentVolumeClaim of its volume_size and its credentials in a Secret, in the
// application's namespace (./render.ts makes the objects). The application reaches it by the Service's
// name; Berth never connects to it. See docs/runtime.md, "Services on Kubernetes".
import type { ServiceRef, ServiceRunner, ServiceRuntime, ServiceSpec } from '../types.js';
import type { KubeClient } from '../../kubernetes/client.js';
import {
  LABEL_SERVICE_INSTANCE,
  namespaceObject,
  namespaceOf,
  type KubeObject,
} from '../../kubernetes/objects.js';
import { KUBERNETES_SERVICE_TYPES, renderService } from './render.js';

export interface KubernetesServiceRunnerOptions {
  client: KubeClient;
  namespacePrefix: string;
  storageClass?: string;
  /** How long a new or restarted instance may take to be ready (an image pull, a first start). */
  readyTimeoutMs: number;
  pollMs?: number;
}

type StatefulSet = KubeObject & { status?: { readyReplicas?: number; replicas?: number } };

export function createKubernetesServiceRunner(options: KubernetesServiceRunnerOptions): ServiceRunner {
  const { client } = options;
  const pollMs = options.pollMs ?? 250;
  const selector = (ref: ServiceRef): string => `${LABEL_SERVICE_INSTANCE}=${ref.id}`;

  /** The instance's StatefulSet, found by its label wherever its application's namespace is. */
  async function find(ref: ServiceRef): Promise<StatefulSet | undefined> {
    const [found] = await client.list<StatefulSet>('apps/v1', 'StatefulSet', undefined, selector(ref));
    return found;
  }

  async function awaitReady(namespace: string, name: string): Promise<void> {
    const end = Date.now() + options.readyTimeoutMs;
    for (;;) {
      const set = await client.read<StatefulSet>('apps/v1', 'StatefulSet', name, namespace);
      if ((set?.status?.readyReplicas ?? 0) >= 1) return;
      if (Date.now() > end)
        throw new Error(
          `${name} in ${namespace} was not ready within ${Math.round(options.readyTimeoutMs / 1000)} s`,
        );
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  async function converge(spec: ServiceSpec): Promise<ServiceRuntime> {
    const namespace = namespaceOf(options.namespacePrefix, spec.applicationId);
    const rendered = renderService(spec, {
      namespace,
      ...(options.storageClass ? { storageClass: options.storageClass } : {}),
    });
    // The application's namespace, made here when a service comes before the first deployment.
    await client.apply(namespaceObject(namespace, spec.teamId, spec.applicationId));
    for (const object of rendered.objects) await client.apply(object);
    const set = rendered.objects.find((o) => o.kind === 'StatefulSet')!;
    await awaitReady(namespace, set.metadata.name);
    return {
      host: rendered.host,
      port: rendered.port,
      pid: null,
      version: rendered.version,
      location: null,
      extra: rendered.extra,
    };
  }

  async function scale(ref: ServiceRef, replicas: number): Promise<StatefulSet | undefined> {
    const set = await find(ref);
    if (set)
      await client.patchMerge(
        'apps/v1',
        'StatefulSet',
        set.metadata.name,
        set.metadata.namespace,
        { spec: { replicas } },
        'berth',
      );
    return set;
  }

  return {
    types: KUBERNETES_SERVICE_TYPES,
    provision: converge,
    start: converge,
    async restart(spec) {
      const set = await find({ id: spec.id, type: spec.type });
      // A changed template rolls the pod by itself; an unchanged one is restarted by deleting its pod.
      if (set)
        await client.remove('v1', 'Pod', `${set.metadata.name}-0`, set.metadata.namespace, {
          propagation: 'Background',
        });
      return converge(spec);
    },
    async stop(ref) {
      await scale(ref, 0);
    },
    async delete(ref) {
      const set = await find(ref);
      if (!set) return;
      const namespace = set.metadata.namespace!;
      const label = selector(ref);
      await client.remove('apps/v1', 'StatefulSet', set.metadata.name, namespace, {
        propagation: 'Foreground',
      });
      for (const [apiVersion, kind] of [
        ['v1', 'Service'],
        ['v1', 'Secret'],
        ['v1', 'PersistentVolumeClaim'],
      ] as const) {
        for (const object of await client.list(apiVersion, kind, namespace, label))
          await client.remove(apiVersion, kind, object.metadata.name, namespace, {
            propagation: 'Background',
          });
      }
    },
    async status(ref) {
      const set = await find(ref);
      return { running: (set?.status?.readyReplicas ?? 0) >= 1, pid: null };
    },
    async logs(ref, tail) {
      const set = await find(ref);
      if (!set) return [];
      const text = await client
        .podLog(set.metadata.namespace!, `${set.metadata.name}-0`, 'service', {
          tailLines: tail,
          timestamps: true,
        })
        .catch(() => ''); // not started yet: no log
      // Each line without the API's timestamp, as the local runners answer them.
      return text
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => line.slice(line.indexOf(' ') + 1));
    },
  };
}
