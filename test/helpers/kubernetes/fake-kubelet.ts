// The test cluster's kubelet (run by cluster.ts as `node --import tsx fake-kubelet.ts`, KUBECONFIG set):
// it runs no container. It registers node fake-node-1 and reports the pods bound to it as a kubelet
// would: Running and Ready, Job pods Succeeded, init containers Completed; a container whose
// command or args hold `fake-kubelet:crash` crash-loops, `fake-kubelet:fail` fails a Job pod (exit 1).
// It finishes pod deletions, provisions a PersistentVolume for each pending claim of the storage class
// berth-test (and deletes it once released), and serves pod logs and exec to the API server.
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { WebSocketServer, type WebSocket } from 'ws';

const NODE = 'fake-node-1';
const STORAGE_CLASS = 'berth-test';
const PROVISIONER = 'berth.dev/fake-kubelet';
const CRASH = 'fake-kubelet:crash';
const FAIL = 'fake-kubelet:fail';
const EXIT_3 = 'fake-kubelet:exit-3';
/** Short enough for quick rollouts, long enough not to load two shared cores. */
const TICK_MS = 200;
/** A crash-looping container restarts once a second (a real kubelet backs off up to 5 minutes). */
const RESTART_MS = 1_000;
/** Log lines per container; their times start here, one second apart, so logs are deterministic. */
const LOG_LINES = 20;
const LOG_EPOCH = Date.UTC(2026, 0, 1);

const kc = new k8s.KubeConfig();
kc.loadFromDefault();
const core = kc.makeApiClient(k8s.CoreV1Api);
const dataDir = process.env.BERTH_FAKE_KUBELET_DIR ?? '/nonexistent';

const code = (error: unknown): number | undefined => (error as { code?: number }).code;

// --- the kubelet API (logs and exec), reached by the API server at the node's InternalIP ---

const server = https.createServer(
  {
    cert: fs.readFileSync(process.env.BERTH_FAKE_KUBELET_TLS_CERT ?? ''),
    key: fs.readFileSync(process.env.BERTH_FAKE_KUBELET_TLS_KEY ?? ''),
  },
  (request, response) => {
    const url = new URL(request.url ?? '/', 'https://kubelet');
    const logs = /^\/containerLogs\/([^/]+)\/([^/]+)\/([^/]+)$/.exec(url.pathname);
    if (request.method === 'GET' && logs) {
      const [, , pod, container] = logs.map(decodeURIComponent) as [string, string, string, string];
      const tail = Number(url.searchParams.get('tailLines') ?? LOG_LINES);
      const timestamps = url.searchParams.get('timestamps') === 'true';
      const first = Math.max(1, LOG_LINES - Math.max(0, Math.min(LOG_LINES, tail)) + 1);
      let body = '';
      for (let n = first; n <= LOG_LINES; n++) {
        const time = new Date(LOG_EPOCH + n * 1000).toISOString().replace('.000Z', 'Z');
        body += `${timestamps ? `${time} ` : ''}fake log ${pod}/${container} line ${n}\n`;
      }
      response.writeHead(200, { 'content-type': 'text/plain' });
      response.end(body);
      return;
    }
    if (url.pathname === '/healthz') {
      response.end('ok');
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain' });
    response.end('not found');
  },
);

// exec over WebSocket, subprotocol v4.channel.k8s.io: one byte of channel, then the data. The command
// does not run: stdout says what would have run, and the status channel says how it ended.
const sockets = new WebSocketServer({
  noServer: true,
  handleProtocols: (protocols) => (protocols.has('v4.channel.k8s.io') ? 'v4.channel.k8s.io' : false),
});
server.on('upgrade', (request, socket, head) => {
  const url = new URL(request.url ?? '/', 'https://kubelet');
  if (!/^\/exec\/[^/]+\/[^/]+\/[^/]+$/.test(url.pathname)) {
    socket.end('HTTP/1.1 404 Not Found\r\n\r\n');
    return;
  }
  sockets.handleUpgrade(request, socket, head, (ws: WebSocket) => {
    const command = url.searchParams.getAll('command');
    const frame = (channel: number, text: string): Buffer =>
      Buffer.concat([Buffer.from([channel]), Buffer.from(text)]);
    ws.send(frame(1, `ran: ${command.join(' ')}\n`));
    const status = command.some((part) => part.includes(EXIT_3))
      ? {
          metadata: {},
          status: 'Failure',
          message: 'command terminated with non-zero exit code: exit status 3',
          reason: 'NonZeroExitCode',
          details: { causes: [{ reason: 'ExitCode', message: '3' }] },
        }
      : { metadata: {}, status: 'Success' };
    ws.send(frame(3, JSON.stringify(status)));
    ws.close(1000);
  });
});

await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const kubeletPort = (server.address() as AddressInfo).port;

// --- the node ---

const now = (): Date => new Date();
const nodeStatus: k8s.V1NodeStatus = {
  capacity: { cpu: '32', memory: '256Gi', pods: '110', 'ephemeral-storage': '1Ti' },
  allocatable: { cpu: '32', memory: '256Gi', pods: '110', 'ephemeral-storage': '1Ti' },
  conditions: [
    {
      type: 'Ready',
      status: 'True',
      reason: 'KubeletReady',
      message: 'fake kubelet',
      lastHeartbeatTime: now(),
      lastTransitionTime: now(),
    },
  ],
  addresses: [
    { type: 'InternalIP', address: '127.0.0.1' },
    { type: 'Hostname', address: NODE },
  ],
  daemonEndpoints: { kubeletEndpoint: { Port: kubeletPort } },
  nodeInfo: {
    architecture: 'amd64',
    operatingSystem: 'linux',
    kubeletVersion: 'v1.20.2-fake',
    kubeProxyVersion: 'v1.20.2-fake',
    containerRuntimeVersion: 'fake://0',
    kernelVersion: '',
    osImage: 'fake',
    machineID: '',
    systemUUID: '',
    bootID: '',
  },
};
// Started beside the API server: it registers the node as soon as the API server answers.
for (const deadline = Date.now() + 60_000; ;) {
  try {
    await core.createNode({
      body: {
        metadata: { name: NODE, labels: { 'kubernetes.io/hostname': NODE, 'kubernetes.io/os': 'linux' } },
      },
    });
    break;
  } catch (error) {
    if (code(error) === 409) break;
    if (Date.now() > deadline) throw error;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
/** Read, change, write back; the controllers change the node meanwhile (409), then again. */
async function updateNode(change: (node: k8s.V1Node) => Promise<unknown>): Promise<void> {
  for (;;) {
    try {
      await change(await core.readNode({ name: NODE }));
      return;
    } catch (error) {
      if (code(error) !== 409) throw error;
    }
  }
}
await updateNode((node) => core.replaceNodeStatus({ name: NODE, body: { ...node, status: nodeStatus } }));
// What the node-lifecycle controller (off in the test cluster) does once a kubelet reports Ready: drop
// the not-ready taint the TaintNodesByCondition admission plugin put on at registration.
await updateNode((node) =>
  core.replaceNode({ name: NODE, body: { ...node, spec: { ...node.spec, taints: [] } } }),
);
console.log(`node registered, kubelet API on port ${kubeletPort}`);

// --- pods ---

const mentions = (containers: k8s.V1Container[] | undefined, marker: string): boolean =>
  (containers ?? []).some((c) =>
    [...(c.command ?? []), ...(c.args ?? [])].some((word) => word.includes(marker)),
  );

let nextIp = 10;
const podIps = new Map<string, string>();
const lastRestart = new Map<string, number>();

function podStatus(pod: k8s.V1Pod): k8s.V1PodStatus | undefined {
  const status = pod.status ?? {};
  const phase = status.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return undefined;
  const uid = pod.metadata?.uid ?? '';
  const isJob = (pod.metadata?.ownerReferences ?? []).some((o) => o.kind === 'Job');
  const containers = pod.spec?.containers ?? [];
  const failing = isJob && mentions(containers, FAIL);
  const crashing = !isJob && (mentions(containers, CRASH) || mentions(containers, FAIL));
  if (phase === 'Running' && !crashing) return undefined;
  if (crashing && phase === 'Running' && Date.now() - (lastRestart.get(uid) ?? 0) < RESTART_MS)
    return undefined;
  const at = now();
  const started = status.startTime ?? at;
  let ip = podIps.get(uid);
  if (!ip) {
    ip = `10.244.${Math.floor(nextIp / 250) % 250}.${(nextIp % 250) + 1}`;
    nextIp++;
    podIps.set(uid, ip);
  }
  const terminated = (exitCode: number): k8s.V1ContainerState => ({
    terminated: {
      exitCode,
      reason: exitCode === 0 ? 'Completed' : 'Error',
      startedAt: started,
      finishedAt: at,
    },
  });
  const ready = !isJob && !crashing;
  const condition = (type: string, value: boolean, reason?: string): k8s.V1PodCondition => {
    const before = status.conditions?.find((c) => c.type === type);
    const same = before?.status === (value ? 'True' : 'False');
    return {
      type,
      status: value ? 'True' : 'False',
      lastTransitionTime: same && before?.lastTransitionTime ? before.lastTransitionTime : at,
      ...(reason ? { reason } : {}),
    };
  };
  const notReadyReason = isJob ? 'PodCompleted' : 'ContainersNotReady';
  lastRestart.set(uid, Date.now());
  return {
    ...status,
    phase: isJob ? (failing ? 'Failed' : 'Succeeded') : 'Running',
    hostIP: '127.0.0.1',
    podIP: ip,
    podIPs: [{ ip }],
    startTime: started,
    qosClass: status.qosClass,
    conditions: [
      condition('Initialized', true),
      condition('Ready', ready, ready ? undefined : notReadyReason),
      condition('ContainersReady', ready, ready ? undefined : notReadyReason),
      condition('PodScheduled', true),
    ],
    initContainerStatuses: (pod.spec?.initContainers ?? []).map((c) => ({
      name: c.name,
      image: c.image ?? '',
      imageID: `fake://${c.image ?? ''}`,
      containerID: `fake://${uid}/${c.name}`,
      ready: true,
      restartCount: 0,
      state: terminated(0),
    })),
    containerStatuses: containers.map((c) => {
      const previous = status.containerStatuses?.find((s) => s.name === c.name);
      const base = {
        name: c.name,
        image: c.image ?? '',
        imageID: `fake://${c.image ?? ''}`,
        containerID: `fake://${uid}/${c.name}`,
        started: ready,
      };
      if (isJob) return { ...base, ready: false, restartCount: 0, state: terminated(failing ? 1 : 0) };
      if (crashing) {
        return {
          ...base,
          ready: false,
          restartCount: previous ? (previous.restartCount ?? 0) + 1 : 0,
          state: {
            waiting: {
              reason: 'CrashLoopBackOff',
              message: `back-off restarting failed container ${c.name} (fake-kubelet)`,
            },
          },
          lastState: terminated(1),
        };
      }
      return { ...base, ready: true, restartCount: 0, state: { running: { startedAt: started } } };
    }),
  };
}

async function syncPods(): Promise<void> {
  const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${NODE}` });
  for (const pod of pods.items) {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    try {
      if (pod.metadata?.deletionTimestamp) {
        // The kubelet's part of a graceful deletion: the containers have stopped, the object goes.
        await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
        podIps.delete(pod.metadata.uid ?? '');
        lastRestart.delete(pod.metadata.uid ?? '');
        continue;
      }
      const status = podStatus(pod);
      if (!status) continue;
      await core.replaceNamespacedPodStatus({ name, namespace, body: { ...pod, status } });
    } catch (error) {
      // 409: changed meanwhile, 404: gone; the next tick sees the new state.
      if (code(error) !== 409 && code(error) !== 404) console.error(`pod ${namespace}/${name}:`, error);
    }
  }
}

// --- volumes: the storage class berth-test's provisioner ---

async function syncVolumes(): Promise<void> {
  const claims = await core.listPersistentVolumeClaimForAllNamespaces();
  for (const claim of claims.items) {
    if (claim.status?.phase !== 'Pending' || claim.spec?.volumeName) continue;
    if (claim.spec?.storageClassName !== STORAGE_CLASS) continue;
    const uid = claim.metadata?.uid ?? '';
    const name = `pvc-${uid}`;
    const hostPath = path.join(dataDir, 'volumes', name);
    try {
      await core.createPersistentVolume({
        body: {
          metadata: { name, annotations: { 'pv.kubernetes.io/provisioned-by': PROVISIONER } },
          spec: {
            capacity: { storage: claim.spec.resources?.requests?.storage ?? '1Gi' },
            accessModes: claim.spec.accessModes ?? ['ReadWriteOnce'],
            volumeMode: claim.spec.volumeMode ?? 'Filesystem',
            persistentVolumeReclaimPolicy: 'Delete',
            storageClassName: STORAGE_CLASS,
            hostPath: { path: hostPath, type: 'DirectoryOrCreate' },
            claimRef: {
              apiVersion: 'v1',
              kind: 'PersistentVolumeClaim',
              namespace: claim.metadata?.namespace ?? '',
              name: claim.metadata?.name ?? '',
              uid,
            },
          },
        },
      });
    } catch (error) {
      if (code(error) !== 409)
        console.error(`volume for ${claim.metadata?.namespace}/${claim.metadata?.name}:`, error);
    }
  }
  const volumes = await core.listPersistentVolume();
  for (const volume of volumes.items) {
    const provisioned = volume.metadata?.annotations?.['pv.kubernetes.io/provisioned-by'] === PROVISIONER;
    if (!provisioned || volume.status?.phase !== 'Released' || volume.metadata?.deletionTimestamp) continue;
    try {
      await core.deletePersistentVolume({ name: volume.metadata?.name ?? '' });
    } catch (error) {
      if (code(error) !== 404) console.error(`volume ${volume.metadata?.name}:`, error);
    }
  }
}

process.on('SIGTERM', () => process.exit(0));
for (;;) {
  await Promise.all([
    syncPods().catch((error: unknown) => console.error('pods:', error)),
    syncVolumes().catch((error: unknown) => console.error('volumes:', error)),
  ]);
  await new Promise((resolve) => setTimeout(resolve, TICK_MS));
}
