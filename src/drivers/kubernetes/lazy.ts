// A KubeClient that loads @kubernetes/client-node (about half a second) and reads the kubeconfig on its
// first call: a Berth on the local runtime never pays for it, and one on Kubernetes pays once.
import type { KubeClient } from './client.js';

export function lazyKubeClient(settings: { kubeconfig?: string }): KubeClient {
  let loaded: Promise<KubeClient> | undefined;
  let server = '';
  const client = (): Promise<KubeClient> =>
    (loaded ??= import('./client.js').then((module) => {
      const made = module.createKubeClient(module.loadKubeConfig(settings));
      server = made.server;
      return made;
    }));
  return {
    get server() {
      return server;
    },
    apply: async (obj) => (await client()).apply(obj),
    read: async (apiVersion, kind, name, namespace) =>
      (await client()).read(apiVersion, kind, name, namespace),
    list: async (apiVersion, kind, namespace, labelSelector) =>
      (await client()).list(apiVersion, kind, namespace, labelSelector),
    remove: async (apiVersion, kind, name, namespace, options) =>
      (await client()).remove(apiVersion, kind, name, namespace, options),
    patchMerge: async (apiVersion, kind, name, namespace, patch, fieldManager) =>
      (await client()).patchMerge(apiVersion, kind, name, namespace, patch, fieldManager),
    serverVersion: async () => (await client()).serverVersion(),
    groupVersions: async () => (await client()).groupVersions(),
    supports: async (apiVersion, kind) => (await client()).supports(apiVersion, kind),
    reviewAccess: async (attributes) => (await client()).reviewAccess(attributes),
    podLog: async (namespace, pod, container, options) =>
      (await client()).podLog(namespace, pod, container, options),
    exec: async (namespace, pod, container, command, options) =>
      (await client()).exec(namespace, pod, container, command, options),
  };
}
