// The Kubernetes API as the kubernetes runtime driver uses it: a handful of generic calls on plain JSON
// objects (server-side apply, read, list, delete, merge patch), discovery, pod logs and exec, and access
// reviews. @kubernetes/client-node gives the kubeconfig (TLS, tokens, exec plugins, the in-cluster
// service account) and the exec WebSocket; object calls go out as plain JSON over node:https with the
// options it makes, because its generic object client sends each known kind through the typed model,
// which drops any field the model lacks and answers class instances with Date fields instead of what
// the API server holds.
import http from 'node:http';
import https from 'node:https';
import * as k8s from '@kubernetes/client-node';
import { apiError, connectionDetail, KubernetesApiError, KubernetesUnreachableError } from './errors.js';
import { execIn, type ExecOptions, type ExecResult } from './exec.js';
import { FIELD_MANAGER, type KubeObject } from './objects.js';

export { KubernetesApiError, KubernetesUnreachableError } from './errors.js';
export type { ExecOptions, ExecResult } from './exec.js';

export type { KubeObject } from './objects.js';

export interface PodLogOptions {
  tailLines?: number;
  /** RFC 3339: only lines after it. */
  sinceTime?: string;
  /** RFC 3339 (nanosecond) timestamp at the start of every line. */
  timestamps: true;
  /** Most bytes of log answered. */
  limitBytes?: number;
}

/** One question to SelfSubjectAccessReview: may this client do `verb` on `resource`? */
export interface AccessAttributes {
  verb: string;
  /** '' for the core group. */
  group: string;
  resource: string;
  subresource?: string;
  /** '' or absent: in every namespace (cluster-wide). */
  namespace?: string;
}

export interface ServerVersion {
  gitVersion: string;
  major: string;
  minor: string;
}

/** What the kubernetes driver asks of a cluster. Every failure is a KubernetesApiError or a KubernetesUnreachableError. */
export interface KubeClient {
  /** The API server's URL (for messages; never a credential). */
  readonly server: string;
  /** Server-side apply as field manager `berth`, forcing conflicts: the object as the server now holds it. */
  apply(obj: KubeObject): Promise<KubeObject>;
  /** The object, or undefined when there is none (404). A namespaced kind needs its namespace. */
  read<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    name: string,
    namespace?: string,
  ): Promise<T | undefined>;
  /** Objects of a kind in `namespace` (undefined or '': in all namespaces, or a cluster-scoped kind). */
  list<T extends KubeObject = KubeObject>(
    apiVersion: string,
    kind: string,
    namespace: string | undefined,
    labelSelector?: string,
  ): Promise<T[]>;
  /** Deletes the object; one already gone is fine. Foreground: the dependents go first. */
  remove(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    options: { propagation: 'Foreground' | 'Background' },
  ): Promise<void>;
  /** JSON merge patch (RFC 7386: null removes a key) as `fieldManager`: the object after it. */
  patchMerge(
    apiVersion: string,
    kind: string,
    name: string,
    namespace: string | undefined,
    patch: Record<string, unknown>,
    fieldManager: string,
  ): Promise<KubeObject>;
  serverVersion(): Promise<ServerVersion>;
  /**
   * Every `group/version` the server serves (`v1` for the core group), asked once. A group version can
   * lack a kind (1.20 serves batch/v1 without CronJob): ask `supports` about a kind.
   */
  groupVersions(): Promise<Set<string>>;
  /** Whether the server serves `kind` in `apiVersion` (discovery, cached per group version). */
  supports(apiVersion: string, kind: string): Promise<boolean>;
  /** Whether this client may do what `attributes` say (SelfSubjectAccessReview). */
  reviewAccess(attributes: AccessAttributes): Promise<boolean>;
  podLog(namespace: string, pod: string, container: string, options: PodLogOptions): Promise<string>;
  /** `command` run in a running container over the exec WebSocket (no shell unless it names one). */
  exec(
    namespace: string,
    pod: string,
    container: string,
    command: string[],
    options: ExecOptions,
  ): Promise<ExecResult>;
}

/** Most a request (not exec) may take: a server that accepts and never answers is unreachable. */
const DEFAULT_TIMEOUT_MS = 30_000;

/** The cluster from a kubeconfig file, else the pod's service account (KUBERNETES_SERVICE_HOST and its token). */
export function loadKubeConfig(settings: { kubeconfig?: string }): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  if (settings.kubeconfig !== undefined) kc.loadFromFile(settings.kubeconfig);
  else {
    kc.loadFromCluster();
    // Outside a pod it still "loads", as https://undefined:undefined.
    if (kc.getCurrentCluster()?.server.includes('//undefined'))
      throw new Error(
        'no kubeconfig (BERTH_KUBECONFIG or KUBECONFIG) and not in a pod (KUBERNETES_SERVICE_HOST is unset)',
      );
  }
  if (!kc.getCurrentCluster()?.server)
    throw new Error(`the kubeconfig ${settings.kubeconfig ?? ''} names no current cluster`);
  return kc;
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

export function createKubeClient(kc: k8s.KubeConfig, options: { timeoutMs?: number } = {}): KubeClient {
  const server = kc.getCurrentCluster()?.server.replace(/\/+$/, '') ?? '';
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // Connections kept alive between requests (a rollout's polls would each pay a TLS handshake); the TLS
  // settings and credentials still come from the kubeconfig on every request. A proxy keeps its agent.
  const pool = kc.getCurrentCluster()?.proxyUrl
    ? undefined
    : new https.Agent({ keepAlive: true, maxSockets: 16 });

  async function request(
    method: string,
    path: string,
    query: Record<string, string | number | boolean | undefined> = {},
    body?: { contentType: string; data: unknown },
  ): Promise<string> {
    const url = new URL(server + path);
    for (const [key, value] of Object.entries(query))
      if (value !== undefined) url.searchParams.set(key, String(value));
    const payload = body === undefined ? undefined : JSON.stringify(body.data);
    const opts: https.RequestOptions = {
      method,
      headers: {
        Accept: 'application/json, */*',
        ...(body ? { 'Content-Type': body.contentType } : {}),
      },
    };
    // Credentials, CA and proxy agent from the kubeconfig; a token file is read again on each request.
    await kc.applyToHTTPSOptions(opts);
    if (pool && url.protocol === 'https:') opts.agent = pool;
    return new Promise<string>((resolve, reject) => {
      const req = (url.protocol === 'http:' ? http : https).request(url, opts, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', (error) => reject(new KubernetesUnreachableError(server, error.message)));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve(text);
          else reject(apiError(status, text));
        });
      });
      req.setTimeout(timeoutMs, () =>
        req.destroy(new Error(`no answer within ${Math.round(timeoutMs / 1000)} s`)),
      );
      req.on('error', (error) => reject(new KubernetesUnreachableError(server, connectionDetail(error))));
      req.end(payload);
    });
  }
  const json = async <T>(...args: Parameters<typeof request>): Promise<T> =>
    JSON.parse(await request(...args)) as T;

  // Discovery: the resource list of each group version, asked once; asked again when a kind is not in
  // it (a CRD installed meanwhile), as kubectl does.
  const resourceLists = new Map<string, Promise<ApiResource[]>>();
  const resourcesOf = (apiVersion: string, fresh = false): Promise<ApiResource[]> => {
    let list = fresh ? undefined : resourceLists.get(apiVersion);
    if (!list) {
      list = json<{ resources: ApiResource[] }>('GET', apiRoot(apiVersion)).then(
        (answer) => answer.resources,
        (error: unknown) => {
          if (error instanceof KubernetesApiError && error.statusCode === 404) return [];
          throw error;
        },
      );
      list.catch(() => resourceLists.delete(apiVersion));
      resourceLists.set(apiVersion, list);
    }
    return list;
  };
  const findResource = async (apiVersion: string, kind: string): Promise<ApiResource | undefined> => {
    const top = (resources: ApiResource[]) => resources.find((r) => r.kind === kind && !r.name.includes('/'));
    return top(await resourcesOf(apiVersion)) ?? top(await resourcesOf(apiVersion, true));
  };
  /** The URL path of a kind's collection, or of one object when `name` is given. */
  const pathOf = async (apiVersion: string, kind: string, namespace?: string, name?: string) => {
    const resource = await findResource(apiVersion, kind);
    // Not a 404 of its own: a read answers undefined for a missing object, never for a missing API.
    if (!resource)
      throw new Error(`the Kubernetes API server ${server} does not serve ${kind} in ${apiVersion}`);
    // Never the server's or the context's default namespace: an object lands where Berth says.
    if (resource.namespaced && !namespace && name !== undefined)
      throw new Error(`${kind} ${name} is namespaced: a namespace is needed`);
    const scope = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
    const item = name === undefined ? '' : `/${encodeURIComponent(name)}`;
    return `${apiRoot(apiVersion)}${scope}/${resource.name}${item}`;
  };

  let groupVersions: Promise<Set<string>> | undefined;

  return {
    server,

    async apply(obj) {
      const path = await pathOf(obj.apiVersion, obj.kind, obj.metadata.namespace, obj.metadata.name);
      return json<KubeObject>(
        'PATCH',
        path,
        { fieldManager: FIELD_MANAGER, force: true },
        // JSON is YAML: the apply content type takes it as it is.
        { contentType: 'application/apply-patch+yaml', data: obj },
      );
    },

    async read<T extends KubeObject = KubeObject>(
      apiVersion: string,
      kind: string,
      name: string,
      namespace?: string,
    ): Promise<T | undefined> {
      try {
        return await json<T>('GET', await pathOf(apiVersion, kind, namespace, name));
      } catch (error) {
        if (error instanceof KubernetesApiError && error.statusCode === 404 && error.reason === 'NotFound')
          return undefined;
        throw error;
      }
    },

    async list<T extends KubeObject = KubeObject>(
      apiVersion: string,
      kind: string,
      namespace: string | undefined,
      labelSelector?: string,
    ): Promise<T[]> {
      const answer = await json<{ items: Array<Omit<T, 'apiVersion' | 'kind'>> }>(
        'GET',
        await pathOf(apiVersion, kind, namespace),
        { labelSelector },
      );
      // A list's items carry no apiVersion and kind: put back, so each can be applied or read again.
      return answer.items.map((item) => ({ apiVersion, kind, ...item }) as T);
    },

    async remove(apiVersion, kind, name, namespace, { propagation }) {
      try {
        await request('DELETE', await pathOf(apiVersion, kind, namespace, name), {
          propagationPolicy: propagation,
        });
      } catch (error) {
        if (error instanceof KubernetesApiError && error.statusCode === 404 && error.reason === 'NotFound')
          return;
        throw error;
      }
    },

    async patchMerge(apiVersion, kind, name, namespace, patch, fieldManager) {
      return json<KubeObject>(
        'PATCH',
        await pathOf(apiVersion, kind, namespace, name),
        { fieldManager },
        { contentType: 'application/merge-patch+json', data: patch },
      );
    },

    serverVersion() {
      return json<ServerVersion>('GET', '/version');
    },

    groupVersions() {
      groupVersions ??= (async () => {
        const [core, groups] = await Promise.all([
          json<{ versions: string[] }>('GET', '/api'),
          json<{ groups: Array<{ versions: Array<{ groupVersion: string }> }> }>('GET', '/apis'),
        ]);
        return new Set([
          ...core.versions,
          ...groups.groups.flatMap((group) => group.versions.map((v) => v.groupVersion)),
        ]);
      })();
      groupVersions.catch(() => (groupVersions = undefined));
      return groupVersions;
    },

    async supports(apiVersion, kind) {
      return (await findResource(apiVersion, kind)) !== undefined;
    },

    async reviewAccess(attributes) {
      const review = await json<{ status?: { allowed?: boolean } }>(
        'POST',
        '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews',
        {},
        {
          contentType: 'application/json',
          data: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SelfSubjectAccessReview',
            spec: { resourceAttributes: { ...attributes, namespace: attributes.namespace ?? '' } },
          },
        },
      );
      return review.status?.allowed === true;
    },

    podLog(namespace, pod, container, logOptions) {
      return request(
        'GET',
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(pod)}/log`,
        {
          container,
          tailLines: logOptions.tailLines,
          sinceTime: logOptions.sinceTime,
          timestamps: logOptions.timestamps,
          limitBytes: logOptions.limitBytes,
        },
      );
    },

    exec(namespace, pod, container, command, execOptions) {
      return execIn(kc, server, { namespace, pod, container, command }, execOptions);
    },
  };
}

/** `/api/v1` for the core group, `/apis/<group>/<version>` for the others. */
function apiRoot(apiVersion: string): string {
  return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
}
