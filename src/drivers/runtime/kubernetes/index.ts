// The Kubernetes runtime: each application is a namespace of objects applied with server-side apply
// (field manager `berth`), rendered by ./render.ts from the same AppSpec the local driver gets. Builds run
// on Berth's host as today (the `builder`, the local driver, never started); a built release is packed
// into the artifact store and pods fetch it through a short-lived signed URL kept in a Secret
// (docs/decisions/0013-kubernetes-releases-and-test-cluster.md). Berth keeps no process state here: every
// answer (status, instances, logs) is asked of the API server. See docs/runtime.md, "Kubernetes".
import {
  PermanentDriverError,
  type AppRuntimeDriver,
  type AppSpec,
  type ExecResult,
  type LogLine,
  type RuntimeStatus,
  type StepContext,
} from '../driver.js';
import type { ArtifactStore } from '../../artifacts/types.js';
import { checkArtifactKey } from '../../artifacts/types.js';
import type { KubeClient } from '../../kubernetes/client.js';
import {
  ANNOTATION_RELEASE,
  annotatePodTemplate,
  LABEL_APPLICATION,
  LABEL_NAME,
  LABEL_RELEASE,
  namespaceOf,
} from '../../kubernetes/objects.js';
import {
  renderApplication,
  renderEnvSecret,
  renderInitJob,
  renderNamespace,
  renderReleaseSecret,
  type KubernetesRenderOptions,
} from './render.js';
import { hashArtifact, packRelease } from './releases.js';
import {
  instanceName,
  instanceOf,
  notReady,
  parseLogLines,
  podState,
  type Deployment,
  type Job,
  type Pod,
} from './pods.js';

export interface KubernetesRuntimeOptions {
  client: KubeClient;
  /** Builds on this host and keeps the built releases' files (the local driver, never started). */
  builder: AppRuntimeDriver;
  /** Where `builder` keeps a built release's files, packed as they are into the artifact store. */
  releaseDir(appId: number, release: string): string;
  artifacts: ArtifactStore;
  /** The render options but those read from the cluster (`apis`). */
  render: Omit<KubernetesRenderOptions, 'apis'>;
  deploymentTimeoutMs: number;
  /** How often the API server is asked while waiting (tests: shorter). */
  pollMs?: number;
  log: { warn(obj: object, msg: string): void };
}

/** Life of a release URL: a pod restarted within it fetches its release; Berth renews it at half-life. */
const RELEASE_URL_TTL_SECONDS = 3600;
/** On pod templates: the version of the Secret `env` the pods started with. */
const ANNOTATION_ENV_VERSION = 'berth.dev/env-version';
const EXEC_OUTPUT_BYTES = 256 * 1024;
const EXEC_TIMEOUT_MS = 10 * 60_000;
/** How long a namespace may take to go (its pods' grace periods, PVCs' finalizers). */
const NAMESPACE_GONE_MS = 5 * 60_000;

const releaseKey = (appId: number, release: string): string =>
  checkArtifactKey(`apps/${appId}/releases/${release}.tar.gz`);

export function createKubernetesRuntimeDriver(options: KubernetesRuntimeOptions): AppRuntimeDriver {
  const { client, builder, artifacts } = options;
  const pollMs = options.pollMs ?? 250;
  const namespace = (appId: number): string => namespaceOf(options.render.namespacePrefix, appId);
  /** The SHA-256 of each release archive in the store, read once per process. */
  const hashes = new Map<string, string>();
  /**
   * What this Berth last applied of each application and left applied (a rollout, or what it found
   * running): the release URLs it renews, and what a failed rollout goes back to, with the spec it ran
   * with (the failed one's start command may be what failed).
   */
  const applied = new Map<number, { app: AppSpec; release: string }>();
  let renewal: NodeJS.Timeout | undefined;
  let renderOptions: KubernetesRenderOptions | undefined;

  /** The render options with what discovery says the cluster serves (asked once). */
  async function rendering(): Promise<KubernetesRenderOptions> {
    renderOptions ??= {
      ...options.render,
      // 1.20 serves batch/v1 without CronJob: the kind is asked, not the group version.
      apis: { cronJob: (await client.supports('batch/v1', 'CronJob')) ? 'batch/v1' : 'batch/v1beta1' },
    };
    return renderOptions;
  }

  /** Packs the built release into the store (once) and answers its SHA-256. */
  async function publishRelease(
    appId: number,
    release: string,
    log?: (line: string) => void,
  ): Promise<string> {
    const key = releaseKey(appId, release);
    const known = hashes.get(key);
    if (known) return known;
    const digest =
      (await hashArtifact(artifacts, key)) ??
      (await (async () => {
        if (!(await builder.hasRelease(appId, release)))
          throw new PermanentDriverError(`release ${release} is gone: deploy again to build it`);
        const packed = await packRelease(artifacts, key, options.releaseDir(appId, release));
        log?.(`Packed release ${release} (${(packed.size / 1024 ** 2).toFixed(1)} MiB) for the cluster`);
        return packed.sha256;
      })());
    hashes.set(key, digest);
    return digest;
  }

  /**
   * The namespace, the environment and the release's Secret with a fresh URL; answers the environment
   * Secret's resourceVersion, which changes only when its content does.
   */
  async function applyBase(app: AppSpec, release: string, log?: (line: string) => void): Promise<string> {
    const render = await rendering();
    const sha256 = await publishRelease(app.id, release, log);
    const url = artifacts.url(releaseKey(app.id, release), RELEASE_URL_TTL_SECONDS);
    await client.apply(renderNamespace(app, render));
    const env = await client.apply(renderEnvSecret(app, render));
    await client.apply(renderReleaseSecret(app, release, { url, sha256 }, render));
    return (env.metadata as { resourceVersion?: string }).resourceVersion ?? '';
  }

  async function wait<T>(
    what: string,
    check: () => Promise<T | undefined>,
    limits: { signal?: AbortSignal; deadlineMs: number },
  ): Promise<T> {
    const end = Date.now() + limits.deadlineMs;
    for (;;) {
      if (limits.signal?.aborted) throw limits.signal.reason;
      const done = await check();
      if (done !== undefined) return done;
      if (Date.now() > end)
        throw new Error(`${what} did not finish within ${Math.round(limits.deadlineMs / 1000)} s`);
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }

  const readDeployment = (appId: number, name = 'web') =>
    client.read<Deployment>('apps/v1', 'Deployment', name, namespace(appId));

  const liveRelease = (deployment: Deployment | undefined): string | null =>
    deployment?.spec?.template?.metadata?.annotations?.[ANNOTATION_RELEASE] ?? null;

  /**
   * Waits until the Deployment runs `replicas` updated, available pods and no others; throws with the
   * controller's message when its progress deadline passed.
   */
  async function awaitRollout(app: AppSpec, release: string, step: StepContext): Promise<void> {
    try {
      await waitForRollout(app, release, step);
    } catch (error) {
      // Cut short (the deployment's deadline, a cancel): the log says what kept the pods from ready.
      const web = (await podsOf(app.id).catch(() => [])).filter(
        (p) => p.metadata.labels?.[LABEL_NAME] === 'web',
      );
      for (const line of notReady(web)) step.log(`Not ready: ${line}`);
      throw error;
    }
  }

  async function waitForRollout(app: AppSpec, release: string, step: StepContext): Promise<void> {
    let reported = '';
    await wait(
      `the rollout of ${release}`,
      async () => {
        const d = await readDeployment(app.id);
        const s = d?.status ?? {};
        const stuck = s.conditions?.find(
          (c) => c.type === 'Progressing' && c.status === 'False' && c.reason === 'ProgressDeadlineExceeded',
        );
        if (stuck && (s.observedGeneration ?? 0) >= (d?.metadata.generation ?? 0))
          throw new RolloutFailed(stuck.message ?? 'the progress deadline passed');
        const progress = `${s.updatedReplicas ?? 0} updated, ${s.availableReplicas ?? 0} available of ${app.replicas}`;
        if (progress !== reported) step.log(`Rollout of ${release}: ${(reported = progress)}`);
        const done =
          d !== undefined &&
          (s.observedGeneration ?? 0) >= (d.metadata.generation ?? 0) &&
          (s.updatedReplicas ?? 0) === app.replicas &&
          (s.availableReplicas ?? 0) >= app.replicas &&
          (s.replicas ?? 0) === app.replicas;
        return done ? true : undefined;
      },
      // The controller's own deadline (progressDeadlineSeconds) answers first; this one is a backstop.
      { signal: step.signal, deadlineMs: options.deploymentTimeoutMs + 30_000 },
    );
  }

  /** The pods that are the application's instances (web, workers, scheduler), not its services' or Jobs'. */
  async function instancePods(appId: number): Promise<Array<{ pod: Pod; name: string }>> {
    return (await podsOf(appId)).flatMap((pod) => {
      const name = instanceName(pod);
      return name ? [{ pod, name }] : [];
    });
  }

  async function podsOf(appId: number): Promise<Pod[]> {
    return client.list<Pod>('v1', 'Pod', namespace(appId), `${LABEL_APPLICATION}=${appId}`);
  }

  async function logsOfPod(
    ns: string,
    pod: Pod,
    source: string,
    tail: number,
    since?: Date,
  ): Promise<LogLine[]> {
    const container = pod.spec?.containers?.[0]?.name;
    if (!container) return [];
    const text = await client
      .podLog(ns, pod.metadata.name, container, {
        tailLines: tail,
        ...(since ? { sinceTime: since.toISOString() } : {}),
        timestamps: true,
      })
      .catch(() => ''); // a pod gone or not started has no log yet
    return parseLogLines(text, source);
  }

  async function renewReleaseUrls(): Promise<void> {
    for (const { app, release } of applied.values()) {
      await applyBase(app, release).catch((error: unknown) =>
        options.log.warn({ err: error, app: app.id }, 'the release URL of an application was not renewed'),
      );
    }
  }

  /**
   * Everything of `release` as `app` says. The pods read their environment from the Secret `env` at
   * start only: its version on the pod templates rolls them when it changed, also for a rollback or a
   * skip_build that keeps the release name (and only then: an unchanged apply rolls nothing).
   */
  async function apply(app: AppSpec, release: string, log?: (line: string) => void): Promise<void> {
    const envVersion = await applyBase(app, release, log);
    const objects = renderApplication(app, release, await rendering());
    for (const object of objects)
      await client.apply(
        object.kind === 'Deployment'
          ? annotatePodTemplate(object, ANNOTATION_ENV_VERSION, envVersion)
          : object,
      );
    applied.set(app.id, { app, release });
  }

  return {
    name: 'kubernetes',
    endpoints: { http: undefined, https: undefined },

    capabilities: () => builder.capabilities(),

    async build(app, release, source, step) {
      const result = await builder.build(app, release, source, step);
      await publishRelease(app.id, release, step.log);
      return result;
    },

    async hasRelease(appId, release) {
      return (
        (await builder.hasRelease(appId, release)) || (await artifacts.exists(releaseKey(appId, release)))
      );
    },

    async release(app, release, step) {
      await applyBase(app, release, step.log);
      const render = await rendering();
      // The volumes exist before the init commands that may write to them.
      for (const claim of renderApplication(app, release, render))
        if (claim.kind === 'PersistentVolumeClaim') await client.apply(claim);
      const job = renderInitJob(app, release, render);
      if (!job) return;
      const ns = namespace(app.id);
      const existing = await client.read<Job>('batch/v1', 'Job', job.metadata.name, ns);
      // A retry after a failure runs the commands again; one that completed is not repeated.
      if (existing?.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True')) {
        await client.remove('batch/v1', 'Job', job.metadata.name, ns, { propagation: 'Foreground' });
        await wait(
          'the removal of the failed init Job',
          async () => ((await client.read('batch/v1', 'Job', job.metadata.name, ns)) ? undefined : true),
          { signal: step.signal, deadlineMs: 60_000 },
        );
      }
      for (const command of app.commands.init) step.log(`$ ${command}`);
      await client.apply(job);
      const outcome = await wait(
        `the init commands of ${release}`,
        async () => {
          const j = await client.read<Job>('batch/v1', 'Job', job.metadata.name, ns);
          const done = j?.status?.conditions?.find(
            (c) => (c.type === 'Complete' || c.type === 'Failed') && c.status === 'True',
          );
          return done;
        },
        { signal: step.signal, deadlineMs: options.deploymentTimeoutMs },
      );
      const pods = await client.list<Pod>('v1', 'Pod', ns, `job-name=${job.metadata.name}`);
      for (const pod of pods) for (const line of await logsOfPod(ns, pod, 'init', 200)) step.log(line.line);
      if (outcome.type === 'Failed')
        throw new Error(`the init commands failed: ${outcome.message ?? outcome.reason ?? 'the Job failed'}`);
    },

    async rollout(app, release, step) {
      const previous = applied.get(app.id);
      await apply(app, release, step.log);
      step.log(`Applied release ${release} to namespace ${namespace(app.id)}`);
      try {
        await awaitRollout(app, release, step);
      } catch (error) {
        // The old ReplicaSet kept serving (maxUnavailable 0): the Deployment goes back to its template,
        // so that the failed one stops trying; a first rollout goes to no replicas.
        if (previous) {
          await apply(previous.app, previous.release).then(
            () => step.log(`Rolled back to ${previous.release}`),
            (undo: unknown) => {
              // Still what to go back to, and whose URL to renew.
              applied.set(app.id, previous);
              options.log.warn({ err: undo, app: app.id }, 'the failed rollout was not undone');
            },
          );
        } else {
          await client.patchMerge(
            'apps/v1',
            'Deployment',
            'web',
            namespace(app.id),
            { spec: { replicas: 0 } },
            'berth',
          );
          applied.delete(app.id);
        }
        if (error instanceof RolloutFailed)
          throw new Error(`the rollout of ${release} failed: ${error.message}`);
        throw error;
      }
      step.log(`Routed ${app.hostnames.join(', ')} to ${release}`);
    },

    async ensureRunning(app, release) {
      await apply(app, release);
    },

    async stop(appId) {
      const ns = namespace(appId);
      applied.delete(appId);
      const deployments = await client.list<Deployment>('apps/v1', 'Deployment', ns);
      for (const d of deployments)
        await client.patchMerge(
          'apps/v1',
          'Deployment',
          d.metadata.name,
          ns,
          { spec: { replicas: 0 } },
          'berth',
        );
      const render = await rendering();
      for (const c of await client.list(render.apis.cronJob, 'CronJob', ns))
        await client.patchMerge(
          render.apis.cronJob,
          'CronJob',
          c.metadata.name,
          ns,
          { spec: { suspend: true } },
          'berth',
        );
    },

    async remove(appId) {
      applied.delete(appId);
      const ns = namespace(appId);
      await client.remove('v1', 'Namespace', ns, undefined, { propagation: 'Background' });
      await wait(
        `the removal of namespace ${ns}`,
        async () => ((await client.read('v1', 'Namespace', ns)) ? undefined : true),
        { deadlineMs: NAMESPACE_GONE_MS },
      );
      for (const key of hashes.keys()) if (key.startsWith(`apps/${appId}/`)) hashes.delete(key);
      await builder.remove(appId);
    },

    async pruneReleases(appId, keep) {
      await builder.pruneReleases(appId, keep);
      const ns = namespace(appId);
      const live = liveRelease(await readDeployment(appId));
      const kept = new Set([...keep, ...(live ? [live] : [])]);
      for (const secret of await client.list('v1', 'Secret', ns, LABEL_RELEASE)) {
        const release = secret.metadata.labels?.[LABEL_RELEASE];
        if (!release || kept.has(release)) continue;
        await client.remove('v1', 'Secret', secret.metadata.name, ns, { propagation: 'Background' });
        const key = releaseKey(appId, release);
        await artifacts.remove(key);
        hashes.delete(key);
      }
      for (const job of await client.list('batch/v1', 'Job', ns, LABEL_RELEASE)) {
        const release = job.metadata.labels?.[LABEL_RELEASE];
        if (release && !kept.has(release))
          await client.remove('batch/v1', 'Job', job.metadata.name, ns, { propagation: 'Background' });
      }
    },

    async status(appId): Promise<RuntimeStatus> {
      const [deployment, pods] = await Promise.all([readDeployment(appId), instancePods(appId)]);
      const instances = pods.map(({ pod, name }) => instanceOf(pod, name));
      const running = deployment !== undefined && (deployment.spec?.replicas ?? 0) > 0;
      return { release: running ? liveRelease(deployment) : null, instances };
    },

    async logs(appId, { tail, since }) {
      const ns = namespace(appId);
      const lines = await Promise.all(
        (await instancePods(appId)).map(({ pod, name }) => logsOfPod(ns, pod, name, tail, since)),
      );
      return lines
        .flat()
        .sort((a, b) => a.at.localeCompare(b.at))
        .slice(-tail);
    },

    followLogs(appId, listener) {
      // The log API follows one container per request; polling every pod with `sinceTime` covers pods
      // that come and go during a rollout.
      const seen = new Set<string>();
      let since = new Date();
      let stopped = false;
      const poll = async (): Promise<void> => {
        while (!stopped) {
          const from = since;
          since = new Date();
          const ns = namespace(appId);
          for (const { pod, name } of await instancePods(appId).catch(() => [])) {
            for (const line of await logsOfPod(ns, pod, name, 1000, from)) {
              const id = `${pod.metadata.name}\n${line.at}\n${line.line}`;
              if (seen.has(id)) continue;
              seen.add(id);
              listener(line);
            }
          }
          if (seen.size > 10_000) seen.clear();
          await new Promise((resolve) => setTimeout(resolve, Math.max(pollMs, 1000)));
        }
      };
      void poll();
      return () => {
        stopped = true;
      };
    },

    async exec(app, release, command, step): Promise<ExecResult> {
      const ns = namespace(app.id);
      const pods = (await podsOf(app.id)).filter(
        (p) => p.metadata.labels?.[LABEL_NAME] === 'web' && podState(p) === 'running',
      );
      const pod = pods.find((p) => p.metadata.annotations?.[ANNOTATION_RELEASE] === release) ?? pods[0];
      if (!pod)
        throw new PermanentDriverError('no replica of the application runs: deploy or resume it first');
      step.log(`$ ${command}`);
      return client.exec(ns, pod.metadata.name, 'web', ['/bin/sh', '-c', command], {
        maxOutputBytes: EXEC_OUTPUT_BYTES,
        timeoutMs: EXEC_TIMEOUT_MS,
        signal: step.signal,
      });
    },

    checkSourceArchive: (key) => builder.checkSourceArchive(key),

    async sourceArchive(appId, release) {
      return builder.sourceArchive(appId, release);
    },

    start() {
      renewal ??= setInterval(() => void renewReleaseUrls(), (RELEASE_URL_TTL_SECONDS * 1000) / 2);
      renewal.unref();
      return Promise.resolve();
    },

    // The builder is closed with the context that made it; what runs stays on the cluster.
    close() {
      if (renewal) clearInterval(renewal);
      renewal = undefined;
      return Promise.resolve();
    },
  };
}

/** The Deployment controller's verdict: its progress deadline passed. */
class RolloutFailed extends Error {}
